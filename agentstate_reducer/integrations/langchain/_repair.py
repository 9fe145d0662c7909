"""Request repair for ``ReducerMiddleware``: the messages of a model call made sendable.

``merge_system`` folds the system messages held in state into the request's one system message;
``RequestRepair`` prunes the rest by the planner's rules (README, "The pruning contract");
``trailing_answers`` finds the assistant answers a request must not end with; ``sendable_next``
tells when a reducer's output needs no more than its opening cut.
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.messages import SystemMessage

from agentstate_reducer.integrations._common import RequestRepair, sendable_next, trailing_answers

__all__ = ["RequestRepair", "merge_system", "sendable_next", "trailing_answers"]


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
