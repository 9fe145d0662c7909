"""Reducing a ``DeltaChannel`` messages channel at put: the value is rebuilt, reduced and stored
as a ``_DeltaSnapshot``.

LangGraph's ``DeltaChannel`` stores the writes that produced a channel, and a checkpoint holds the
value itself only every ``snapshot_frequency`` updates (a ``_DeltaSnapshot``); a load replays the
writes after the newest snapshot through the channel's batch reducer. A saver that reduces such a
channel therefore cannot edit a value in the checkpoint it is given: there is none. Instead, at every
put whose checkpoint updates the channel (``messages_key`` in ``new_versions``, or a snapshot of
LangGraph's own), ``rebuilt_value_flow`` rebuilds the channel's value from storage (the parent
checkpoint's value, or its seed and writes, plus the writes stored at the parent, which produced the
new checkpoint), the reducer reduces it, and the checkpoint is stored with
``_DeltaSnapshot(reduced)``. ``reduced_checkpoint_flow`` is the whole put-time decision, a flow of
``GetTuple``/``GetHistory``/``Reduce`` operations each saver performs with its own reads and its
reducer (``ReducingCheckpointSaver``, the Cosmos DB savers). Invariants:

* a checkpoint that updates the channel holds the reduced value itself, so loading it replays no
  write; a checkpoint that does not update it reads the value of the nearest ancestor that did
  (LangGraph's walk stops there, and no write of the channel lies between). No write is therefore
  ever replayed on top of a reduced value: a write naming a pruned message (an update, a
  ``RemoveMessage``) never reaches a reducer that would reject it (``add_messages`` raises for the
  removal of an unknown id);
* the value is rebuilt with LangGraph's ``_messages_delta_reducer`` (replace by id, append new ids,
  ignore the removal of an id not held, ``REMOVE_ALL_MESSAGES`` and ``Overwrite`` reset), which is
  what deepagents' reducer, LangGraph's own and a batch ``add_messages`` do on any history they
  accept; LangGraph's snapshot in the given checkpoint (the live run's full list, which holds
  messages pruned at earlier puts of the run) is not used, so each message is pruned once;
* writes of one step are replayed in ``writes_sort_key`` order, ``(task_path, task_id, idx)``, as
  the live run applied them; the task paths come from ``put_writes`` calls this process saw
  (``TaskPaths``), a write stored by another process sorts as one without a path;
* a checkpoint that does not update the channel carries the value of its parent as a snapshot
  too (row savers such as SQLite store ``channel_values`` whole; blob savers keep the blob of the
  unchanged version and ignore it), so the newest checkpoint of a thread always holds the reduced
  value and retention may cut every checkpoint before it;
* the writes the rebuilt value comes from are the ones in storage; the only thing remembered in
  process is the value this saver stored at a checkpoint (``StoredValues``), which never changes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.message import _messages_delta_reducer

from .reduction import OnReduce, _report, _with_messages

__all__ = [
    "DeltaMemo",
    "GetHistory",
    "GetTuple",
    "Reduce",
    "StoredValues",
    "TaskPaths",
    "delta_update",
    "holds_list",
    "messages_channel",
    "rebuilt_value_flow",
    "reduced_checkpoint_flow",
    "snapshot",
    "with_snapshot",
]

logger = logging.getLogger("agentstate_reducer.checkpointers")

#: what a checkpoint's ``channel_values`` lacks for a channel it does not hold
_ABSENT: Any = object()


@dataclass(frozen=True, slots=True)
class GetTuple:
    """Read one checkpoint tuple (``get_tuple`` / ``aget_tuple``)."""

    config: RunnableConfig


@dataclass(frozen=True, slots=True)
class GetHistory:
    """Read a channel's seed and writes before a checkpoint (``get_delta_channel_history``)."""

    config: RunnableConfig
    channel: str


@dataclass(frozen=True, slots=True)
class Reduce:
    """Reduce the list ``checkpoint`` holds with the saver's reducer (``reduce_for_put`` or
    ``areduce_for_put``); the result is the checkpoint to store."""

    config: RunnableConfig
    checkpoint: Checkpoint
    new_versions: ChannelVersions


DeltaOp = GetTuple | GetHistory | Reduce


