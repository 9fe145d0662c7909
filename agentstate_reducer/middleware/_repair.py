"""Request repair for ``ReducerMiddleware``: the messages of a model call made sendable.

``merge_system`` folds the system messages held in state into the request's one system message;
``trim_ends`` drops what a model call cannot take although the history may keep it.
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.messages import SystemMessage

from ..messages import read_message

__all__ = ["merge_system", "trim_ends"]


def merge_system(first: SystemMessage | None, held: list[Any]) -> SystemMessage | None:
    """One system message: the request's prompt, then the system messages held in state."""
    parts = ([first] if first is not None else []) + held
    if len(parts) <= 1:
        return cast("SystemMessage | None", parts[0] if parts else None)
    if all(isinstance(p.content, str) for p in parts):
        content: Any = "\n\n".join(p.content for p in parts)
    else:
        content = []
        for p in parts:
            text = p.content
            content += [{"type": "text", "text": text}] if isinstance(text, str) else list(text)
    return SystemMessage(content=content, id=parts[0].id)


def trim_ends(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(kept, removed)``: drop what comes before the first user turn and an unanswered tool call
    at the end (the model is about to be called: the call can no longer be answered first)."""
    first = next((i for i, m in enumerate(messages) if read_message(m).kind == "human"), None)
    removed: list[Any] = []
    if first:
        removed += messages[:first]
        messages = messages[first:]
    end = len(messages)
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        info = read_message(messages[i])
        if info.kind == "tool":
            answered.update(info.result_ids)
            continue
        if info.kind == "ai" and info.call_ids and not answered.issuperset(info.call_ids):
            end = i
        break
    if end < len(messages):
        removed += messages[end:]
        messages = messages[:end]
    return messages, removed
