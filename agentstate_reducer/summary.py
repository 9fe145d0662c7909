"""The running summary: one marked message that replaces the history the reducer pruned.

With ``ReducerConfig(inject_summary=True, summarize_fn=...)`` a reduction that prunes puts ONE
summary message into ``surviving``, right after the leading block: the system prompt (and any
system or unknown-role messages at the start), index 0 with ``preserve_first`` (with the tool
results of its calls, so a tool group is never split). It carries the stable id ``SUMMARY_ID`` and
a marker (``SUMMARY_MARKER``, holding how many conversation messages it covers), so the next
reduction recognises it in that place:

* it stays (it is planned around: never pruned as an ordinary message). Like every pinned message
  it counts in the trigger (``max_messages`` / ``max_tokens``), and in token mode its tokens come
  off ``target_tokens``; in count mode it takes none of the ``min_messages`` slots. The first
  summary is added after planning, so it can push ``tokens_after`` over the target once
  (``stats.over_target`` says so); from then on its size is reserved;
* when the next reduction prunes, the summarizer receives ``[previous summary, *newly pruned]``, so
  the new summary rolls the old one forward; the new message replaces the old one, which is
  reported first in ``pruned``. Summaries never accumulate, whatever role the factory gives them.

``surviving`` and ``pruned`` then partition *the input plus the injected summary*. An empty summary
is not injected (the previous one, if any, stays). Without ``inject_summary`` nothing here applies:
the summary is only returned on the result.

The default message (``default_summary_message``) is a user turn in the shape of the input; why a
user turn, and what to do for APIs that demand strict user/assistant alternation, is in
``docs/summaries.md``.

The reducer calls this module between planning and applying: to recognise and build summary
messages, and to call the summarizer (in a worker thread or on a private event loop when a timeout
or an async-only summarizer needs one). ``SummaryMemo`` is per-conversation state kept by callers
that reduce the same growing list again and again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .messages import MessageInfo, read_message
from .planner import Plan

if TYPE_CHECKING:
    from .config import ReducerConfig

#: The id every injected summary message carries (LangGraph's ``add_messages`` replaces by id).
SUMMARY_ID: Final = "agentstate-summary"
#: Marker key: in ``additional_kwargs`` for LangChain messages and LangChain-style dicts, a
#: top-level key for OpenAI-style dicts (``add_messages`` moves unknown keys into
#: ``additional_kwargs``, where it is found again). Its value is ``{"count": N}``.
SUMMARY_MARKER: Final = "agentstate_summary"
#: The default message's prefix; the text after it is the summarizer's output.
SUMMARY_PREFIX: Final = "Summary of the earlier conversation"

# Kinds the planner pins; leading messages of these kinds stay in front of the summary.
_LEADING_PINNED_KINDS: Final = frozenset({"system", "unknown"})
_LANGCHAIN_ROLE_NAMES: Final = frozenset({"human", "ai", "system", "tool"})


# -- recognising ---------------------------------------------------------------------------------


def _marker(msg: Any) -> Any:
    """The marker value of ``msg`` (None when absent), in any supported shape."""
    try:
        if isinstance(msg, Mapping):
            if SUMMARY_MARKER in msg:
                return msg[SUMMARY_MARKER]
            body = msg
            for wrapper in ("data", "kwargs"):  # messages_to_dict / dumpd forms
                if isinstance(msg.get(wrapper), Mapping):
                    body = msg[wrapper]
            extra = body.get("additional_kwargs")
        else:
            extra = getattr(msg, "additional_kwargs", None)
        if isinstance(extra, Mapping):
            return extra.get(SUMMARY_MARKER)
    except Exception:  # a hostile __getattr__ must not break a reduction (read_message does the same)
        return None
    return None


def is_summary_message(msg: Any, info: MessageInfo | None = None) -> bool:
    """True for a summary message injected by this package (marker or the reserved id)."""
    if _marker(msg) is not None:
        return True
    info = info if info is not None else read_message(msg)
    return info.id == SUMMARY_ID


def summary_count(msg: Any) -> int:
    """How many conversation messages a summary message covers (0 when it does not say)."""
    marker = _marker(msg)
    count = marker.get("count") if isinstance(marker, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0


# -- building ------------------------------------------------------------------------------------


def summary_content(text: str, count: int) -> str:
    return f"{SUMMARY_PREFIX} ({count} messages):\n{text}"


def default_summary_message(text: str, count: int, *, like: Any = None) -> Any:
    """The default summary message (a user turn), in the shape of the message ``like``: a LangChain
    ``HumanMessage`` for LangChain objects, ``{"role": "user"}`` for OpenAI/Anthropic-style dicts
    (``{"role": "human"}`` when they use LangChain role names), ``{"type": "human"}`` for
    LangChain-style dicts, the serialized forms for serialized input, else an OpenAI-style dict."""
    content = summary_content(text, count)
    marker = {SUMMARY_MARKER: {"count": count}}
    if like is not None and not isinstance(like, Mapping):
        try:
            from langchain_core.messages import BaseMessage, HumanMessage
        except ImportError:  # pragma: no cover - objects without langchain_core: fall back to a dict
            pass
        else:
            if isinstance(like, BaseMessage):
                return HumanMessage(content=content, id=SUMMARY_ID, additional_kwargs=marker)
    if isinstance(like, Mapping):
        body = {"content": content, "id": SUMMARY_ID, "additional_kwargs": marker}
        if like.get("type") == "constructor" and isinstance(like.get("kwargs"), Mapping):
            return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
                    "kwargs": {"type": "human", **body}}
        if "role" not in like and isinstance(like.get("data"), Mapping):
            return {"type": "human", "data": {"type": "human", **body}}
        if "role" not in like and isinstance(like.get("type"), str):
            return {"type": "human", **body}
        role = like.get("role")
        user = "human" if isinstance(role, str) and role.lower() in _LANGCHAIN_ROLE_NAMES else "user"
        return {"role": user, "content": content, "id": SUMMARY_ID, **marker}
    # OpenAI SDK objects and other duck-typed messages: an OpenAI-style dict
    return {"role": "user", "content": content, "id": SUMMARY_ID, **marker}


def _stamp(msg: Any, count: int) -> Any:
    """A copy of a factory's message carrying ``SUMMARY_ID`` and the marker (never mutates it)."""
    marker = {"count": count}
    if isinstance(msg, Mapping):
        if "role" in msg or "type" not in msg:  # OpenAI-style dict: a top-level marker
            return {**msg, "id": SUMMARY_ID, SUMMARY_MARKER: marker}
        wrapper = next((k for k in ("data", "kwargs") if isinstance(msg.get(k), Mapping)), None)
        body = msg[wrapper] if wrapper is not None else msg
        extra = body.get("additional_kwargs")
        extra = extra if isinstance(extra, Mapping) else {}
        body = {**body, "id": SUMMARY_ID, "additional_kwargs": {**extra, SUMMARY_MARKER: marker}}
        return {**msg, wrapper: body} if wrapper is not None else body
    copy = getattr(msg, "model_copy", None)
    extra = getattr(msg, "additional_kwargs", None)
    if callable(copy) and isinstance(extra, Mapping):  # LangChain messages (pydantic models)
        return copy(update={"id": SUMMARY_ID, "additional_kwargs": {**extra, SUMMARY_MARKER: marker}})
    raise TypeError(
        f"summary_message_factory returned a {type(msg).__name__}; return one message: a dict or a "
        "LangChain message (the reducer adds the summary id and marker to a copy of it)"
    )


