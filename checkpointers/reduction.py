"""Reducing the messages channel of a checkpoint: the one code path every saver here uses.

``ReducingCheckpointSaver`` and ``CosmosDBSaver(reducer=...)`` call ``reduce_for_put`` /
``areduce_for_put`` on every put: the checkpoint ``reduce_checkpoint`` / ``areduce_checkpoint``
return, with the same logging and ``on_reduce`` calls, the report built only when one of them
uses it; ``reduce_checkpoint`` also returns the report (``compact`` uses it). What a saver promises
its users is in ``docs/savers.md``. Invariants:

* the checkpoint given is never mutated (its list is the live run's list): the result is a new
  dict with new ``channel_values``; no key is added or deleted; versions, ids and metadata are
  untouched; a checkpoint that needs no change is handed back as it is;
* the reduced value has the type the channel had (a tuple channel stays a tuple);
* the reduction is deterministic and idempotent, so it is applied whenever the channel's value is
  in the checkpoint, also when ``messages_key`` is not in ``new_versions`` (row savers store
  ``channel_values`` whole on every put, and that value is the live run's full list);
  ``PutReduction.new_version`` tells the two cases apart;
* a ``DeltaChannel`` messages channel (value absent, or a ``_DeltaSnapshot``) is left as it is,
  with one warning per process: there is no value here to reduce (the savers rebuild it from
  storage first, ``checkpointers.delta``, and hand this module the rebuilt list);
* with a summarizer and a ``SummaryMemo``, the reducer gets the list the memo cut
  (``agentstate_reducer.summary.SummaryMemo`` says how); one memo per saver.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from agentstate_reducer import MessageReducer, ReducerResult, ReducerStats, read_message, telemetry
from agentstate_reducer.summary import MemoizedReduction, SummaryMemo

if TYPE_CHECKING:  # importable without langgraph: the types are only for the checker
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointTuple

__all__ = [
    "OnReduce",
    "PutReduction",
    "StoredOutputs",
    "SummaryMemo",
    "areduce_checkpoint",
    "reduce_checkpoint",
]

logger = logging.getLogger("agentstate_reducer.checkpointers")

_warned_delta = threading.Event()


@dataclass(frozen=True, slots=True)
class PutReduction:
    """What a put did to the messages channel; passed to ``on_reduce`` callbacks and logged."""

    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    messages_key: str
    #: why nothing was reduced ("absent", "delta channel", "not a list or tuple"), or None
    skipped: str | None
    stats: ReducerStats | None = None
    summary: str | None = None
    #: ``messages_key`` was in ``new_versions``. False: the put carries an unchanged version whose
    #: value was reduced again (row savers store it; blob savers keep what they stored for it).
    new_version: bool = True


OnReduce = Callable[[PutReduction], None]


#: what ``_messages_or_skip`` reads for a channel the checkpoint's values lack
_ABSENT: Any = object()


def _messages_or_skip(checkpoint: Mapping[str, Any], key: str) -> list[Any] | tuple[Any, ...] | str:
    """The list or tuple to reduce, or a ``str`` saying why there is none."""
    values = checkpoint.get("channel_values") or {}
    value = values.get(key, _ABSENT)
    if type(value) is list:  # the common case, decided with one type check
        return value
    if value is _ABSENT:
        if key in (checkpoint.get("channel_versions") or {}):
            _warn_delta(key)
            return "delta channel"
        return "absent"
    if type(value).__name__ == "_DeltaSnapshot":
        _warn_delta(key)
        return "delta channel"
    if not isinstance(value, list | tuple):  # never str or bytes: text is not a message list
        return "not a list or tuple"
    return value


def _warn_delta(key: str) -> None:
    if not _warned_delta.is_set():
        _warned_delta.set()
        logger.warning(
            "channel %r looks like a DeltaChannel: this checkpoint holds no value to reduce; "
            "ReducingCheckpointSaver and the Cosmos DB savers rebuild it from storage first, or use "
            "Annotated[list, DeltaChannel(reducer.as_delta_reducer())] to bound such a channel",
            key,
        )


def _is_state_channel(name: str) -> bool:
    """A channel of the graph's state, not one of LangGraph's own (``__start__``, ``branch:to:x``)."""
    return not name.startswith("__") and ":" not in name


def _holds_messages(value: Any) -> bool:
    """The value is a non-empty list or tuple whose first item reads as a message."""
    return isinstance(value, list | tuple) and bool(value) and read_message(value[0]).kind != "unknown"


class AbsentKeyCheck:
    """One saver's check that its ``messages_key`` names a channel: the first root checkpoint
    that lacks that channel while another state channel holds messages logs a warning naming the
    checkpoint's channels and the key (once per saver), since a mistyped key otherwise leaves
    every checkpoint unreduced without a word. Checkpoints without such a channel (the input
    checkpoint holding only ``__start__``, empty values, state written before any message,
    subgraphs with a state of their own) say nothing."""

    __slots__ = ("_lock", "_warned")

    def __init__(self) -> None:
        self._warned = False
        self._lock = threading.Lock()

    def check(self, saver: str, config: RunnableConfig, checkpoint: Checkpoint, key: str) -> None:
        """Warn if ``checkpoint`` lacks ``key`` while another channel holds messages (the first time)."""
        if self._warned:
            return
        values = checkpoint.get("channel_values") or {}
        if key in values or key in (checkpoint.get("channel_versions") or {}):
            return
        conf = config.get("configurable") or {}
        if conf.get("checkpoint_ns", ""):
            return
        channels = sorted(c for c in values if isinstance(c, str) and _is_state_channel(c))
        holding = [c for c in channels if _holds_messages(values[c])]
        if not holding:
            return
        with self._lock:
            if self._warned:
                return
            self._warned = True
        logger.warning(
            "%s: a checkpoint of thread %r has no channel %r (its channels: %s; messages are in %s), "
            "so nothing is reduced; pass messages_key= naming the channel that holds the message "
            "list (warned once per saver)",
            saver, conf.get("thread_id"), key, channels, holding,
        )


def _with_messages(checkpoint: Checkpoint, key: str, messages: list[Any] | tuple[Any, ...]) -> Checkpoint:
    values = dict(checkpoint["channel_values"])
    values[key] = messages
    return cast("Checkpoint", {**checkpoint, "channel_values": values})


def _report(
    config: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    key: str,
    new_version: bool,
    skipped: str | None,
    result: ReducerResult | None,
    on_reduce: OnReduce | None,
) -> PutReduction:
    conf = config.get("configurable") or {}
    report = PutReduction(
        thread_id=conf.get("thread_id"),
        checkpoint_ns=conf.get("checkpoint_ns", ""),
        checkpoint_id=checkpoint.get("id"),
        messages_key=key,
        skipped=skipped,
        stats=result.stats if result is not None else None,
        summary=result.summary if result is not None else None,
        new_version=new_version,
    )
    if result is not None and result.pruned:
        s = result.stats
        # a re-reduced unchanged version repeats an earlier decision: not news at INFO
        logger.log(
            logging.INFO if new_version else logging.DEBUG,
            "reduced %r in thread %r ns %r: %d -> %d messages, tokens %s -> %s",
            key, report.thread_id, report.checkpoint_ns, s.messages_before, s.messages_after,
            s.tokens_before, s.tokens_after,
        )
    if on_reduce is not None:
        try:
            on_reduce(report)
        except Exception:
            logger.exception("on_reduce callback failed; the checkpoint is stored anyway")
    return report


def _memoized(
    reducer: MessageReducer, config: RunnableConfig, messages: list[Any], summary_memo: SummaryMemo | None
) -> MemoizedReduction | None:
    """The ``SummaryMemo``'s start on ``messages``; None without a memo or a summarizer."""
    if summary_memo is None or not _summarizes(reducer):
        return None
    conf = config.get("configurable") or {}
    key = (conf.get("thread_id"), conf.get("checkpoint_ns", ""))
    return summary_memo.start(key, messages, preserve_first=reducer.config.preserve_first)


