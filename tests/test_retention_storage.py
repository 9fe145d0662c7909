"""Retention bounds what a thread stores, frees space, and survives a SIGKILL mid-batch."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import sweep
from tests.scenario_graph import build_graph, open_saver, run_turns, thread_config, turn_ids

ROOT = Path(__file__).resolve().parents[1]
KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=20, max_messages=40)


def row_bytes(saver: Any) -> int:
    """Bytes of the stored rows: checkpoints, metadata, writes (and blobs on Postgres)."""
    inner: Any = saver.inner if isinstance(saver, ReducingCheckpointSaver) else saver
    if hasattr(inner, "_cursor") and not isinstance(getattr(inner, "conn", None), sqlite3.Connection):
        with inner._cursor() as cur:
            cur.execute(
                "SELECT (SELECT COALESCE(SUM(octet_length(checkpoint::text)"
                " + octet_length(metadata::text)), 0) FROM checkpoints)"
                " + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_blobs)"
                " + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_writes) AS n"
            )
            return int(cur.fetchone()["n"])
    row = inner.conn.execute(
        "SELECT (SELECT COALESCE(SUM(length(checkpoint) + length(metadata)), 0) FROM checkpoints)"
        " + (SELECT COALESCE(SUM(length(value)), 0) FROM writes)"
    ).fetchone()
    return int(row[0])


def file_bytes(path: Path, conn: sqlite3.Connection) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_bytes_stay_flat_over_200_turns_with_keep_last_2(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    path = tmp_path / "flat.db"
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2)
        graph = build_graph(saver, content_chars=200)
        rows: list[int] = []
        files: list[int] = []

        def measure(turn: int, _out: dict[str, Any]) -> None:
            rows.append(row_bytes(saver))
            if kind == "sqlite":
                files.append(file_bytes(path, inner.conn))

        run_turns(graph, 200, thread_id="long", content_chars=200, after_turn=measure)
        # the reducer saw-tooths between 20 and 40 messages and retention runs every 8 puts: compare
        # maxima over windows
        early, late = max(rows[50:100]), max(rows[150:200])
        assert late <= 1.1 * early, (early, late)
        if files:  # freed pages are reused: the file stops growing without any VACUUM
            assert max(files[150:200]) <= 1.1 * max(files[50:100]), (max(files[50:100]), max(files[150:200]))
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0 and stats.checkpoints_deleted > 900
        assert [m.id for m in graph.get_state(thread_config("long")).values["messages"]][-4:] == turn_ids(199)


def test_sqlite_sweep_with_vacuum_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bare.db"
    with open_saver("sqlite", path=path) as inner:
        graph = build_graph(inner, content_chars=200)
        run_turns(graph, 40, thread_id="bare", content_chars=200)
        latest = graph.get_state(thread_config("bare")).values["messages"]
        kept = sweep(inner, keep_last=1)  # no vacuum: the freed pages stay in the file
        assert kept.bytes_after == kept.bytes_before == file_bytes(path, inner.conn)
        report = sweep(inner, keep_last=1, vacuum=True)
        assert report.checkpoints_deleted == 0 and report.vacuumed
        assert report.bytes_before is not None and report.bytes_after is not None
        assert report.bytes_after * 5 <= report.bytes_before
        assert report.bytes_after == file_bytes(path, inner.conn)
        assert graph.get_state(thread_config("bare")).values["messages"] == latest


@pytest.mark.postgres
def test_postgres_sweep_vacuum_reports_relation_sizes(pg_url: str) -> None:
    with open_saver("postgres", pg_url=pg_url) as inner:
        graph = build_graph(inner, content_chars=200)
        run_turns(graph, 30, thread_id="bare", content_chars=200)
        report = sweep(inner, keep_last=1, vacuum=True)
        assert report.vacuumed and report.checkpoints_deleted > 100
        assert isinstance(report.bytes_before, int) and isinstance(report.bytes_after, int)
        with inner._cursor() as cur:
            cur.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'checkpoints'")
            assert cur.fetchone()["n_dead_tup"] == 0  # VACUUM ran on the table
        # the space is reused: 30 more turns (then trimmed, vacuumed) barely grow the tables
        run_turns(graph, 30, thread_id="other", content_chars=200)
        again = sweep(inner, keep_last=1, vacuum=True)
        assert again.checkpoints_deleted > 100 and again.bytes_after is not None
        assert again.bytes_after < 1.3 * report.bytes_after, (report.bytes_after, again.bytes_after)


# -- crash safety ---------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from agentstate_reducer import MessageReducer
    from checkpointers import ReducingCheckpointSaver
    from checkpointers.retention import sweep
    from tests.scenario_graph import build_graph, open_saver, run_turns

    kind, where, mode = sys.argv[1:4]
    path, url = (where, None) if kind == "sqlite" else (None, where)
    with open_saver(kind, path=path, pg_url=url) as inner:
        if mode == "sweep":
            print("sweeping", flush=True)
            sweep(inner, keep_last=1)
            print("swept", flush=True)
        else:
            saver = ReducingCheckpointSaver(
                inner, MessageReducer(min_messages=4, max_messages=8), keep_last=1, retention_every=1
            )
            graph = build_graph(saver)
            for turn in range(int(mode), 10_000):
                run_turns(graph, 1, thread_id="live", start=turn)
                print("turn", turn, flush=True)
    """
)


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