def build_summary_message(
    text: str, count: int, *, like: Any, factory: Callable[[str, int], Any] | None
) -> Any:
    """The summary message to inject: ``factory(text, count)`` (stamped) or the default."""
    if factory is None:
        return default_summary_message(text, count, like=like)
    msg = factory(text, count)
    if isinstance(msg, list | tuple):
        raise TypeError(
            "summary_message_factory must return ONE message, got a "
            f"{type(msg).__name__} of {len(msg)}; one summary message replaces the previous one"
        )
    return _stamp(msg, count)


def shape_template(messages: Sequence[Any]) -> Any:
    """The message whose shape the default summary copies: the first human message, else the first
    message (summaries skipped). Reads only up to the first human message."""
    first = None
    for m in messages:
        info = read_message(m)
        if is_summary_message(m, info):
            continue
        if info.kind == "human":
            return m
        if first is None:
            first = m
    return first


def _front(messages: Sequence[Any], preserve_first: bool) -> Iterator[tuple[int, bool]]:
    """``(index, is_summary)`` for each message of the leading block: index 0 with ``preserve_first``
    (and the tool results of its calls), system and unknown-role messages, a provider compaction
    (and the tool results of its calls: a provider ignores what precedes a compaction, so the
    summary goes after it), summary messages. Stops at the first other message, so it reads a
    handful of messages, not the history."""
    first_calls: frozenset[str] = frozenset()
    for i, m in enumerate(messages):
        info = read_message(m)
        if is_summary_message(m, info):
            yield i, True
        elif (i == 0 and preserve_first) or info.compaction:
            first_calls = first_calls | frozenset(info.call_ids)
            yield i, False
        elif info.kind in _LEADING_PINNED_KINDS or (
            info.kind == "tool" and not first_calls.isdisjoint(info.result_ids)
        ):
            yield i, False  # never put the summary between a pinned call and its results
        else:
            return


