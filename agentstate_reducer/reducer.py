"""``MessageReducer``: read (adapter) -> cost -> plan (pure) -> apply (slice, summary, hooks)."""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from . import _columns
from . import summary as _summary
from .config import ReducerConfig
from .merge import make_state_reducer
from .messages import MessageInfo, is_message_like, read_message
from .planner import UNLIMITED, Plan, Tail, extend_tail, keep_all, plan, tail_of
from .tokens import TokenCounter, count_messages, read_and_count, resolve_token_counter
from .tokens.cache import read_and_count_unchecked

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
    #: tokens before and after; None in count mode (tokens are only counted in token mode).
    #: ``tokens_before`` may hold the count a message had when it was last checked, when it was
    #: edited in place since and lies before what a triggered decision reads (docs/tokens.md)
    tokens_before: int | None = None
    tokens_after: int | None = None
    #: the kept history is over the target because one unit, or the live turn, is bigger than it
    over_target: bool = False
    #: the summarizer raised or timed out: ``repr`` of the error (see ``ReducerConfig.on_summary_error``)
    summary_error: str | None = None
    #: no trigger fired, but messages a provider rejects (orphan, late or second results, dangling
    #: calls) were pruned
    repaired: bool = False


@dataclass(frozen=True)
class ReducerResult:
    """``surviving`` and ``pruned`` partition the input, each in original order.

    With ``inject_summary``, they partition the input *plus the injected summary message*: the new
    summary is in ``surviving`` (after the leading pinned messages) and the summary it replaces is
    at the front of ``pruned``.
    """

    surviving: list[Any]
    pruned: list[Any]
    summary: str | None = None
    stats: ReducerStats = field(
        default_factory=lambda: ReducerStats("off", False, 0, 0, 0), compare=False, repr=False
    )


def _one(i: int) -> int:
    return 1


class _Checked(NamedTuple):
    """The last output, known sendable, and its tail: a history that starts with it (compared
    with ``==``, identity first) needs only its new messages checked."""

    messages: list[Any] | None
    length: int
    tail: Tail
    #: the stats of reducing ``messages`` again when that keeps them whole without a trigger
    #: (count mode, at most ``max_messages``); None otherwise (token mode recounts every message)
    again: ReducerStats | None = None


@dataclass(frozen=True, slots=True)
class _Step:
    """A planned reduction before the summarizer runs: what reduce and areduce share."""

    messages: list[Any]
    plan: Plan
    mode: Mode
    surviving: list[Any]
    pruned: list[Any]
    #: the previous summary messages (inject_summary): pinned, replaced when a new summary comes
    held: list[Any]

    @property
    def to_summarize(self) -> list[Any]:
        """What the summarizer gets: the previous summary first, then the newly pruned messages."""
        return [*self.held, *self.pruned] if self.pruned else []


def _with_held(p: Plan, held: tuple[int, ...], held_cost: int) -> Plan:
    """Map a plan made without the ``held`` indices back to the full list, ``held`` kept."""
    if not held:
        return p
    kept = []
    for k in p.kept:
        for h in held:  # held is a few leading indices: shift past each one at or before k
            if h <= k:
                k += 1
        kept.append(k)
    return Plan(
        tuple(sorted([*kept, *held])), p.triggered, p.over_target, p.cost_before, p.cost_after + held_cost
    )


def _read_by(
    p: Plan, costs: list[int], max_tokens: int, upto: int, held: tuple[int, ...]
) -> tuple[int, list[int]]:
    """``(lo, extra)``: of the first ``upto`` messages, those whose costs and readings the
    decision ``p`` depends on are ``lo`` on and the indices in ``extra``.

    A triggered plan made by the table (``Plan.newest``, no held summary) depends only on the
    newest messages worth more than ``max_tokens`` (from the largest ``s`` with ``sum(costs[s:])
    > max_tokens``: their true costs alone prove the trigger, and as ``target_tokens <=
    max_tokens`` nothing older is kept by the budget) and on the kept ones (pinned messages, the
    live turn); any other plan on every message."""
    if held or not p.triggered or p.newest is None:
        return 0, []
    amount, start = p.newest
    s = start if amount == max_tokens else _columns.newest_over(costs, max_tokens)
    lo = min(s, upto)
    kept = p.kept
    return lo, list(kept[: bisect_left(kept, lo)])  # kept ascends


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


