"""The per-call records carry the request's tokens and the share a prompt cache can serve:
``ReduceRecord.prefix_tokens``, for the framework integrations (``CallFlow``) and the LangChain
middleware, against the previous call of the same thread."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer
from agentstate_reducer.integrations._common import CallFlow, ReduceRecord, build_reducer
from agentstate_reducer.middleware import ReducerMiddleware
from tests.agent_script import TOOLS, ScriptedModel, turns

LOG = logging.getLogger("tests.cost_records")


def _turn(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {i} " * 10},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " * 30},
        {"role": "assistant", "content": f"answer {i} " * 8},
    ]


def _check(records: list[ReduceRecord], sent: list[list[Any]]) -> None:
    """A thread's first call shares nothing; a call that starts with the whole previous request
    shares all of its tokens; a call that cut into it shares less than it."""
    assert records[0].prefix_tokens == 0
    extends = cuts = 0
    for (before, after), (a, b) in zip(itertools.pairwise(records), itertools.pairwise(sent), strict=True):
        assert 0 <= after.prefix_tokens <= after.tokens_after
        if b[: len(a)] == a:
            extends += 1
            assert after.prefix_tokens == before.tokens_after
        else:
            cuts += 1
            assert after.prefix_tokens < before.tokens_after
    assert extends and cuts, (extends, cuts)


def test_call_flow_records_the_prefix_shared_with_the_previous_call() -> None:
    records: list[ReduceRecord] = []
    reducer = build_reducer(None, {"min_messages": 4, "max_messages": 10}, preserve_first=False, what="test")
    flow = CallFlow(reducer, mode="request", on_reduce=records.append, logger=LOG)
    history: list[Any] = [{"role": "system", "content": "be brief"}]
    sent: list[list[Any]] = []
    for i in range(8):
        for m in _turn(i):
            history.append(m)
            if m["role"] != "assistant":
                out = flow.bound("k", history).sent
                sent.append([m for m in out if m.get("role") != "system"])
    assert len(records) == len(sent)
    _check(records, sent)
    # another thread starts afresh
    other: list[ReduceRecord] = []
    CallFlow(reducer, mode="request", on_reduce=other.append, logger=LOG).bound("k2", history[:2])
    assert other[0].prefix_tokens == 0


def test_without_on_reduce_nothing_is_counted() -> None:
    reducer = MessageReducer(min_messages=4, max_messages=10)
    flow = CallFlow(reducer, mode="state", logger=LOG)
    bounded = flow.bound("k", _turn(0))
    assert (bounded.record.tokens_after, bounded.record.prefix_tokens) == (0, 0)


def test_middleware_records_the_prefix_shared_with_the_previous_call() -> None:
    model = ScriptedModel(steps=2)
    records: list[ReduceRecord] = []
    mw = ReducerMiddleware(
        MessageReducer(), mode="request", trigger=("messages", 16), keep=("messages", 8),
        on_reduce=records.append,
    )
    agent = create_agent(model, TOOLS, system_prompt="terse", checkpointer=InMemorySaver(), middleware=[mw])
    config: Any = {"configurable": {"thread_id": "t"}}
    for t in turns(6):
        agent.invoke(t, config)
    sent: list[list[BaseMessage]] = [[m for m in call if m.type != "system"] for call in model.calls]
    assert len(records) == len(sent)
    _check(records, sent)
