"""Pydantic AI's ``ModelRequest`` and ``ModelResponse``, read without importing pydantic-ai.

A message is recognised by its ``kind`` (``"request"`` / ``"response"``) and its ``parts``, each
part by its ``part_kind``; the message and its parts are never converted.

* A ``ModelRequest`` answers the calls its ``tool-return`` parts name (``tool_call_id``) and its
  ``retry-prompt`` parts that name a tool (``tool_name`` set); a retry without a tool, a
  ``retry-feedback`` part and a ``user-prompt`` part are a user's turn; ``system-prompt`` parts
  alone are a system message. A request that answers calls is a tool result even when it also
  holds a user prompt (the rule of Anthropic's user message with ``tool_result`` blocks): its
  parts cannot be split without converting it, and as a turn of its own it could outlive the
  calls it answers. The first request (system prompt and first user prompt together) is a
  user's turn, which ``preserve_first`` pins.
* A ``ModelResponse`` is an AI message making the calls of its ``tool-call`` parts. A native
  (builtin) tool call and its return travel in the same response: they need nothing else.
* A message holding a ``compaction`` part holds a compaction (``MessageInfo.compaction``, planner
  rule 5): a response (the provider's compaction, sent back to it) is an AI message, a request (a
  summary the application wrote, sent in the user's voice) a user's turn. Delta and
  instruction-record parts say nothing about the kind. A request with no part that does is
  ``unknown`` (kept).

``content`` is the text the token counter counts: the parts' texts (and non-text values as JSON)
joined by newlines. These messages have no id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, NamedTuple

from agentstate_reducer.messages.jsontext import json_text

__all__ = ["ModelMessageReading", "read_model_message"]

#: the kinds of ``read.Kind`` a Pydantic AI message can have
ModelMessageKind = Literal["system", "human", "ai", "tool", "unknown"]


class ModelMessageReading(NamedTuple):
    """What ``read_message`` needs of a Pydantic AI message (it has no role, id or name)."""

    kind: ModelMessageKind
    content: str
    call_ids: tuple[str, ...] = ()
    result_ids: tuple[str, ...] = ()
    #: it holds a ``compaction`` part
    compaction: bool = False

_KINDS: Final = frozenset({"request", "response"})
#: response parts whose text (or arguments) the model sent and reads back
_RESPONSE_TEXT: Final = frozenset({"text", "thinking"})
_NATIVE: Final = frozenset({"builtin-tool-call", "builtin-tool-return"})


def _text(value: Any) -> str:
    if type(value) is str:
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        # a user prompt's items: strings and TextContent (its text in .content); media as JSON
        out = []
        for item in value:
            if isinstance(item, str):
                out.append(item)
            else:
                text = getattr(item, "content", None)
                out.append(text if isinstance(text, str) else json_text(item))
        return "\n".join(out)
    return json_text(value)


def _str_id(value: Any) -> str | None:
    """A call id, the empty one included (``read.call_id``: a call and its result read alike)."""
    return str.__str__(value) if isinstance(value, str) else None


def read_model_message(msg: Any) -> ModelMessageReading | None:
    """The reading of a Pydantic AI ``ModelRequest``/``ModelResponse``; None for anything else.

    Raises whatever reading a field raises (``read_message`` catches it).
    """
    kind_name = getattr(msg, "kind", None)
    if type(kind_name) is not str or kind_name not in _KINDS:
        return None
    parts = getattr(msg, "parts", None)
    if isinstance(parts, str | bytes) or not isinstance(parts, Sequence):
        return None
    texts: list[str] = []
    ids: list[str] = []
    compaction = False
    if kind_name == "response":
        for part in parts:
            pk = getattr(part, "part_kind", None)
            if pk in _RESPONSE_TEXT:
                texts.append(_text(getattr(part, "content", "")))
            elif pk == "tool-call":
                call_id = _str_id(getattr(part, "tool_call_id", None))
                if call_id is not None and call_id not in ids:
                    ids.append(call_id)
            elif pk in _NATIVE:
                value = getattr(part, "args" if pk == "builtin-tool-call" else "content", None)
                texts.append(_text(value) if value is not None else "")
            elif pk == "compaction":
                compaction = True
        return ModelMessageReading("ai", "\n".join(texts), tuple(ids), (), compaction)
    human = system = False
    for part in parts:
        pk = getattr(part, "part_kind", None)
        if pk == "tool-return":
            answered = _str_id(getattr(part, "tool_call_id", None))
            if answered is not None:
                ids.append(answered)
            texts.append(_text(getattr(part, "content", "")))
        elif pk == "retry-prompt":
            if getattr(part, "tool_name", None) is not None:
                answered = _str_id(getattr(part, "tool_call_id", None))
                if answered is not None:
                    ids.append(answered)
            else:
                human = True
            texts.append(_text(getattr(part, "content", "")))
        elif pk == "user-prompt" or pk == "retry-feedback":
            human = True
            texts.append(_text(getattr(part, "content", "")))
        elif pk == "system-prompt":
            system = True
            texts.append(_text(getattr(part, "content", "")))
        elif pk == "compaction":
            compaction = True
    kind: ModelMessageKind
    if ids:
        kind = "tool"
    elif human or compaction:
        kind = "human"
    elif system:
        kind = "system"
    else:
        kind = "unknown"
    return ModelMessageReading(kind, "\n".join(texts), (), tuple(ids), compaction and kind == "human")
