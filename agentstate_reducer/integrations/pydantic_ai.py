"""A history-reducing capability for Pydantic AI agents: ``ReduceHistory`` (``pip install ".[pydantic-ai]"``).

``Agent(model, capabilities=[ReduceHistory(reducer)])`` bounds every model call of the agent.
``ReduceHistory`` is a ``pydantic_ai.capabilities.ProcessHistory`` whose processor, an async
``(RunContext, messages)`` function, runs the core over the ``ModelRequest``/``ModelResponse``
objects themselves (read by ``agentstate_reducer.messages``, never converted):

* What it bounds: the request **and** the run's stored history. ``ProcessHistory`` sends the
  processor's result and also writes it over the run's history (``ctx.messages[:] = ...``), so
  ``result.all_messages()`` is the bounded history (the running summary in it) and
  ``new_messages()`` the messages of this run (found by ``run_id``, which the summary does not
  carry). Persist ``all_messages()`` and pass it back as ``message_history``: it carries what the
  summary covers. Appending only ``new_messages()`` to a store keeps growing that store; the
  requests stay bounded, but the summary is not among the new messages, so each run prunes and
  summarizes the old messages again (the summarizer and ``on_prune`` hooks see them again).
* ``preserve_first=True`` (the default): Pydantic AI keeps the system prompt inside the first
  ``ModelRequest``, with the first user prompt, and adds system prompts only to an empty
  history, so the first request is pinned: the system prompt and the task. ``instructions=``
  are sent with every request from the agent's settings, so no pruning loses them.
* The running summary is a ``ModelRequest`` holding one ``UserPromptPart``. Pydantic AI merges
  consecutive requests (a new run merges the stored history; each request is merged as it is
  sent), so the summary, and the first kept turn's request after the pinned first request,
  arrive at the next run inside the request before them; the capability takes them out again,
  each into a request of its own, before reducing: the first request is cut before its second
  user prompt (a first request holding two user prompts is pinned up to the second).
* The thread is ``RunContext.conversation_id`` (inherited from ``message_history`` by every run
  of one conversation, or the ``conversation_id=`` of ``Agent.run``): ``on_prune`` hooks get the
  namespace ``("memories", conversation_id)``.
* ``validate=True`` repairs the request the planner's way before it is sent (what is sent is
  what is stored, so what the repair removes, a call group the model call leaves unanswered at
  the end, is pruned through the summarizer and ``on_prune`` hooks); Pydantic AI's own repair
  (orphan results dropped, an interrupted result added for a dangling call) runs after it and
  then finds nothing to do.

Importing this module imports pydantic-ai; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from agentstate_reducer.integrations._common import (
    CallFlow,
    NativeSummaries,
    ReduceRecord,
    build_reducer,
    missing_extra,
)
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.summary import SUMMARY_PREFIX

try:
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        RetryPromptPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the package
    raise ImportError(
        missing_extra("agentstate_reducer.integrations.pydantic_ai", "pydantic-ai-slim", "pydantic-ai")
    ) from exc

__all__ = ["ReduceHistory", "ReduceRecord", "summary_request", "summary_text"]

logger = logging.getLogger("agentstate_reducer.integrations.pydantic_ai")

_WHAT = "ReduceHistory"
#: the start of a summary's text (the core's header: "<prefix> (<n> messages):\n")
_SUMMARY_START = SUMMARY_PREFIX + " ("


def summary_request(content: str) -> ModelRequest:
    """The running summary as Pydantic AI sends it: a request with one user prompt."""
    return ModelRequest(parts=[UserPromptPart(content=content)])


def summary_text(message: Any) -> str | None:
    """The text of a request holding exactly one text ``UserPromptPart``; None for anything else."""
    if not isinstance(message, ModelRequest) or len(message.parts) != 1:
        return None
    part = message.parts[0]
    if isinstance(part, UserPromptPart) and isinstance(part.content, str):
        return part.content
    return None


def _is_summary_part(part: Any) -> bool:
    return (
        isinstance(part, UserPromptPart)
        and isinstance(part.content, str)
        and part.content.startswith(_SUMMARY_START)
    )


def _is_result_part(part: Any) -> bool:
    """A tool's result: a return, or a retry prompt sent back to the tool's call."""
    return isinstance(part, ToolReturnPart) or (
        isinstance(part, RetryPromptPart) and part.tool_name is not None
    )


def _runs(parts: Sequence[Any], calls: set[str]) -> list[list[Any]]:
    """``parts`` cut around each summary part; where a tool result answers none of ``calls``
    (the calls of the response right before), also between the results and the prompts. A
    request of results and prompts reads as results: an orphan result would take the user's
    prompt with it. Results that answer the calls keep their prompts (a tool's ``ctx.enqueue``
    note, the prompt of a run resumed with results): one unit with the calls."""
    orphan = any(_is_result_part(p) and p.tool_call_id not in calls for p in parts)
    runs: list[list[Any]] = []
    for part in parts:
        summary = _is_summary_part(part)
        kind_changed = orphan and bool(runs) and _is_result_part(part) != _is_result_part(runs[-1][-1])
        if not runs or summary or _is_summary_part(runs[-1][-1]) or kind_changed:
            runs.append([part])
        else:
            runs[-1].append(part)
    return runs


def _unmerged(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with each request Pydantic AI merged from several taken apart again where
    the core would misread it (``_runs``): each summary part in a request of its own, the other
    parts in copies of the request (its instructions, ids and metadata kept); every other
    message as it is."""
    out: list[ModelMessage] = []
    calls: set[str] = set()
    for message in messages:
        if not isinstance(message, ModelRequest):
            calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            out.append(message)
            continue
        runs = _runs(message.parts, calls) if len(message.parts) > 1 else []
        calls = set()
        if len(runs) < 2:
            out.append(message)
            continue
        for run in runs:
            if len(run) == 1 and _is_summary_part(run[0]):
                out.append(ModelRequest(parts=run))
            else:
                out.append(dataclasses.replace(message, parts=run))
    return out


