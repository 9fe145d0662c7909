"""``MessageReducer``: read (adapter) -> cost -> plan (pure) -> apply (slice, summary, hooks)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import ReducerConfig
from .messages import is_message_like
from .planner import Plan, keep_all, plan
from .tokens import resolve_token_counter

logger = logging.getLogger("agentstate_reducer")

Mode = Literal["messages", "tokens", "off"]


@dataclass(frozen=True, slots=True)
class ReducerStats:
    """What one reduction did, for logs and metrics."""

    mode: Mode
    triggered: bool
    messages_before: int
    messages_after: int
    pruned_count: int
    #: tokens before and after; None in count mode (tokens are only counted in token mode)
    tokens_before: int | None = None
    tokens_after: int | None = None
    #: the kept history is over the target because one unit, or the live turn, is bigger than it
    over_target: bool = False
    #: the summarizer raised: ``repr`` of the error (see ``ReducerConfig.on_summary_error``)
    summary_error: str | None = None


@dataclass(frozen=True)
class ReducerResult:
    """``surviving`` and ``pruned`` partition the input, each in original order."""

    surviving: list[Any]
    pruned: list[Any]
    summary: str | None = None
    stats: ReducerStats = field(
        default_factory=lambda: ReducerStats("off", False, 0, 0, 0), compare=False, repr=False
    )


def _one(i: int) -> int:
    return 1


def as_message_list(value: Any) -> list[Any]:
    """``None`` -> ``[]``; one message (dict or object) -> ``[message]``; an iterable -> a new list."""
    if value is None:
        return []
    if is_message_like(value):
        return [value]
    if isinstance(value, str | bytes):
        raise TypeError(
            f"expected a message or a list of messages, got a {type(value).__name__}; "
            "wrap text in a message, e.g. {'role': 'user', 'content': ...}"
        )
    if isinstance(value, Iterable):
        return list(value)
    raise TypeError(f"expected a message or a list of messages, got {type(value).__name__}")


class MessageReducer:
    """Prune a message history by count or token budget without breaking it for a provider.

    >>> r = MessageReducer(min_messages=2, max_messages=4)
    >>> turns = [("user" if i % 2 == 0 else "assistant", str(i)) for i in range(6)]
    >>> msgs = [{"role": "system", "content": "s"}] + [{"role": r, "content": c, "id": c} for r, c in turns]
    >>> [m["id"] for m in r.reduce(msgs).surviving[1:]]
    ['4', '5']
    """

    def __init__(
        self, min_messages: int = 0, max_messages: int | None = None, *, config: ReducerConfig | None = None
    ) -> None:
        if config is None:
            config = ReducerConfig(min_messages=min_messages, max_messages=max_messages)
        elif not isinstance(config, ReducerConfig):
            raise TypeError(f"config must be a ReducerConfig, got {type(config).__name__}")
        elif (min_messages, max_messages) != (0, None):
            raise ValueError(
                "pass either min_messages/max_messages or config=ReducerConfig(...), not both "
                f"(got min_messages={min_messages}, max_messages={max_messages} and a config)"
            )
        self._config = config
        self._counter: Callable[[Any], int] | None = None

    @property
    def config(self) -> ReducerConfig:
        return self._config

    @property
    def min_messages(self) -> int:
        return self._config.min_messages

    @property
    def max_messages(self) -> int | None:
        return self._config.max_messages

    @property
    def token_counter(self) -> Callable[[Any], int]:
        """The resolved counter (user callable, tiktoken or heuristic), made on first use."""
        if self._counter is None:
            self._counter = resolve_token_counter(self._config.token_counter, encoding=self._config.encoding)
        return self._counter

    def __repr__(self) -> str:
        c = self._config
        if c.token_mode:
            return f"MessageReducer(max_tokens={c.max_tokens}, target_tokens={c.effective_target_tokens})"
        return f"MessageReducer(min_messages={c.min_messages}, max_messages={c.max_messages})"

    # -- planning ---------------------------------------------------------------------------

    def count_tokens(self, messages: list[Any]) -> list[int]:
        """Per-message token counts; a counter result that is not a non-negative int is an error."""
        counter = self.token_counter
        out: list[int] = []
        for i, msg in enumerate(messages):
            n = counter(msg)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(
                    f"token_counter returned {n!r} for message {i} ({type(msg).__name__}); "
                    "it must return a non-negative int"
                )
            out.append(n)
        return out

    def plan(self, messages: list[Any]) -> tuple[Plan, Mode]:
        """The pure decision for ``messages`` (already merged), without applying it."""
        c = self._config
        if c.max_tokens is not None:
            costs = self.count_tokens(messages)
            total = sum(costs)
            budget = c.effective_target_tokens
            assert budget is not None
            if total <= c.max_tokens:
                return keep_all(len(messages), total), "tokens"
            return self._plan(messages, costs.__getitem__, total, budget, count_mode=False), "tokens"
        n = len(messages)
        if c.max_messages is None:
            return keep_all(n, n), "off"
        if n <= c.max_messages:
            return keep_all(n, n), "messages"
        return self._plan(messages, _one, n, c.min_messages, count_mode=True), "messages"

    def _plan(
        self, messages: list[Any], cost_of: Callable[[int], int], total: int, budget: int, *, count_mode: bool
    ) -> Plan:
        c = self._config
        return plan(
            messages,
            cost_of,
            trigger_cost=total,
            budget=budget,
            count_mode=count_mode,
            preserve_first=c.preserve_first,
            start_on_human=c.start_on_human,
        )

    # -- applying ---------------------------------------------------------------------------

    def reduce(self, existing: Any = None, new: Any = None, *, namespace: Any = None) -> ReducerResult:
        """Concatenate ``existing`` and ``new`` (each a list, one message, or None) and prune.

        Never mutates the inputs and returns the caller's own message objects.
        """
        messages = as_message_list(existing) + as_message_list(new)
        the_plan, mode = self.plan(messages)
        surviving, pruned = the_plan.split(messages)
        summary, error = None, None
        if pruned and self._config.summarize_fn is not None:
            try:
                summary = self._config.summarize_fn(pruned)
            except Exception as exc:
                error = exc
        return self._finish(messages, the_plan, mode, (surviving, pruned), summary, error, namespace)

    async def areduce(self, existing: Any = None, new: Any = None, *, namespace: Any = None) -> ReducerResult:
        """``reduce`` for async callers: a sync ``summarize_fn`` runs off the event loop."""
        messages = as_message_list(existing) + as_message_list(new)
        the_plan, mode = self.plan(messages)
        surviving, pruned = the_plan.split(messages)
        summary, error = None, None
        if pruned and self._config.summarize_fn is not None:
            try:
                summary = await asyncio.to_thread(self._config.summarize_fn, pruned)
            except Exception as exc:
                error = exc
        return self._finish(messages, the_plan, mode, (surviving, pruned), summary, error, namespace)

    def _finish(
        self,
        messages: list[Any],
        the_plan: Plan,
        mode: Mode,
        split: tuple[list[Any], list[Any]],
        summary: str | None,
        error: Exception | None,
        namespace: Any,
    ) -> ReducerResult:
        """Apply a plan: slice, keep everything when the summarizer failed (policy "keep"), run hooks."""
        surviving, pruned = split
        cost_after = the_plan.cost_after
        if error is not None:
            logger.error("summarize_fn failed; policy %r", self._config.on_summary_error, exc_info=error)
            if self._config.on_summary_error == "keep":
                surviving, pruned, cost_after = list(messages), [], the_plan.cost_before
        tokens = mode == "tokens"
        stats = ReducerStats(
            mode=mode,
            triggered=the_plan.triggered,
            messages_before=len(messages),
            messages_after=len(surviving),
            pruned_count=len(pruned),
            tokens_before=the_plan.cost_before if tokens else None,
            tokens_after=cost_after if tokens else None,
            over_target=the_plan.over_target,
            summary_error=repr(error) if error is not None else None,
        )
        if pruned:
            self._run_hooks(pruned, namespace)
            logger.debug("pruned %d of %d messages (%s mode)", len(pruned), len(messages), mode)
        return ReducerResult(surviving, pruned, summary, stats)

    def _run_hooks(self, pruned: list[Any], namespace: Any) -> None:
        for hook in self._config.on_prune:
            try:
                hook(list(pruned), namespace)
            except Exception:
                logger.exception("on_prune hook %r failed; the reduction goes on", hook)

    def as_langgraph_reducer(self) -> Callable[[Any, Any], list[Any]]:
        """A ``(existing, new) -> list`` for ``Annotated[list, reducer.as_langgraph_reducer()]``:
        merges with ``add_messages`` semantics, then prunes (see ``agentstate_reducer.langgraph``)."""
        from .langgraph import make_state_reducer

        return make_state_reducer(self)
