"""``MessageReducer``: read (adapter) -> cost -> plan (pure) -> apply (slice, summary, hooks).

One reduction: hold the injected summary out (``summary.hold``), plan the rest (the column path
where it answers, else the reference ``planner.plan``), put the summary back; the reducer's one
memo (``_columns.PrefixMemo``) lets a history that starts with a list it handled skip what it
learned about that list."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import _columns
from . import summary as _summary
from . import telemetry as _telemetry
from ._columns import CountColumns, PrefixMemo, Remembered, Sendable, TableState
from .config import ReducerConfig
from .merge import make_delta_reducer, make_state_reducer
from .messages import MessageInfo, is_message_like, read_message
from .planner import UNLIMITED, Plan, Tail, extend_tail, keep_all, plan, tail_of
from .results import Mode, ReducerResult, ReducerStats
from .tokens import TokenCounter, count_messages, read_and_count, resolve_token_counter
from .tokens.calibration import Calibration, Scale, history_scale, scale_counts

logger = logging.getLogger("agentstate_reducer")


def _one(i: int) -> int:
    return 1


def wait_released(timeout: float | None = None) -> bool:
    """Wait until every list a reducer's memo let go of has been freed, and return ``True``;
    ``False`` if ``timeout`` seconds passed first.

    A reducer frees the lists it stops remembering (which may hold the last references to
    messages its caller dropped) on a daemon thread, not in the reducing call, so memory falls a
    moment after a call returns. Call this before measuring memory (``tracemalloc``, RSS) after
    dropping conversations; nothing else needs it.
    """
    return _columns.memo.released(timeout)


@dataclass(slots=True)
class _Call:
    """One call's use of the reducer's memo (``_columns.memo``; None when the column path is
    off): the remembered list that starts its history and how many messages they share, and
    what the call learned (the counter's columns, the planner's table) for the next call."""

    memo: PrefixMemo | None
    #: the caller's calibration of this conversation (``reduce(calibration=...)``), or None
    calibration: Calibration | None = None
    record: Remembered | None = None
    shared: int = 0
    counts: CountColumns | None = None
    table: TableState | None = None
    #: the tail of the history, when ``sendable`` found it sendable
    tail: Tail | None = None
    #: token mode: the calibration ratio the plan's costs were scaled by, None when unscaled
    ratio: float | None = None
    #: token mode: the calibration's tokens beside the messages, added to every cost compared
    offset: int = 0

    @property
    def extends(self) -> Remembered | None:
        """The remembered record the history starts with whole, or None."""
        record = self.record
        return record if record is not None and self.shared == len(record.items) else None

    def sendable(self, messages: list[Any]) -> bool:
        """True when ``messages`` is a remembered sendable output plus messages that keep it
        sendable (only the new ones are read)."""
        record = self.extends
        if record is None or record.sendable is None:
            return False
        self.tail = extend_tail(record.sendable.tail, map(read_message, messages[self.shared :]))
        return self.tail is not None


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
    #: how many of ``pruned`` (its first ones) a compaction replaced (``Plan.covered``)
    covered: int = 0

    @property
    def to_summarize(self) -> list[Any]:
        """What the summarizer gets: the previous summary first, then the newly pruned messages
        but those a compaction replaced (their content is in the compaction)."""
        fresh = self.pruned[self.covered :]
        return [*self.held, *fresh] if fresh else []


def _describe(
    report: _telemetry.Reduction, result: ReducerResult, message: Any, error: Exception | None
) -> None:
    """Fill ``report`` (what the reduction's span and metrics say) from its result."""
    stats = result.stats
    report.mode = "tokens" if stats.mode == "tokens" else "count"
    report.messages_before, report.messages_after = stats.messages_before, stats.messages_after
    report.tokens_before, report.tokens_after = stats.tokens_before, stats.tokens_after
    report.pruned = stats.pruned_count
    report.repaired = stats.repaired
    report.summary_created = message is not None and error is None
    report.summary_covered = _summary.summary_count(message) if report.summary_created else 0
    report.summary_error = error is not None


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
    if type(value) is list:  # the common call: a list of messages
        return list(value)
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


async def arun_hook(hook: Callable[[list[Any], Any], Any], pruned: list[Any], namespace: Any) -> None:
    """Run one ``on_prune`` hook from async code: its ``acall`` when it has one (e.g.
    ``checkpointers.archive.StoreArchive``: the store's async API), awaited when it is a coroutine
    function, else in a worker thread (a sync hook may do I/O: keep it off the event loop)."""
    acall = getattr(hook, "acall", None)
    if callable(acall):
        await acall(pruned, namespace)
    elif asyncio.iscoroutinefunction(hook):
        await hook(pruned, namespace)
    else:
        await asyncio.to_thread(hook, pruned, namespace)


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
        self._memo = PrefixMemo()

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
        returns anything but a non-negative int raises ``TokenCountError`` naming the message.
        These are the counter's own counts; ``calibrated_counts`` are what token mode plans with."""
        return count_messages(self.token_counter, messages)

    @property
    def calibrates(self) -> bool:
        """Whether token mode scales counts to the provider's tokens (``ReducerConfig.calibrate``:
        None means on for the built-in counters, off for a user's ``token_counter``)."""
        flag = self._config.calibrate
        return isinstance(self.token_counter, TokenCounter) if flag is None else flag

    def token_ratio(self, messages: list[Any], *, calibration: Calibration | None = None) -> float | None:
        """The calibration ratio token mode applies to ``messages``' counts: from ``calibration``
        when given (alone), else from the usage the history's AI messages carry; None when
        calibration is off or there is nothing to learn from (docs/tokens.md, "Calibrated
        budgets")."""
        scale = self.token_scale(messages, calibration=calibration)
        return scale.ratio if scale is not None else None

    def token_scale(self, messages: list[Any], *, calibration: Calibration | None = None) -> Scale | None:
        """The calibration token mode plans ``messages`` with: each count times ``ratio``, plus
        ``offset`` (the tokens a request holds besides its messages) for the whole; from
        ``calibration`` when given (alone), else from the usage the history's AI messages
        carry. None when calibration is off, there is nothing to learn from, or the offset
        leaves no room under ``target_tokens`` (docs/tokens.md, "Calibrated budgets")."""
        if not self.calibrates:
            return None
        counts, infos = read_and_count(self.token_counter, messages)
        return self._scale_of(messages, counts, infos, calibration)

    def calibrated_counts(self, messages: list[Any], *, calibration: Calibration | None = None) -> list[int]:
        """Per-message counts as token mode plans with them: ``count_tokens`` scaled by
        ``token_ratio`` (rounded up); the counter's own counts when there is no ratio. The
        scale's ``offset`` is not in them: ``calibrated_tokens`` adds it."""
        counts, infos = read_and_count(self.token_counter, messages)
        scale = self._scale_of(messages, counts, infos, calibration) if self.calibrates else None
        return scale_counts(counts, scale.ratio if scale is not None else None)

    def calibrated_tokens(self, messages: list[Any], *, calibration: Calibration | None = None) -> int:
        """What token mode compares with ``max_tokens`` for ``messages``: their calibrated
        counts plus the scale's ``offset`` (the request's size in the provider's tokens)."""
        counts, infos = read_and_count(self.token_counter, messages)
        scale = self._scale_of(messages, counts, infos, calibration) if self.calibrates else None
        if scale is None:
            return sum(counts)
        return sum(scale_counts(counts, scale.ratio)) + scale.offset

    def _scale_of(self, messages: list[Any], counts: list[int], infos: list[MessageInfo] | None,
                  calibration: Calibration | None) -> Scale | None:
        """The scale of these counts: from ``calibration``, else the history's; None when its
        offset leaves no room under the target (a wrong figure, or tools no budget can hold)."""
        if calibration is not None:
            if not isinstance(calibration, Calibration):
                raise TypeError(
                    "calibration must be an agentstate_reducer.Calibration (one per conversation) "
                    f"or None, got {type(calibration).__name__}"
                )
            scale = calibration.scale(self.token_counter)
        else:
            scale = history_scale(messages, counts, infos)
        target = self._config.effective_target_tokens
        if scale is not None and scale.offset and target is not None and scale.offset >= target:
            return None
        return scale

    def _scaled(self, messages: list[Any], costs: list[int], infos: list[MessageInfo] | None,
                call: _Call) -> list[int]:
        """``costs`` scaled by the call's calibration ratio (kept in ``call.ratio``, its offset in
        ``call.offset``)."""
        scale = self._scale_of(messages, costs, infos, call.calibration) if self.calibrates else None
        call.ratio, call.offset = (scale.ratio, scale.offset) if scale is not None else (None, 0)
        return costs if scale is None else scale_counts(costs, scale.ratio)

    def _cost(self, messages: list[Any], call: _Call) -> int:
        """What ``messages`` cost in the plan's units (the call's ratio applied, without its
        offset)."""
        return sum(scale_counts(self.count_tokens(messages), call.ratio))

    def plan(self, messages: list[Any], *, calibration: Calibration | None = None) -> tuple[Plan, Mode]:
        """The pure decision for ``messages`` (already merged), without applying it."""
        return self._plan_with(messages, _summary.hold(messages, self._config), _Call(None, calibration))

    def _plan_with(self, messages: list[Any], held: _summary.Held, call: _Call) -> tuple[Plan, Mode]:
        """The decision for ``messages`` with ``held`` (the injected summary) held out of it."""
        c = self._config
        if c.max_tokens is not None:
            return self._plan_tokens(messages, held, call), "tokens"
        n = len(messages)
        mode: Mode = "off" if c.max_messages is None else "messages"
        if c.max_messages is None or n <= c.max_messages:
            if call.sendable(messages):
                return keep_all(n, n), mode
            budget = UNLIMITED  # untriggered: prune only what no provider accepts (rule 3)
        else:
            budget = c.min_messages
        p = self._plan(held.out(messages), None, n, budget, call)
        return held.back(p, len(held.indices)), mode

    def _plan_tokens(self, messages: list[Any], held: _summary.Held, call: _Call) -> Plan:
        """The token-mode decision. The built-in counters hand back their readings (the planner
        reads nothing twice); with the memo, the counts of the messages its record shares come
        unchecked, and only those the decision read are confirmed (a change there: every count
        checked again, and the decision made again)."""
        c = self._config
        assert c.max_tokens is not None
        counter = self.token_counter
        unchecked = None
        infos: list[MessageInfo] | None
        if _columns.enabled and isinstance(counter, TokenCounter):
            prior = call.record.counts if call.record is not None else None
            costs, infos, unchecked, call.counts = _columns.count(counter, messages, prior, call.shared)
        else:
            costs, infos = read_and_count(counter, messages)
        planned = self._scaled(messages, costs, infos, call)
        p = self._plan_costs(messages, held, planned, infos, call)
        if unchecked is not None:
            assert isinstance(counter, TokenCounter)
            lo, extra = _read_by(p, planned, c.max_tokens - call.offset, unchecked.upto, held.indices)
            if not counter.confirm(messages, unchecked, lo, extra):
                costs, infos = read_and_count(counter, messages)
                call.counts = None
                planned = self._scaled(messages, costs, infos, call)
                p = self._plan_costs(messages, held, planned, infos, call)
        return p

    def _plan_costs(
        self,
        messages: list[Any],
        held: _summary.Held,
        costs: list[int],
        infos: list[MessageInfo] | None,
        call: _Call,
    ) -> Plan:
        """The token-mode plan of ``messages`` with these costs (and readings)."""
        c = self._config
        assert c.max_tokens is not None
        # the calibration's offset (system prompt, tools) is in every request: it counts
        # against both the trigger and the target, never against a message
        offset = call.offset
        total = sum(costs) + offset
        held_cost = sum(costs[i] for i in held.indices)
        if total <= c.max_tokens:
            if call.sendable(messages):
                return keep_all(len(messages), total)
            budget = UNLIMITED
        else:
            target = c.effective_target_tokens
            assert target is not None
            budget = target - held_cost - offset
        rest_infos = held.out(infos) if infos is not None else None
        p = held.back(self._plan(held.out(messages), held.out(costs), total, budget, call, infos=rest_infos),
                      held_cost)  # fmt: skip
        return dataclasses.replace(p, cost_after=p.cost_after + offset) if offset else p

    def _plan(
        self,
        messages: list[Any],
        costs: list[int] | None,
        total: int,
        budget: int,
        call: _Call,
        *,
        infos: list[MessageInfo] | None = None,
    ) -> Plan:
        """Plan by columns where the history allows, else with the reference planner. ``costs``:
        each message's tokens, or None in count mode; ``budget``: ``UNLIMITED`` for an
        untriggered call (prune only what cannot be sent)."""
        c = self._config
        repair = budget == UNLIMITED
        start_on_human = c.start_on_human and not repair
        pinned_kinds = compactions = None
        if _columns.enabled:
            prior = call.record.table if call.record is not None else None
            fast, call.table = _columns.plan(
                messages,
                costs,
                trigger_cost=total,
                budget=budget,
                preserve_first=c.preserve_first,
                start_on_human=start_on_human,
                infos=infos,
                triggered=not repair,
                prior=prior,
            )
            if fast is not None:
                return fast
            if infos is None:  # what the table read (from readings the reference reads them)
                pinned_kinds, compactions = call.table.kind_pinned, call.table.compactions
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
            compactions=compactions,
        )

    def _repair(self, messages: list[Any]) -> Plan:
        """The untriggered plan: prune only what no provider accepts (rule 3)."""
        held = _summary.hold(messages, self._config)
        rest = held.out(messages)
        return held.back(self._plan(rest, None, len(messages), UNLIMITED, _Call(None)), len(held.indices))

    # -- the saver's seam: an output read back ---------------------------------------------

    def _again(self, n: int) -> ReducerStats | None:
        """The stats of reducing an output of ``n`` messages again on its own, when that keeps it
        whole untriggered (count mode, at most ``max_messages``: an output is sendable); else None."""
        c = self._config
        if c.max_tokens is not None or (c.max_messages is not None and n > c.max_messages):
            return None
        return ReducerStats("off" if c.max_messages is None else "messages", False, n, n, 0)

    def _vouch(self, output: list[Any]) -> None:
        """Remember ``output``, a new list the caller hands over, as an output of this reducer:
        equal, message for message, to a list a reduction returned (a checkpoint it stored, read
        back), so a history starting with these objects is a memo hit on it and has only the
        messages after them read. The caller vouches for the equality; the memo then takes these
        objects as it takes its own (``_columns.memo``, assumption 1)."""
        memo = self._memo if _columns.enabled else None
        if memo is None or not output:
            return
        memo.keep(output, owned=True, sendable=Sendable(tail_of(output), self._again(len(output))))

    # -- applying ---------------------------------------------------------------------------

    def reduce(
        self,
        existing: Any = None,
        new: Any = None,
        *,
        namespace: Any = None,
        calibration: Calibration | None = None,
    ) -> ReducerResult:
        """Concatenate ``existing`` and ``new`` (each a list, one message, or None) and prune.

        Never mutates the inputs and returns the caller's own message objects (plus, with
        ``inject_summary``, one new summary message). ``calibration``: this conversation's
        ``Calibration``, for histories whose messages carry no usage (docs/tokens.md,
        "Calibrated budgets"); without it token mode calibrates from the history's own usage.
        """
        messages, call = self._start(existing, new, calibration)
        whole = self._kept_whole(messages, new, call)
        if whole is not None:
            return whole
        step = self._begin(messages, call)
        if not step.pruned:  # nothing to summarize, no hook to run, nothing to report
            return self._finish(step, None, None, None, call)
        report = _telemetry.Reduction()
        with _telemetry.reduction_span(report, namespace):
            text, message, error = None, None, None
            if self._summarizes and step.to_summarize:
                try:
                    with _telemetry.summarizer_span(len(step.to_summarize)):
                        text = _summary.summarize(self._config, step.to_summarize)
                    message = self._summary_message(step, text)
                except Exception as exc:
                    error = exc
            result = self._finish(step, text, message, error, call)
            _describe(report, result, message, error)
            if result.pruned:
                self._run_hooks(result.pruned, namespace)
        return result

    async def areduce(
        self,
        existing: Any = None,
        new: Any = None,
        *,
        namespace: Any = None,
        calibration: Calibration | None = None,
    ) -> ReducerResult:
        """``reduce`` for async callers: ``asummarize_fn`` is awaited, a sync ``summarize_fn`` and
        sync hooks run off the event loop, hooks with an async ``acall`` are awaited."""
        messages, call = self._start(existing, new, calibration)
        whole = self._kept_whole(messages, new, call)
        if whole is not None:
            return whole
        step = self._begin(messages, call)
        if not step.pruned:
            return self._finish(step, None, None, None, call)
        report = _telemetry.Reduction()
        with _telemetry.reduction_span(report, namespace):
            text, message, error = None, None, None
            if self._summarizes and step.to_summarize:
                try:
                    with _telemetry.summarizer_span(len(step.to_summarize)):
                        text = await _summary.asummarize(self._config, step.to_summarize)
                    message = self._summary_message(step, text)
                except Exception as exc:
                    error = exc
            result = self._finish(step, text, message, error, call)
            _describe(report, result, message, error)
            if result.pruned:
                await self._arun_hooks(result.pruned, namespace)
        return result

    def _start(self, existing: Any, new: Any, calibration: Calibration | None) -> tuple[list[Any], _Call]:
        """The history to reduce (one new list) and what the memo remembers of its start."""
        if calibration is not None and not isinstance(calibration, Calibration):
            raise TypeError(
                "calibration must be an agentstate_reducer.Calibration (one per conversation) or "
                f"None, got {type(calibration).__name__}"
            )
        if new is None:  # the common call reduces one list: copy it once
            messages = as_message_list(existing)
        else:
            base = existing if type(existing) is list else as_message_list(existing)
            messages = base + as_message_list(new)  # one new list of the exact size
        memo = self._memo if _columns.enabled else None
        if memo is None:
            return messages, _Call(None, calibration)
        record, shared = memo.recall(messages)
        return messages, _Call(memo, calibration, record, shared)

    def _kept_whole(self, messages: list[Any], new: Any, call: _Call) -> ReducerResult | None:
        """The result for a remembered output reduced again on its own (no ``new``), when that
        keeps it whole untriggered (``Sendable.again``); None for any other call."""
        record = call.record
        if new is not None or record is None or record.sendable is None:
            return None
        again = record.sendable.again
        if again is None or call.shared != len(messages) or call.shared != len(record.items):
            return None
        return ReducerResult(messages, [], None, again)

    @property
    def _summarizes(self) -> bool:
        return self._config.summarize_fn is not None or self._config.asummarize_fn is not None

    def _begin(self, messages: list[Any], call: _Call) -> _Step:
        """Hold the summary out, plan, and split the list by the plan."""
        held = _summary.hold(messages, self._config)
        the_plan, mode = self._plan_with(messages, held, call)
        pruned: list[Any]
        if len(the_plan.kept) == len(messages):
            surviving, pruned = messages, []  # made by _start: no second copy
        else:
            surviving, pruned = the_plan.split(messages)
        covered = the_plan.covered - bisect_left(the_plan.kept, the_plan.covered)  # pruned before it
        held_messages = [messages[i] for i in held.indices]
        return _Step(messages, the_plan, mode, surviving, pruned, held_messages, covered)

    def _summary_message(self, step: _Step, text: str) -> Any:
        """The message to inject for ``text``, or None (not injecting, or an empty summary)."""
        c = self._config
        if not c.inject_summary or not text.strip():
            return None
        count = sum(_summary.summary_count(m) for m in step.held) + len(step.pruned) - step.covered
        return _summary.build_summary_message(
            text, count, like=_summary.shape_template(step.messages), factory=c.summary_message_factory
        )

    def _finish(
        self, step: _Step, text: str | None, message: Any, error: Exception | None, call: _Call
    ) -> ReducerResult:
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
                surviving, pruned = self._repair(messages).split(messages)
                if tokens:  # every message's count checked: the plan may have read some unchecked
                    cost_before = self._cost(messages, call) + call.offset
                    cost_after = self._cost(surviving, call) + call.offset
                else:
                    cost_after = cost_before
        elif message is not None:
            surviving = _summary.with_summary(surviving, message, preserve_first=c.preserve_first)
            pruned = [*step.held, *pruned]
            if tokens:
                cost_after += self._cost([message], call) - self._cost(step.held, call)
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
            token_ratio=call.ratio if tokens else None,
        )
        if pruned:
            logger.debug("pruned %d of %d messages (%s mode)", len(pruned), len(messages), step.mode)
        if call.memo is not None:
            self._remember(call, step, surviving, stats, error)
        return ReducerResult(surviving, pruned, text, stats)

    def _remember(
        self, call: _Call, step: _Step, surviving: list[Any], stats: ReducerStats, error: Exception | None
    ) -> None:
        """Keep what this call learned: the input with the counter's columns and the planner's
        table, and the output as sendable (one record when nothing was cut from the input)."""
        assert call.memo is not None
        n = len(surviving)
        again = self._again(n)
        kept_whole = not (stats.pruned_count or stats.triggered or stats.over_target or error is not None)
        if again is not None and kept_whole:
            again = stats  # this call kept its list whole untriggered: a call again says the same
        whole = surviving is step.messages
        tail = call.tail if whole and call.tail is not None else tail_of(surviving)
        sendable = Sendable(tail, again)
        # the input is this call's own list unless it is handed back as ``surviving``: then the
        # memo keeps a copy, and a table read from the input reads from that copy
        items = list(step.messages) if whole else step.messages
        table = call.table
        if whole and table is not None and table.keys is step.messages:
            table = table._replace(keys=items)
        if whole:
            call.memo.keep(
                items, call.extends, owned=True, counts=call.counts, table=table, sendable=sendable
            )
            return
        if call.counts is not None or table is not None:
            call.memo.keep(items, call.extends, owned=True, counts=call.counts, table=table)
        call.memo.keep(surviving, sendable=sendable)

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
                await arun_hook(hook, list(pruned), namespace)
            except Exception:
                logger.exception("on_prune hook %r failed; the reduction goes on", hook)

    def as_langgraph_reducer(self) -> Callable[[Any, Any], list[Any]]:
        """A ``(existing, new) -> list`` for ``Annotated[list, reducer.as_langgraph_reducer()]``:
        merges with ``add_messages`` semantics, then prunes (see ``agentstate_reducer.merge``)."""

        def reduce_state(messages: list[Any]) -> list[Any]:
            with _telemetry.entry("state"):
                return self.reduce(messages).surviving

        return make_state_reducer(reduce_state)

    def as_delta_reducer(self) -> Callable[[Any, Sequence[Any]], list[Any]]:
        """A batch ``(state, [write, ...]) -> list`` for LangGraph's ``DeltaChannel``:
        ``Annotated[list, DeltaChannel(reducer.as_delta_reducer(), snapshot_frequency=50)]``.

        Each write is merged with ``add_messages`` semantics (as ``as_langgraph_reducer``) and the
        list reduced after it, so the function is deterministic and batching-invariant
        (``r(r(s, xs), ys) == r(s, xs + ys)``), as LangGraph's replay of stored writes needs
        (``agentstate_reducer.merge.make_delta_reducer``).

        Raises:
            ValueError: the reducer has a summarizer or ``on_prune`` hooks. LangGraph replays the
                writes through this function on every load, so they would run again on each load;
                bound the stored history with ``ReducingCheckpointSaver`` instead, which summarizes
                and archives once per pruned message on ``DeltaChannel`` threads too.
        """
        c = self._config
        fields = (("summarize_fn", c.summarize_fn), ("asummarize_fn", c.asummarize_fn),
                  ("on_prune", c.on_prune))
        given = [name for name, value in fields if value]
        if given:
            raise ValueError(
                f"as_delta_reducer() needs a reducer without {', '.join(given)}: LangGraph replays a "
                "DeltaChannel's writes through it on every load, which would run them again each "
                "time; use a MessageReducer without them here, and summarize or archive with "
                "ReducingCheckpointSaver(inner, reducer) on the checkpointer"
            )
        return make_delta_reducer(lambda messages: self.reduce(messages).surviving)


__all__ = ["MessageReducer", "Mode", "ReducerResult", "ReducerStats", "as_message_list"]
