"""ReducingCheckpointSaver with a summarizer when the inner saver's ``put`` fails now and then.

The inner savers are real (InMemorySaver, SqliteSaver on a file, AsyncSqliteSaver); a test-only
subclass raises ``ConnectionError`` before storing anything at the put calls a seeded generator
picks. The graph (``scenario_graph``'s agent) runs with ``durability="sync"``, so a failed put
fails the run, and the caller retries the turn with the same input until it succeeds. Whatever
puts fail, the summarizer sees each message once, and every message the saver ever stored is
still stored or in the summary. The model gives every answer a new id, as a real one does, so a
message summarized twice is one message, not two answers that happen to share an id.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.summary import is_summary_message
from checkpointers import ReducingCheckpointSaver
from tests.scenario_graph import (
    ScriptedToolModel,
    build_graph,
    contract_violations,
    human_message,
    system_message,
    thread_config,
)

MAX = 16
TURNS = 12
SEEDS = range(6)


class FreshIdModel(ScriptedToolModel):
    """``ScriptedToolModel`` whose every answer is a new message: its id and call ids carry a
    call counter, as a real model's would be new (a retried turn calls the model again)."""

    calls: int = 0

    def next_message(self, messages: Sequence[Any]) -> AIMessage:
        self.calls += 1
        msg = super().next_message(messages)
        tag = f"#{self.calls}"
        calls = [{**c, "id": f"{c['id']}{tag}"} for c in msg.tool_calls]
        return AIMessage(msg.content, id=f"{msg.id}{tag}", tool_calls=calls)


class Outage:
    """Which put calls fail: each with probability ``rate``, drawn from ``random.Random(seed)``.

    ``summarized`` counts the ids each summarizer call got; ``failed_with_new_summary`` counts
    failed puts that carried a summary made for them (the case a retry must not summarize again).
    """

    def __init__(self, seed: int, rate: float = 0.25) -> None:
        self._random = random.Random(seed)
        self._rate = rate
        self.failures = 0
        self.summarized: Counter[str | None] = Counter()
        self.fresh_summary = False
        self.failed_with_new_summary = 0

    def summarize(self, messages: list[Any]) -> str:
        self.summarized.update(read_message(m).id for m in messages if not is_summary_message(m))
        self.fresh_summary = True
        return f"summary of {len(messages)} messages"

    def check(self) -> None:
        """Called by a put before it stores anything: raise, or let it store."""
        fresh, self.fresh_summary = self.fresh_summary, False
        if self._random.random() < self._rate:
            self.failures += 1
            self.failed_with_new_summary += fresh
            raise ConnectionError("checkpoint store unreachable")


class FailingInMemorySaver(InMemorySaver):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.outage.check()
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.outage.check()
        return await super().aput(config, checkpoint, metadata, new_versions)


class FailingSqliteSaver(SqliteSaver):
    outage: Outage

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.outage.check()
        return super().put(config, checkpoint, metadata, new_versions)


class FailingAsyncSqliteSaver(AsyncSqliteSaver):
    outage: Outage

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.outage.check()
        return await super().aput(config, checkpoint, metadata, new_versions)


def reducer(outage: Outage) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(
        min_messages=8, max_messages=MAX, summarize_fn=outage.summarize, inject_summary=True
    ))


@contextmanager
def failing_saver(kind: str, outage: Outage, path: Path) -> Iterator[Any]:
    if kind == "memory":
        yield FailingInMemorySaver(outage)
        return
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = FailingSqliteSaver(conn)
        saver.outage = outage
        saver.setup()
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def afailing_saver(kind: str, outage: Outage, path: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield FailingInMemorySaver(outage)
        return
    async with aiosqlite.connect(path) as conn:
        saver = FailingAsyncSqliteSaver(conn)
        saver.outage = outage
        await saver.setup()
        yield saver


def turn_input(turn: int) -> dict[str, Any]:
    return {"messages": [human_message(turn)] if turn else [system_message(), human_message(turn)]}


def ids(messages: Any) -> list[str | None]:
    return [read_message(m).id for m in messages]


def assert_summarized_once_and_nothing_lost(
    outage: Outage, stored: list[Any], ever_stored: set[str | None]
) -> None:
    """``stored``: the thread's latest messages; ``ever_stored``: the ids in any of its checkpoints."""
    assert contract_violations(stored, max_len=MAX) == []
    assert [i for i, n in outage.summarized.items() if n != 1] == []
    kept = set(ids(stored)) | set(outage.summarized)
    assert ever_stored - kept == set()
    assert {f"h{t}" for t in range(TURNS)} <= kept
    assert outage.failures and outage.summarized  # the scenario did fail puts and summarize


def stored_ids(checkpoint: Any) -> list[str | None]:
    return ids(checkpoint["channel_values"].get("messages", []))


def run_retried(graph: Any) -> None:
    """Run TURNS turns on thread "t", each retried by the caller while a put fails."""
    for turn in range(TURNS):
        for _ in range(100):
            try:
                graph.invoke(turn_input(turn), thread_config("t"), durability="sync")
                break
            except ConnectionError:
                continue  # the caller retries the turn
        else:
            pytest.fail(f"turn {turn} never succeeded")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_retried_runs_summarize_each_message_once(kind: str, seed: int, tmp_path: Path) -> None:
    outage = Outage(seed)
    with failing_saver(kind, outage, tmp_path / "cp.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer(outage))
        run_retried(build_graph(saver, model=FreshIdModel()))
        latest = saver.get_tuple(thread_config("t"))
        assert latest is not None
        ever_stored = {i for tup in saver.list(thread_config("t")) for i in stored_ids(tup.checkpoint)}
        stored = latest.checkpoint["channel_values"]["messages"]
        assert_summarized_once_and_nothing_lost(outage, stored, ever_stored)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["memory", "aiosqlite"])
async def test_retried_async_runs_summarize_each_message_once(kind: str, seed: int, tmp_path: Path) -> None:
    outage = Outage(seed)
    async with afailing_saver(kind, outage, tmp_path / "acp.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer(outage))
        graph = build_graph(saver, model=FreshIdModel())
        for turn in range(TURNS):
            for _ in range(100):
                try:
                    await graph.ainvoke(turn_input(turn), thread_config("t"), durability="sync")
                    break
                except ConnectionError:
                    continue
            else:
                pytest.fail(f"turn {turn} never succeeded")
        latest = await saver.aget_tuple(thread_config("t"))
        assert latest is not None
        ever_stored = {i async for tup in saver.alist(thread_config("t")) for i in stored_ids(tup.checkpoint)}
        stored = latest.checkpoint["channel_values"]["messages"]
        assert_summarized_once_and_nothing_lost(outage, stored, ever_stored)


@pytest.mark.slow
def test_some_seeds_fail_a_put_that_carries_a_new_summary(tmp_path: Path) -> None:
    """The seeds above exercise the case that matters: a put fails right after its summary was made."""
    hits = 0
    for seed in SEEDS:
        outage = Outage(seed)
        saver = ReducingCheckpointSaver(FailingInMemorySaver(outage), reducer(outage))
        run_retried(build_graph(saver, model=FreshIdModel()))
        hits += outage.failed_with_new_summary > 0
    assert hits >= 3