def leading_summaries(messages: Sequence[Any], *, preserve_first: bool) -> tuple[int, ...]:
    """Indices of the summary messages in the leading block (where the reducer puts its summary)."""
    return tuple(i for i, is_summary in _front(messages, preserve_first) if is_summary)


def insert_position(messages: Sequence[Any], *, preserve_first: bool) -> int:
    """The index just past the leading block of ``messages`` (summaries in it included): where the
    summary goes in a list without one."""
    pos = 0
    for i, _ in _front(messages, preserve_first):
        pos = i + 1
    return pos


def without(items: Sequence[Any], indices: Sequence[int]) -> list[Any]:
    """``items`` minus the (ascending) ``indices``, built from slices."""
    out: list[Any] = []
    prev = 0
    for i in indices:
        out += items[prev:i]
        prev = i + 1
    out += items[prev:]
    return out


@dataclass(frozen=True, slots=True)
class Held:
    """The injected summary messages of a list (``hold``), held out of it while it is planned:
    they stay pinned, count in the trigger, and in token mode their tokens come off the target."""

    indices: tuple[int, ...] = ()

    def out(self, items: list[Any]) -> list[Any]:
        """``items`` (the messages, their costs or their readings) without the held ones."""
        return without(items, self.indices) if self.indices else items

    def back(self, plan: Plan, cost: int) -> Plan:
        """A plan made without the held messages mapped back to the whole list, them kept;
        ``cost``: what they cost (their number in count mode)."""
        if not self.indices:
            return plan
        return Plan(
            tuple(sorted([*map(self._place, plan.kept), *self.indices])),
            plan.triggered,
            plan.over_target,
            plan.cost_before,
            plan.cost_after + cost,
            covered=self._place(plan.covered) if plan.covered else 0,
        )

    def _place(self, k: int) -> int:
        """Index ``k`` of the list without the held messages, in the whole list."""
        for h in self.indices:  # a few leading indices: shift past each one at or before k
            if h <= k:
                k += 1
        return k


NOT_HELD: Final = Held()


def hold(messages: Sequence[Any], config: ReducerConfig) -> Held:
    """The injected summary of ``messages`` to hold out (only with ``inject_summary``)."""
    if not config.inject_summary:
        return NOT_HELD
    return Held(leading_summaries(messages, preserve_first=config.preserve_first))


def with_summary(messages: Sequence[Any], summary: Any, *, preserve_first: bool) -> list[Any]:
    """``messages`` without their leading summaries, with ``summary`` after the leading block."""
    rest = without(messages, leading_summaries(messages, preserve_first=preserve_first))
    pos = insert_position(rest, preserve_first=preserve_first)
    return [*rest[:pos], summary, *rest[pos:]]


# -- calling the summarizer ----------------------------------------------------------------------


def _checked(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"the summarizer must return a str, got {type(text).__name__}")
    return text


def _in_thread(fn: Callable[[], Any], timeout: float | None, what: str) -> Any:
    """Run ``fn`` in a daemon thread and wait at most ``timeout`` s. A sync call cannot be
    interrupted: on timeout it keeps running, and its result is discarded."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, name="agentstate-summarizer", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"{what} did not return within {timeout} s (summary_timeout)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def summarize(config: ReducerConfig, messages: list[Any]) -> str:
    """Call the summarizer from sync code, honouring ``summary_timeout``.

    With only ``asummarize_fn`` set, the coroutine runs on a private event loop in a worker thread
    (the caller may itself be inside a running loop)."""
    timeout = config.summary_timeout
    if config.summarize_fn is not None:
        fn = config.summarize_fn
        if timeout is None:
            return _checked(fn(messages))
        return _checked(_in_thread(lambda: fn(messages), timeout, "summarize_fn"))
    afn = config.asummarize_fn
    assert afn is not None

    async def call() -> Any:
        if timeout is None:
            return await afn(messages)
        try:
            return await asyncio.wait_for(afn(messages), timeout)
        except asyncio.TimeoutError:  # a distinct class before Python 3.11
            raise TimeoutError(f"asummarize_fn did not return within {timeout} s (summary_timeout)") from None

    return _checked(_in_thread(lambda: asyncio.run(call()), None, "asummarize_fn"))


async def asummarize(config: ReducerConfig, messages: list[Any]) -> str:
    """Call the summarizer from async code: ``asummarize_fn`` if set, else ``summarize_fn`` off the
    event loop; ``summary_timeout`` applies to both (a timed-out sync call keeps its thread)."""
    timeout = config.summary_timeout
    if config.asummarize_fn is not None:
        pending = config.asummarize_fn(messages)
    else:
        assert config.summarize_fn is not None
        pending = asyncio.to_thread(config.summarize_fn, messages)
    if timeout is None:
        return _checked(await pending)
    try:
        return _checked(await asyncio.wait_for(pending, timeout))
    except asyncio.TimeoutError:
        raise TimeoutError(f"the summarizer did not return within {timeout} s (summary_timeout)") from None


# -- remembering what the running summary covers -------------------------------------------------


class _Reduced(Protocol):
    """What ``MemoizedReduction.record`` reads of a reduction's result (a ``ReducerResult``)."""

    @property
    def pruned(self) -> Sequence[Any]: ...

    @property
    def surviving(self) -> Sequence[Any]: ...


