"""What every framework integration shares, over the one core.

* ``build_reducer``: the reducer an integration runs with, from a ``MessageReducer`` or its
  keyword arguments, the integration's ``preserve_first`` and an optional summarizer.
* ``RequestRepair``: the messages of a model call made sendable by the planner's rules.
* ``ReduceRecord``: what an integration did for one model call (``on_reduce``).
* ``NativeSummaries``: the running summary in a framework's own message class, which may have no
  room for the core's summary id and marker.
* ``RequestWindow``: request mode for messages without ids: what the running summary covers,
  by position in a history that only grows.
* ``CallFlow``: one bounded model call, sync or async, through the pieces above.
* ``Calibrations``: each conversation's token calibration, fed with the request it sent last and
  the usage the framework reported for it.
* ``responses_summary_item``/``responses_summary_text``: the running summary as an OpenAI
  Responses item, for ``NativeSummaries`` (the Agents SDK session and ``reduce_request``).

Imports only the core; each framework module imports its framework and this module.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import re
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentstate_reducer import telemetry
from agentstate_reducer._columns.structure import same_prefix
from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.cost import CacheTracker
from agentstate_reducer.messages import MessageInfo, read_message
from agentstate_reducer.planner import extend_tail, tail_of
from agentstate_reducer.reducer import MessageReducer, ReducerResult, arun_hook
from agentstate_reducer.summary import (
    SUMMARY_ID,
    SUMMARY_MARKER,
    SUMMARY_PREFIX,
    is_summary_message,
    leading_summaries,
    with_summary,
)
from agentstate_reducer.tokens.calibration import Calibration

from ._bounded import BoundedMap

__all__ = [
    "Calibrations",
    "CallFlow",
    "Mode",
    "NativeSummaries",
    "ReduceRecord",
    "RequestRepair",
    "RequestWindow",
    "build_reducer",
    "message_ids",
    "missing_extra",
    "responses_summary_item",
    "responses_summary_text",
    "sendable_next",
    "trailing_answers",
]

Mode = Literal["state", "request"]

#: The limits of the reducer an integration makes when it is given neither a reducer nor limits.
DEFAULT_LIMITS: Final[Mapping[str, int]] = {"min_messages": 20, "max_messages": 40}


def missing_extra(what: str, package: str, extra: str) -> str:
    """The ImportError text of an integration whose framework is not installed."""
    return (
        f"{what} needs the {package!r} package: install the {extra!r} extra from the "
        f'agentstate-reducer checkout: pip install ".[{extra}]"'
    )


# -- the reducer ---------------------------------------------------------------------------------


def _is_async(fn: Any) -> bool:
    call = fn.__call__ if callable(fn) and not inspect.isfunction(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def summarizer_fields(summarizer: Any, config: ReducerConfig) -> dict[str, Any]:
    """The ``ReducerConfig`` fields for ``summarizer``, a callable ``(messages) -> str`` or an async
    one, replacing the reducer's; with a summarizer (given or the reducer's) the summary is
    injected: it is the running summary that stands for what was pruned."""
    if summarizer is None:
        has = config.summarize_fn is not None or config.asummarize_fn is not None
        return {"inject_summary": has}
    if not callable(summarizer):
        raise TypeError(
            "summarizer must be a callable (messages) -> str or an async callable, "
            f"got {type(summarizer).__name__}"
        )
    if _is_async(summarizer):
        return {"summarize_fn": None, "asummarize_fn": summarizer, "inject_summary": True}
    return {"summarize_fn": summarizer, "asummarize_fn": None, "inject_summary": True}


def build_reducer(
    reducer: MessageReducer | None,
    reducer_kwargs: Mapping[str, Any],
    *,
    preserve_first: bool,
    summarizer: Any = None,
    what: str,
) -> MessageReducer:
    """The reducer ``what`` runs with: ``reducer``, or one made from ``ReducerConfig`` keyword
    arguments (``min_messages=20, max_messages=40`` unless either is given), with
    ``preserve_first`` and the summarizer applied (a new reducer when they change it).

    Raises:
        TypeError: ``reducer`` is no ``MessageReducer``; both it and keyword arguments are given;
            a keyword is no ``ReducerConfig`` field; ``preserve_first`` is no bool; the summarizer
            is not callable.
        ValueError: the keyword arguments are not a valid ``ReducerConfig``.
    """
    if isinstance(reducer, type):
        raise TypeError(
            f"{what}: reducer is the class {reducer.__name__}: pass an instance, MessageReducer(...)"
        )
    if reducer is not None and not isinstance(reducer, MessageReducer):
        raise TypeError(
            f"{what}: reducer must be an agentstate_reducer.MessageReducer, got {type(reducer).__name__}"
        )
    if reducer is not None and reducer_kwargs:
        raise TypeError(
            f"{what}: pass a MessageReducer or its keyword arguments, not both "
            f"(got a reducer and {sorted(reducer_kwargs)})"
        )
    if not isinstance(preserve_first, bool):
        raise TypeError(f"{what}: preserve_first must be a bool, got {preserve_first!r}")
    both = sorted({"summarize_fn", "asummarize_fn"} & set(reducer_kwargs))
    if summarizer is not None and both:
        raise TypeError(f"{what}: pass summarizer= or {both[0]}=, not both (summarizer= replaces it)")
    if reducer is None:
        known = {f.name for f in dataclasses.fields(ReducerConfig)}
        unknown = sorted(set(reducer_kwargs) - known)
        if unknown:
            close = {u: difflib.get_close_matches(u, known, n=1) for u in unknown}
            hints = [f"{u!r} (did you mean {c[0]!r}?)" if c else repr(u) for u, c in close.items()]
            raise TypeError(
                f"{what}: unknown keyword argument(s) {', '.join(hints)}; besides its own arguments "
                f"it takes the fields of agentstate_reducer.ReducerConfig: {sorted(known)}"
            )
        kwargs = dict(reducer_kwargs)
        if "min_messages" not in kwargs and "max_messages" not in kwargs:
            kwargs.update(DEFAULT_LIMITS)
        reducer = MessageReducer(config=ReducerConfig(**kwargs))
    config = reducer.config
    try:
        fields = summarizer_fields(summarizer, config)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None
    fields["preserve_first"] = preserve_first
    if all(getattr(config, name) == value for name, value in fields.items()):
        return reducer
    return MessageReducer(config=dataclasses.replace(config, **fields))


# -- repair --------------------------------------------------------------------------------------

#: stands for the turn after the model call: nothing in the request can wait for a later message
_NEXT_TURN: Final = {"role": "user", "content": "", "id": "agentstate-next-turn"}


class RequestRepair:
    """The conversation messages of a model call, made sendable by the planner's rules.

    The request is planned untriggered, as the reducer repairs a history nothing triggered
    (orphan results, late and second results, dangling calls are pruned), but with a user turn
    after it: the model is being called, so a call at the end still waiting for results is
    dangling, not pending, and a reasoning item at the end has no model output after it. Then the
    request starts at its first user message (a pinned one counts: the task with
    ``preserve_first``), keeping the pinned messages before it (system messages): what else
    precedes it cannot open a request. Without a user message nothing is cut.

    Pure: no hooks, no summarizer, the input list is not mutated; any shape the core reads.

    >>> lead = {"role": "assistant", "content": "left over"}
    >>> orphan = {"role": "tool", "tool_call_id": "y", "content": "r"}
    >>> call = {"role": "assistant", "tool_calls": [{"id": "x", "type": "function",
    ...         "function": {"name": "f", "arguments": "{}"}}]}
    >>> sent, removed = RequestRepair()([lead, {"role": "user", "content": "q"}, orphan, call])
    >>> sent, len(removed)
    ([{'role': 'user', 'content': 'q'}], 3)
    """

    __slots__ = ("_preserve_first", "_reducer")

    def __init__(self, *, preserve_first: bool = False) -> None:
        self._preserve_first = preserve_first
        # count mode with no limit: the reducer always makes the untriggered plan (never warm)
        self._reducer = MessageReducer(
            config=ReducerConfig(min_messages=0, max_messages=None, preserve_first=preserve_first)
        )

    def __call__(self, messages: list[Any]) -> tuple[list[Any], list[Any]]:
        """``(sent, removed)``, each in request order; ``sent`` is ``messages`` itself when
        nothing is removed."""
        if not messages:
            return messages, []
        planned = [*messages, _NEXT_TURN]
        the_plan, _ = self._reducer.plan(planned)
        # the next turn is the newest user message: always kept (the live turn), and last
        kept = list(the_plan.kept)
        assert kept and kept[-1] == len(messages), "the planner dropped the live turn"
        kept.pop()
        chosen = self._opened(messages, kept)
        if len(chosen) == len(messages):
            return messages, []
        return dataclasses.replace(the_plan, kept=chosen, runs=None).split(messages)

    def opening(self, messages: list[Any]) -> tuple[list[Any], list[Any]]:
        """``(sent, removed)`` for ``messages`` that the planner's rules already keep whole (with
        the next turn after them): only the cut before the first user message."""
        chosen = self._opened(messages, list(range(len(messages))))
        if len(chosen) == len(messages):
            return messages, []
        taken = set(chosen)
        return [messages[i] for i in chosen], [m for i, m in enumerate(messages) if i not in taken]

    def _opened(self, messages: Sequence[Any], kept: list[int]) -> list[int]:
        """Of ``kept`` (ascending), the request: from the first user message on, with the
        pinned messages before it. Reads only up to that user message."""
        pinned: list[int] = []
        for j, i in enumerate(kept):
            kind = read_message(messages[i]).kind
            if kind == "human":
                return [*pinned, *kept[j:]] if pinned or j else kept
            if kind == "system" or (self._preserve_first and i == 0):
                pinned.append(i)
        return kept  # no user message: nothing is cut


_NEXT_TURN_READ: Final = (read_message(_NEXT_TURN),)


def sendable_next(reduced: Sequence[Any]) -> bool:
    """Whether ``reduced``, a reducer's output (the planner's rules keep it whole), stays whole
    with the next turn after it; reads only its last group. False means "plan it": a pending
    call at its end, or an item that needs an AI message after it."""
    return extend_tail(tail_of(reduced), _NEXT_TURN_READ) is not None


def _is_answer(message: Any) -> bool:
    info = read_message(message)
    return info.kind == "ai" and not info.call_ids and not info.compaction


def trailing_answers(messages: Sequence[Any]) -> int:
    """How many assistant messages without tool calls end ``messages`` after its last user
    message or tool result (0 when nothing precedes them), in any shape the core reads.

    A model is called after a user message or tool results; an answer at the end is left when
    the repair removed the results after it (a result that came after the model's next message).
    Anthropic takes a final assistant message as a prefill to continue (models with extended
    thinking refuse it), so the request is sent without it: the model answers the turn again.
    """
    n = 0
    for m in reversed(messages):
        if not _is_answer(m):
            break
        n += 1
    return n if n < len(messages) else 0


# -- what an integration did ---------------------------------------------------------------------


def message_ids(messages: Sequence[Any]) -> tuple[str | None, ...]:
    """The ids of ``messages`` as the core reads them (None where a message has none)."""
    return tuple(read_message(m).id for m in messages)


@dataclass(frozen=True, slots=True)
class ReduceRecord:
    """What an integration did for one model call (``on_reduce``).

    ``messages_*``/``tokens_*`` count the conversation messages sent to the model, without the
    system message, before and after the integration changed the request (in state mode "before"
    is the stored history before it was reduced, when it was).
    """

    mode: Mode
    thread_id: str | None
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    #: a trigger fired (by count, tokens or fraction) for this call
    triggered: bool
    #: ids of the messages pruned by the reduction (the replaced summary included)
    pruned: tuple[str | None, ...] = ()
    #: tool call ids whose results were replaced by the placeholder (``clear_tool_results``)
    cleared: tuple[str, ...] = ()
    #: ids of the messages the request validation removed (a broken history)
    repaired: tuple[str | None, ...] = ()
    #: a new running summary was injected
    summarized: bool = False
    #: ``repr`` of the summarizer's error, when it failed (nothing was pruned then)
    summary_error: str | None = None
    #: of ``tokens_after``, the tokens of the leading messages the previous call of the same
    #: thread sent too: the share a prompt cache can serve, before a provider's minimum and steps
    #: (``agentstate_reducer.cost``); 0 for a thread's first call
    prefix_tokens: int = 0


# -- the running summary in a framework's class --------------------------------------------------

_SUMMARY_TEXT: Final = re.compile(re.escape(SUMMARY_PREFIX) + r" \((\d+) messages\):\n")


def core_summary(content: str, count: int) -> dict[str, Any]:
    """The core's summary message for ``content`` (a summary's whole text, header included)."""
    return {"role": "user", "content": content, "id": SUMMARY_ID, SUMMARY_MARKER: {"count": count}}


#: message class -> whether it is a ``Mapping``: an ABC check per message costs more than the
#: rest of ``outward``, and a class's answer does not change
_MAPPING_CLASSES: dict[type, bool] = {dict: True}


def _is_mapping(message: Any) -> bool:
    cls = type(message)
    known = _MAPPING_CLASSES.get(cls)
    if known is None:
        known = _MAPPING_CLASSES[cls] = isinstance(message, Mapping)
    return known


class NativeSummaries:
    """The running summary in a framework's own message class, and back.

    The core knows its summary by an id and a marker, which a framework's message class may have
    no room for. ``inward`` gives the core a history it can read: a native summary (one this
    object made, or any message whose text, by ``text_of``, is a summary's text with its header)
    becomes the core's summary dict. ``outward`` gives the framework its own class again: a core
    summary becomes ``make(content)``. The same content gives the same objects both ways (the
    newest ``max_kept`` contents are kept), so a history keeps its identity from call to call.

    ``text_of(message)`` returns the text of a plain user text message (None for anything else);
    ``make(content)`` builds the user message the framework sends.
    """

    __slots__ = ("_by_content", "_by_native", "_last", "_lock", "_make", "_text_of", "max_kept")

    def __init__(
        self, make: Callable[[str], Any], text_of: Callable[[Any], str | None], *, max_kept: int = 256
    ) -> None:
        self._make = make
        self._text_of = text_of
        self.max_kept = max_kept
        #: summary content -> (core dict, native message)
        self._by_content: OrderedDict[str, tuple[dict[str, Any], Any]] = OrderedDict()
        #: id(native message) -> content, for the natives in ``_by_content``
        self._by_native: dict[int, str] = {}
        # threads share one object (a framework may run its hooks in worker threads)
        self._lock = threading.Lock()
        #: the last ``inward``: its input and its output (copies)
        self._last: tuple[list[Any], list[Any]] = ([], [])

    def _pair(self, content: str, count: int, native: Any = None) -> tuple[dict[str, Any], Any]:
        with self._lock:
            return self._pair_locked(content, count, native)

    def _pair_locked(self, content: str, count: int, native: Any) -> tuple[dict[str, Any], Any]:
        pair = self._by_content.get(content)
        if pair is None:
            pair = (core_summary(content, count), native if native is not None else self._make(content))
            self._by_content[content] = pair
            self._by_native[id(pair[1])] = content
            while len(self._by_content) > self.max_kept:
                _, (_, old) = self._by_content.popitem(last=False)
                self._by_native.pop(id(old), None)
        else:
            self._by_content.move_to_end(content)
        return pair

    def _core_of(self, message: Any) -> dict[str, Any] | None:
        # one dict read is atomic: no lock for the common answer "not one of ours"; the pair
        # check below confirms an id found (an id may be reused once its native is gone)
        content = self._by_native.get(id(message))
        if content is not None:
            with self._lock:
                pair = self._by_content.get(content)
            if pair is not None and pair[1] is message:
                return pair[0]
        try:
            text = self._text_of(message)
        except Exception:  # a message text_of cannot read is no summary
            return None
        if not isinstance(text, str) or not text.startswith(SUMMARY_PREFIX):
            return None
        match = _SUMMARY_TEXT.match(text)
        if match is None:
            return None
        return self._pair(text, int(match.group(1)), native=message)[0]

    def inward(self, messages: Sequence[Any]) -> list[Any]:
        """``messages`` with native summaries as the core's summary dicts (a new list).

        The leading messages that are the very objects the previous call began with are taken
        as they were read then (the reducer's memo assumes the same of an object it has read:
        ``agentstate_reducer._columns.memo``), so a history that grows is read only where it is
        new. One list is remembered, whatever the number of conversations."""
        items = list(messages)
        seen, read = self._last
        start = same_prefix(seen, items)
        out = [*read[:start], *items[start:]] if start else list(items)
        core_of = self._core_of
        for i in range(start, len(out)):
            core = core_of(out[i])
            if core is not None:
                out[i] = core
        self._last = (items, out[:])  # one tuple: threads sharing the object swap it whole
        return out

    def outward(self, messages: Sequence[Any]) -> list[Any]:
        """``messages`` with the core's summary dicts as native messages (a new list)."""
        out = list(messages)
        for i, m in enumerate(out):
            if _is_mapping(m) and is_summary_message(m):
                content = m.get("content")
                if isinstance(content, str):
                    count = m.get(SUMMARY_MARKER, {}).get("count", 0)
                    out[i] = self._pair(content, count if isinstance(count, int) else 0)[1]
        return out

    def speaking_natively(self, reducer: MessageReducer) -> MessageReducer:
        """``reducer`` with its summarizer and ``on_prune`` hooks given the framework's messages
        only: the running summary they see is the native message the history holds, never the
        core's summary dict (``reducer`` itself when it has neither)."""
        config = reducer.config
        sync_fn, async_fn, hooks = config.summarize_fn, config.asummarize_fn, tuple(config.on_prune)
        if sync_fn is None and async_fn is None and not hooks:
            return reducer
        fields: dict[str, Any] = {}
        if sync_fn is not None:
            fields["summarize_fn"] = _NativeCall(self, sync_fn)
        if async_fn is not None:
            fields["asummarize_fn"] = _NativeAsyncCall(self, async_fn)
        if hooks:
            fields["on_prune"] = tuple(_NativeHook(self, hook) for hook in hooks)
        return MessageReducer(config=dataclasses.replace(config, **fields))


class _NativeCall:
    """A summarizer called with the framework's messages (``NativeSummaries.speaking_natively``)."""

    __slots__ = ("fn", "native")

    def __init__(self, native: NativeSummaries, fn: Callable[[list[Any]], Any]) -> None:
        self.native, self.fn = native, fn

    def __call__(self, messages: list[Any]) -> Any:
        return self.fn(self.native.outward(messages))

    def __repr__(self) -> str:
        return repr(self.fn)


class _NativeAsyncCall(_NativeCall):
    """An async summarizer called with the framework's messages."""

    async def __call__(self, messages: list[Any]) -> Any:
        return await self.fn(self.native.outward(messages))


class _NativeHook:
    """An ``on_prune`` hook called with the framework's messages, from sync or async code (an
    async hook, or one with ``acall``, is awaited as the reducer would)."""

    __slots__ = ("hook", "native")

    def __init__(self, native: NativeSummaries, hook: Callable[[list[Any], Any], Any]) -> None:
        self.native, self.hook = native, hook

    def __call__(self, pruned: list[Any], namespace: Any) -> Any:
        return self.hook(self.native.outward(pruned), namespace)

    async def acall(self, pruned: list[Any], namespace: Any) -> None:
        await arun_hook(self.hook, self.native.outward(pruned), namespace)

    def __repr__(self) -> str:
        return repr(self.hook)


# -- request mode without ids --------------------------------------------------------------------


def fingerprint(message: Any) -> int:
    """A hash of everything ``message`` holds, stable within the process: equal messages of one
    class have the same fingerprint. A pydantic model by its JSON (``model_dump_json``), any
    other message by its ``repr`` (a dict's keys in order)."""
    dump = getattr(message, "model_dump_json", None)
    if callable(dump) and not isinstance(message, type):
        try:
            return hash((type(message), dump()))
        except Exception:  # a field pydantic cannot serialize: its repr still says it
            pass
    return hash((type(message), repr(message)))


_Ref = Callable[[], Any]


def _ref(message: Any) -> _Ref | None:
    """A weak reference to ``message``, or None when it takes none (a dict)."""
    try:
        return weakref.ref(message)
    except TypeError:
        return None


#: bytes one covered message costs a window, at most: its fingerprint (8), a slot for its weak
#: reference (8) and the weak reference itself (80 in CPython 3.11), to the object the newest
#: history held
_BYTES_PER_COVERED: Final = 96
#: bytes of one conversation's entry besides its covered messages and summary text
_BYTES_PER_ENTRY: Final = 512


@dataclass(frozen=True, slots=True)
class _Covered:
    """What the running summary of one conversation covers, without holding a message.

    ``prints`` and ``refs`` describe the messages pruned so far (also those the newest history
    lacked), in history order: each one's ``fingerprint``, and a weak reference to the object
    the newest history held for it (None for a dict), so the same object handed over again is
    matched by identity, a copy by its fingerprint.
    """

    prints: array[int]
    refs: tuple[_Ref | None, ...]
    #: the core summary message standing for them (None without a summarizer)
    summary: Any

    def __len__(self) -> int:
        return len(self.prints)

    def weight(self) -> int:
        """The bytes this entry keeps alive, about (the ``RequestWindow`` byte bound)."""
        content = self.summary.get("content") if isinstance(self.summary, Mapping) else None
        text = len(content) if isinstance(content, str) else 0
        live = sum(1 for r in self.refs if r is not None)
        return _BYTES_PER_ENTRY + 16 * len(self.prints) + (_BYTES_PER_COVERED - 16) * live + text


class _Matcher:
    """Compares the messages of one history with covered ones: by identity through a live weak
    reference, else by fingerprint (each history message's computed once, when first needed)."""

    __slots__ = ("items", "prints", "same")

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items
        self.prints: list[int | None] = [None] * len(items)
        #: positions matched by identity
        self.same: set[int] = set()

    def matches(self, k: int, covered: _Covered, n: int) -> bool:
        ref = covered.refs[n]
        item = self.items[k]
        if ref is not None and ref() is item:
            self.same.add(k)
            return True
        found = self.prints[k]
        if found is None:
            found = self.prints[k] = fingerprint(item)
        return found == covered.prints[n]

    def next(self, start: int, covered: _Covered, n: int) -> int | None:
        """The position from ``start`` on of the next message that is covered message ``n``."""
        for k in range(start, len(self.items)):
            if self.matches(k, covered, n):
                return k
        return None


def _find(covered: _Covered, match: _Matcher) -> tuple[list[int], list[int]] | None:
    """Where the ``covered`` messages are in the history: each, in order, is the next one that
    is it or equals it. Returns their positions and the indices (in ``covered``) of those the
    history lacks. Only the newest covered messages may be lacking (a history cut back); None
    when an older one is, or when none is found: an edited or another history."""
    found: list[int] = []
    j = 0
    for n in range(len(covered)):
        k = match.next(j, covered, n)
        if k is None:
            if not found or (n + 1 < len(covered) and match.next(j, covered, n + 1) is not None):
                return None
            return found, list(range(n, len(covered)))
        found.append(k)
        j = k + 1
    return found, []


def _with_calls(items: Sequence[Any], covered: frozenset[int]) -> frozenset[int]:
    """``covered`` without the calls an uncovered result answers in place of a covered result
    the history lacks: a result a framework moved or replaced travels with its call (ADK,
    answering a confirmed call, cuts the history back to the call and sends its real result
    right after it). Only a result in its call's block (nothing but results between them) whose
    call no covered result in the history answers brings the call back; any other result for a
    covered call (replayed, duplicated, late after the next turn) is one the request repair
    drops, and bringing its call back would summarize and archive the call again.

    A block (a message and the results after it) changes nothing unless it holds both covered
    and uncovered messages, so only the blocks across a border of ``covered`` are read: a few
    messages, not the history."""
    if not covered:
        return covered
    infos: dict[int, MessageInfo] = {}

    def info(i: int) -> MessageInfo:
        found = infos.get(i)
        if found is None:
            found = infos[i] = read_message(items[i])
        return found

    uncover: set[int] = set()
    starts: set[int] = set()
    for p in range(1, len(items)):
        if ((p - 1) in covered) == (p in covered) or info(p).kind != "tool":
            continue  # no border, or a border between two blocks
        start = p - 1
        while start > 0 and info(start).kind == "tool":
            start -= 1
        if start in starts:
            continue
        starts.add(start)
        calls: dict[str, int] = {}  # call id -> position of the newest call with it
        answered: set[str] = set()  # call ids of those calls a covered result answers
        block: set[str] = set()  # call ids of the block
        i = start
        while i < len(items) and (i == start or info(i).kind == "tool"):
            m = info(i)
            if i in covered:
                answered.update(m.result_ids)
            else:
                uncover.update(
                    calls[r]
                    for r in m.result_ids
                    if r in block and r not in answered and calls.get(r) in covered
                )
            for c in m.call_ids:
                calls[c] = i
                answered.discard(c)
                block.add(c)
            i += 1
    return covered - uncover if uncover else covered


@dataclass(frozen=True, slots=True)
class WindowView:
    """One request through a ``RequestWindow``: ``messages`` is the list to reduce."""

    key: Hashable
    history: tuple[Any, ...]
    messages: list[Any]
    #: id of each history object in ``messages`` -> its position in the history
    positions: Mapping[int, int]
    #: positions in ``history`` of the messages the running summary covers
    covered: frozenset[int]
    #: covered messages ``history`` lacks: ``(position of the covered one before it, its
    #: fingerprint, its weak reference)``
    missing: tuple[tuple[int, int, _Ref | None], ...] = ()
    #: of ``covered``: position -> ``(fingerprint, weak reference or None)`` as remembered
    known: Mapping[int, tuple[int, _Ref | None]] = dataclasses.field(default_factory=dict)


class RequestWindow:
    """Request mode for a framework that sends its whole stored history at every model call and
    whose messages carry no ids: remembers, per conversation, which messages of that history the
    running summary covers, so the summarizer and ``on_prune`` hooks see each message once and the
    request is the previous request plus the new messages (a stable prefix).

    Use: ``view = window.view(key, history)``, reduce ``view.messages``, then
    ``window.record(view, result)``. The covered messages are found in a later history in order,
    each the same object or an equal one (the same ``fingerprint``), with other messages between
    them or not: a framework may insert one, or cut the history back for one call (ADK, answering
    a long-running call, sends the history cut back to the call, then the whole history with the
    answer moved up to it). The newest covered messages a history lacks stay remembered, and the
    summary stands for them; a history that lacks an older one (edited, rewound) or holds none is
    reduced whole, as the first one was.

    Holds no message: per covered message a fingerprint and a weak reference to the object the
    newest history held (at most 96 bytes), plus the running summary. Bounded to
    the ``max_threads`` most recently recorded conversations and to ``max_bytes`` (default
    16 MiB) for all of them: the least recently recorded go first (a conversation forgotten is
    reduced whole at its next call, as a new one). Thread-safe (a record is a new immutable value).

    Raises:
        ValueError: ``max_threads`` or ``max_bytes`` is not an int >= 1.
    """

    __slots__ = ("_preserve_first", "_seen")

    def __init__(self, *, preserve_first: bool, max_threads: int = 1024, max_bytes: int = 16 << 20) -> None:
        self._preserve_first = preserve_first
        self._seen: BoundedMap[Hashable, _Covered] = BoundedMap(
            max_threads, max_bytes=max_bytes, weigh=_Covered.weight
        )

    def view(self, key: Hashable, history: Sequence[Any]) -> WindowView:
        """The list to reduce for ``history``: without the covered messages, the summary in."""
        items = tuple(history)
        known = self._seen.get(key)
        covered: frozenset[int] = frozenset()
        missing: tuple[tuple[int, int, _Ref | None], ...] = ()
        remembered: dict[int, tuple[int, _Ref | None]] = {}
        summary = None
        if known is not None and len(known):
            match = _Matcher(items)
            where = _find(known, match)
            if where is not None:
                found, lacking = where
                covered, summary = _with_calls(items, frozenset(found)), known.summary
                missing = tuple((found[-1], known.prints[n], known.refs[n]) for n in lacking)
                # a weak reference to the object this history holds: a framework that hands the
                # same objects over again (Agno within a run) is matched by identity next time
                remembered = {
                    k: (known.prints[n], known.refs[n] if k in match.same else _ref(items[k]))
                    for n, k in enumerate(found)
                    if k in covered
                }
        keep = [i for i in range(len(items)) if i not in covered]
        messages = [items[i] for i in keep]
        if summary is not None:
            messages = with_summary(messages, summary, preserve_first=self._preserve_first)
        positions = {id(items[i]): i for i in keep}
        return WindowView(key, items, messages, positions, covered, missing, remembered)

    def record(self, view: WindowView, result: ReducerResult) -> None:
        """Remember what reducing ``view.messages`` pruned."""
        known = self._seen.get(view.key)
        pruned = {view.positions[id(m)] for m in result.pruned if id(m) in view.positions}
        # history order; a lacking message goes where it was: after the covered message before it
        # and the newly pruned ones that follow that one
        after: dict[int, list[tuple[int, _Ref | None]]] = {}
        for before, printed, ref in view.missing:
            after.setdefault(before, []).append((printed, ref))
        entries: list[tuple[int, _Ref | None]] = []
        carry = after.get(-1, [])
        for p in sorted(view.covered | pruned):
            if p in view.covered:
                entries.extend(carry)
                carry = after.get(p, [])
                # a covered message _with_calls brought back and pruned again is fingerprinted anew
                old = view.known.get(p)
                message = view.history[p]
                entries.append(old if old is not None else (fingerprint(message), _ref(message)))
            else:
                message = view.history[p]
                entries.append((fingerprint(message), _ref(message)))
        entries.extend(carry)
        lead = leading_summaries(result.surviving, preserve_first=self._preserve_first)
        summary = result.surviving[lead[0]] if lead else None
        if summary is None and not result.pruned and known is not None and view.covered:
            summary = known.summary
        prints = array("q", (printed for printed, _ in entries))
        self._seen.put(view.key, _Covered(prints, tuple(ref for _, ref in entries), summary))


# -- one model call ------------------------------------------------------------------------------


class Bounded:
    """One bounded model call: what to send, what to store, what happened.

    ``record`` is made when first read (at once when the flow has an ``on_reduce`` callback):
    a call nobody reports on reads no message for it.
    """

    __slots__ = ("_make", "_record", "result", "sent", "stored")

    def __init__(
        self,
        sent: list[Any],
        stored: list[Any] | None,
        result: ReducerResult,
        record: ReduceRecord | Callable[[], ReduceRecord],
    ) -> None:
        #: the messages the model gets (the caller's objects, a native summary in the front)
        self.sent = sent
        #: state mode: the history to store in place of the input when it changed; else None
        self.stored = stored
        self.result = result
        self._record = record if isinstance(record, ReduceRecord) else None
        self._make = None if isinstance(record, ReduceRecord) else record

    @property
    def record(self) -> ReduceRecord:
        """What the integration did for this call."""
        if self._record is None:
            assert self._make is not None
            self._record, self._make = self._make(), None
        return self._record


def _joined(result: ReducerResult, fixed: ReducerResult) -> ReducerResult:
    """``result`` followed by ``fixed``, a reduction of ``result.surviving`` plus the next turn
    (its last message, dropped here): one reduction's surviving, pruned, summary and stats."""
    surviving = list(fixed.surviving[:-1])
    pruned = [*result.pruned, *fixed.pruned]
    stats = dataclasses.replace(
        result.stats,
        messages_after=len(surviving),
        pruned_count=len(pruned),
        summary_error=result.stats.summary_error or fixed.stats.summary_error,
        repaired=result.stats.repaired or (bool(fixed.pruned) and not result.stats.triggered),
    )
    summary = fixed.summary if fixed.summary is not None else result.summary
    return ReducerResult(surviving, pruned, summary, stats)


@dataclass(frozen=True, slots=True)
class _Begun:
    key: Hashable
    thread: str | None
    history: list[Any]
    view: WindowView | None
    messages: list[Any]
    tokens_before: int


class CallFlow:
    """One bounded model call, the same for every framework: read the history (native summaries
    in), reduce it (state mode: the history itself; request mode: through a ``RequestWindow``),
    repair the request, give the summary the framework's class again, record.

    Each message of the history is kept, or reaches the summarizer and ``on_prune`` hooks, once.
    What the request repair removes is still in the framework's history in request mode, and in
    state mode the stored history is the reduction (``Bounded.stored``), which keeps it. With
    ``stores_request`` (state mode for a framework that stores the very list it sends: Pydantic
    AI's run history, CrewAI's executor list) the request is the stored history, so the repair is
    a reduction: what it removes (a trailing call group the model call leaves unanswered, say) is
    pruned through the summarizer and hooks like any pruned message.

    ``bound`` and ``abound`` share every step but the reductions (``reduce`` / ``areduce``, which
    runs the async summarizer and hooks). Thread-safe: one flow may serve many conversations at
    once, each named by its ``key``.
    """

    def __init__(
        self,
        reducer: MessageReducer,
        *,
        mode: Mode,
        validate: bool = True,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        native: NativeSummaries | None = None,
        logger: logging.Logger,
        max_threads: int = 1024,
        stores_request: bool = False,
    ) -> None:
        if mode not in ("state", "request"):
            raise ValueError(f"mode must be 'state' or 'request', got {mode!r}")
        if stores_request and mode != "state":
            raise ValueError("stores_request applies to state mode only")
        if not isinstance(validate, bool):
            raise TypeError(f"validate must be a bool, got {validate!r}")
        if on_reduce is not None and not callable(on_reduce):
            raise TypeError(
                f"on_reduce must be callable(ReduceRecord) or None, got {type(on_reduce).__name__}"
            )
        if native is not None:
            reducer = native.speaking_natively(reducer)
        #: the reducer the flow runs (with ``native``: its summarizer and hooks see native messages)
        self.reducer = reducer
        self.mode: Mode = mode
        self.validate = validate
        self.on_reduce = on_reduce
        self.native = native
        self._logger = logger
        #: the name its reductions report in telemetry spans: the framework's module name
        self.entry = logger.name.rsplit(".", 1)[-1]
        preserve_first = reducer.config.preserve_first
        self._repair = RequestRepair(preserve_first=preserve_first)
        #: stores_request: the repair as a reduction (the reducer's summarizer and hooks, no
        #: trigger), planned with the next turn after the history as ``RequestRepair`` plans it
        self._fixer: MessageReducer | None = None
        if stores_request and validate:
            untriggered = dataclasses.replace(
                reducer.config, min_messages=0, max_messages=None, max_tokens=None, target_tokens=None
            )
            self._fixer = MessageReducer(config=untriggered)
        self._window: RequestWindow | None = None
        if mode == "request":
            self._window = RequestWindow(preserve_first=preserve_first, max_threads=max_threads)
        self._reported: BoundedMap[Hashable, tuple[int, ...]] = BoundedMap(max_threads)
        self._sent = CacheTracker(max_threads)

    def _counts(self, messages: Sequence[Any]) -> tuple[list[Any], list[int]]:
        """The conversation messages (no system message) and their tokens; counted only for
        ``on_reduce``."""
        if self.on_reduce is None or not messages:
            return [], []
        counted = [m for m in messages if read_message(m).kind != "system"]
        return counted, self.reducer.count_tokens(counted)

    def _tokens(self, messages: Sequence[Any]) -> int:
        return sum(self._counts(messages)[1])

    def _begin(self, key: Hashable, thread: str | None, history: Sequence[Any]) -> _Begun:
        items = list(history)
        readable = self.native.inward(items) if self.native is not None else items
        view = self._window.view(key, readable) if self._window is not None else None
        messages = view.messages if view is not None else readable
        return _Begun(key, thread, items, view, messages, self._tokens(items))

    def _end(self, begun: _Begun, result: ReducerResult, fixed: ReducerResult | None = None) -> Bounded:
        """Record, repair and report one call; ``fixed`` is the fixer's reduction of
        ``result.surviving`` (stores_request), whose last message is the next turn."""
        if begun.view is not None:
            assert self._window is not None
            self._window.record(begun.view, result)
        fixes: list[Any] = []
        if fixed is not None:
            fixes = list(fixed.pruned)
            result = _joined(result, fixed)
        surviving = list(result.surviving)
        out = self.native.outward(surviving) if self.native is not None else surviving
        if self._fixer is not None:  # planned by the fixer, or settled: only the opening cut
            sent, removed = self._repair.opening(out)
        elif not self.validate:
            sent, removed = out, []
        else:
            # the reduction's output is whole by the planner's rules: planned again only when the
            # next turn after it would change that (a pending call at its end), else just opened
            sent, removed = self._repair.opening(out) if sendable_next(out) else self._repair(out)
            # an answer the repair (or the reduction's repair) left last, where the history did
            # not end with one: the request goes without it, the stored history keeps it
            answers = trailing_answers(sent)
            if answers and begun.messages and not _is_answer(begun.messages[-1]):
                removed, sent = [*removed, *sent[-answers:]], sent[:-answers]
        stored: list[Any] | None = None
        kept = sent if self._fixer is not None else out
        if self.mode == "state" and (
            len(kept) != len(begun.history)
            or any(a is not b for a, b in zip(kept, begun.history, strict=True))
        ):
            stored = kept
        fixes = [m for m in fixes if not is_summary_message(m)]
        if fixes or removed:
            self._log_repair(begun.key, [*fixes, *removed])
        pruned = [m for m in result.pruned if not any(m is f for f in fixes)]
        repaired = [*fixes, *removed]
        if pruned and result.stats.repaired:  # nothing triggered: only broken parts went
            repaired, pruned = [*pruned, *repaired], []

        def record() -> ReduceRecord:
            counted, counts = self._counts(sent)
            return ReduceRecord(
                mode=self.mode,
                thread_id=begun.thread,
                messages_before=sum(1 for m in begun.history if read_message(m).kind != "system"),
                messages_after=sum(1 for m in sent if read_message(m).kind != "system"),
                tokens_before=begun.tokens_before,
                tokens_after=sum(counts),
                triggered=result.stats.triggered,
                pruned=message_ids(pruned),
                repaired=message_ids(repaired),
                summarized=result.summary is not None
                and any(is_summary_message(m) for m in result.surviving),
                summary_error=result.stats.summary_error,
                prefix_tokens=self._sent.observe(begun.key, counted, counts) if counted else 0,
            )

        if self.on_reduce is None:  # made when read: the counts and the cache tracker need on_reduce
            return Bounded(sent, stored, result, record)
        made = record()
        self._emit(made)
        return Bounded(sent, stored, result, made)

    def _to_fix(self, surviving: list[Any]) -> list[Any] | None:
        """stores_request: the list the fixer reduces (``surviving`` and the next turn) when its
        plan prunes something; None when the request is ``surviving`` as it is. The fixer plans
        once, as ``RequestRepair`` would; the rare list to fix is planned again, with hooks."""
        if self._fixer is None or not surviving or sendable_next(surviving):
            return None
        planned = [*surviving, _NEXT_TURN]
        the_plan, _ = self._fixer.plan(planned)
        return planned if len(the_plan.kept) < len(planned) else None

    def _log_repair(self, key: Hashable, removed: Sequence[Any]) -> None:
        """WARNING with what the repair removed; the same repair of the same conversation again
        (a stored history repaired at every call) at DEBUG."""
        marks = tuple(id(m) for m in removed)
        level = logging.DEBUG if self._reported.put(key, marks) == marks else logging.WARNING
        self._logger.log(
            level,
            "request repaired before the model call: removed %d message(s) %s",
            len(removed),
            list(message_ids(removed)),
        )

    def _emit(self, record: ReduceRecord) -> None:
        if self.on_reduce is None:
            return
        try:
            self.on_reduce(record)
        except Exception:
            self._logger.exception("on_reduce callback %r failed; the model call goes on", self.on_reduce)

    def bound(
        self,
        key: Hashable,
        history: Sequence[Any],
        *,
        thread: str | None = None,
        calibration: Calibration | None = None,
    ) -> Bounded:
        """Bound one model call's ``history``; hooks get the namespace ``("memories", thread)``.
        ``calibration``: the conversation's, when the integration feeds one (``Calibrations``);
        without it token mode calibrates from the usage the history carries."""
        begun = self._begin(key, thread, history)
        namespace = ("memories", thread)
        with telemetry.entry(self.entry, thread=thread):
            result = self.reducer.reduce(begun.messages, namespace=namespace, calibration=calibration)
            fixed = None
            planned = self._to_fix(result.surviving)
            if planned is not None:
                assert self._fixer is not None
                fixed = self._fixer.reduce(planned, namespace=namespace)
        return self._end(begun, result, fixed)

    async def abound(
        self,
        key: Hashable,
        history: Sequence[Any],
        *,
        thread: str | None = None,
        calibration: Calibration | None = None,
    ) -> Bounded:
        """``bound`` with the async summarizer and hooks."""
        begun = self._begin(key, thread, history)
        namespace = ("memories", thread)
        with telemetry.entry(self.entry, thread=thread):
            result = await self.reducer.areduce(begun.messages, namespace=namespace, calibration=calibration)
            fixed = None
            planned = self._to_fix(result.surviving)
            if planned is not None:
                assert self._fixer is not None
                fixed = await self._fixer.areduce(planned, namespace=namespace)
        return self._end(begun, result, fixed)


# -- calibration -----------------------------------------------------------------------------------


class _Fed:
    """One conversation's calibration and the request it sent last, not yet paired with usage."""

    __slots__ = ("calibration", "sent", "source")

    def __init__(self) -> None:
        self.calibration = Calibration()
        self.sent: tuple[Any, ...] = ()
        #: what the last usage paired was read from: the same again is no new call
        self.source: Hashable = None


class Calibrations:
    """Each conversation's token calibration, fed by an integration around its model calls.

    A framework reports a model call's usage after the call, where the integration sees it at the
    next one (the history's newest response, a session event, the LLM's running total).
    ``calibration(key, usage, source=...)`` pairs that usage with the request ``sent(key, ...)``
    recorded last for ``key`` (each request once) and returns the conversation's
    ``Calibration``, or None while it has learned nothing (token mode then calibrates from the
    usage the history carries, if any). A figure the core cannot use (missing, zero, negative,
    non-integer) leaves the last anchor as it was. ``source`` names what the usage was read from
    (a response's id, the object itself): an equal source again (a retried call, a hook run
    twice) pairs nothing.

    One entry per conversation key (at most ``max_threads``, the least recently written
    forgotten), so conversations sharing one integration never mix. Only token mode scales by a
    calibration: for a ``reducer`` in count mode or with calibration off nothing is recorded
    (a server of many conversations would otherwise keep each one's last request). Thread-safe.
    """

    __slots__ = ("_enabled", "_entries", "_lock")

    def __init__(self, reducer: MessageReducer, max_threads: int = 1024) -> None:
        self._enabled = reducer.config.token_mode and reducer.calibrates
        self._entries: BoundedMap[Hashable, _Fed] = BoundedMap(max_threads)
        self._lock = threading.Lock()

    def calibration(self, key: Hashable, usage: Any, *, source: Hashable = None) -> Calibration | None:
        """``key``'s calibration after learning ``usage`` (None: nothing reported) for the request
        it sent last; None when it has no anchor."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        with self._lock:
            fresh = source is None or source != entry.source
            if usage is not None and entry.sent and fresh:
                entry.calibration.observe(entry.sent, usage)
                entry.sent, entry.source = (), source
        return entry.calibration if entry.calibration.anchor is not None else None

    def sent(self, key: Hashable, messages: Sequence[Any]) -> None:
        """Record ``messages`` as the request ``key`` sends now."""
        if not self._enabled:
            return
        entry = self._entries.get(key)
        if entry is None:
            entry = _Fed()
            self._entries.put(key, entry)
        with self._lock:
            entry.sent = tuple(messages)


# -- the running summary as a Responses item ---------------------------------------------------


def responses_summary_item(content: str) -> dict[str, Any]:
    """The running summary as a Responses input item: a plain user message, the shape every model
    of the Agents SDK takes (Responses, Chat Completions, LiteLLM), and the one its runner stores
    for text input."""
    return {"role": "user", "content": content}


def responses_summary_text(item: Any) -> str | None:
    """The text of a user message item (text content, or one ``input_text`` part); None for any
    other item. The running summary is the user message whose text starts with its header."""
    if not isinstance(item, Mapping) or item.get("role") != "user":
        return None
    if item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        if content[0].get("type") == "input_text":
            content = content[0].get("text")
    return content if isinstance(content, str) else None