def _stored(
    checkpoint: Checkpoint,
    key: str,
    value: list[Any] | tuple[Any, ...],
    messages: list[Any],
    memoized: MemoizedReduction | None,
    result: ReducerResult,
) -> Checkpoint:
    """The checkpoint to store once the channel's ``value`` (as the list ``messages``, or the list
    ``memoized`` cut from it) is reduced to ``result``: the very same one when the reducer got
    ``messages`` and kept them whole (O(1) on the hot path; a summary is only injected when
    something is pruned), else a copy holding the surviving messages in the channel's type."""
    whole = True
    if memoized is not None:
        memoized.record(result)
        whole = memoized.messages is messages
    if whole and not result.pruned and len(result.surviving) == len(messages):
        return checkpoint
    surviving = result.surviving
    return _with_messages(checkpoint, key, tuple(surviving) if type(value) is tuple else surviving)


def reduce_checkpoint(
    reducer: MessageReducer,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    *,
    messages_key: str = "messages",
    on_reduce: OnReduce | None = None,
    summary_memo: SummaryMemo | None = None,
) -> tuple[Checkpoint, PutReduction]:
    """Return ``(checkpoint to store, report)``; the input checkpoint is never changed."""
    new_version = messages_key in new_versions
    value = _messages_or_skip(checkpoint, messages_key)
    if isinstance(value, str):
        return checkpoint, _report(config, checkpoint, messages_key, new_version, value, None, on_reduce)
    messages = value if type(value) is list else list(value)  # the reducer takes a list
    memoized = _memoized(reducer, config, messages, summary_memo)
    to_reduce = messages if memoized is None else memoized.messages
    with _entry(config):
        result = reducer.reduce(to_reduce, namespace=_namespace(config))
    stored = _stored(checkpoint, messages_key, value, messages, memoized, result)
    return stored, _report(config, checkpoint, messages_key, new_version, None, result, on_reduce)