def _first_alone(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with the first request cut before its second user prompt: what follows it
    there is the request Pydantic AI merged into it (a reduced history has the pinned first
    request right before the first kept turn), and goes into a copy of the request of its own."""
    first = messages[0] if messages else None
    if not isinstance(first, ModelRequest):
        return messages
    prompts = [i for i, p in enumerate(first.parts) if isinstance(p, UserPromptPart)]
    if len(prompts) < 2:
        return messages
    cut = prompts[1]
    head = dataclasses.replace(first, parts=list(first.parts[:cut]))
    tail = dataclasses.replace(first, parts=list(first.parts[cut:]))
    return [head, tail, *messages[1:]]


class ReduceHistory(ProcessHistory[Any]):
    """A capability keeping every model call of a Pydantic AI agent bounded and sendable.

    >>> from pydantic_ai import Agent  # doctest: +SKIP
    >>> agent = Agent("openai:gpt-5.2", capabilities=[ReduceHistory(max_messages=40)])  # doctest: +SKIP

    Args:
        reducer: the ``MessageReducer`` whose settings apply (limits, token counter, hooks);
            or pass its keyword arguments instead (default ``min_messages=20, max_messages=40``).
        summarizer: ``(messages) -> str`` or an async one; the pruned messages (Pydantic AI's
            objects, the previous summary among them as its request) become one running summary
            request. Replaces the reducer's summarizer.
        on_reduce: called with a ``ReduceRecord`` after each model call was bounded.
        validate: repair the request by the planner's rules before it is sent.
        preserve_first: pin the first request (system prompt and task).

    One instance may serve many agents, conversations and threads at once.

    Raises:
        TypeError: a reducer that is no ``MessageReducer``, a reducer and keyword arguments
            together, a summarizer or ``on_reduce`` that is not callable, a ``validate`` or
            ``preserve_first`` that is no bool.
        ValueError: keyword arguments that are no valid ``ReducerConfig``.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Callable[[list[Any]], Any] | None = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = True,
        **reducer_kwargs: Any,
    ) -> None:
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=_WHAT
        )
        self._flow = CallFlow(
            built,
            mode="state",
            validate=validate,
            on_reduce=on_reduce,
            native=NativeSummaries(summary_request, summary_text),
            logger=logger,
            stores_request=True,
        )
        self.reducer = self._flow.reducer
        super().__init__(processor=self._process)

    async def _process(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The bounded history: sent to the model and stored as the run's history."""
        thread = ctx.conversation_id or ctx.run_id
        history = _unmerged(messages)
        if self.reducer.config.preserve_first:
            history = _first_alone(history)
        bounded = await self._flow.abound(thread, history, thread=thread)
        return bounded.sent

    def __repr__(self) -> str:
        return f"ReduceHistory({self.reducer!r}, validate={self._flow.validate})"
