"""A list that grows a few messages at a time, handed each time to one warm reducer, is planned
as a fresh reducer and the reference planner plan it, whatever the new messages are: a new turn,
a pending call and its results, results out of order, an orphan, a call left unanswered before
the next user message, a system message in the middle."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer, _columns


@contextmanager
def _reference() -> Iterator[None]:
    was = _columns.enabled
    _columns.use(False)
    try:
        yield
    finally:
        _columns.use(was)


def _call(cid: str) -> dict[str, Any]:
    return {"name": "f", "args": {}, "id": cid}


def _turn(t: int) -> list[Any]:
    return [
        HumanMessage(f"q{t}", id=f"h{t}"),
        AIMessage("", id=f"a{t}", tool_calls=[_call(f"c{t}"), _call(f"d{t}")]),
        ToolMessage("r", tool_call_id=f"c{t}", id=f"tc{t}"),
        ToolMessage("r", tool_call_id=f"d{t}", id=f"td{t}"),
        AIMessage(f"answer {t}", id=f"f{t}"),
    ]


#: what each step appends to the list, in order
STEPS: list[list[Any]] = [
    _turn(100),
    [HumanMessage("q", id="hp"), AIMessage("", id="ap", tool_calls=[_call("p1"), _call("p2")])],
    [ToolMessage("r", tool_call_id="p1", id="tp1")],  # the pending call, answered in part
    [ToolMessage("r", tool_call_id="p2", id="tp2"), AIMessage("done", id="fp")],
    [HumanMessage("q", id="ho"), AIMessage("", id="ao", tool_calls=[_call("o1"), _call("o2")])],
    [ToolMessage("r", tool_call_id="o2", id="to2"), ToolMessage("r", tool_call_id="o1", id="to1")],
    [AIMessage("after results out of order", id="fo")],
    [ToolMessage("r", tool_call_id="nobody", id="orphan")],
    [HumanMessage("q", id="hu"), AIMessage("", id="au", tool_calls=[_call("u1")])],
    [HumanMessage("the call above is never answered", id="hu2")],
    [SystemMessage("a system message in the middle", id="sys2"), *_turn(101)],
    _turn(102),
]


@pytest.mark.parametrize("keep", [6, 20, 40])
def test_a_growing_list_is_planned_as_fresh_and_reference_reducers_plan_it(keep: int) -> None:
    msgs: list[Any] = [SystemMessage("s", id="s")]
    for t in range(12):
        msgs += _turn(t)
    warm = MessageReducer(min_messages=keep, max_messages=keep + 10)
    warm.reduce(msgs)
    for step in STEPS:  # each list starts with the last: only its new messages are checked
        msgs = [*msgs, *step]
        got = warm.reduce(msgs)
        fresh = MessageReducer(min_messages=keep, max_messages=keep + 10).reduce(msgs)
        with _reference():
            reference = MessageReducer(min_messages=keep, max_messages=keep + 10).reduce(msgs)
        ids = [m.id for m in got.surviving]
        assert ids == [m.id for m in fresh.surviving] == [m.id for m in reference.surviving]
        assert [m.id for m in got.pruned] == [m.id for m in reference.pruned]
        assert len(got.surviving) + len(got.pruned) == len(msgs)  # each message once