async def areduce_checkpoint(
    reducer: MessageReducer,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    *,
    messages_key: str = "messages",
    on_reduce: OnReduce | None = None,
    summary_memo: SummaryMemo | None = None,
) -> tuple[Checkpoint, PutReduction]:
    """``reduce_checkpoint`` for ``aput``: the summarizer, if any, runs off the event loop."""
    new_version = messages_key in new_versions
    value = _messages_or_skip(checkpoint, messages_key)
    if isinstance(value, str):
        return checkpoint, _report(config, checkpoint, messages_key, new_version, value, None, on_reduce)
    messages = value if type(value) is list else list(value)  # the reducer takes a list
    memoized = _memoized(reducer, config, messages, summary_memo)
    to_reduce = messages if memoized is None else memoized.messages
    with _entry(config):
        result = await reducer.areduce(to_reduce, namespace=_namespace(config))
    stored = _stored(checkpoint, messages_key, value, messages, memoized, result)
    return stored, _report(config, checkpoint, messages_key, new_version, None, result, on_reduce)


def reduce_for_put(
    reducer: MessageReducer,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
    summary_memo: SummaryMemo | None,
) -> Checkpoint:
    """The checkpoint ``reduce_checkpoint`` returns, for a saver's ``put``, which drops the report.

    The same logging and ``on_reduce`` calls; the ``PutReduction`` is only built when one of them
    uses it (``on_reduce`` is set, or something was pruned).
    """
    value = _messages_or_skip(checkpoint, messages_key)
    if isinstance(value, str):
        if on_reduce is not None:
            _report(config, checkpoint, messages_key, messages_key in new_versions, value, None, on_reduce)
        return checkpoint
    messages = value if type(value) is list else list(value)  # the reducer takes a list
    memoized = _memoized(reducer, config, messages, summary_memo)
    to_reduce = messages if memoized is None else memoized.messages
    token = _enter(config)  # not a with-block: this runs on every put
    try:
        result = reducer.reduce(to_reduce, namespace=_namespace(config))
    finally:
        telemetry.leave(token)
    stored = _stored(checkpoint, messages_key, value, messages, memoized, result)
    if on_reduce is not None or result.pruned:
        _report(config, checkpoint, messages_key, messages_key in new_versions, None, result, on_reduce)
    return stored