def _roots(inner: Any, thread_id: str) -> list[str]:
    return sorted(t.config["configurable"]["checkpoint_id"] for t in inner.list(thread_config(thread_id)))


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_during_retention_leaves_the_latest_checkpoint_intact(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("postgres_server").new_database("crash") if kind == "postgres" else None
    path = tmp_path / "crash.db"
    where = str(path) if kind == "sqlite" else str(pg_url)
    threads = [f"t{i}" for i in range(16)]
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        graph = build_graph(inner)
        for thread_id in threads:
            run_turns(graph, 6, thread_id=thread_id)
        before = {t: _roots(inner, t) for t in threads}

    # 1. killed in the middle of a sweep (a transaction per thread; a thread takes ~10 ms)
    for delay in (0.01, 0.04, 0.08):
        _kill_after(_child(kind, where, "sweep"), "sweeping", delay)
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        for thread_id in threads:
            roots = _roots(inner, thread_id)
            # all of a thread's batch, or none of it
            assert roots in (before[thread_id], before[thread_id][-1:]), thread_id
            latest = inner.get_tuple(thread_config(thread_id))
            assert latest.config["configurable"]["checkpoint_id"] == roots[-1]
        graph = build_graph(inner)
        for thread_id in threads:
            run_turns(graph, 1, thread_id=thread_id, start=6)
            messages = graph.get_state(thread_config(thread_id)).values["messages"]
            assert [m.id for m in messages][-4:] == turn_ids(6)

    # 2. killed while a graph runs with retention at every put
    start = 0
    for delay in (0.1, 0.3, 0.6):
        proc = _child(kind, where, str(start))
        _kill_after(proc, "turn", delay)
        with open_saver(kind, path=path, pg_url=pg_url) as inner:
            saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8))
            state = build_graph(saver).get_state(thread_config("live"))
            done = [int(m.id[1:]) for m in state.values["messages"] if m.id.startswith("h")]
            start = max(done) + 1
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8))
        graph = build_graph(saver)
        run_turns(graph, 1, thread_id="live", start=start)
        ids = [m.id for m in graph.get_state(thread_config("live")).values["messages"]]
        assert ids[-4:] == turn_ids(start)


# -- concurrent puts on one thread ----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_puts_on_one_thread_through_two_savers(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two savers (two connections, as two processes would have) put to one thread at the same time,
    each running retention at every put: no put fails, no run fails, and the newest checkpoints
    survive with their writes."""
    import threading

    from langgraph.checkpoint.base import empty_checkpoint

    pg_url = None
    if kind == "postgres":
        pg_url = request.getfixturevalue("postgres_server").new_database("concurrent")
    path = tmp_path / "concurrent.db"
    with open_saver(kind, path=path, pg_url=pg_url) as one, open_saver(kind, path=path, pg_url=pg_url) as two:
        savers = [ReducingCheckpointSaver(s, reducer(), keep_last=3, retention_every=1) for s in (one, two)]
        written: list[list[str]] = [[], []]
        errors: list[BaseException] = []

        def writer(i: int) -> None:
            saver = savers[i]
            config: Any = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
            try:
                for step in range(40):
                    cp = empty_checkpoint()
                    version = saver.get_next_version(None, None)
                    cp["channel_values"] = {"messages": [f"w{i}-{step}"]}
                    cp["channel_versions"] = {"messages": version}
                    config = saver.put(config, cp, {"step": step, "source": "loop"}, {"messages": version})
                    saver.put_writes(config, [("messages", [f"pending {i}-{step}"])], task_id=f"task{i}")
                    written[i].append(config["configurable"]["checkpoint_id"])
            except BaseException as exc:  # collected: the assertion below names it
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(i,)) for i in (0, 1)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        for saver in savers:
            stats = saver.retention_stats
            assert stats is not None and stats.failures == 0, stats
        remaining = sorted(_roots(one, "shared"))
        newest = sorted(written[0] + written[1])[-3:]
        assert remaining[-3:] == newest and len(remaining) <= 4
        latest = one.get_tuple(thread_config("shared"))
        assert latest is not None and latest.config["configurable"]["checkpoint_id"] == newest[-1]
        assert [w[2] for w in latest.pending_writes] != []
