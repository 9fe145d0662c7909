"""Reducing the messages channel of a checkpoint: the one code path every saver here uses.

``ReducingCheckpointSaver`` and ``CosmosDBSaver(reducer=...)`` both call ``reduce_checkpoint`` /
``areduce_checkpoint``; what a saver promises its users is in ``docs/savers.md``. Invariants:

* the checkpoint given is never mutated (its list is the live run's list): the result is a new
  dict with new ``channel_values``; no key is added or deleted; versions, ids and metadata are
  untouched; a checkpoint that needs no change is handed back as it is;
* the reduced value has the type the channel had (a tuple channel stays a tuple);
* the reduction is deterministic and idempotent, so it is applied whenever the channel's value is
  in the checkpoint, also when ``messages_key`` is not in ``new_versions`` (row savers store
  ``channel_values`` whole on every put, and that value is the live run's full list);
  ``PutReduction.new_version`` tells the two cases apart;
* a ``DeltaChannel`` messages channel (value absent, or a ``_DeltaSnapshot``) is left as it is,
  with one warning per process;
* with a summarizer and a ``SummaryMemo``, the reducer gets the list the memo cut
  (``agentstate_reducer.summary.SummaryMemo`` says how); one memo per saver.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from agentstate_reducer import MessageReducer, ReducerResult, ReducerStats, read_message
from agentstate_reducer.summary import MemoizedReduction, SummaryMemo

if TYPE_CHECKING:  # importable without langgraph: the types are only for the checker
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint

__all__ = ["OnReduce", "PutReduction", "SummaryMemo", "areduce_checkpoint", "reduce_checkpoint"]

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
            "channel %r looks like a DeltaChannel: its checkpoints are left unreduced (editing a "
            "snapshot would not match the replayed writes); use Annotated[list, "
            "reducer.as_langgraph_reducer()] to bound such a channel",
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


class _ReadyPut(NamedTuple):
    """A put whose messages are ready to reduce: what ``_finish`` needs besides the result.

    A ``NamedTuple``, not a dataclass: one is built on every put, and a tuple is the cheapest."""

    config: RunnableConfig
    checkpoint: Checkpoint
    messages_key: str
    new_versions: ChannelVersions
    on_reduce: OnReduce | None
    #: the channel's messages, as a list
    original: list[Any]
    as_tuple: bool
    #: the list to reduce: ``original``, or the list a ``SummaryMemo`` cut from it
    messages: list[Any]
    memoized: MemoizedReduction | None

    @property
    def new_version(self) -> bool:
        return self.messages_key in self.new_versions

    @property
    def namespace(self) -> Any:
        """What the reducer's hooks receive."""
        return _namespace(self.config)


def _prepare(
    reducer: MessageReducer,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
    summary_memo: SummaryMemo | None,
) -> _ReadyPut | str:
    """The put ready to reduce, or why its channel holds nothing to reduce."""
    value = _messages_or_skip(checkpoint, messages_key)
    if isinstance(value, str):
        return value
    as_tuple = isinstance(value, tuple)
    messages: list[Any] = list(value) if isinstance(value, tuple) else value  # the reducer takes a list
    memoized = None
    if summary_memo is not None and _summarizes(reducer):
        conf = config.get("configurable") or {}
        key = (conf.get("thread_id"), conf.get("checkpoint_ns", ""))
        memoized = summary_memo.start(key, messages, preserve_first=reducer.config.preserve_first)
    return _ReadyPut(
        config, checkpoint, messages_key, new_versions, on_reduce, messages, as_tuple,
        memoized.messages if memoized is not None else messages, memoized,
    )


def _skipped(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
    why: str,
) -> PutReduction:
    return _report(config, checkpoint, messages_key, messages_key in new_versions, why, None, on_reduce)


def _finish(put: _ReadyPut, result: ReducerResult) -> Checkpoint:
    """The checkpoint to store once ``put.messages`` is reduced to ``result``."""
    if put.memoized is not None:
        put.memoized.record(result)
    whole = put.messages is put.original and _kept_whole(put.original, result)
    return _stored(put.checkpoint, put.messages_key, result, put.as_tuple, whole)


def _kept_whole(original: list[Any], result: ReducerResult) -> bool:
    """The reducer got the channel's own list and pruned nothing: surviving is that list, message
    for message (a summary is only injected when something is pruned)."""
    return not result.pruned and len(result.surviving) == len(original)


def _stored(
    checkpoint: Checkpoint, key: str, result: ReducerResult, as_tuple: bool, whole: bool
) -> Checkpoint:
    """The checkpoint to store: the very same one when the list was kept ``whole`` (O(1) on the
    hot path), else a copy holding the surviving messages in the channel's type."""
    if whole:
        return checkpoint
    return _with_messages(checkpoint, key, tuple(result.surviving) if as_tuple else result.surviving)