async def areduce_for_put(
    reducer: MessageReducer,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
    summary_memo: SummaryMemo | None,
) -> Checkpoint:
    """``reduce_for_put`` for ``aput``; ``areduce_checkpoint``'s checkpoint."""
    value = _messages_or_skip(checkpoint, messages_key)
    if isinstance(value, str):
        if on_reduce is not None:
            _report(config, checkpoint, messages_key, messages_key in new_versions, value, None, on_reduce)
        return checkpoint
    messages = value if type(value) is list else list(value)  # the reducer takes a list
    memoized = _memoized(reducer, config, messages, summary_memo)
    to_reduce = messages if memoized is None else memoized.messages
    token = _enter(config)
    try:
        result = await reducer.areduce(to_reduce, namespace=_namespace(config))
    finally:
        telemetry.leave(token)
    stored = _stored(checkpoint, messages_key, value, messages, memoized, result)
    if on_reduce is not None or result.pruned:
        _report(config, checkpoint, messages_key, messages_key in new_versions, None, result, on_reduce)
    return stored


def _entry(config: Mapping[str, Any]) -> AbstractContextManager[None]:
    """The telemetry entry of a saver's reduction: ``saver``, for the config's thread."""
    conf = config.get("configurable") or {}
    return telemetry.entry("saver", thread=conf.get("thread_id"))


def _enter(config: Mapping[str, Any]) -> contextvars.Token[Any]:
    """``_entry`` started without a block (``telemetry.enter``): end it with ``telemetry.leave``."""
    conf = config.get("configurable") or {}
    return telemetry.enter("saver", thread=conf.get("thread_id"))


def _summarizes(reducer: MessageReducer) -> bool:
    """The reducer has a summarizer: a ``SummaryMemo`` may cut the list it is given."""
    c = reducer.config
    return c.summarize_fn is not None or c.asummarize_fn is not None


def _namespace(config: Mapping[str, Any]) -> Any:
    """The namespace hooks receive: ``configurable.memory_namespace``, else ``("memories", thread_id)``."""
    conf = config.get("configurable") or {}
    ns = conf.get("memory_namespace")
    if ns is not None:
        return ns
    return ("memories", conf.get("thread_id"))


class _Stored(NamedTuple):
    """What a saver stored for one ``(thread_id, checkpoint_ns)`` at its newest put."""

    checkpoint_id: str
    #: how many messages the stored list holds
    length: int
    #: an estimate of the bytes the entry holds, key included
    size: int


#: the bytes of one entry with its key, but the strings' characters
_ENTRY_BYTES = 320


def _thread_key(conf: Mapping[str, Any]) -> tuple[str, str]:
    # str: a run's config may carry the thread id as the caller gave it (an int), a read the
    # stored one (a str)
    thread, ns = conf.get("thread_id"), conf.get("checkpoint_ns", "")
    return (thread if type(thread) is str else str(thread)), (ns if type(ns) is str else str(ns))


