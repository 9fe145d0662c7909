"""Reducing an OpenAI Responses request: ``reduce_request(request, reducer)``.

``request`` is the keyword arguments of ``client.responses.create(**request)``; the result is a
new dict with its ``input`` reduced (the caller's items, a new list; nothing else changes).

A request that chains on the server (``previous_response_id``, or a ``conversation``) sends only
its new items: the conversation lives on OpenAI's servers, and OpenAI's compaction guide says not
to prune it by hand. Such a request is returned unreduced, with one warning (logger
``agentstate_reducer.responses``, level WARNING) per reducer and conversation, unless the caller
asks for it with ``reduce_chained=True``. Server-side compaction
(``context_management=[{"type": "compaction", "compact_threshold": N}]``) and the ``compaction``
items it returns need nothing here: the reducer keeps the newest one and prunes what it replaced
first (docs/providers.md). With a reducer that injects a running summary (``inject_summary``),
the summary goes into ``input`` as a plain user message (the reducer's own summary message
carries an id and a marker key the Responses API does not take), and a request that sends it
back has it recognised by its header. Importing this module imports no SDK.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

from agentstate_reducer import telemetry
from agentstate_reducer.reducer import MessageReducer

from ._common import NativeSummaries, responses_summary_item, responses_summary_text

logger = logging.getLogger("agentstate_reducer.responses")

#: the conversations each reducer warned about (a ``previous_response_id`` chain has no id of its
#: own: one warning per reducer for all of them)
_warned: weakref.WeakKeyDictionary[MessageReducer, set[str]] = weakref.WeakKeyDictionary()
#: conversations remembered per reducer; past this many the memory starts again (a long-lived
#: server with many conversations may then warn about one again, never grows without end)
MAX_WARNED_CONVERSATIONS = 4096


#: the running summaries ``reduce_request`` put into requests, shared by every reducer
_summaries = NativeSummaries(responses_summary_item, responses_summary_text)


def _conversation(request: Mapping[str, Any]) -> str | None:
    """What the request chains on: its conversation id, ``"previous_response_id"``, or None."""
    conversation = request.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if conversation:
        return f"conversation {conversation}"
    if request.get("previous_response_id"):
        return "previous_response_id"
    return None


def reduce_request(
    request: Mapping[str, Any], reducer: MessageReducer, *, reduce_chained: bool = False
) -> dict[str, Any]:
    """A copy of the Responses ``request`` with its ``input`` reduced by ``reducer``.

    A text ``input`` (one user message) and a request without ``input`` are copied as they are.
    A request with ``previous_response_id`` or ``conversation`` is copied unreduced with one
    warning, unless ``reduce_chained=True``: then its (new) items are reduced like any others.

    >>> from agentstate_reducer import ReducerConfig
    >>> reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=3, preserve_first=False))
    >>> turns = [{"role": r, "content": str(i)} for i, r in enumerate(["user", "assistant"] * 2)]
    >>> [m["content"] for m in reduce_request({"model": "gpt-5", "input": turns}, reducer)["input"]]
    ['2', '3']
    """
    if not isinstance(request, Mapping):
        raise TypeError(
            f"request must be a mapping of responses.create arguments, got {type(request).__name__}"
        )
    if not isinstance(reducer, MessageReducer):
        raise TypeError(f"reducer must be a MessageReducer, got {type(reducer).__name__}")
    out = dict(request)
    items = out.get("input")
    if items is None or isinstance(items, str):
        return out
    if not isinstance(items, list | tuple):
        raise TypeError(f"request['input'] must be a str or a list of items, got {type(items).__name__}")
    chained = _conversation(request)
    if chained is not None and not reduce_chained:
        seen = _warned.setdefault(reducer, set())
        if chained not in seen:
            if len(seen) >= MAX_WARNED_CONVERSATIONS:
                seen.clear()
            seen.add(chained)
            logger.warning(
                "not reducing a request chained with %s: the conversation lives on OpenAI's "
                "servers, which manage its length; pass reduce_chained=True to reduce its "
                "input anyway",
                chained,
            )
        return out
    model = out.get("model")
    with telemetry.entry("openai_responses", model=model if isinstance(model, str) else None):
        if not reducer.config.inject_summary:
            out["input"] = reducer.reduce(list(items)).surviving
        else:
            out["input"] = _summaries.outward(reducer.reduce(_summaries.inward(items)).surviving)
    return out


__all__ = ["reduce_request"]