def _reported(put: _ReadyPut, result: ReducerResult) -> PutReduction:
    """The put's report: logged when something was pruned, passed to ``on_reduce``."""
    return _report(
        put.config, put.checkpoint, put.messages_key, put.new_version, None, result, put.on_reduce
    )


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
    put = _prepare(reducer, config, checkpoint, new_versions, messages_key, on_reduce, summary_memo)
    if isinstance(put, str):
        return checkpoint, _skipped(config, checkpoint, new_versions, messages_key, on_reduce, put)
    result = reducer.reduce(put.messages, namespace=put.namespace)
    return _finish(put, result), _reported(put, result)


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
    put = _prepare(reducer, config, checkpoint, new_versions, messages_key, on_reduce, summary_memo)
    if isinstance(put, str):
        return checkpoint, _skipped(config, checkpoint, new_versions, messages_key, on_reduce, put)
    result = await reducer.areduce(put.messages, namespace=put.namespace)
    return _finish(put, result), _reported(put, result)


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
    uses it (``on_reduce`` is set, or something was pruned). A list channel without a summary
    memo to consult (the common put) skips ``_prepare``: bench_savers' put overhead was +2.2%
    with that path and +2.7% without it, in one run of six puts-series each, interleaved.
    """
    value = _plain_list(reducer, checkpoint, messages_key, summary_memo)
    if value is not None:
        result = reducer.reduce(value, namespace=_namespace(config))
        return _plain_done(config, checkpoint, new_versions, messages_key, on_reduce, value, result)
    put = _prepare(reducer, config, checkpoint, new_versions, messages_key, on_reduce, summary_memo)
    if isinstance(put, str):
        return _unreduced(put, config, checkpoint, new_versions, messages_key, on_reduce)
    return _put_done(put, reducer.reduce(put.messages, namespace=put.namespace))


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
    value = _plain_list(reducer, checkpoint, messages_key, summary_memo)
    if value is not None:
        result = await reducer.areduce(value, namespace=_namespace(config))
        return _plain_done(config, checkpoint, new_versions, messages_key, on_reduce, value, result)
    put = _prepare(reducer, config, checkpoint, new_versions, messages_key, on_reduce, summary_memo)
    if isinstance(put, str):
        return _unreduced(put, config, checkpoint, new_versions, messages_key, on_reduce)
    return _put_done(put, await reducer.areduce(put.messages, namespace=put.namespace))


def _summarizes(reducer: MessageReducer) -> bool:
    """The reducer has a summarizer: a ``SummaryMemo`` may cut the list it is given."""
    c = reducer.config
    return c.summarize_fn is not None or c.asummarize_fn is not None


def _plain_list(
    reducer: MessageReducer, checkpoint: Checkpoint, key: str, summary_memo: SummaryMemo | None
) -> list[Any] | None:
    """The channel's list when the reducer gets it as it is (a list, no summary memo to cut it)."""
    values = checkpoint.get("channel_values")
    value = values.get(key) if values else None
    if type(value) is list and (summary_memo is None or not _summarizes(reducer)):
        return value
    return None


def _plain_done(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
    messages: list[Any],
    result: ReducerResult,
) -> Checkpoint:
    """``_put_done`` for a ``_plain_list`` channel, without a ``_ReadyPut``."""
    if on_reduce is not None or result.pruned:
        _report(config, checkpoint, messages_key, messages_key in new_versions, None, result, on_reduce)
    return _stored(checkpoint, messages_key, result, False, _kept_whole(messages, result))


def _put_done(put: _ReadyPut, result: ReducerResult) -> Checkpoint:
    """``_finish``, with the report built only when it is logged or received."""
    out = _finish(put, result)
    if put.on_reduce is not None or result.pruned:
        _reported(put, result)
    return out


def _unreduced(
    why: str,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    messages_key: str,
    on_reduce: OnReduce | None,
) -> Checkpoint:
    """A put with nothing to reduce: the checkpoint as it is, reported only to ``on_reduce``."""
    if on_reduce is not None:
        _skipped(config, checkpoint, new_versions, messages_key, on_reduce, why)
    return checkpoint


def _namespace(config: Mapping[str, Any]) -> Any:
    """The namespace hooks receive: ``configurable.memory_namespace``, else ``("memories", thread_id)``."""
    conf = config.get("configurable") or {}
    ns = conf.get("memory_namespace")
    if ns is not None:
        return ns
    return ("memories", conf.get("thread_id"))


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