def delta_update(checkpoint: Mapping[str, Any], key: str, new_versions: Mapping[str, Any]) -> bool:
    """The checkpoint updates a ``DeltaChannel`` ``key``: its value is absent although the channel is
    versioned and in ``new_versions``, or it is a ``_DeltaSnapshot`` (LangGraph's cadence)."""
    value = (checkpoint.get("channel_values") or {}).get(key, _ABSENT)
    if isinstance(value, _DeltaSnapshot):
        return True
    return value is _ABSENT and key in new_versions and key in (checkpoint.get("channel_versions") or {})


def snapshot(value: Any) -> _DeltaSnapshot:
    """``value`` as the blob LangGraph reads back without replaying a write."""
    return _DeltaSnapshot(value)


def with_snapshot(checkpoint: Checkpoint, key: str, value: Any) -> Checkpoint:
    """A copy of ``checkpoint`` whose ``key`` holds ``_DeltaSnapshot(value)``; the given one is
    unchanged (its dicts are the live run's)."""
    values = dict(checkpoint["channel_values"])
    values[key] = _DeltaSnapshot(value)
    return {**checkpoint, "channel_values": values}


class TaskPaths:
    """The ``task_path`` of each task whose writes this process stored (bounded, newest kept).

    ``get_tuple`` hands back a checkpoint's pending writes without their task paths, and LangGraph
    applies the writes of one step in ``(task_path, task_id, idx)`` order (parallel tool calls are
    sorted by the position of their ``Send``), so the saver remembers the paths it was given.
    """

    __slots__ = ("_lock", "_paths", "_size")

    def __init__(self, size: int = 4096) -> None:
        self._paths: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def record(self, task_id: str, task_path: str) -> None:
        if not task_path:
            return
        with self._lock:
            self._paths[task_id] = task_path
            self._paths.move_to_end(task_id)
            while len(self._paths) > self._size:
                self._paths.popitem(last=False)

    def sort_key(self, write: PendingWrite, idx: int) -> tuple[str, str, int]:
        return (self._paths.get(write[0], ""), write[0], idx)


