"""Retention on DeltaChannel threads across processes: a process killed in the middle of a sweep
or of a run with ``keep_last`` at every put, and two worker processes serving one thread, leave
every stored checkpoint rebuilding a whole history (a cut chain rebuilds a history that does not
start at the thread's first turn)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from checkpointers.retention import sweep
from tests.scenario_graph import open_saver
from tests.test_delta_retention import build, config, rebuilt, run, values

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import sys
    from agentstate_reducer import MessageReducer
    from checkpointers import ReducingCheckpointSaver
    from checkpointers.retention import sweep
    from tests.scenario_graph import open_saver
    from tests.test_delta_retention import build, run

    kind, where, mode = sys.argv[1:4]
    path, url = (where, None) if kind == "sqlite" else (None, where)
    with open_saver(kind, path=path, pg_url=url) as inner:
        if mode == "sweep":
            print("sweeping", flush=True)
            sweep(inner, keep_last=1)
            print("swept", flush=True)
        else:
            saver = ReducingCheckpointSaver(
                inner, MessageReducer(min_messages=50, max_messages=99), keep_last=1, retention_every=1
            )
            graph = build(saver)
            for turn in range(int(mode), 10_000):
                run(graph, "live", range(turn, turn + 1))
                print("turn", turn, flush=True)
    """
)


def whole(ids: tuple[str, ...]) -> bool:
    """A history that starts at the thread's first question (or, at its first checkpoint, is
    empty), each message once: a cut chain rebuilds one that does not start there."""
    return (not ids or ids[0] == "h0") and len(set(ids)) == len(ids)


def broken(
    graph: Any, thread_id: str, *, parents: bool = True
) -> list[tuple[tuple[str, ...], tuple[str, ...] | None]]:
    """(its message ids, its parent's) of every stored checkpoint that is not ``whole`` or, with
    ``parents``, does not extend its parent's (one run at a time on the thread, this graph only
    appends: a checkpoint holds its parent's messages, then new ones)."""
    states = list(graph.get_state_history(config(thread_id)))
    ids = {s.config["configurable"]["checkpoint_id"]: values(s)[0] for s in states}
    out = []
    for s in states:
        own = ids[s.config["configurable"]["checkpoint_id"]]
        parent = ids.get((s.parent_config or {}).get("configurable", {}).get("checkpoint_id"))
        if not whole(own) or (parents and parent is not None and own[: len(parent)] != parent):
            out.append((own, parent))
    return out


def _child(kind: str, where: str, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, where, mode], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )


def _kill_after(proc: subprocess.Popen[str], first_line: str, delay: float) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(first_line), line
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_during_retention_of_delta_threads_loses_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("postgres_server").new_database("dcrash") if kind == "postgres" else None
    path = tmp_path / "crash.db"
    where = str(path) if kind == "sqlite" else str(pg_url)
    threads = [f"t{i}" for i in range(12)]
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        graph = build(inner)
        for thread_id in threads:
            run(graph, thread_id, range(5))
        before = {t: rebuilt(graph, t) for t in threads}

    # 1. killed in the middle of a sweep (a transaction per thread)
    for delay in (0.01, 0.05, 0.1):
        _kill_after(_child(kind, where, "sweep"), "sweeping", delay)
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        graph = build(inner)
        for thread_id in threads:
            after = rebuilt(graph, thread_id)
            assert max(after) == max(before[thread_id])
            assert {i: v for i, v in after.items() if before[thread_id].get(i) != v} == {}, thread_id
            run(graph, thread_id, range(5, 6))
            assert whole(values(graph.get_state(config(thread_id)))[0])

        # a whole sweep then trims every thread (5 turns: 20 checkpoints, 8 to 2 turns back)
        report = sweep(inner, keep_last=1, branch_grace=timedelta(0))
        assert report.skipped == {} and sorted(report.threads_trimmed) == sorted(threads)
        for thread_id in threads:
            assert broken(graph, thread_id) == [] and len(rebuilt(graph, thread_id)) <= 9

    # 2. killed while a graph runs with retention at every put
    start = 0
    for delay in (0.1, 0.3, 0.6):
        _kill_after(_child(kind, where, str(start)), "turn", delay)
        with open_saver(kind, path=path, pg_url=pg_url) as inner:
            graph = build(inner)
            assert broken(graph, "live") == []
            done = [int(i[1:]) for i in values(graph.get_state(config("live")))[0] if i.startswith("h")]
            start = max(done) + 1
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        graph = build(inner)
        run(graph, "live", range(start, start + 1))
        ids = values(graph.get_state(config("live")))[0]
        assert whole(ids) and broken(graph, "live") == [] and ids[-1] == f"ai{start}-answer"


def _work(kind: str, path: str, pg_url: str | None, first: int, start: Any) -> None:
    """One worker process: turns ``first`` .. ``first + 7`` on the shared thread, keep_last=1 at
    every put."""
    from agentstate_reducer import MessageReducer
    from checkpointers import ReducingCheckpointSaver

    with open_saver(kind, path=Path(path), pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99), keep_last=1,
                                        retention_every=1)
        graph = build(saver)
        start.wait()
        run(graph, "shared", range(first, first + 8))


@pytest.mark.parametrize("kind", KINDS)
def test_two_worker_processes_on_one_delta_thread_lose_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("postgres_server").new_database("dtwo") if kind == "postgres" else None
    path = tmp_path / "shared.db"
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        run(build(inner), "shared", range(2))
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    workers = [ctx.Process(target=_work, args=(kind, str(path), pg_url, first, start))
               for first in (100, 200)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        graph = build(inner)
        # Two runs that overlap on one thread interleave (each appends to what it read, one may
        # start between the other's steps), so a checkpoint need not extend its parent even
        # without retention; a cut chain still shows as a history not starting at h0.
        assert broken(graph, "shared", parents=False) == []
        latest = values(graph.get_state(config("shared")))[0]
        assert whole(latest) and latest[-1] in {"ai107-answer", "ai207-answer"}
        # then a sweep that spares nothing for recency leaves it short, and it goes on (the
        # workers' own keep_last=1 may already have left nothing to trim: which run put last
        # decides it)
        report = sweep(inner, keep_last=1, branch_grace=timedelta(0))
        assert report.skipped == {} and report.threads_trimmed in ([], ["shared"])
        assert broken(graph, "shared", parents=False) == []
        assert len(rebuilt(graph, "shared")) < 4 * 18  # 18 turns
        run(graph, "shared", range(300, 301))
        assert whole(values(graph.get_state(config("shared")))[0])