class StoredOutputs:
    """The reduced lists one saver stored, known again when a run reads them back (one entry per
    ``(thread_id, checkpoint_ns)``, the newest puts kept, at most ``max_bytes``; no message held).

    A run's first put receives the stored list deserialized (equal messages, new objects) plus
    the run's input, so the reducer's memo, which recognises objects, would plan it all again.
    Two steps hand the reducer the copy instead, without reading a message:

    * ``after_put``: the checkpoint id this saver stored and the length of its list, the
      reducer's output;
    * ``after_load``: a ``get_tuple`` through this saver that returns that very checkpoint vouches
      for the list it read back as an output of the reducer (``MessageReducer._vouch``).

    The reducer's memo then recognises the copy's objects, in their places, at the start of the
    run's first put, as it recognises its own output: only the messages after them are read. Why
    this is sound: a stored checkpoint is never changed (LangGraph and ``compact`` write new ones),
    so a load of it reads back an equal copy of what was stored, and the vouch is about those
    objects, not about the thread: a write that replaces a message (``update_state``, a node
    returning a message with its id) puts a new object at its place, a ``RemoveMessage`` shifts the
    rest, and a fork or another process's checkpoint is another checkpoint, not vouched for. Each
    of those is reduced in full, as without this memo. The copy's objects must not be edited in
    place (the reducer memo's assumption 1, ``agentstate_reducer/_columns/memo.py``). The vouched
    copy lives in the reducer's memo, so it is a hit as long as that memo keeps it (reductions of
    other threads in between may push it out: the put is then reduced in full)."""

    __slots__ = ("_bytes", "_entries", "_lock", "max_bytes")

    def __init__(self, max_bytes: int = 4 * 2**20) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        # insertion-ordered, each put re-inserting its thread: the first entry is the stalest
        self._entries: dict[tuple[str, str], _Stored] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """The estimated bytes held (at most ``max_bytes``)."""
        return self._bytes

    def after_put(self, saved: RunnableConfig, checkpoint: Checkpoint, key: str) -> None:
        """Note the list the put stored in ``checkpoint`` (under ``saved``'s checkpoint id): the
        reducer's output, the channel reduced by this saver."""
        conf = saved.get("configurable") or {}
        cid = conf.get("checkpoint_id")
        value = checkpoint["channel_values"].get(key)
        thread = _thread_key(conf)
        entry = None
        if cid and (type(value) is list or type(value) is tuple) and value:
            cid = cid if type(cid) is str else str(cid)
            entry = _Stored(cid, len(value), _ENTRY_BYTES + len(cid) + len(thread[0]) + len(thread[1]))
        with self._lock:
            old = self._entries.pop(thread, None)
            held = self._bytes - (old.size if old is not None else 0)
            if entry is not None and entry.size <= self.max_bytes:
                self._entries[thread] = entry
                held += entry.size
                while held > self.max_bytes:
                    held -= self._entries.pop(next(iter(self._entries))).size
            self._bytes = held

    def after_load(self, reducer: MessageReducer, tup: CheckpointTuple | None, key: str) -> None:
        """Vouch for the list ``get_tuple`` read back, if it is the one this saver stored."""
        if tup is None:
            return
        thread = _thread_key(tup.config.get("configurable") or {})
        with self._lock:
            entry = self._entries.get(thread)
        if entry is None or entry.checkpoint_id != tup.checkpoint.get("id"):
            return
        value = (tup.checkpoint.get("channel_values") or {}).get(key)
        if isinstance(value, list | tuple) and len(value) == entry.length:
            reducer._vouch(list(value))


class DefaultMemo:
    """The type of ``DEFAULT_MEMO``: "not given" (a new ``SummaryMemo``), where ``None`` means off."""

    def __repr__(self) -> str:
        return "DEFAULT_MEMO"


DEFAULT_MEMO = DefaultMemo()


def resolve_memo(value: SummaryMemo | DefaultMemo | None) -> SummaryMemo | None:
    """A saver's ``summary_memo`` argument: not given -> a new memo per saver; None -> off."""
    if isinstance(value, DefaultMemo):
        return SummaryMemo()
    if value is not None and not isinstance(value, SummaryMemo):
        raise TypeError(f"summary_memo must be a SummaryMemo or None, got {type(value).__name__}")
    return value