class StoredValues:
    """The value this saver stored for the channel at its newest checkpoints (bounded, newest kept),
    by ``(thread_id, checkpoint_ns, checkpoint_id)``: a stored checkpoint never changes, so a put
    whose parent is here carries the value on without reading it back."""

    __slots__ = ("_lock", "_size", "_values")

    def __init__(self, size: int = 1024) -> None:
        self._values: OrderedDict[tuple[Any, str, str], list[Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    @staticmethod
    def _key(config: RunnableConfig, checkpoint_id: str | None = None) -> tuple[Any, str, str] | None:
        conf = config.get("configurable") or {}
        cid = checkpoint_id or conf.get("checkpoint_id")
        return None if not cid else (conf.get("thread_id"), conf.get("checkpoint_ns", ""), str(cid))

    def get(self, config: RunnableConfig) -> list[Any] | None:
        """The value stored at the checkpoint ``config`` names, if this saver stored it."""
        key = self._key(config)
        with self._lock:
            return None if key is None else self._values.get(key)

    def record(self, config: RunnableConfig, checkpoint_id: str, value: list[Any]) -> None:
        key = self._key(config, checkpoint_id)
        if key is None:
            return
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)


def _parent(config: RunnableConfig) -> bool:
    conf = config.get("configurable") or {}
    return bool(conf.get("checkpoint_id"))


#: LangGraph's batch merge for a messages DeltaChannel, typed as DeltaChannel takes it
_MERGE = cast("Callable[[Any, Sequence[Any]], Any]", _messages_delta_reducer)


def messages_channel() -> DeltaChannel[Any]:
    """The ``DeltaChannel`` a messages channel's value is rebuilt with here: LangGraph's messages
    delta reducer, which merges as deepagents', LangGraph's own and a batch ``add_messages`` do on
    any history they accept (module doc)."""
    return DeltaChannel(_MERGE)


def _replayed(seed: Any, writes: Sequence[PendingWrite]) -> list[Any]:
    channel = messages_channel()
    rebuilt = channel.from_checkpoint(seed)
    rebuilt.replay_writes(writes)
    return list(rebuilt.value)


def _step_writes(tup: CheckpointTuple, key: str, paths: TaskPaths) -> list[PendingWrite]:
    """The writes of ``key`` stored at ``tup``, in the order the live run applied them."""
    pending = tup.pending_writes or []
    # idx: a write's position among its task's writes, which get_tuple keeps in order
    seen: dict[str, int] = {}
    keyed: list[tuple[tuple[str, str, int], PendingWrite]] = []
    for write in pending:
        idx = seen.get(write[0], 0)
        seen[write[0]] = idx + 1
        if write[1] == key:
            keyed.append((paths.sort_key(write, idx), write))
    keyed.sort(key=lambda item: item[0])
    return [write for _, write in keyed]


def rebuilt_value_flow(
    config: RunnableConfig, key: str, paths: TaskPaths
) -> Generator[DeltaOp, Any, list[Any] | None]:
    """The value of ``key`` at the checkpoint about to be put with ``config`` (whose
    ``checkpoint_id`` names its parent): the parent's value and the writes stored at the parent,
    replayed. ``[]`` for a thread's first checkpoint; None when the parent is not in storage (the
    put is then left as it is)."""
    if not _parent(config):
        return []
    tup: CheckpointTuple | None = yield GetTuple(config)
    if tup is None:
        return None
    held = tup.checkpoint["channel_values"].get(key, _ABSENT)
    before: list[PendingWrite] = []
    if held is _ABSENT:
        history: DeltaChannelHistory = yield GetHistory(config, key)
        held = history.get("seed", None)
        before = list(history["writes"])
    return _replayed(held, [*before, *_step_writes(tup, key, paths)])


class DeltaMemo:
    """What one saver remembers for its ``DeltaChannel`` puts: task paths and stored values."""

    __slots__ = ("task_paths", "values")

    def __init__(self) -> None:
        self.task_paths = TaskPaths()
        self.values = StoredValues()


def _unchanged(checkpoint: Mapping[str, Any], key: str, new_versions: Mapping[str, Any]) -> bool:
    """A ``DeltaChannel`` ``key`` this checkpoint does not update (nothing stored for it here)."""
    values = checkpoint.get("channel_values") or {}
    return key not in values and key in (checkpoint.get("channel_versions") or {}) and key not in new_versions


def holds_list(checkpoint: Mapping[str, Any], key: str) -> bool:
    """The checkpoint holds ``key``'s value as a list, the common put: ``reduced_checkpoint_flow``
    then yields one ``Reduce`` of the checkpoint and returns its result, so a saver may reduce it
    without driving the flow (a put needing no reduction costs a few microseconds)."""
    values = checkpoint.get("channel_values")
    return values is not None and type(values.get(key)) is list


def reduced_checkpoint_flow(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    key: str,
    memo: DeltaMemo,
    on_reduce: OnReduce | None,
) -> Generator[DeltaOp, Any, Checkpoint]:
    """The checkpoint a saver stores for ``checkpoint``: a list channel reduced as it is (one
    ``Reduce``); a ``DeltaChannel`` rebuilt (``rebuilt_value_flow``), reduced where the checkpoint
    updates it and stored as a snapshot either way. A value that cannot be rebuilt leaves the
    checkpoint as LangGraph gave it (logged): nothing is lost, that put is just not reduced."""
    unchanged = _unchanged(checkpoint, key, new_versions)
    if holds_list(checkpoint, key) or (not unchanged and not delta_update(checkpoint, key, new_versions)):
        reduced: Checkpoint = yield Reduce(config, checkpoint, new_versions)
        return reduced
    value = memo.values.get(config) if unchanged else None
    if value is None:
        try:
            value = yield from rebuilt_value_flow(config, key, memo.task_paths)
        except Exception:
            thread = (config.get("configurable") or {}).get("thread_id")
            logger.exception(
                "could not rebuild DeltaChannel %r of thread %r to reduce it; the checkpoint is "
                "stored unreduced", key, thread,
            )
            return checkpoint
        if value is None:
            return checkpoint
    if unchanged:
        # the parent's value, reduced there: carried so the newest checkpoint holds it
        if on_reduce is not None:
            _report(config, checkpoint, key, False, "delta channel unchanged", None, on_reduce)
    else:
        reduced = yield Reduce(config, _with_messages(checkpoint, key, value), new_versions)
        value = reduced["channel_values"][key]
    assert value is not None
    memo.values.record(config, checkpoint["id"], value)
    return with_snapshot(checkpoint, key, value)

