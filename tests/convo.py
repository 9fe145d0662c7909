"""Build one conversation in every supported message shape, from a compact spec.

A spec is a list of tuples:
    ("system", id) | ("human", id) | ("ai", id) | ("call", id, [call_ids]) | ("tool", id, call_id)
    | ("unknown", id)
A tool message answering several calls, ("tool", id, [call_ids]), exists only in Anthropic's shape
(one user message of several ``tool_result`` blocks): ``MULTI_RESULT_FORMATS``.
Each builder returns the caller-visible messages; ``ids(messages)`` reads the ids back through
the public adapter so tests can state exact expected ids for every shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentstate_reducer import read_message

Spec = list[tuple[Any, ...]]


def _text(mid: str) -> str:
    return f"message {mid} " + "x" * 20


def langchain_dicts(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            calls = [{"name": "lookup", "args": {"q": c}, "id": c, "type": "tool_call"} for c in rest[0]]
            out.append({"type": "ai", "content": "", "id": mid, "tool_calls": calls})
        elif kind == "tool":
            out.append({"type": "tool", "content": _text(mid), "id": mid, "tool_call_id": rest[0]})
        elif kind == "unknown":
            out.append({"type": "critic", "content": _text(mid), "id": mid})
        else:
            out.append({"type": kind, "content": _text(mid), "id": mid})
    return out


_OPENAI_ROLES = {"system": "system", "human": "user", "ai": "assistant", "unknown": "critic"}


def openai_dicts(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            calls = [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": f'{{"q": "{c}"}}'}}
                for c in rest[0]
            ]
            out.append({"role": "assistant", "content": None, "id": mid, "tool_calls": calls})
        elif kind == "tool":
            out.append({"role": "tool", "content": _text(mid), "id": mid, "tool_call_id": rest[0]})
        else:
            msg: dict[str, Any] = {"role": _OPENAI_ROLES[kind], "content": _text(mid), "id": mid}
            if kind == "ai":
                msg["tool_calls"] = None  # common in OpenAI dumps
            out.append(msg)
    return out


def anthropic_dicts(spec: Spec) -> list[Any]:
    """Anthropic content blocks: tool_use in assistant content, tool_result in user content."""
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            blocks = [{"type": "tool_use", "id": c, "name": "lookup", "input": {"q": c}} for c in rest[0]]
            out.append({"role": "assistant", "id": mid, "content": [{"type": "text", "text": "ok"}, *blocks]})
        elif kind == "tool":
            answers = rest[0] if isinstance(rest[0], list) else [rest[0]]
            blocks = [{"type": "tool_result", "tool_use_id": c, "content": _text(mid)} for c in answers]
            out.append({"role": "user", "id": mid, "content": blocks})
        else:
            out.append(
                {"role": _OPENAI_ROLES[kind], "id": mid, "content": [{"type": "text", "text": _text(mid)}]}
            )
    return out


def langchain_objects(spec: Spec) -> list[Any]:
    from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            calls = [{"name": "lookup", "args": {"q": c}, "id": c} for c in rest[0]]
            out.append(AIMessage(content="", id=mid, tool_calls=calls))
        elif kind == "tool":
            out.append(ToolMessage(content=_text(mid), id=mid, tool_call_id=rest[0]))
        elif kind == "system":
            out.append(SystemMessage(content=_text(mid), id=mid))
        elif kind == "human":
            out.append(HumanMessage(content=_text(mid), id=mid))
        elif kind == "ai":
            out.append(AIMessage(content=_text(mid), id=mid))
        else:
            out.append(ChatMessage(role="critic", content=_text(mid), id=mid))
    return out


BUILDERS: dict[str, Callable[[Spec], list[Any]]] = {
    "langchain_dict": langchain_dicts,
    "openai_dict": openai_dicts,
    "anthropic_dict": anthropic_dicts,
    "langchain_object": langchain_objects,
}


#: the shapes in which one message can answer several calls
MULTI_RESULT_FORMATS = frozenset({"anthropic_dict"})


def ids(messages: list[Any]) -> list[str | None]:
    return [read_message(m).id for m in messages]
