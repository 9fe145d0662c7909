"""``read_structure`` reads the planner's columns as ``read_message`` reads each message, and
``structure_of_infos`` takes them from readings, on generated lists of every shape (hypothesis)."""

from __future__ import annotations

import operator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer._columns.structure import (
    LETTERS,
    Structure,
    joined,
    read_structure,
    same_prefix,
    structure_of_infos,
    window,
)
from agentstate_reducer.messages import read_message
from tests.convo import MULTI_RESULT_FORMATS, PROPERTY_BUILDERS
from tests.test_messages_bulk import histories
from tests.test_properties import conversations


def _expected(msgs: list[Any], lo: int) -> Structure:
    """The columns, one ``read_message`` at a time."""
    infos = [read_message(m) for m in msgs]
    kinds = [info.kind for info in infos[lo:]]
    calls = {
        i: infos[i].call_ids for i in range(lo, len(msgs)) if infos[i].kind == "ai" and infos[i].call_ids
    }
    results = {i: infos[i].result_ids for i in range(lo, len(msgs)) if infos[i].kind == "tool"}
    leads = {i: infos[i].leads for i in range(lo, len(msgs)) if infos[i].leads}
    text = "".join("c" if i in calls else LETTERS[infos[i].kind] for i in range(lo, len(msgs)))
    return Structure(lo, kinds, calls, results, leads, text)


def _check(msgs: list[Any], lo: int, cut: int) -> None:
    lo = min(lo, len(msgs))
    expected = _expected(msgs, lo)
    got = read_structure(msgs, lo)
    assert got == expected
    assert list(got.calls) == sorted(got.calls) and list(got.results) == sorted(got.results)
    assert structure_of_infos([read_message(m) for m in msgs], lo) == expected
    cut = lo + min(cut, len(msgs) - lo)
    assert joined(read_structure(msgs, lo, cut), read_structure(msgs, cut)) == expected
    # a window cut at either end is the window read there
    assert window(expected, cut, len(msgs)) == _expected(msgs, cut)
    assert window(expected, lo, cut) == read_structure(msgs, lo, cut)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(histories, st.integers(0, 12), st.integers(0, 12))
def test_read_structure_equals_read_message(msgs: list[Any], lo: int, cut: int) -> None:
    """Odd field values: ids of every type, content blocks, calls in both shapes, chat messages."""
    _check(msgs, lo, cut)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(PROPERTY_BUILDERS)), st.data(), st.integers(0, 12), st.integers(0, 12))
def test_read_structure_equals_read_message_in_every_shape(
    fmt: str, data: st.DataObject, lo: int, cut: int
) -> None:
    msgs = PROPERTY_BUILDERS[fmt](data.draw(conversations(multi=fmt in MULTI_RESULT_FORMATS)))
    _check(msgs, lo, cut)


def test_calls_held_in_extras_and_parts_are_read() -> None:
    """Calls an older LangChain dump keeps in ``additional_kwargs`` and a Gemini dict's calls in
    ``parts`` (content None) are read, not taken as an AI message without calls."""
    from langchain_core.messages import AIMessage

    legacy = {"tool_calls": [{"id": "old", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    objects: list[Any] = [AIMessage("", additional_kwargs=legacy, id="a1")]
    dicts: list[Any] = [
        {"role": "assistant", "content": "", "additional_kwargs": legacy, "id": "a2"},
        {"role": "assistant", "content": None, "parts": [{"function_call": {"name": "f", "args": {}}}]},
        {"type": "message", "role": "assistant", "content": "a Responses message item", "id": "a3"},
    ]
    assert read_structure(objects).calls == {0: ("old",)}
    got = read_structure(dicts)
    assert got.calls == {0: ("old",), 1: ("f#0",)}
    assert got.leads == {2: 1}
    assert got == _expected(dicts, 0)


def test_the_kind_of_an_object_is_read_from_its_own_type() -> None:
    """A model whose ``type`` field takes several values, and a LangChain message whose ``type``
    was assigned: each is read by its instance's value, as ``read_message`` reads it."""
    from typing import Literal

    from langchain_core.messages import HumanMessage
    from pydantic import BaseModel

    from agentstate_reducer import MessageReducer, ReducerConfig
    from agentstate_reducer._columns.bulk import pinned_indices
    from agentstate_reducer.messages import PINNED_KINDS

    class Msg(BaseModel):
        type: Literal["human", "ai", "tool", "system"] = "human"
        content: str = ""
        id: str = ""
        tool_calls: list[dict[str, Any]] = []
        tool_call_id: str | None = None

    moved = HumanMessage("now a system message", id="m")
    moved.type = "system"  # type: ignore[assignment]
    msgs: list[Any] = [
        Msg(content="q1", id="h1"),
        Msg(type="ai", content="a1", id="a1"),
        Msg(type="system", content="s", id="s1"),
        moved,
        Msg(content="q2", id="h2"),
        Msg(type="ai", id="c2", tool_calls=[{"id": "x", "name": "f", "args": {}}]),
        Msg(type="tool", content="r", id="t2", tool_call_id="x"),
    ]
    assert read_structure(msgs) == _expected(msgs, 0)
    assert pinned_indices(msgs) == [i for i, m in enumerate(msgs) if read_message(m).kind in PINNED_KINDS]
    reducer = MessageReducer(config=ReducerConfig(min_messages=1, max_messages=4, preserve_first=False))
    assert [m.id for m in reducer.reduce(msgs).surviving] == ["s1", "m", "h2", "c2", "t2"]


def test_a_message_read_whole_keeps_nothing_its_columns_read() -> None:
    """A dict whose extras cannot say whether they are true is read by ``read_message`` (which
    reads it as unknown): the call ids the columns read before are not kept."""

    class Hostile(dict[str, Any]):
        def __bool__(self) -> bool:
            raise RuntimeError("no truth value")

    msg = {"role": "assistant", "content": "x", "tool_calls": [{"id": "a"}], "additional_kwargs": Hostile()}
    got = read_structure([msg])
    assert got == _expected([msg], 0)


class _Loud:
    """An item whose ``==`` raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no answer")

    __hash__ = object.__hash__


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 12),
    other_size=st.integers(0, 12),
    swaps=st.lists(st.integers(0, 11), max_size=3),
    equal_copies=st.booleans(),
    loud=st.booleans(),
)
def test_same_prefix_counts_the_same_objects_at_the_same_places(
    size: int, other_size: int, swaps: list[int], equal_copies: bool, loud: bool
) -> None:
    """The answer is the length of the prefix of the same objects, whatever the lists hold past
    it; an equal other object there ends it unless the same objects surround it (then it counts
    as the same: ``==`` means content equality), and an ``==`` that raises never escapes."""
    own: list[Any] = [_Loud() if loud and i == size // 2 else [i] for i in range(size)]
    other = own[:other_size] + [[i] for i in range(size, other_size)]
    for i in swaps:
        if i < len(other):
            other[i] = list(other[i]) if equal_copies and isinstance(other[i], list) else object()
    before = list(own)
    got = same_prefix(own, other)
    shorter = min(len(own), len(other))
    same = next((i for i in range(shorter) if own[i] is not other[i]), shorter)
    assert same <= got <= shorter
    assert all(a is b or a == b for a, b in zip(own[:got], other[:got], strict=True))
    assert all(map(operator.is_, own, before)) and len(own) == len(before)
