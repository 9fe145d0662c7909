"""Reducing the messages channel of a checkpoint: the one code path every saver here uses.

``ReducingCheckpointSaver`` and ``CosmosDBSaver(reducer=...)`` both call ``reduce_checkpoint`` /
``areduce_checkpoint``. The rules (see ``../shared/reference/langgraph-checkpoint-facts.md``):

* never mutate the checkpoint given (its list is the live run's list): build new dicts and lists;
* never add or delete keys, never touch versions, ids or metadata;
* the reduction is deterministic and idempotent, so it is applied whenever the channel's value is
  in the checkpoint, also when ``messages_key`` is not in ``new_versions``: row savers (SqliteSaver,
  CosmosDBSaver) store ``channel_values`` whole on every put, and the value there is the live
  run's *full* list. Reducing only new versions let a step that did not touch the messages (a node
  writing another key, the last step of a run) persist and hand the next run the unreduced list.
  Blob savers (InMemorySaver, PostgresSaver) ignore the value of a version they already stored,
  which was this same reduction. ``PutReduction.new_version`` tells the two cases apart, so
  metrics can count each version once;
* a ``DeltaChannel`` messages channel (its value is absent, or a ``_DeltaSnapshot``) is left as it
  is, with one warning per process: its state is rebuilt by replaying writes onto the snapshot,
  and the writes may remove or edit ids a reduced snapshot no longer has. Use ``Annotated[list,
  reducer.as_langgraph_reducer()]`` for such graphs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentstate_reducer import MessageReducer, ReducerResult, ReducerStats

logger = logging.getLogger("agentstate_reducer.checkpointers")

_warned_delta = threading.Event()


@dataclass(frozen=True, slots=True)
class PutReduction:
    """What a put did to the messages channel; passed to ``on_reduce`` callbacks and logged."""

    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    messages_key: str
    #: why nothing was reduced ("absent", "delta channel", "not a list"), or None
    skipped: str | None
    stats: ReducerStats | None = None
    summary: str | None = None
    #: ``messages_key`` was in ``new_versions``. False: the put carries an unchanged version whose
    #: value was reduced again (row savers store it; blob savers keep what they stored for it).
    new_version: bool = True


OnReduce = Callable[[PutReduction], None]


def _messages_or_skip(checkpoint: Mapping[str, Any], key: str) -> Any:
    """The list to reduce, or a ``str`` saying why there is none."""
    values = checkpoint.get("channel_values") or {}
    if key not in values:
        if key in (checkpoint.get("channel_versions") or {}):
            _warn_delta(key)
            return "delta channel"
        return "absent"
    value = values[key]
    if type(value).__name__ == "_DeltaSnapshot":
        _warn_delta(key)
        return "delta channel"
    if not isinstance(value, list):
        return "not a list"
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


def _with_messages(checkpoint: Any, key: str, messages: list[Any]) -> Any:
    values = dict(checkpoint["channel_values"])
    values[key] = messages
    out = dict(checkpoint)
    out["channel_values"] = values
    return out


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


def _apply(checkpoint: Any, key: str, messages: list[Any], result: ReducerResult) -> Any:
    unchanged = len(result.surviving) == len(messages) and all(
        a is b for a, b in zip(result.surviving, messages, strict=True)
    )
    if unchanged:
        return checkpoint
    return _with_messages(checkpoint, key, result.surviving)


def reduce_checkpoint(
    reducer: MessageReducer,
    config: Mapping[str, Any],
    checkpoint: Any,
    new_versions: Mapping[str, Any],
    *,
    messages_key: str = "messages",
    on_reduce: OnReduce | None = None,
) -> tuple[Any, PutReduction]:
    """Return ``(checkpoint to store, report)``; the input checkpoint is never changed."""
    new_version = messages_key in new_versions
    messages = _messages_or_skip(checkpoint, messages_key)
    if isinstance(messages, str):
        return checkpoint, _report(config, checkpoint, messages_key, new_version, messages, None, on_reduce)
    result = reducer.reduce(messages, namespace=_namespace(config))
    out = _apply(checkpoint, messages_key, messages, result)
    return out, _report(config, checkpoint, messages_key, new_version, None, result, on_reduce)


async def areduce_checkpoint(
    reducer: MessageReducer,
    config: Mapping[str, Any],
    checkpoint: Any,
    new_versions: Mapping[str, Any],
    *,
    messages_key: str = "messages",
    on_reduce: OnReduce | None = None,
) -> tuple[Any, PutReduction]:
    """``reduce_checkpoint`` for ``aput``: the summarizer, if any, runs off the event loop."""
    new_version = messages_key in new_versions
    messages = _messages_or_skip(checkpoint, messages_key)
    if isinstance(messages, str):
        return checkpoint, _report(config, checkpoint, messages_key, new_version, messages, None, on_reduce)
    result = await reducer.areduce(messages, namespace=_namespace(config))
    out = _apply(checkpoint, messages_key, messages, result)
    return out, _report(config, checkpoint, messages_key, new_version, None, result, on_reduce)


def _namespace(config: Mapping[str, Any]) -> Any:
    """The namespace hooks receive: ``configurable.memory_namespace``, else ``("memories", thread_id)``."""
    conf = config.get("configurable") or {}
    ns = conf.get("memory_namespace")
    if ns is not None:
        return ns
    return ("memories", conf.get("thread_id"))
