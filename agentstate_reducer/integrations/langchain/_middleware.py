"""The ``ReducerMiddleware`` class: the pruning contract at LangChain's agent hooks.

What it guarantees is stated in the package docstring (``agentstate_reducer.middleware``) and in
docs/middleware.md; the ``trigger``/``keep`` forms live in ``_triggers``, the summarizer adapters
in ``_summarizer``, the request repair in ``_repair``.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import threading
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.context_editing import ClearToolUsesEdit
from langchain.agents.middleware.types import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from agentstate_reducer import telemetry
from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.cost import CacheTracker
from agentstate_reducer.integrations._bounded import BoundedMap
from agentstate_reducer.integrations._common import Mode, ReduceRecord, build_reducer
from agentstate_reducer.messages import read_usage
from agentstate_reducer.reducer import MessageReducer, ReducerResult
from agentstate_reducer.summary import MemoizedReduction, SummaryMemo, is_summary_message
from agentstate_reducer.tokens.calibration import Calibration

from ._repair import RequestRepair, merge_system, sendable_next, trailing_answers
from ._summarizer import summary_fields
from ._triggers import (
    Clause,
    Size,
    check_keep_within_trigger,
    no_profile,
    parse_size,
    parse_trigger,
    profile_limit,
    resolve,
    trigger_repr,
)

__all__ = ["Mode", "ReduceRecord", "ReducerMiddleware"]

logger = logging.getLogger("agentstate_reducer.middleware")

_WHAT = "ReducerMiddleware"

#: the middleware's own keyword arguments, for the "did you mean" hint of a misspelt one
_OWN_ARGUMENTS = (
    "reducer", "config", "mode", "trigger", "keep", "model", "summarizer", "preserve_first",
    "validate", "clear_tool_results", "on_reduce", "summary_memo",
)  # fmt: skip

#: a ``trigger`` replaces these reducer limits, a ``keep`` those: giving both is ambiguous
_REPLACED_BY = {"trigger": ("max_messages", "max_tokens"), "keep": ("min_messages", "target_tokens")}

#: ``_reduced_at``'s answer for a thread no reduction has pruned (an AI message id may be None)
_NOT_REDUCED = object()


def _ids(messages: Sequence[Any]) -> tuple[str | None, ...]:
    return tuple(getattr(m, "id", None) for m in messages)


# -- the middleware --------------------------------------------------------------------------------


def _reducer_of(
    reducer: Any,
    config: Any,
    kwargs: Mapping[str, Any],
    *,
    trigger: Any,
    keep: Any,
    summarizer: Any,
    preserve_first: Any,
) -> MessageReducer:
    """The reducer the middleware starts from: ``reducer``, ``MessageReducer(config=config)`` or
    one built from ``ReducerConfig`` keyword arguments by ``build_reducer``, as every integration
    builds it (its "did you mean" error for a misspelt field, its defaults). A given ``reducer``
    is returned itself: the caller applies ``preserve_first`` and the summarizer to a copy of
    its config, and counts tokens with it (its counter's cache)."""
    if config is not None:
        if not isinstance(config, ReducerConfig):
            raise TypeError(
                f"{_WHAT}: config must be an agentstate_reducer.ReducerConfig, got {type(config).__name__}"
            )
        if reducer is not None or kwargs:
            given = "a reducer" if reducer is not None else f"{sorted(kwargs)}"
            raise TypeError(
                f"{_WHAT}: pass reducer=, config= or ReducerConfig fields, one of them "
                f"(got config= and {given})"
            )
        if not isinstance(preserve_first, bool):
            raise TypeError(f"{_WHAT}: preserve_first must be a bool, got {preserve_first!r}")
        return MessageReducer(config=config)
    fields = {f.name for f in dataclasses.fields(ReducerConfig)}
    for name in sorted(set(kwargs) - fields):
        close = difflib.get_close_matches(name, [*_OWN_ARGUMENTS, *fields], n=1)
        if close and close[0] in _OWN_ARGUMENTS:  # a misspelt argument of the middleware itself
            raise TypeError(
                f"{_WHAT}: unknown keyword argument {name!r} (did you mean {close[0]!r}?); besides its "
                f"own arguments {sorted(_OWN_ARGUMENTS)} it takes the fields of "
                f"agentstate_reducer.ReducerConfig: {sorted(fields)}"
            )
    for own, value in (("trigger", trigger), ("keep", keep)):
        clash = [name for name in _REPLACED_BY[own] if name in kwargs]
        if value is not None and clash:
            raise TypeError(
                f"{_WHAT}: pass {own}= or {clash[0]}=, not both ({own} replaces the reducer's "
                f"{' and '.join(_REPLACED_BY[own])})"
            )
    both = sorted({"summarize_fn", "asummarize_fn"} & set(kwargs))
    if summarizer is not None and both:
        raise TypeError(f"{_WHAT}: pass summarizer= or {both[0]}=, not both (summarizer= replaces it)")
    built = build_reducer(reducer, kwargs, preserve_first=preserve_first, what=_WHAT)
    return built if reducer is None else reducer


class _Pending:
    """What ``before_model`` did, for the record of the model call that follows."""

    __slots__ = ("before", "result", "tokens_before", "triggered")

    def __init__(self, before: int, tokens_before: int, result: ReducerResult, triggered: bool) -> None:
        self.before = before
        self.tokens_before = tokens_before
        self.result = result
        self.triggered = triggered


def _model_name(model: Any) -> str | None:
    """The name a chat model calls itself (``model_name``, ``model`` or ``model_id``), for spans."""
    for attr in ("model_name", "model", "model_id"):
        name = getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return None


class ReducerMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keep a ``create_agent`` agent's context bounded without ever breaking a model call.

    The reducer is given the way every integration takes it: a ``MessageReducer``, a
    ``ReducerConfig`` (``config=``, as ``MessageReducer(config=...)``), or the ``ReducerConfig``
    fields as keyword arguments (``ReducerMiddleware(min_messages=10, max_messages=20)``); one
    of the three. A misspelt keyword is a ``TypeError`` naming the closest argument or field.

    >>> ReducerMiddleware(min_messages=10, max_messages=20)
    ReducerMiddleware(mode='state', trigger=('messages', 21), keep=('messages', 10))

    Args:
        reducer: the ``MessageReducer`` whose contract and settings apply (summarizer, hooks,
            token counter, ``on_summary_error``...). Default: ``min_messages=20, max_messages=40``.
        config: a ``ReducerConfig`` instead of ``reducer``.
        **reducer_kwargs: ``ReducerConfig`` fields instead of ``reducer`` (``min_messages``,
            ``max_messages``, ``max_tokens``, ``target_tokens``, ``token_counter``,
            ``on_prune``...); ``min_messages=20, max_messages=40`` unless either is given.
        mode: ``"state"`` (reduce the stored state in ``before_model``) or ``"request"`` (reduce
            only what is sent, in ``wrap_model_call``; the state keeps everything).
        trigger: when to reduce, in LangChain's forms (see the package docstring); replaces the
            reducer's ``max_messages``/``max_tokens``.
        keep: how much to keep, ``("messages", n)``, ``("tokens", n)`` or ``("fraction", f)``;
            replaces the reducer's ``min_messages``/``target_tokens``. Any trigger combines with
            any keep; a keep over a threshold of the trigger in the same unit raises.
        model: the agent's model, read for its profile when a fraction must be known before the
            request exists (state mode). Request mode reads the request's model.
        summarizer: a chat model (prompted with ``DEFAULT_SUMMARY_PROMPT``), a callable
            ``(messages) -> str`` or an async one; replaces the reducer's ``summarize_fn``.
        preserve_first: pin the first state message (the reducer's own setting is replaced:
            ``create_agent`` sends its system prompt from outside the state).
        validate: repair every request into one providers accept (see the package docstring).
        clear_tool_results: a ``ClearToolUsesEdit``: older tool results are replaced by its
            placeholder in the request (never in the state) before whole turns are pruned.
        on_reduce: ``fn(ReduceRecord)`` called once per model call; failures are logged.
        summary_memo: the memo of request mode (default: a new one). Under a
            ``ReducingCheckpointSaver`` with a summarizer, give both the same memo (state mode
            then never summarizes what the saver already summarized).

    Raises:
        TypeError, ValueError: a bad argument, named; an unknown keyword; a reducer given two
            ways; ``trigger`` with ``max_messages``/``max_tokens`` or ``keep`` with
            ``min_messages``/``target_tokens`` (each replaces the other); ``summarizer`` with
            ``summarize_fn``/``asummarize_fn``; a fraction in state mode without ``model``
            having a profile; a keep over the trigger.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        mode: Mode = "state",
        trigger: Any = None,
        keep: Any = None,
        model: BaseChatModel | None = None,
        summarizer: Any = None,
        preserve_first: bool = False,
        validate: bool = True,
        clear_tool_results: ClearToolUsesEdit | None = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        summary_memo: SummaryMemo | None = None,
        config: ReducerConfig | None = None,
        **reducer_kwargs: Any,
    ) -> None:
        super().__init__()
        reducer = _reducer_of(
            reducer,
            config,
            reducer_kwargs,
            trigger=trigger,
            keep=keep,
            summarizer=summarizer,
            preserve_first=preserve_first,
        )
        if mode not in ("state", "request"):
            raise ValueError(f"mode must be 'state' or 'request', got {mode!r}")
        if clear_tool_results is not None and not isinstance(clear_tool_results, ClearToolUsesEdit):
            raise TypeError(
                "clear_tool_results must be a langchain.agents.middleware.ClearToolUsesEdit, "
                f"got {type(clear_tool_results).__name__}"
            )
        if not isinstance(validate, bool):
            raise TypeError(f"validate must be a bool, got {validate!r}")
        if on_reduce is not None and not callable(on_reduce):
            raise TypeError(
                f"on_reduce must be callable(ReduceRecord) or None, got {type(on_reduce).__name__}"
            )
        if model is not None and not isinstance(model, BaseChatModel):
            raise TypeError(f"model must be a LangChain chat model or None, got {type(model).__name__}")
        if summary_memo is not None and not isinstance(summary_memo, SummaryMemo):
            raise TypeError(f"summary_memo must be a SummaryMemo or None, got {type(summary_memo).__name__}")
        self.reducer = reducer
        self.mode: Mode = mode
        self.preserve_first = preserve_first
        self.validate = validate
        self.clear_tool_results = clear_tool_results
        self.on_reduce = on_reduce
        self.model = model
        c = reducer.config
        self._base = dataclasses.replace(c, preserve_first=preserve_first, **summary_fields(summarizer, c))
        self._trigger: tuple[Clause, ...]
        if trigger is not None:
            self._trigger = parse_trigger(trigger)
        elif c.max_tokens is not None:
            self._trigger = ((("tokens", c.max_tokens + 1),),)
        elif c.max_messages is not None:
            self._trigger = ((("messages", c.max_messages + 1),),)
        else:
            self._trigger = ()
        self._keep: tuple[str, float]
        if keep is not None:
            self._keep = parse_size(keep, "keep")
        elif c.max_tokens is not None:
            target = c.effective_target_tokens
            self._keep = ("tokens", target if target is not None else c.max_tokens)
        else:
            self._keep = ("messages", c.min_messages)
        kinds = {self._keep[0]}.union(k for clause in self._trigger for k, _ in clause)
        uses_fraction = "fraction" in kinds
        if uses_fraction and mode == "state":
            if model is None:
                raise ValueError(
                    "a ('fraction', f) trigger or keep in state mode needs model=<the agent's chat model> "
                    "(its profile's max_input_tokens is read before the request exists); or use "
                    "mode='request', which reads the request's model"
                )
            if profile_limit(model) is None:
                raise no_profile(model)
        check_keep_within_trigger(
            self._keep, self._trigger, model, keep_given=keep is not None, trigger_given=trigger is not None
        )
        self.summary_memo = summary_memo if summary_memo is not None else SummaryMemo()
        self._reducers: dict[Size | None, MessageReducer] = {}
        self._repair = RequestRepair()
        self._lock = threading.Lock()  # guards _reducers
        # per-thread notes, as many threads as the memo remembers
        threads = self.summary_memo.max_threads
        #: per thread: id of the newest AI message when the last reduction pruned
        self._reduced_at: BoundedMap[Hashable, str | None] = BoundedMap(threads)
        #: per thread and "state"/"request": the ids the last logged repair removed
        self._reported: BoundedMap[Hashable, tuple[str | None, ...]] = BoundedMap(threads)
        #: per thread: what before_model did, for the next model call's record (a model call
        #: that never came is forgotten after ``threads`` others)
        self._pending: BoundedMap[Hashable, _Pending] = BoundedMap(threads)
        #: per thread: the previous model call's messages, for ``ReduceRecord.prefix_tokens``
        self._sent = CacheTracker(threads)
        #: request mode, per thread: the calibration fed with each request sent and the usage its
        #: response reported (the state holds more than was sent, so it cannot calibrate itself)
        self._calibrations: BoundedMap[Hashable, Calibration] = BoundedMap(threads)

    def __repr__(self) -> str:
        """The effective trigger and keep, in the middleware's forms (a trigger fires at ``>=``:
        the reducer's ``max_messages=40`` is ``('messages', 41)``)."""
        return (
            f"ReducerMiddleware(mode={self.mode!r}, trigger={trigger_repr(self._trigger)}, "
            f"keep={self._keep!r})"
        )

    # -- building blocks ---------------------------------------------------------------------

    def _reducer_for(self, keep: Size | None) -> MessageReducer:
        """The reducer applying ``keep`` once triggered (None: nothing triggers, only what cannot
        be sent is pruned). All share the reducer's token counter and its cache."""
        with self._lock:
            r = self._reducers.get(keep)
            if r is None:
                limits: dict[str, Any]
                if keep is None:
                    limits = {"min_messages": 0, "max_messages": None, "max_tokens": None}
                elif keep[0] == "messages":
                    limits = {"min_messages": keep[1], "max_messages": keep[1], "max_tokens": None}
                else:
                    limits = {
                        "min_messages": 0,
                        "max_messages": None,
                        "max_tokens": keep[1],
                        "target_tokens": keep[1],
                    }
                limits.setdefault("target_tokens", None)
                if limits["max_tokens"] is not None:  # counts tokens: with the reducer's counter and cache
                    limits["token_counter"] = self.reducer.token_counter
                # a count-mode reducer never resolves a counter, so never loads tiktoken (or warns)
                r = self._reducers[keep] = MessageReducer(config=dataclasses.replace(self._base, **limits))
            return r

    def _tokens(self, messages: Sequence[Any]) -> int:
        return sum(self.reducer.count_tokens(list(messages))) if messages else 0

    def _calibration(self, key: Hashable) -> Calibration | None:
        """Request mode: the thread's calibration (made on first use); state mode: None (the
        state is what was sent, its AI messages' usage calibrates it)."""
        if self.mode != "request":
            return None
        cal = self._calibrations.get(key)
        if cal is None:
            cal = Calibration()
            previous = self._calibrations.put(key, cal)
            if previous is not None:  # another call of the thread made one meanwhile: keep it
                self._calibrations.put(key, previous)
                cal = previous
        return cal

    def _observe(self, key: Hashable, sent: ModelRequest[Any], response: Any) -> None:
        """Request mode: learn from the usage the response's AI message reports for ``sent``."""
        cal = self._calibration(key)
        if cal is None:
            return
        result = getattr(response, "model_response", response)  # ExtendedModelResponse
        found = getattr(result, "result", None)
        messages = found if isinstance(found, list) else [result]
        for m in messages:
            figure = read_usage(m) if getattr(m, "type", None) == "ai" else None
            if figure is not None:
                cal.observe(sent.messages, figure, model=_model_name(sent.model))
                return

    def _calibrated_tokens(self, messages: Sequence[Any], calibration: Calibration | None) -> int:
        """The tokens the trigger compares: the reducer's counts in the provider's tokens, with
        the calibration's offset (system prompt, tools)."""
        if not messages:
            return 0
        return self.reducer.calibrated_tokens(list(messages), calibration=calibration)

    def _record_tokens(self, messages: Sequence[Any]) -> int:
        """The tokens a ``ReduceRecord`` reports; only counted when ``on_reduce`` receives records,
        so a count-mode middleware without it never counts a token."""
        return self._tokens(messages) if self.on_reduce is not None else 0

    @staticmethod
    def _key(runtime: Any) -> tuple[Hashable, str | None]:
        """``((thread_id, graph namespace), thread_id)``: the memo key a ``ReducingCheckpointSaver``
        uses too (the node's own namespace part dropped)."""
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        ns = getattr(info, "checkpoint_ns", "") or ""
        graph_ns = ns.rsplit("|", 1)[0] if "|" in ns else ""
        return (thread, graph_ns), thread

    def _cleared_view(self, messages: list[Any]) -> tuple[list[Any], tuple[str, ...]]:
        """``messages`` with ``clear_tool_results`` applied to a copy, and the cleared call ids."""
        edit = self.clear_tool_results
        if edit is None or not messages:
            return messages, ()
        view = list(messages)
        edit.apply(view, count_tokens=self._tokens)
        cleared = tuple(
            str(getattr(new, "tool_call_id", ""))
            for old, new in zip(messages, view, strict=True)
            if new is not old and getattr(new, "type", None) == "tool"
        )
        return view, cleared

    def _usage_total(self, key: Hashable, messages: list[Any]) -> int | None:
        """The newest AI message's reported total plus an estimate of the messages after it; None
        when it reports none, or a reduction has happened since it."""
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if getattr(m, "type", None) != "ai":
                continue
            usage = getattr(m, "usage_metadata", None)
            total = usage.get("total_tokens") if isinstance(usage, Mapping) else None
            if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
                return None
            if self._reduced_at.get(key, _NOT_REDUCED) == getattr(m, "id", None):
                return None
            return total + self._tokens(messages[i + 1 :])
        return None

    def _triggered(self, key: Hashable, messages: list[Any], model: Any) -> bool:
        calibration = self._calibration(key)
        counted: int | None = None
        usage: int | None = None
        usage_read = False
        for clause in self._trigger:
            met = True
            for kind, value in clause:
                rkind, threshold = resolve(kind, value, model)
                if rkind == "messages":
                    met = len(messages) >= threshold
                else:
                    if counted is None:
                        counted = self._calibrated_tokens(messages, calibration)
                    if not usage_read:
                        usage, usage_read = self._usage_total(key, messages), True
                    met = counted >= threshold or (usage is not None and usage >= threshold)
                if not met:
                    break
            if met:
                return True
        return False

    def _note_reduction(self, key: Hashable, messages: list[Any], result: ReducerResult) -> None:
        if not result.pruned:
            return
        newest_ai = next(
            (getattr(m, "id", None) for m in reversed(messages) if getattr(m, "type", None) == "ai"), None
        )
        self._reduced_at.put(key, newest_ai)

    def _plan(self, key: Hashable, messages: list[Any], model: Any) -> tuple[MessageReducer, bool]:
        """The reducer to apply to ``messages`` (the trigger measured on the cleared view)."""
        view, _ = self._cleared_view(messages)
        if self._trigger and self._triggered(key, view, model):
            return self._reducer_for(resolve(*self._keep, model)), True
        return self._reducer_for(None), False

    def _log_repair(self, key: Hashable, what: str, removed: Sequence[Any]) -> None:
        """WARNING with the removed ids; the same repair of the same thread again (a request
        repaired at every call, the state left alone) at DEBUG."""
        ids = _ids(removed)
        if not ids:
            return
        repeated = self._reported.put((key, what), ids) == ids
        level = logging.DEBUG if repeated else logging.WARNING
        logger.log(level, "%s repaired before the model call: removed %s", what, list(ids))

    def _emit(self, record: ReduceRecord) -> None:
        if self.on_reduce is None:
            return
        try:
            self.on_reduce(record)
        except Exception:
            logger.exception("on_reduce callback %r failed; the model call goes on", self.on_reduce)

    # -- state mode ----------------------------------------------------------------------------

    def _state_update(
        self, key: Hashable, messages: list[Any], result: ReducerResult, triggered: bool
    ) -> dict[str, Any] | None:
        self._note_reduction(key, messages, result)
        changed = len(result.surviving) != len(messages) or any(
            a is not b for a, b in zip(result.surviving, messages, strict=False)
        )
        self._pending.put(key, _Pending(len(messages), self._record_tokens(messages), result, triggered))
        if not changed:
            return None
        if result.pruned and result.stats.repaired:
            self._log_repair(key, "state", result.pruned)
        elif result.pruned:
            logger.info("state: pruned %d of %d messages", len(result.pruned), len(messages))
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.surviving]}

    def _state_inputs(self, state: Any, runtime: Any) -> tuple[Hashable, list[Any]] | None:
        if self.mode != "state":
            return None
        messages = list(state.get("messages") or []) if isinstance(state, Mapping) else []
        if not messages:
            return None
        key, _ = self._key(runtime)
        return key, messages

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """State mode: reduce the state's messages and write them back when they changed."""
        inputs = self._state_inputs(state, runtime)
        if inputs is None:
            return None
        key, messages = inputs
        run = self._memo_start(key, messages)
        reducer, triggered = self._plan(key, run.messages, self.model)
        with telemetry.entry("middleware", model=_model_name(self.model)):
            result = reducer.reduce(run.messages, namespace=self._namespace(runtime))
        run.record(result)
        return self._state_update(key, messages, result, triggered)

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """State mode: ``before_model`` with the async summarizer and hooks."""
        inputs = self._state_inputs(state, runtime)
        if inputs is None:
            return None
        key, messages = inputs
        run = self._memo_start(key, messages)
        reducer, triggered = self._plan(key, run.messages, self.model)
        with telemetry.entry("middleware", model=_model_name(self.model)):
            result = await reducer.areduce(run.messages, namespace=self._namespace(runtime))
        run.record(result)
        return self._state_update(key, messages, result, triggered)

    def _memo_start(self, key: Hashable, messages: list[Any]) -> Any:
        return self.summary_memo.start(key, messages, preserve_first=self.preserve_first)

    @staticmethod
    def _namespace(runtime: Any) -> Any:
        """What ``on_prune`` hooks receive: ``("memories", thread_id)``, as behind a saver."""
        _, thread = ReducerMiddleware._key(runtime)
        return ("memories", thread)

    # -- every model call ----------------------------------------------------------------------

    def _finish_request(
        self,
        request: ModelRequest[Any],
        key: Hashable,
        thread: str | None,
        before: int,
        tokens_before: int,
        messages: list[Any],
        result: ReducerResult | None,
        triggered: bool,
        *,
        reduced: bool = False,
    ) -> ModelRequest[Any]:
        """Clear, validate and record: the request to send. ``reduced``: ``messages`` is the
        reducer's output, whole by the planner's rules (request mode)."""
        system = request.system_message
        repaired: list[Any] = []
        if self.validate:
            held = [m for m in messages if getattr(m, "type", None) == "system"]
            if held:
                messages = [m for m in messages if getattr(m, "type", None) != "system"]
                system = merge_system(system, held)
            # a reducer's output is planned again only when the next turn after it would change
            # it (a call pending at its end); else only its opening is cut (as CallFlow does)
            if reduced and sendable_next(messages):
                messages, removed = self._repair.opening(messages)
            else:
                messages, removed = self._repair(messages)
            repaired += removed
            answers = trailing_answers(messages)
            if answers:
                repaired += messages[-answers:]
                messages = messages[:-answers]
        messages, cleared = self._cleared_view(messages)
        pruned = result.pruned if result is not None else []
        if pruned and result is not None and result.stats.repaired:  # no trigger: only broken parts went
            repaired, pruned = [*pruned, *repaired], []
        self._log_repair(key, "request", repaired)
        # counted only when on_reduce receives records (as _record_tokens)
        counts = self.reducer.count_tokens(list(messages)) if self.on_reduce is not None and messages else []
        self._emit(
            ReduceRecord(
                mode=self.mode,
                thread_id=thread,
                messages_before=before,
                messages_after=len(messages),
                tokens_before=tokens_before,
                tokens_after=sum(counts),
                triggered=triggered,
                pruned=_ids(pruned),
                cleared=cleared,
                repaired=_ids(repaired),
                summarized=result is not None
                and result.summary is not None
                and any(is_summary_message(m) for m in result.surviving),
                summary_error=result.stats.summary_error if result is not None else None,
                prefix_tokens=self._sent.observe(key, messages, counts) if counts else 0,
            )
        )
        overrides: dict[str, Any] = {}
        if messages is not request.messages:
            overrides["messages"] = messages
        if system is not request.system_message:
            overrides["system_message"] = system
        return request.override(**overrides) if overrides else request

    def _begin(
        self, request: ModelRequest[Any]
    ) -> tuple[Hashable, str | None, list[Any], MemoizedReduction, MessageReducer, bool]:
        key, thread = self._key(request.runtime)
        messages = list(request.messages)
        run = self._memo_start(key, messages)
        reducer, triggered = self._plan(key, run.messages, request.model)
        return key, thread, messages, run, reducer, triggered

    def _state_record(
        self, key: Hashable, request: ModelRequest[Any]
    ) -> tuple[int, int, ReducerResult | None, bool]:
        pending = self._pending.pop(key)
        if pending is None:
            n = len(request.messages)
            return n, self._record_tokens(request.messages), None, False
        return pending.before, pending.tokens_before, pending.result, pending.triggered

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Request mode: reduce the request's messages; both modes: clear and validate them."""
        sent = self._request(request)
        response = handler(sent)
        self._observe(self._key(request.runtime)[0], sent, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """``wrap_model_call`` with the async summarizer and hooks."""
        sent = await self._arequest(request)
        response = await handler(sent)
        self._observe(self._key(request.runtime)[0], sent, response)
        return response

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if self.mode == "state":
            key, thread = self._key(request.runtime)
            before, tokens_before, result, triggered = self._state_record(key, request)
            return self._finish_request(
                request, key, thread, before, tokens_before, list(request.messages), result, triggered
            )
        key, thread, messages, run, reducer, triggered = self._begin(request)
        with telemetry.entry("middleware", thread=thread, model=_model_name(request.model)):
            result = reducer.reduce(
                run.messages, namespace=self._namespace(request.runtime), calibration=self._calibration(key)
            )
        return self._reduced_request(request, key, thread, messages, run, result, triggered)

    async def _arequest(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if self.mode == "state":
            return self._request(request)
        key, thread, messages, run, reducer, triggered = self._begin(request)
        with telemetry.entry("middleware", thread=thread, model=_model_name(request.model)):
            result = await reducer.areduce(
                run.messages, namespace=self._namespace(request.runtime), calibration=self._calibration(key)
            )
        return self._reduced_request(request, key, thread, messages, run, result, triggered)

    def _reduced_request(
        self,
        request: ModelRequest[Any],
        key: Hashable,
        thread: str | None,
        messages: list[Any],
        run: MemoizedReduction,
        result: ReducerResult,
        triggered: bool,
    ) -> ModelRequest[Any]:
        """What ``_request`` and ``_arequest`` do once the request's messages are reduced."""
        run.record(result)
        self._note_reduction(key, messages, result)
        return self._finish_request(
            request,
            key,
            thread,
            len(messages),
            self._record_tokens(messages),
            list(result.surviving),
            result,
            triggered,
            reduced=True,
        )