def _message_id(msg: Any) -> str | None:
    mid = msg.get("id") if isinstance(msg, Mapping) else getattr(msg, "id", None)
    if isinstance(mid, str) and mid:
        return mid
    return read_message(msg).id  # serialized dict forms keep the id one level down


#: Summaries a coverage remembers besides its base (the newest): a retry starts from one of the
#: last few; an older one is only a miss (the memo is ignored), never a wrong cut.
_MAX_STEPS: Final = 8


@dataclass(frozen=True, slots=True)
class _Coverage:
    """What a conversation's running summary covers since the list its run started from."""

    #: content of the summary message in that starting list (None: it had none)
    base: Any
    #: ids of the messages pruned since then
    covered: frozenset[str]
    #: the summary message now standing for them (None without ``inject_summary``)
    summary: Any
    #: ``(start, end, first, last)``: the covered messages were ``run_list[start:end]``, ``first``
    #: and ``last`` the objects at its ends; None when they were not one contiguous slice
    span: tuple[int, int, Any, Any] | None = None
    #: ``(summary content, ids it covers)`` for ``base`` (no ids) and each summary made since, in
    #: order: a list carrying one of them (stored by a put before a later one failed) still has
    #: the ids covered after it to cut
    steps: tuple[tuple[Any, frozenset[str]], ...] = ()

    def seen_from(self, current: Any) -> _Coverage | None:
        """This coverage for a list whose leading summary has content ``current``: itself when
        that is ``base``; rebased on ``current`` when it is a summary made since (only the ids
        covered after it remain to cut); None when ``current`` is neither."""
        if current == self.base:
            return self
        for i, (content, ids) in enumerate(self.steps):
            if content == current:
                later = tuple((c, k - ids) for c, k in self.steps[i:])
                return _Coverage(current, self.covered - ids, self.summary, None, later)
        return None


class SummaryMemo:
    """Remembers, per conversation, what the running summary already covers, so a summarizer (and
    each ``on_prune`` hook) sees a pruned message once although the caller reduces the run's full
    list again and again (a checkpoint saver on every put, a middleware on every model call).

    Use: ``run = memo.start(key, messages, preserve_first=...)``, reduce ``run.messages`` (the list
    with the covered messages cut out and the summary standing for them in), then
    ``run.record(result)``. ``key`` names the conversation (a saver uses ``(thread_id,
    checkpoint_ns)``); only reductions with a summarizer need a memo.

    It is only a cache, bounded to the ``max_threads`` most recently recorded conversations: it
    applies when the list starts from the summary its run started from, or from one of the last
    summaries it made since, and holds every id covered after that summary (the same run, a
    retried call, a run retried after a failed put); it is ignored otherwise (a new run starts
    from the stored list, which carries the newest summary; a fork or replay from a list without
    those ids). A reduction is recorded when it is made, so a summary made for a put that then
    failed is not asked for again: the retry, from the list the last good put stored, gets it in
    place of the messages it covers, and the summarizer sees each message once. Messages need
    ids; a batch with an id-less message is not remembered. Thread-safe.
    """

    def __init__(self, max_threads: int = 1024) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be an int >= 1, got {max_threads!r}")
        self.max_threads = max_threads
        self._coverage: OrderedDict[Hashable, _Coverage] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._coverage)

    def start(self, key: Hashable, messages: list[Any], *, preserve_first: bool) -> MemoizedReduction:
        """Begin one reduction of conversation ``key``'s ``messages`` (never changed): its
        ``messages`` is the list to reduce, ``messages`` itself when the memo does not apply."""
        leading = leading_summaries(messages, preserve_first=preserve_first)
        current = read_message(messages[leading[0]]).content if leading else None
        with self._lock:
            coverage = self._coverage.get(key)
            if coverage is not None:
                self._coverage.move_to_end(key)
        seen = coverage.seen_from(current) if coverage is not None else None
        if seen is not None and seen.covered:
            cut = _cut(messages, leading, seen, preserve_first)
            if cut is not None:
                return MemoizedReduction(self, key, messages, cut, preserve_first, seen)
        nothing = _Coverage(current, frozenset(), None, None, ((current, frozenset()),))
        return MemoizedReduction(self, key, messages, messages, preserve_first, nothing)

    def _store(self, key: Hashable, coverage: _Coverage | None) -> None:
        with self._lock:
            if coverage is None:
                self._coverage.pop(key, None)
                return
            self._coverage[key] = coverage
            self._coverage.move_to_end(key)
            while len(self._coverage) > self.max_threads:
                self._coverage.popitem(last=False)


