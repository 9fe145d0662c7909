"""Reading LlamaIndex's ``ChatMessage`` (``llama_index.core.llms``) without importing LlamaIndex.

A ``ChatMessage`` holds ``role`` (a ``MessageRole``, a str enum), ``blocks`` (``TextBlock``,
``ImageBlock``, ``ToolCallBlock``, ...; ``content`` is the text blocks' text) and
``additional_kwargs``:

* an assistant message makes the calls in ``additional_kwargs["tool_calls"]`` (OpenAI-style
  dicts or SDK objects with an ``id``, as function-calling LLMs write them) and those of its
  ``ToolCallBlock`` blocks (``tool_call_id``);
* a ``tool`` message answers the call named by ``additional_kwargs["tool_call_id"]`` (as the
  agents write results); an assistant message with a ``tool_call_id`` (a ``return_direct``
  answer) answers nothing.

It is recognised by its class name and module (LangChain has a ``ChatMessage`` too); it has no
id. The ``content`` read for the token counter is its text, the calls' names and arguments come
from ``llama_index_call_payloads``. Duck-typed and stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentstate_reducer.messages.jsontext import arguments_text

__all__ = ["is_llama_index_message", "llama_index_call_payloads", "read_llama_index"]

#: ``role`` values and their kind (``chatbot`` and ``model`` are assistant names of some LLMs)
_KINDS: Final = {
    "user": "human",
    "assistant": "ai",
    "chatbot": "ai",
    "model": "ai",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}

#: ``(kind, role, id, content, call_ids, result_ids, name, leads)``, ``MessageInfo``'s fields
Reading = tuple[str, str, None, Any, tuple[str, ...], tuple[str, ...], "str | None", int]


def is_llama_index_message(msg: Any) -> bool:
    """``msg`` is a LlamaIndex ``ChatMessage`` (by class name and module, never by import)."""
    cls = type(msg)
    return cls.__name__ == "ChatMessage" and cls.__module__.startswith("llama_index.")


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _str_id(value: Any) -> str | None:
    """A call id, the empty one included (``read.call_id``: a call and its result read alike)."""
    return str.__str__(value) if isinstance(value, str) else None


def _role(msg: Any) -> str:
    role = getattr(msg, "role", None)
    value = getattr(role, "value", role)
    return value if isinstance(value, str) else ""


def _calls(msg: Any) -> list[tuple[str, Any, Any]]:
    """``(id, name, arguments)`` of each call the message makes, raw (ids deduplicated)."""
    out: list[tuple[str, Any, Any]] = []
    seen: set[str] = set()
    extra = getattr(msg, "additional_kwargs", None)
    calls = extra.get("tool_calls") if isinstance(extra, Mapping) else None
    if isinstance(calls, Sequence) and not isinstance(calls, str):
        for call in calls:
            call_id = _str_id(_get(call, "id"))
            if call_id is None or call_id in seen:
                continue
            seen.add(call_id)
            fn = _get(call, "function")
            src = fn if fn is not None else call
            out.append((call_id, _get(src, "name"), _get(src, "arguments")))
    blocks = getattr(msg, "blocks", None)
    if isinstance(blocks, Sequence):
        for block in blocks:
            if _get(block, "block_type") != "tool_call":
                continue
            call_id = _str_id(_get(block, "tool_call_id"))
            if call_id is None or call_id in seen:
                continue
            seen.add(call_id)
            out.append((call_id, _get(block, "tool_name"), _get(block, "tool_kwargs")))
    return out


def read_llama_index(msg: Any) -> Reading:
    """The ``MessageInfo`` fields of a LlamaIndex ``ChatMessage``. Raises what a hostile field
    raises (``read_message`` catches it)."""
    role = _role(msg)
    kind = _KINDS.get(role.lower(), "unknown")
    content = getattr(msg, "content", None)
    if kind == "ai":
        calls = tuple(call_id for call_id, _, _ in _calls(msg))
        return ("ai", role, None, content, calls, (), None, 0)
    if kind == "tool":
        extra = getattr(msg, "additional_kwargs", None)
        answered = _str_id(extra.get("tool_call_id")) if isinstance(extra, Mapping) else None
        return ("tool", role, None, content, (), (answered,) if answered is not None else (), None, 0)
    return (kind, role, None, content, (), (), None, 0)


def llama_index_call_payloads(msg: Any) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each tool call of an assistant ``ChatMessage``."""
    if _KINDS.get(_role(msg).lower()) != "ai":
        return []
    return [
        (call_id, name if isinstance(name, str) else "", arguments_text(args if args is not None else ""))
        for call_id, name, args in _calls(msg)
    ]
