"""The message adapter reads every supported shape and never changes a message."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
    message_to_dict,
)
from langchain_core.messages.tool import tool_call_chunk

from agentstate_reducer import MessageReducer, read_message

LC_CALL = {"name": "f", "args": {"a": 1}, "id": "call_1"}


@pytest.mark.parametrize(
    ("message", "kind", "msg_id", "calls", "results"),
    [
        # LangChain dicts
        ({"type": "human", "content": "hi", "id": "1"}, "human", "1", (), ()),
        ({"type": "ai", "content": "", "tool_calls": [LC_CALL], "id": "2"}, "ai", "2", ("call_1",), ()),
        ({"type": "tool", "content": "r", "tool_call_id": "call_1"}, "tool", None, (), ("call_1",)),
        ({"type": "system", "content": "s"}, "system", None, (), ()),
        # OpenAI dicts
        ({"role": "user", "content": "hi"}, "human", None, (), ()),
        ({"role": "assistant", "content": None, "tool_calls": None}, "ai", None, (), ()),
        (
            {"role": "assistant", "tool_calls": [{"id": "c9", "type": "function", "function": {}}]},
            "ai", None, ("c9",), (),
        ),
        ({"role": "tool", "tool_call_id": "c9", "content": "r"}, "tool", None, (), ("c9",)),
        ({"role": "developer", "content": "rules"}, "system", None, (), ()),
        ({"role": "function", "name": "g", "content": "r"}, "tool", None, (), ()),
        ({"role": "agent", "content": "x"}, "ai", None, (), ()),
        ({"role": "ASSISTANT", "content": "x"}, "ai", None, (), ()),
        # LangChain serialized forms
        ({"type": "ai", "data": {"tool_calls": [LC_CALL], "id": "s1"}}, "ai", "s1", ("call_1",), ()),
        (
            {"type": "chat", "data": {"role": "user", "content": "x", "id": "s2"}},
            "human", "s2", (), (),
        ),
        # Anthropic content blocks
        (
            {"role": "assistant", "content": [{"type": "text", "text": "t"},
                                              {"type": "tool_use", "id": "tu1", "name": "f", "input": {}}]},
            "ai", None, ("tu1",), (),
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "r"},
                                         {"type": "tool_result", "tool_use_id": "tu2", "content": "r"}]},
            "tool", None, (), ("tu1", "tu2"),
        ),
        ({"role": "user", "content": [{"type": "text", "text": "plain"}]}, "human", None, (), ()),
        # unknown and malformed
        ({"role": "critic", "content": "x"}, "unknown", None, (), ()),
        ({"content": "no role"}, "unknown", None, (), ()),
        ({"role": None, "type": None}, "unknown", None, (), ()),
        ("just a string", "unknown", None, (), ()),
        (None, "unknown", None, (), ()),
        ({"role": "assistant", "tool_calls": [{"no": "id"}, "x", None]}, "ai", None, (), ()),
    ],
)  # fmt: skip
def test_dict_shapes(
    message: Any, kind: str, msg_id: str | None, calls: tuple[str, ...], results: tuple[str, ...]
) -> None:
    before = copy.deepcopy(message)
    info = read_message(message)
    assert (info.kind, info.id, info.call_ids, info.result_ids) == (kind, msg_id, calls, results)
    assert message == before


@pytest.mark.parametrize(
    ("message", "kind", "calls", "results"),
    [
        (HumanMessage("x", id="m"), "human", (), ()),
        (HumanMessageChunk(content="x", id="m"), "human", (), ()),
        (AIMessage("", id="m", tool_calls=[LC_CALL]), "ai", ("call_1",), ()),
        (AIMessageChunk(content="", id="m", tool_call_chunks=[
            tool_call_chunk(name="f", args='{"a": 1}', id="call_1", index=0)]), "ai", ("call_1",), ()),
        (SystemMessage("x", id="m"), "system", (), ()),
        (ToolMessage("x", id="m", tool_call_id="call_1"), "tool", (), ("call_1",)),
        (ToolMessageChunk(content="x", id="m", tool_call_id="call_1"), "tool", (), ("call_1",)),
        (FunctionMessage(content="x", name="f", id="m"), "tool", (), ()),
        (ChatMessage(role="user", content="x", id="m"), "human", (), ()),
        (ChatMessage(role="assistant", content="x", id="m"), "ai", (), ()),
        (ChatMessage(role="critic", content="x", id="m"), "unknown", (), ()),
        (RemoveMessage(id="m"), "remove", (), ()),
    ],
)  # fmt: skip
def test_langchain_objects(message: Any, kind: str, calls: tuple[str, ...], results: tuple[str, ...]) -> None:
    info = read_message(message)
    assert (info.kind, info.id, info.call_ids, info.result_ids) == (kind, "m", calls, results)


def test_langchain_dict_dumps() -> None:
    ai = AIMessage("", id="d1", tool_calls=[LC_CALL])
    for dumped in (message_to_dict(ai), dumpd(ai)):
        info = read_message(dumped)
        assert (info.kind, info.id, info.call_ids) == ("ai", "d1", ("call_1",))


def test_openai_sdk_like_objects_with_only_role() -> None:
    call = SimpleNamespace(id="c1", type="function", function=SimpleNamespace(name="f", arguments="{}"))
    assistant = SimpleNamespace(role="assistant", content=None, tool_calls=[call])
    tool = SimpleNamespace(role="tool", content="r", tool_call_id="c1")
    assert (read_message(assistant).kind, read_message(assistant).call_ids) == ("ai", ("c1",))
    assert (read_message(tool).kind, read_message(tool).result_ids) == ("tool", ("c1",))


def test_hostile_object_is_unknown_not_an_error() -> None:
    class Hostile:
        @property
        def type(self) -> str:
            raise RuntimeError("boom")

    assert read_message(Hostile()).kind == "unknown"


def test_remove_message_is_never_a_conversation_message() -> None:
    msgs = [SystemMessage("s", id="s"), RemoveMessage(id="gone"), HumanMessage("a", id="h1"),
            AIMessage("b", id="a1"), HumanMessage("c", id="h2"), AIMessage("d", id="a2")]  # fmt: skip
    result = MessageReducer(min_messages=2, max_messages=3).reduce(msgs)
    assert [m.id for m in result.surviving] == ["s", "gone", "h2", "a2"]
    assert result.surviving[1] is msgs[1]
