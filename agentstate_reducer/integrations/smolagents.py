"""A memory-bounding step callback for smolagents agents: ``ReduceMemory`` (``pip install ".[smolagents]"``).

``ToolCallingAgent(tools=..., model=..., step_callbacks=[ReduceMemory(reducer)])`` (or a
``CodeAgent``) keeps the agent's memory bounded. smolagents builds every model request from the
memory (``agent.write_memory_to_messages()``: the system prompt, then each step's messages), and
calls each step callback with the finished step and the agent, before it appends the step to
``agent.memory.steps``. ``ReduceMemory`` runs the core over the steps themselves (read by
``agentstate_reducer.messages``, never converted) and writes the bounded list back in place:

* What it bounds: the stored memory **and** so every later request. Pruned steps leave
  ``agent.memory.steps``; a ``SummaryStep`` (the running summary, a user message when rendered)
  stands for them. ``agent.replay()`` prints the system prompt, the first task and the steps
  kept (it prints only the step types it knows, so not the summary); ``agent.memory.steps`` and
  ``get_full_steps()`` hold the summary step; a ``RunResult``'s token usage counts the steps
  still in memory.
* Units are whole steps: an ``ActionStep`` holds the model output, its tool calls (parallel calls
  too) and their observations, so a call is never apart from its observation. A ``TaskStep``
  (one ``run()``'s task) opens a turn; the running task and its steps (the live turn, the
  finished step among them) are never pruned.
* ``preserve_first=True`` (the default): the first step of the memory, the first task, is
  pinned. The system prompt is ``agent.memory.system_prompt``, outside the steps: never pruned.
* The summarizer and ``on_prune`` hooks get the steps (smolagents' objects, an earlier summary as
  its ``SummaryStep``); ``step.to_messages()`` renders a step as the model saw it.
* The thread is ``agent.name`` (None for an unnamed agent): ``on_prune`` hooks get the namespace
  ``("memories", agent.name)``.

Register it as a list item (called after every ``ActionStep``) or in the dict form for more
step types (``{ActionStep: cb, PlanningStep: cb}``); a ``FinalAnswerStep`` bounds the memory as
it is. ``max_steps`` bounds the steps of one run, not the memory across runs (``reset=False``).

Importing this module imports smolagents; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agentstate_reducer.integrations._common import (
    CallFlow,
    NativeSummaries,
    ReduceRecord,
    build_reducer,
    missing_extra,
)
from agentstate_reducer.reducer import MessageReducer

try:
    from smolagents.memory import ActionStep, MemoryStep, PlanningStep
    from smolagents.models import ChatMessage, MessageRole
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the package
    raise ImportError(
        missing_extra("agentstate_reducer.integrations.smolagents", "smolagents", "smolagents")
    ) from exc

__all__ = ["ReduceMemory", "ReduceRecord", "SummaryStep"]

logger = logging.getLogger("agentstate_reducer.integrations.smolagents")

_WHAT = "ReduceMemory"


@dataclass
class SummaryStep(MemoryStep):  # type: ignore[misc]  # smolagents ships no type information
    """The running summary in ``agent.memory.steps``: it stands for the steps pruned before it
    and renders as one user message (in ``summary_mode`` too: planning sees it)."""

    content: str
    #: read by the core as a user message with ``content``
    role: ClassVar[str] = "user"

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": self.content}])]


def _summary_text(step: Any) -> str | None:
    return step.content if isinstance(step, SummaryStep) else None


class ReduceMemory:
    """A step callback keeping a smolagents agent's memory, and so its requests, bounded.

    >>> from smolagents import ToolCallingAgent  # doctest: +SKIP
    >>> reduce = ReduceMemory(max_messages=40)  # doctest: +SKIP
    >>> agent = ToolCallingAgent(tools=[], model=model, step_callbacks=[reduce])  # doctest: +SKIP

    Args:
        reducer: the ``MessageReducer`` whose settings apply (limits count steps; token
            counter, hooks); or pass its keyword arguments instead (default ``min_messages=20,
            max_messages=40``).
        summarizer: ``(steps) -> str`` or an async one (run to completion in the callback);
            the pruned steps become one running ``SummaryStep``. Replaces the reducer's.
        on_reduce: called with a ``ReduceRecord`` after each step the memory was bounded at.
        validate: also repair the memory by the planner's rules (it then starts at a task).
        preserve_first: pin the first step of the memory (the first task).

    One instance may serve many agents at once, in threads; each agent's memory is its own.

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
            native=NativeSummaries(SummaryStep, _summary_text),
            logger=logger,
        )
        #: the reducer the callback runs
        self.reducer = self._flow.reducer

    def __call__(self, memory_step: Any, agent: Any = None) -> None:
        """Bound ``agent.memory.steps`` with ``memory_step``, the step just finished (smolagents
        appends it after the callbacks); the list is edited in place."""
        memory = getattr(agent, "memory", None)
        steps = getattr(memory, "steps", None)
        if not isinstance(steps, list):
            raise TypeError(
                f"{_WHAT} is a smolagents step callback called as callback(step, agent=agent): pass it "
                f"in step_callbacks=[...] of the agent; got agent={agent!r}"
            )
        live = isinstance(memory_step, ActionStep | PlanningStep) and all(s is not memory_step for s in steps)
        history = [*steps, memory_step] if live else list(steps)
        name = getattr(agent, "name", None)
        bounded = self._flow.bound(id(memory), history, thread=name if isinstance(name, str) else None)
        kept = bounded.sent if self._flow.validate else (bounded.stored or history)
        if len(kept) == len(history) and all(a is b for a, b in zip(kept, history, strict=True)):
            return
        if live and all(s is not memory_step for s in kept):  # the live turn is kept: cannot happen
            logger.warning("%s: the finished step was pruned; the memory is left as it was", _WHAT)
            return
        steps[:] = [s for s in kept if s is not memory_step]

    def __repr__(self) -> str:
        return f"ReduceMemory({self.reducer!r}, validate={self._flow.validate})"