def _sendable(messages: list[Any], checked: _Checked | None) -> bool:
    """True when ``messages`` is the last checked output plus messages that keep it sendable."""
    if checked is None:
        return False
    k = checked.length
    if len(messages) < k:
        return False
    # no messages: _begin found them equal already, before appending ``new``
    prev = checked.messages
    if prev is not None and not _equal(messages if len(messages) == k else messages[:k], prev):
        return False
    return extend_tail(checked.tail, map(read_message, messages[k:])) is not None


def _equal(a: list[Any], b: list[Any]) -> bool:
    """List equality at C speed (identity first); False when an element's ``__eq__`` cannot answer."""
    try:
        return a == b
    except Exception:
        return False


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
        self._checked: _Checked | None = None
        self._table = _columns.TableMemo()

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
        """Per-message token counts (cached by the built-in counters); a counter that raises or
        returns anything but a non-negative int raises ``TokenCountError`` naming the message."""
        return count_messages(self.token_counter, messages)

    def plan(self, messages: list[Any]) -> tuple[Plan, Mode]:
        """The pure decision for ``messages`` (already merged), without applying it."""
        return self._plan_with(messages, self._held(messages), checked=None)

    def _held(self, messages: list[Any]) -> tuple[int, ...]:
        """Indices of the injected summary, which stays pinned (only when ``inject_summary``)."""
        if not self._config.inject_summary:
            return ()
        return _summary.leading_summaries(messages, preserve_first=self._config.preserve_first)

    def _plan_with(
        self, messages: list[Any], held: tuple[int, ...], *, checked: _Checked | None
    ) -> tuple[Plan, Mode]:
        # The held summary is planned around, not through the planner: it counts in the trigger,
        # and in token mode its tokens come off the target, like any pinned message.
        c = self._config
        if c.max_tokens is not None:
            # the built-in counters hand back their cached readings: the planner reads nothing
            # twice; the counts of the messages their last call checked come unchecked, and only
            # those the decision read are confirmed (a change there: everything checked again)
            counter = self.token_counter
            costs, infos, unchecked = read_and_count_unchecked(counter, messages)
            p = self._plan_tokens(messages, held, costs, infos, checked)
            if unchecked is not None:
                assert isinstance(counter, TokenCounter)
                lo, extra = _read_by(p, costs, c.max_tokens, unchecked.upto, held)
                if not counter.confirm(messages, unchecked, lo, extra):
                    costs, infos = read_and_count(counter, messages)
                    p = self._plan_tokens(messages, held, costs, infos, checked)
            return p, "tokens"
        rest = _summary.without(messages, held) if held else messages
        n = len(messages)
        mode: Mode = "off" if c.max_messages is None else "messages"
        if c.max_messages is None or n <= c.max_messages:
            if _sendable(messages, checked):
                return keep_all(n, n), mode
            return self._repair(messages, held), mode
        p = self._plan(rest, None, n, c.min_messages)
        return _with_held(p, held, len(held)), mode

    def _plan_tokens(
        self,
        messages: list[Any],
        held: tuple[int, ...],
        costs: list[int],
        infos: list[MessageInfo] | None,
        checked: _Checked | None,
    ) -> Plan:
        """The token-mode plan of ``messages`` with these costs (and readings)."""
        c = self._config
        assert c.max_tokens is not None
        rest = _summary.without(messages, held) if held else messages
        total = sum(costs)
        held_cost = sum(costs[i] for i in held)
        rest_costs = _summary.without(costs, held) if held else costs
        if held and infos is not None:
            infos = _summary.without(infos, held)
        if total <= c.max_tokens:
            if _sendable(messages, checked):
                return keep_all(len(messages), total)
            p = self._plan(rest, rest_costs, total, UNLIMITED, infos=infos)
            return _with_held(p, held, held_cost)
        budget = c.effective_target_tokens
        assert budget is not None
        p = self._plan(rest, rest_costs, total, budget - held_cost, infos=infos)
        return _with_held(p, held, held_cost)

    def _repair(self, messages: list[Any], held: tuple[int, ...]) -> Plan:
        """The count-mode untriggered plan: prune only what no provider accepts (rule 3)."""
        rest = _summary.without(messages, held) if held else messages
        n = len(messages)
        return _with_held(self._plan(rest, None, n, UNLIMITED), held, len(held))

    def _plan(
        self,
        messages: list[Any],
        costs: list[int] | None,
        total: int,
        budget: int,
        *,
        infos: list[MessageInfo] | None = None,
    ) -> Plan:
        """Plan by columns (``table``) where the history allows, else with the reference planner.
        ``costs``: each message's tokens, or None in count mode."""
        c = self._config
        repair = budget == UNLIMITED  # untriggered: prune only what cannot be sent
        start_on_human = c.start_on_human and not repair
        pinned_kinds = None
        if _columns.enabled:
            fast = _columns.plan(
                messages,
                costs,
                trigger_cost=total,
                budget=budget,
                preserve_first=c.preserve_first,
                start_on_human=start_on_human,
                infos=infos,
                triggered=not repair,
                memo=self._table,
            )
            if fast is not None:
                return fast
            if infos is None:
                pinned_kinds = _columns.pinned_indices(messages)
        return plan(
            messages,
            _one if costs is None else costs.__getitem__,
            trigger_cost=total,
            budget=budget,
            count_mode=costs is None,
            preserve_first=c.preserve_first,
            start_on_human=start_on_human,
            infos=infos,
            triggered=not repair,
            pinned_kinds=pinned_kinds,
        )

    # -- applying ---------------------------------------------------------------------------

    def reduce(self, existing: Any = None, new: Any = None, *, namespace: Any = None) -> ReducerResult:
        """Concatenate ``existing`` and ``new`` (each a list, one message, or None) and prune.

        Never mutates the inputs and returns the caller's own message objects (plus, with
        ``inject_summary``, one new summary message).
        """
        whole = self._kept_whole(existing, new)
        if whole is not None:
            return whole
        step = self._begin(existing, new)
        text, message, error = None, None, None
        if self._summarizes and step.to_summarize:
            try:
                text = _summary.summarize(self._config, step.to_summarize)
                message = self._summary_message(step, text)
            except Exception as exc:
                error = exc
        result = self._finish(step, text, message, error)
        if result.pruned:
            self._run_hooks(result.pruned, namespace)
        return result

    async def areduce(self, existing: Any = None, new: Any = None, *, namespace: Any = None) -> ReducerResult:
        """``reduce`` for async callers: ``asummarize_fn`` is awaited, a sync ``summarize_fn`` and
        sync hooks run off the event loop, hooks with an async ``acall`` are awaited."""
        whole = self._kept_whole(existing, new)
        if whole is not None:
            return whole
        step = self._begin(existing, new)
        text, message, error = None, None, None
        if self._summarizes and step.to_summarize:
            try:
                text = await _summary.asummarize(self._config, step.to_summarize)
                message = self._summary_message(step, text)
            except Exception as exc:
                error = exc
        result = self._finish(step, text, message, error)
        if result.pruned:
            await self._arun_hooks(result.pruned, namespace)
        return result

    def _kept_whole(self, messages: Any, new: Any) -> ReducerResult | None:
        """The result for the last output reduced again on its own (a list, no ``new``), when
        that keeps it whole untriggered (``_Checked.again``): the validity check is the
        identity-first comparison with it. None for any other call."""
        checked = self._checked
        if new is not None or type(messages) is not list:
            return None
        if checked is None or checked.again is None or len(messages) != checked.length:
            return None
        if checked.messages is None or not _equal(messages, checked.messages):
            return None
        # remember these objects, as _finish would: equal copies (a checkpoint read back) are then
        # compared by identity next time
        self._checked = _Checked(list(messages), checked.length, checked.tail, checked.again)
        return ReducerResult(list(messages), [], None, checked.again)

    @property
    def _summarizes(self) -> bool:
        return self._config.summarize_fn is not None or self._config.asummarize_fn is not None

    def _begin(self, existing: Any, new: Any) -> _Step:
        checked = self._checked
        if new is None:  # the common call reduces one list: copy it once
            messages = as_message_list(existing)
        else:
            base = existing if type(existing) is list else as_message_list(existing)
            if checked is not None and checked.messages is not None and len(base) == checked.length:
                # reduce(previous output, new): compare before appending, without a slice
                checked = checked._replace(messages=None) if _equal(base, checked.messages) else None
            messages = base + as_message_list(new)  # one new list of the exact size
        held = self._held(messages)
        the_plan, mode = self._plan_with(messages, held, checked=checked)
        pruned: list[Any]
        if len(the_plan.kept) == len(messages):
            surviving, pruned = messages, []  # made here above: no second copy
        else:
            surviving, pruned = the_plan.split(messages)
        return _Step(messages, the_plan, mode, surviving, pruned, [messages[i] for i in held])

    def _summary_message(self, step: _Step, text: str) -> Any:
        """The message to inject for ``text``, or None (not injecting, or an empty summary)."""
        c = self._config
        if not c.inject_summary or not text.strip():
            return None
        count = sum(_summary.summary_count(m) for m in step.held) + len(step.pruned)
        return _summary.build_summary_message(
            text, count, like=_summary.shape_template(step.messages), factory=c.summary_message_factory
        )

    def _finish(self, step: _Step, text: str | None, message: Any, error: Exception | None) -> ReducerResult:
        """Apply a plan: slice; inject the summary, which replaces the held one; keep everything
        when the summarizer failed (policy "keep")."""
        c = self._config
        the_plan, messages = step.plan, step.messages
        surviving, pruned = step.surviving, step.pruned
        tokens = step.mode == "tokens"
        cost_before, cost_after = the_plan.cost_before, the_plan.cost_after
        if error is not None:
            logger.error("summarize_fn failed; policy %r", c.on_summary_error, exc_info=error)
            text = None
            if c.on_summary_error == "keep":
                # nothing is pruned but what no provider accepts (the untriggered plan)
                surviving, pruned = self._repair(messages, self._held(messages)).split(messages)
                if tokens:  # every message's count checked: the plan may have read some unchecked
                    cost_before = sum(self.count_tokens(messages))
                    cost_after = sum(self.count_tokens(surviving))
                else:
                    cost_after = cost_before
        elif message is not None:
            surviving = _summary.with_summary(surviving, message, preserve_first=c.preserve_first)
            pruned = [*step.held, *pruned]
            if tokens:
                cost_after += self.count_tokens([message])[0] - sum(self.count_tokens(step.held))
        target = c.effective_target_tokens
        over = the_plan.over_target or (tokens and target is not None and cost_after > target)
        stats = ReducerStats(
            mode=step.mode,
            triggered=the_plan.triggered,
            messages_before=len(messages),
            messages_after=len(surviving),
            pruned_count=len(pruned),
            tokens_before=cost_before if tokens else None,
            tokens_after=cost_after if tokens else None,
            over_target=over,
            summary_error=repr(error) if error is not None else None,
            repaired=bool(pruned) and not the_plan.triggered,
        )
        if pruned:
            logger.debug("pruned %d of %d messages (%s mode)", len(pruned), len(messages), step.mode)
        n = len(surviving)
        again = None
        if c.max_tokens is None and (c.max_messages is None or n <= c.max_messages):
            # reduced again, the output is sendable and within max_messages: kept whole, untriggered
            kept_whole = not (pruned or stats.triggered or stats.over_target or error is not None)
            again = stats if kept_whole else ReducerStats(step.mode, False, n, n, 0)
        self._checked = _Checked(list(surviving), n, tail_of(surviving), again)
        return ReducerResult(surviving, pruned, text, stats)

    def _run_hooks(self, pruned: list[Any], namespace: Any) -> None:
        for hook in self._config.on_prune:
            try:
                out = hook(list(pruned), namespace)
                if asyncio.iscoroutine(out):
                    out.close()
                    raise TypeError(f"{hook!r} is async: use areduce/aput, or give it a sync __call__")
            except Exception:
                logger.exception("on_prune hook %r failed; the reduction goes on", hook)

    async def _arun_hooks(self, pruned: list[Any], namespace: Any) -> None:
        for hook in self._config.on_prune:
            try:
                acall = getattr(hook, "acall", None)
                if callable(acall):  # e.g. checkpointers.archive.StoreArchive: the store's async API
                    await acall(list(pruned), namespace)
                elif asyncio.iscoroutinefunction(hook):
                    await hook(list(pruned), namespace)
                else:  # a sync hook may do I/O: keep it off the event loop
                    await asyncio.to_thread(hook, list(pruned), namespace)
            except Exception:
                logger.exception("on_prune hook %r failed; the reduction goes on", hook)

    def as_langgraph_reducer(self) -> Callable[[Any, Any], list[Any]]:
        """A ``(existing, new) -> list`` for ``Annotated[list, reducer.as_langgraph_reducer()]``:
        merges with ``add_messages`` semantics, then prunes (see ``agentstate_reducer.merge``)."""
        return make_state_reducer(lambda messages: self.reduce(messages).surviving)
