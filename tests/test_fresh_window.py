"""A fresh reducer on LangChain messages it never saw reads the window its budget reaches in
one pass over the messages (the column path); every odd message in that window is read whole,
so the result equals the reference planner's, message for message."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer
from tests.paths import column_path


def _turn(t: int) -> list[Any]:
    calls = [{"name": "f", "args": {}, "id": f"c{t}a"}, {"name": "g", "args": {}, "id": f"c{t}b"}]
    return [
        HumanMessage(f"q{t}", id=f"h{t}"),
        AIMessage("", tool_calls=calls, id=f"a{t}"),
        ToolMessage("r", tool_call_id=f"c{t}a", id=f"t{t}a"),
        ToolMessage("r", tool_call_id=f"c{t}b", id=f"t{t}b"),
        AIMessage(f"answer {t}", id=f"f{t}"),
    ]


def _odd(t: int) -> list[Any]:
    """A turn whose messages the columns cannot decide alone (an even one also repeats a call
    id, which the column path leaves to the reference)."""
    call = {"id": f"old{t}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    legacy = {"tool_calls": [call]}
    turn: list[Any] = [
        HumanMessage([{"type": "text", "text": f"q{t}"}], id=f"h{t}"),  # content blocks
        AIMessage("", additional_kwargs=legacy, id=f"a{t}"),  # calls an older dump keeps in extras
        ToolMessage("r", tool_call_id=f"old{t}", id=f"t{t}"),
        AIMessage([{"type": "text", "text": "blocks"}], id=f"f{t}"),
    ]
    if t % 2 == 0:  # the same call id twice in one message
        turn += [
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "dup"}] * 2, id=f"d{t}"),
            ToolMessage("r", tool_call_id="dup", id=f"u{t}"),
        ]
    return [*turn, HumanMessage("next", id=f"n{t}")]


def _history(odd_at: set[int], turns: int = 60) -> list[Any]:
    msgs: list[Any] = [SystemMessage("s", id="sys")]
    for t in range(turns):
        msgs += _odd(t) if t in odd_at else _turn(t)
    return msgs


def _ids(result: Any) -> list[str]:
    return [m.id for m in result.surviving]


@pytest.mark.parametrize("odd_at", [set(), {41}, {10, 45, 59}, {40}, set(range(30, 60, 3))])
@pytest.mark.parametrize("keep", [20, 150])
def test_fresh_reducer_equals_the_reference(odd_at: set[int], keep: int) -> None:
    msgs = _history(odd_at)
    before = list(msgs)
    with column_path(True):
        fast = MessageReducer(min_messages=keep, max_messages=keep + 20).reduce(msgs)
    with column_path(False):
        reference = MessageReducer(min_messages=keep, max_messages=keep + 20).reduce(msgs)
    assert _ids(fast) == _ids(reference)
    assert [m.id for m in fast.pruned] == [m.id for m in reference.pruned]
    # each message kept or pruned, exactly once; the input is not changed
    assert sorted(_ids(fast) + [m.id for m in fast.pruned]) == sorted(m.id for m in msgs)
    assert msgs == before and all(a is b for a, b in zip(msgs, before, strict=True))
