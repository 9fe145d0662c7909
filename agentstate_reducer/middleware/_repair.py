"""Request repair for ``ReducerMiddleware``: the messages of a model call made sendable.

``merge_system`` folds the system messages held in state into the request's one system message;
``RequestRepair`` prunes the rest by the planner's rules (README, "The pruning contract").
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from langchain_core.messages import HumanMessage, SystemMessage

from ..config import ReducerConfig
from ..messages import read_message
from ..reducer import MessageReducer

__all__ = ["RequestRepair", "merge_system"]

#: stands for the turn after the model call: nothing in the request can wait for a later message
_NEXT_TURN = HumanMessage(content="", id="agentstate-next-turn")


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


class RequestRepair:
    """The conversation messages of a model call, made sendable by the planner's rules.

    The request is planned untriggered, as the reducer repairs a history nothing triggered
    (rule 3: orphan results, late and second results, dangling calls are pruned), but with a
    user turn after it: the model is being called, so a call at the end still waiting for
    results is dangling, not pending, and a reasoning item at the end has no model output after
    it. Then the request starts at its first user message: the contract keeps what comes before
    it (a history may start anywhere), a model call cannot take it (a cut before a user message
    splits no tool group). Without a user message nothing is cut.

    Pure: no hooks, no summarizer, the input list is not mutated. System messages are expected
    to be merged out first (``merge_system``); any left are pinned by the planner.

    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "x"}], id="c")
    >>> lead, orphan = AIMessage("left over", id="a"), ToolMessage("r", tool_call_id="y", id="o")
    >>> sent, removed = RequestRepair()([lead, HumanMessage("q", id="h"), orphan, call])
    >>> [m.id for m in sent], [m.id for m in removed]
    (['h'], ['a', 'o', 'c'])
    """

    __slots__ = ("_reducer",)

    def __init__(self) -> None:
        # count mode with no limit: the reducer always makes the untriggered plan (never warm)
        self._reducer = MessageReducer(
            config=ReducerConfig(min_messages=0, max_messages=None, preserve_first=False)
        )

    def __call__(self, messages: list[Any]) -> tuple[list[Any], list[Any]]:
        """``(sent, removed)``, each in request order; ``sent`` is ``messages`` itself when
        nothing is removed."""
        if not messages:
            return messages, []
        planned = [*messages, _NEXT_TURN]
        the_plan, _ = self._reducer.plan(planned)
        # the next turn is the newest user message: always kept (rule 4), and last
        kept = list(the_plan.kept)
        assert kept and kept[-1] == len(messages), "the planner dropped the live turn"
        kept.pop()
        start = next((j for j, i in enumerate(kept) if read_message(messages[i]).kind == "human"), 0)
        if start == 0 and len(kept) == len(messages):
            return messages, []
        return dataclasses.replace(the_plan, kept=kept[start:], runs=None).split(messages)
