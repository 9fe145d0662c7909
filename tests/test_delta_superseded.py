"""DeltaChannel threads under the default settings: the checkpoints kept for a run that read the
thread's latest checkpoint and has not stored its first one yet are bounded in number, so a fast
thread stays flat; a deepagents thread with ``keep_last=2`` and the default grace stays flat.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langgraph.checkpoint.base.id import uuid6

from agentstate_reducer import MessageReducer, ReducerConfig
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import (
    SUPERSEDED_GRACE,
    SUPERSEDED_KEEP,
    StoredCheckpoint,
    ThreadState,
    backend_for,
    checkpoint_time,
    plan_retention,
)
from tests.agent_script import TOOLS, ScriptedModel, turns
from tests.scenario_graph import open_saver, saver_params

# -- the rule, on the plan -------------------------------------------------------------------------


def _ids(n: int) -> list[str]:
    return sorted(str(uuid6(clock_seq=i)) for i in range(n))


def _made(cid: str) -> datetime:
    made = checkpoint_time(cid)
    assert made is not None
    return made


def _run(ids: list[str], parent: str | None = None, *, unseeded: str = "messages") -> list[StoredCheckpoint]:
    """One run's checkpoints, each the parent of the next, the first a child of ``parent``; none
    is followed by a due step, and each rebuilds ``unseeded`` from its ancestors."""
    out = []
    for i, cid in enumerate(ids):
        out.append(StoredCheckpoint(
            "", cid, parent=ids[i - 1] if i else parent, delta=True, loop=bool(i), due=False,
            step=i, unseeded=frozenset(unseeded.split()),
        ))
    return out


def test_a_fast_thread_keeps_only_the_newest_superseded_checkpoints() -> None:
    """Ten checkpoints made within the grace: the latest and the newest SUPERSEDED_KEEP it and its
    predecessors superseded stay, not all ten."""
    ids = _ids(10)
    stored = tuple(_run(ids, unseeded=""))
    plan = plan_retention(ThreadState("t", stored), keep_last=1, now=_made(ids[-1]))
    assert sorted(plan.kept[""]) == ids[-1 - SUPERSEDED_KEEP:]
    # once the newest of them is older than the grace, only keep_last is left
    later = _made(ids[-1]) + SUPERSEDED_GRACE * 2
    assert sorted(plan_retention(ThreadState("t", stored), keep_last=1, now=later).kept[""]) == ids[-1:]


def test_two_runs_on_one_thread_keep_what_the_second_one_read() -> None:
    """Run A stored a0..a4; run B read a2 while it was the latest and has not stored a
    checkpoint yet, while A stored a3 and a4: a2 is among the newest superseded and stays. Once B
    stored b0 (a child of a2 that rebuilds its messages through it), a2 stays as b0's ancestor,
    whatever the grace."""
    ids = _ids(6)
    a, b0 = ids[:5], ids[5]
    run_a = _run(a)
    run_a[0] = StoredCheckpoint("", a[0], delta=True, due=False, step=0)  # holds every value
    now = _made(a[-1])
    plan = plan_retention(ThreadState("t", tuple(run_a)), keep_last=1, now=now)
    assert a[2] in plan.kept[""]
    assert a[1] not in plan.kept[""] or a[1] in _ancestors(a, a[2])
    second = StoredCheckpoint("", b0, parent=a[2], delta=True, loop=False, due=True, step=3,
                              unseeded=frozenset({"messages"}))
    for when in (_made(b0), _made(b0) + timedelta(hours=2)):
        plan = plan_retention(ThreadState("t", (*run_a, second)), keep_last=1, now=when)
        assert {b0, a[2], a[1], a[0]} <= set(plan.kept[""])  # b0 rebuilds its messages back to a0
    plan = plan_retention(ThreadState("t", (*run_a, second)), keep_last=1, now=_made(b0) + timedelta(hours=2))
    assert sorted(plan.kept[""]) == sorted([b0, a[2], a[1], a[0]])


def _ancestors(ids: list[str], cid: str) -> list[str]:
    return ids[: ids.index(cid)]


# -- deepagents, default settings ------------------------------------------------------------------


def _deep_thread_bytes(kind: str, tmp_path: Path, pg_url: str | None, checkpoints: list[int]) -> list[int]:
    """Stored bytes after turns 20 and 40 of a deepagents thread through
    ``ReducingCheckpointSaver(inner, reducer, keep_last=2)`` with every other setting default;
    ``checkpoints``: the thread's checkpoint count after each turn.

    On PostgreSQL, dead rows count in the relation sizes until a VACUUM reclaims them for reuse:
    a plain VACUUM after every turn stands in for autovacuum (which a test's turns would outpace),
    and autovacuum is off on the checkpoint tables so that no run of its own, at a time of its
    choosing, makes the sizes differ from one test run to the next."""
    sizes = []
    with open_saver(kind, path=tmp_path / "deep.db", pg_url=pg_url) as inner:
        if kind == "postgres":
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):  # PostgresSaver's
                inner.conn.execute(
                    f"ALTER TABLE {table} SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)"
                )
        reducer = MessageReducer(config=ReducerConfig(min_messages=8, max_messages=16))
        saver = ReducingCheckpointSaver(inner, reducer, keep_last=2)
        backend = backend_for(saver)
        agent = create_deep_agent(model=ScriptedModel(), tools=TOOLS, system_prompt="Be terse.",
                                  checkpointer=saver)
        cfg: Any = {"configurable": {"thread_id": f"deep-{uuid.uuid4().hex[:8]}"}}
        for n, t in enumerate(turns(40), 1):
            agent.invoke(t, cfg)
            checkpoints.append(len(list(saver.list(cfg))))
            if kind == "postgres":
                backend.vacuum()
            if n in (20, 40):
                size = backend.size()
                assert size is not None
                sizes.append(size)
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0 and stats.checkpoints_deleted > 0
    return sizes


@pytest.mark.parametrize("kind", saver_params(["sqlite", "postgres"]))
def test_a_deep_agent_with_keep_last_and_default_grace_stays_flat(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    pg_url = server.new_database("deepflat") if server is not None else None
    counts: list[int] = []
    at_20, at_40 = _deep_thread_bytes(kind, tmp_path, pg_url, counts)
    assert at_40 <= 1.25 * at_20, (at_20, at_40)
    # the checkpoints left do not pile up either (on a blob saver a kept checkpoint also keeps the
    # one that stored the messages snapshot it reads)
    bound = 2 + SUPERSEDED_KEEP + 8  # keep_last, the superseded ones, the puts between two runs
    assert max(counts) <= (2 * bound if kind == "postgres" else bound)