def _cut(
    messages: list[Any], leading: tuple[int, ...], coverage: _Coverage, preserve_first: bool
) -> list[Any] | None:
    """``messages`` without the covered ones, the recorded summary in place of the leading ones;
    None when ``messages`` is not the list the coverage was recorded on (a fork, a replay, another
    run)."""
    span = coverage.span
    if span is not None and _same_run(messages, span, preserve_first):
        # The run's list grows at the end and keeps its objects: the covered messages are the
        # slice they were, so the list is cut there without reading its messages.
        head, tail = messages[: span[0]], messages[span[1] :]
        if coverage.summary is None:
            return head + tail
        return with_summary(without(head, leading) + tail, coverage.summary, preserve_first=preserve_first)
    if not coverage.covered <= {_message_id(m) for m in messages}:
        return None
    if coverage.summary is None:  # no injection: only drop what was pruned
        return [m for m in messages if _message_id(m) not in coverage.covered]
    rest = [m for m in without(messages, leading) if _message_id(m) not in coverage.covered]
    return with_summary(rest, coverage.summary, preserve_first=preserve_first)


def _same_run(messages: list[Any], span: tuple[int, int, Any, Any], preserve_first: bool) -> bool:
    start, end, first, last = span
    return (
        end <= len(messages)
        and messages[start] is first
        and messages[end - 1] is last
        and insert_position(messages, preserve_first=preserve_first) == start
    )


class MemoizedReduction:
    """One reduction through a ``SummaryMemo`` (from ``SummaryMemo.start``): ``messages`` is the
    list to reduce; ``record(result)`` remembers what the reduction pruned."""

    __slots__ = ("_key", "_memo", "_original", "_preserve_first", "_start", "messages")

    def __init__(
        self,
        memo: SummaryMemo,
        key: Hashable,
        original: list[Any],
        messages: list[Any],
        preserve_first: bool,
        start: _Coverage,
    ) -> None:
        self._memo = memo
        self._key = key
        self._original = original
        self._preserve_first = preserve_first
        #: what the running summary covered when this reduction started (its ``base`` and ``covered``)
        self._start = start
        #: the list to reduce: ``original``, or a new list the memo cut from it
        self.messages = messages

    def record(self, result: _Reduced) -> None:
        """Remember the result of reducing ``messages``: the ids it pruned join the covered ones."""
        if not result.pruned:
            return
        ids = [_message_id(m) for m in result.pruned if not is_summary_message(m)]
        if any(i is None for i in ids):
            self._memo._store(self._key, None)
            return
        leading = leading_summaries(result.surviving, preserve_first=self._preserve_first)
        summary = result.surviving[leading[0]] if leading else None
        covered = self._start.covered.union(i for i in ids if i is not None)
        steps = self._start.steps
        if summary is not None:
            steps = (*steps, (read_message(summary).content, covered))[-_MAX_STEPS:]
        self._memo._store(
            self._key, _Coverage(self._start.base, covered, summary, self._span(covered), steps)
        )

    def _span(self, covered: frozenset[str]) -> tuple[int, int, Any, Any] | None:
        """Where the covered messages sit in the run's list: right after its leading block (the
        oldest messages are pruned first). Walks the covered messages once, when a batch is pruned."""
        run = self._original
        start = insert_position(run, preserve_first=self._preserve_first)
        end = start
        while end < len(run) and _message_id(run[end]) in covered:
            end += 1
        if end - start != len(covered):
            return None
        return start, end, run[start], run[end - 1]
