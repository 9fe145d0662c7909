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
  too) and their observations, so a call is never apart from its observation. The limits count
  what the model receives: ``max_messages``/``min_messages`` count the messages the steps render
  (``step.to_messages()``, up to four for an ``ActionStep``), not the steps. A ``TaskStep``
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

Request mode, ``ReduceMemory(mode="request")``, leaves the memory whole and bounds each request
instead; smolagents has no hook for that but the agent's own method, so override it::

    class Agent(ToolCallingAgent):
        def write_memory_to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
            return reduce.messages(self, summary_mode=summary_mode)

The running summary then covers the steps left out of the request (each step summarized once,
found again by identity), and the request is the previous one plus the new steps until the next
reduction.

Importing this module imports smolagents; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentstate_reducer.cost import CacheTracker
from agentstate_reducer.integrations._common import (
    Bounded,
    CallFlow,
    Mode,
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


def rendered_messages(step: Any) -> int:
    """How many messages ``step`` adds to a request: ``len(step.to_messages())``, what
    ``agent.write_memory_to_messages()`` makes of it (1 for anything without ``to_messages``,
    the core's running summary among them, and for a step that cannot render)."""
    to_messages = getattr(step, "to_messages", None)
    if not callable(to_messages):
        return 1
    try:
        return len(to_messages())
    except Exception:  # a step that cannot render is counted as one message, never raised
        return 1


def counting_rendered_messages(reducer: MessageReducer) -> MessageReducer:
    """``reducer`` with its message limits counting the messages the steps render.

    A count-mode reducer counts list items, and a step renders up to four messages (an
    ``ActionStep``: the model output, the calls, the observations or the error): the same
    selection with each step costing its messages is token mode with ``rendered_messages`` as
    the counter, ``max_messages`` as the trigger and ``min_messages`` as the target (pinned steps
    and the summary counted in it). A token-mode reducer, or one that never triggers, is
    returned as it is.
    """
    config = reducer.config
    if config.max_tokens is not None or config.max_messages is None:
        return reducer
    return MessageReducer(
        config=dataclasses.replace(
            config,
            max_tokens=config.max_messages,
            target_tokens=config.min_messages,
            token_counter=rendered_messages,
        )
    )


class ReduceMemory:
    """A step callback keeping a smolagents agent's memory, and so its requests, bounded.

    >>> from smolagents import ToolCallingAgent  # doctest: +SKIP
    >>> reduce = ReduceMemory(max_messages=40)  # doctest: +SKIP
    >>> agent = ToolCallingAgent(tools=[], model=model, step_callbacks=[reduce])  # doctest: +SKIP

    Args:
        reducer: the ``MessageReducer`` whose settings apply (token counter, hooks); or pass
            its keyword arguments instead (default ``min_messages=20, max_messages=40``).
            ``max_messages``/``min_messages`` count the messages the memory renders
            (``write_memory_to_messages()``, the system prompt aside), whole steps kept or
            pruned: after each step the memory renders at most ``max_messages``, after a
            reduction at most ``min_messages`` (the first task and the summary included) unless
            the live task alone renders more.
        summarizer: ``(steps) -> str`` or an async one (run to completion in the callback);
            the pruned steps become one running ``SummaryStep``. Replaces the reducer's.
        on_reduce: called with a ``ReduceRecord`` after each bounding.
        mode: ``"state"`` (the default): a step callback bounding ``agent.memory.steps``;
            ``"request"``: the memory keeps every step and ``messages(agent)``, called from an
            agent's ``write_memory_to_messages``, gives the bounded request.
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
        mode: Mode = "state",
        validate: bool = True,
        preserve_first: bool = True,
        **reducer_kwargs: Any,
    ) -> None:
        if mode not in ("state", "request"):
            raise ValueError(f"{_WHAT}: mode must be 'state' or 'request', got {mode!r}")
        if on_reduce is not None and not callable(on_reduce):
            raise TypeError(
                f"{_WHAT}: on_reduce must be callable(ReduceRecord) or None, got {type(on_reduce).__name__}"
            )
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=_WHAT
        )
        # the flow records nothing: its records would count steps, and rendered messages as tokens
        self._flow = CallFlow(
            counting_rendered_messages(built),
            mode=mode,
            validate=validate,
            native=NativeSummaries(SummaryStep, _summary_text),
            logger=logger,
        )
        #: the reducer the callback runs (in count mode: its limits counting rendered messages)
        self.reducer = self._flow.reducer
        #: counts the tokens of the records (the given reducer's counter)
        self._counter = built
        self.on_reduce = on_reduce
        self._sent = CacheTracker()

    @property
    def mode(self) -> Mode:
        """``"state"`` (bounds the memory) or ``"request"`` (bounds what ``messages`` returns)."""
        return self._flow.mode

    def __call__(self, memory_step: Any, agent: Any = None) -> None:
        """Bound ``agent.memory.steps`` with ``memory_step``, the step just finished (smolagents
        appends it after the callbacks); the list is edited in place."""
        steps = _steps_of(agent, "the agent: it is a step callback, called as callback(step, agent=agent); "
                          "pass it in step_callbacks=[...] of the agent")  # fmt: skip
        if self._flow.mode == "request":
            raise TypeError(
                f"{_WHAT}(mode='request') is no step callback: call its messages(agent) from the "
                "agent's write_memory_to_messages (see the module), or use mode='state'"
            )
        live = isinstance(memory_step, ActionStep | PlanningStep) and all(s is not memory_step for s in steps)
        history = [*steps, memory_step] if live else list(steps)
        bounded = self._bound(agent, history)
        kept = bounded.sent if self._flow.validate else (bounded.stored or history)
        if len(kept) == len(history) and all(a is b for a, b in zip(kept, history, strict=True)):
            return
        if live and all(s is not memory_step for s in kept):  # the live turn is kept: cannot happen
            logger.warning("%s: the finished step was pruned; the memory is left as it was", _WHAT)
            return
        steps[:] = [s for s in kept if s is not memory_step]

    def messages(self, agent: Any, *, summary_mode: bool = False) -> list[ChatMessage]:
        """The request of ``agent`` (what ``write_memory_to_messages(summary_mode)`` returns),
        from its memory bounded: in request mode the memory is left whole, in state mode it is
        bounded in place first."""
        steps = _steps_of(agent, "an agent with a memory (agent.memory.steps)")
        bounded = self._bound(agent, steps)
        sent = bounded.sent
        if self._flow.mode == "state" and (
            len(sent) != len(steps) or any(a is not b for a, b in zip(sent, steps, strict=True))
        ):
            steps[:] = sent
        out: list[ChatMessage] = agent.memory.system_prompt.to_messages(summary_mode=summary_mode)
        for step in sent:
            out.extend(step.to_messages(summary_mode=summary_mode))
        return out

    def _bound(self, agent: Any, history: list[Any]) -> Bounded:
        key = id(agent.memory)
        bounded = self._flow.bound(key, history, thread=_thread(agent))
        if self.on_reduce is not None:
            self._emit(self._record(key, bounded, history))
        return bounded

    def _record(self, key: Hashable, bounded: Bounded, history: Sequence[Any]) -> ReduceRecord:
        """The flow's record with messages counted as rendered and tokens by the reducer's
        counter (the flow's counter counts rendered messages)."""
        sent = bounded.sent
        counts = self._counter.count_tokens(list(sent)) if sent else []
        return dataclasses.replace(
            bounded.record,
            messages_before=sum(map(rendered_messages, history)),
            messages_after=sum(map(rendered_messages, sent)),
            tokens_before=sum(self._counter.count_tokens(list(history))) if history else 0,
            tokens_after=sum(counts),
            prefix_tokens=self._sent.observe(key, sent, counts) if sent else 0,
        )

    def _emit(self, record: ReduceRecord) -> None:
        assert self.on_reduce is not None
        try:
            self.on_reduce(record)
        except Exception:
            logger.exception("on_reduce callback %r failed; the agent goes on", self.on_reduce)

    def __repr__(self) -> str:
        return f"ReduceMemory({self.reducer!r}, mode={self.mode!r}, validate={self._flow.validate})"


def _steps_of(agent: Any, what: str) -> list[Any]:
    steps = getattr(getattr(agent, "memory", None), "steps", None)
    if not isinstance(steps, list):
        raise TypeError(f"{_WHAT} needs {what}; got agent={agent!r}")
    return steps


def _thread(agent: Any) -> str | None:
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) else None
