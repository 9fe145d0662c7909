"""deepagents' ``create_deep_agent`` (its ``messages`` channel is a ``DeltaChannel``) with
``ReducingCheckpointSaver`` alone and with ``ReducerMiddleware`` too, on real savers.

The model is ``tests.agent_script.ScriptedModel`` (tool steps with parallel calls, ``bind_tools``);
deepagents adds its built-in tools and middleware (todos, filesystem, subagents, summarization,
large-result eviction). Every model request is judged by ``tests/provider_rules.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from checkpointers import ReducingCheckpointSaver
from tests.agent_script import TOOLS, ScriptedModel, provider_errors, turns
from tests.scenario_graph import SYNC_SAVERS, aopen_saver, open_saver, saver_params

SYSTEM = "You are a terse assistant."
MAX = 16

SYNC = saver_params(SYNC_SAVERS)
ASYNC = saver_params(["memory", "aiosqlite"])


@pytest.fixture(params=SYNC)
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    with open_saver(request.param, path=tmp_path / "cp.db", pg_url=pg_url) as saver:
        yield saver


@pytest.fixture(params=ASYNC)
async def ainner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with aopen_saver(request.param, path=tmp_path / "acp.db") as saver:
        yield saver


class Archive:
    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.ids.extend(str(m.id) for m in pruned)


def reducer(archive: Archive | None = None) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=8, max_messages=MAX,
                                               on_prune=[archive] if archive else []))


def config() -> Any:
    return {"configurable": {"thread_id": f"deep-{uuid.uuid4().hex[:8]}"}}


def assert_requests_valid(calls: list[list[BaseMessage]], bound: int) -> None:
    assert calls
    for n, call in enumerate(calls):
        assert provider_errors(call) == [], f"request {n}: {provider_errors(call)}"
        assert len([m for m in call if m.type != "system"]) <= bound, f"request {n}: {len(call)} messages"


def test_the_saver_alone_bounds_a_deep_agent(inner: Any) -> None:
    archive = Archive()
    model = ScriptedModel()
    saver = ReducingCheckpointSaver(inner, reducer(archive))
    agent = create_deep_agent(model=model, tools=TOOLS, system_prompt=SYSTEM, checkpointer=saver)
    cfg = config()
    seen: dict[str, None] = {}
    for t in turns(8):
        out = agent.invoke(t, cfg)
        seen.update((str(m.id), None) for m in out["messages"])
        loaded = agent.get_state(cfg).values["messages"]
        assert len(loaded) <= MAX
    # a run sends what it loaded plus its own messages (one turn: 7 messages)
    assert_requests_valid(model.calls, MAX + 7)
    assert model.lost_turns == 0
    stored = [str(m.id) for m in agent.get_state(cfg).values["messages"]]
    assert sorted(stored + archive.ids) == sorted(seen)  # each message stored or archived, once
    newest = saver.get_tuple(cfg)
    assert newest is not None
    assert isinstance(newest.checkpoint["channel_values"]["messages"], _DeltaSnapshot)


def test_middleware_and_saver_with_keep_last(tmp_path: Path) -> None:
    """The one-line setup: the middleware bounds each request, the saver the stored messages, and
    keep_last trims the thread's checkpoints (no grace for superseded ones: one run at a time)."""
    model = ScriptedModel()
    with open_saver("sqlite", path=tmp_path / "cp.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2, branch_grace=timedelta(0))
        agent = create_deep_agent(
            model=model, tools=TOOLS, system_prompt=SYSTEM,
            middleware=[ReducerMiddleware(MessageReducer(min_messages=8, max_messages=MAX))],
            checkpointer=saver,
        )
        cfg = config()
        kept = []
        for t in turns(16):
            agent.invoke(t, cfg)
            assert len(agent.get_state(cfg).values["messages"]) <= MAX + 1
            kept.append(len(list(saver.list(cfg))))
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0 and stats.checkpoints_deleted > 0
        # flat: keep_last plus what the puts between two retention runs add (retention_every=8)
        assert max(kept) <= 2 + saver.retention_every
        assert max(kept[8:]) <= max(kept[:8])
    # ReducerMiddleware bounds the in-run state too: every request stays near the bound
    assert_requests_valid(model.calls, MAX + 7)
    assert model.lost_turns == 0


async def test_async_savers_bound_a_deep_agent(ainner: Any) -> None:
    archive = Archive()
    model = ScriptedModel()
    agent = create_deep_agent(model=model, tools=TOOLS, system_prompt=SYSTEM,
                              checkpointer=ReducingCheckpointSaver(ainner, reducer(archive)))
    cfg = config()
    seen: dict[str, None] = {}
    for t in turns(6):
        out = await agent.ainvoke(t, cfg)
        seen.update((str(m.id), None) for m in out["messages"])
        assert len((await agent.aget_state(cfg)).values["messages"]) <= MAX
    assert_requests_valid(model.calls, MAX + 7)
    stored = [str(m.id) for m in (await agent.aget_state(cfg)).values["messages"]]
    assert sorted(stored + archive.ids) == sorted(seen)
