"""Retention on the async savers: keep_last through ainvoke, aprune, asweep, and LangGraph's
conformance suite with keep_last=4 applied at every put."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import asweep
from tests.scenario_graph import aopen_saver, arun_turns, build_graph, thread_config, turn_ids

KINDS = ["memory", "aiosqlite", pytest.param("apostgres", marks=pytest.mark.postgres)]


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=4, max_messages=8)


def _pg(kind: str, request: pytest.FixtureRequest) -> str | None:
    if kind != "apostgres":
        return None
    return str(request.getfixturevalue("postgres_server").new_database("retention_async"))


async def root_ids(saver: Any, thread_id: str) -> list[str]:
    return sorted([t.config["configurable"]["checkpoint_id"]
                   async for t in saver.alist(thread_config(thread_id))])


@pytest.mark.parametrize("kind", KINDS)
async def test_keep_last_through_ainvoke(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with aopen_saver(kind, path=tmp_path / "a.db", pg_url=_pg(kind, request)) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2, retention_every=1)
        graph = build_graph(saver)
        # parallel threads, on one saver, at the same time
        await asyncio.gather(*(arun_turns(graph, 4, thread_id=f"p{i}") for i in range(3)))
        for i in range(3):
            ids = await root_ids(saver, f"p{i}")
            assert len(ids) == 2, (i, ids)
            state = await graph.aget_state(thread_config(f"p{i}"))
            assert [m.id for m in state.values["messages"]][-len(turn_ids(3)):] == turn_ids(3)
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0


@pytest.mark.parametrize("kind", KINDS)
async def test_aprune_and_asweep(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with aopen_saver(kind, path=tmp_path / "s.db", pg_url=_pg(kind, request)) as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        graph = build_graph(saver)
        await arun_turns(graph, 3, thread_id="live")
        await arun_turns(graph, 2, thread_id="trim")
        # an idle thread: its newest checkpoint is 40 days old
        old: Any = {"configurable": {"thread_id": "idle", "checkpoint_ns": ""}}
        for step in range(3):
            cp = empty_checkpoint()
            cp["ts"] = (datetime.now(timezone.utc) - timedelta(days=40, minutes=-step)).isoformat()
            old = await inner.aput(old, cp, {"step": step}, {})
        live_before = await root_ids(saver, "live")
        trim_before = await root_ids(saver, "trim")

        dry = await asweep(saver, older_than=timedelta(days=30), keep_last=3, dry_run=True)
        assert dry.threads_deleted == ["idle"] and sorted(dry.threads_trimmed) == ["live", "trim"]
        assert await root_ids(saver, "live") == live_before  # a dry run deletes nothing

        # the bare saver works too
        report = await asweep(inner, older_than=timedelta(days=30), keep_last=3, vacuum=True)
        assert report.threads_deleted == dry.threads_deleted
        assert sorted(report.threads_trimmed) == sorted(dry.threads_trimmed)
        assert (report.checkpoints_deleted, report.writes_deleted, report.blobs_deleted) == (
            dry.checkpoints_deleted, dry.writes_deleted, dry.blobs_deleted)
        assert report.checkpoints_deleted == 3 + len(live_before) - 3 + len(trim_before) - 3
        assert await root_ids(saver, "idle") == []
        assert await root_ids(saver, "live") == live_before[-3:]
        assert report.vacuumed
        assert isinstance(report.bytes_before, int) and isinstance(report.bytes_after, int)
        if kind != "apostgres":  # VACUUM (ANALYZE) makes space reusable; relations may keep their size
            assert report.bytes_after < report.bytes_before
        # idempotent: a second run finds nothing to do
        again = await asweep(saver, older_than=timedelta(days=30), keep_last=3)
        assert (again.checkpoints_deleted, again.threads_deleted, again.threads_trimmed) == (0, [], [])

        await saver.aprune(["live"], strategy="keep_latest")
        assert await root_ids(saver, "live") == live_before[-1:]
        await saver.aprune(["trim"], strategy="delete")
        assert await root_ids(saver, "trim") == []
        await arun_turns(graph, 1, thread_id="live", start=3)
        state = await graph.aget_state(thread_config("live"))
        assert state.values["messages"][-1].id == "ai3-final"


async def test_asweep_argument_errors() -> None:
    saver = InMemorySaver()
    with pytest.raises(ValueError, match="sweep needs older_than"):
        await asweep(saver)
    with pytest.raises(TypeError, match=r"older_than must be a datetime\.timedelta"):
        await asweep(saver, older_than=30)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_last must be >= 1"):
        await asweep(saver, keep_last=0)
    with pytest.raises(TypeError, match="retention supports InMemorySaver"):
        await asweep(object(), keep_last=1)  # type: ignore[arg-type]


CASES = [
    pytest.param("memory", id="InMemorySaver"),
    pytest.param("aiosqlite", id="AsyncSqliteSaver"),
    pytest.param("apostgres", id="AsyncPostgresSaver", marks=pytest.mark.postgres),
]


@pytest.mark.parametrize("kind", CASES)
async def test_conformance_full_with_keep_last_4(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = _pg(kind, request)
    counter = iter(range(100))
    wrappers: list[ReducingCheckpointSaver] = []

    async def factory() -> AsyncIterator[ReducingCheckpointSaver]:
        async with aopen_saver(kind, path=tmp_path / f"conf-{next(counter)}.db", pg_url=pg_url) as inner:
            # retention at every put: the strictest schedule
            wrapper = ReducingCheckpointSaver(inner, reducer(), keep_last=4, retention_every=1)
            wrappers.append(wrapper)
            yield wrapper

    report = await validate(checkpointer_test(name=f"keep_last=4({kind})")(factory))
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    detected = {cap for cap, r in report.results.items() if r.detected}
    assert detected == {"put", "put_writes", "get_tuple", "list", "delete_thread", "prune"}
    # retention ran (and deleted) during the suites, without a failure
    assert sum(w.retention_stats.runs for w in wrappers if w.retention_stats) > 0
    assert all(w.retention_stats is not None and w.retention_stats.failures == 0 for w in wrappers)
