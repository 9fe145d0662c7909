"""Retention's I/O, written once: flows (``checkpointers._flow``) of a few operations (load a
thread, delete checkpoints, delete writes, delete blobs, delete a thread, list the threads, read
the newest root ``ts``), which a backend per saver class performs (``backends``), each flow in one
transaction where the store has them. The decisions are ``rules``; a flow only asks for what they
need and deletes what they say.

``snapshot_flow`` is the other kind: it stores the ``_DeltaSnapshot`` s a plan asks for before
anything is deleted (``rules``, DeltaChannel threads), through the saver's own reads and ``put``
(``ReadCheckpoint``, ``ReadHistory``, ``PutSnapshot``), each committed as the saver commits a put;
a backend runs it with ``snapshots``/``asnapshots``, outside any retention transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.errors import EmptyChannelError

from .rules import (
    BRANCH_GRACE,
    RetentionPlan,
    ThreadState,
    is_idle,
    plan_retention,
    waiting,
)

__all__ = [
    "SNAPSHOT_BUMPS",
    "DeleteBlobs",
    "DeleteCheckpoints",
    "DeleteThread",
    "DeleteWrites",
    "Deleted",
    "Flow",
    "ListThreads",
    "LoadThread",
    "NewestTs",
    "Op",
    "PutSnapshot",
    "ReadCheckpoint",
    "ReadHistory",
    "SweptThread",
    "apply_flow",
    "delete_thread_flow",
    "list_threads_flow",
    "retain_flow",
    "seen_after_bumps",
    "snapshot_flow",
    "sweep_thread_flow",
    "with_snapshots",
]

# -- operations -----------------------------------------------------------------------------------


class LoadThread(NamedTuple):
    thread_id: str


class DeleteCheckpoints(NamedTuple):
    """Delete these checkpoints of one namespace and their writes; result: (checkpoints, writes)."""

    thread_id: str
    ns: str
    ids: tuple[str, ...]


class DeleteWrites(NamedTuple):
    """Delete the writes of these checkpoints (not stored) of one namespace; result: rows deleted."""

    thread_id: str
    ns: str
    ids: tuple[str, ...]


class DeleteBlobs(NamedTuple):
    """Delete these blob versions of one channel, each unless a stored checkpoint names it
    (checked when deleting); result: blobs deleted."""

    thread_id: str
    ns: str
    channel: str
    versions: tuple[str, ...]


class DeleteThread(NamedTuple):
    thread_id: str


class ListThreads(NamedTuple):
    pass


class NewestTs(NamedTuple):
    """The ``ts`` of the thread's newest root checkpoint (None: the thread has none)."""

    thread_id: str


class ReadCheckpoint(NamedTuple):
    """The saver's ``get_tuple`` of one checkpoint (None: not stored)."""

    thread_id: str
    ns: str
    id: str


class ReadHistory(NamedTuple):
    """The saver's ``get_delta_channel_history`` of ``channels`` at the checkpoint ``config`` names."""

    config: RunnableConfig
    channels: tuple[str, ...]


class PutSnapshot(NamedTuple):
    """Store the checkpoint ``stored`` read again, each channel of ``values`` as a
    ``_DeltaSnapshot`` of its value (``with_snapshots``), through the saver's ``put``."""

    stored: CheckpointTuple
    values: Mapping[str, Any]


Op = (LoadThread | DeleteCheckpoints | DeleteWrites | DeleteBlobs | DeleteThread | ListThreads | NewestTs
      | ReadCheckpoint | ReadHistory | PutSnapshot)
Flow = Generator[Op, Any, Any]


@dataclass(frozen=True, slots=True)
class Deleted:
    """What one flow deleted (or, dry, would delete)."""

    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0


# -- flows ----------------------------------------------------------------------------------------


def apply_flow(plan: RetentionPlan) -> Generator[Op, Any, Deleted]:
    checkpoints = writes = blobs = 0
    for ns, ids in plan.checkpoints.items():
        c, w = yield DeleteCheckpoints(plan.thread_id, ns, ids)
        checkpoints += c
        writes += w
    for ns, ids in plan.orphans.items():
        writes += yield DeleteWrites(plan.thread_id, ns, ids)
    for (ns, channel), versions in plan.blobs.items():
        blobs += yield DeleteBlobs(plan.thread_id, ns, channel, versions)
    return Deleted(checkpoints, writes, blobs)


def retain_flow(
    thread_id: str, keep_last: int, protect: Collection[tuple[str, str]] = (), *, dry_run: bool = False,
    branch_grace: timedelta = BRANCH_GRACE,
) -> Generator[Op, Any, Deleted]:
    """Load ``thread_id``, plan its retention, delete what the plan says (unless ``dry_run``)."""
    state = yield LoadThread(thread_id)
    plan = plan_retention(state, keep_last=keep_last, protect=protect, branch_grace=branch_grace)
    if dry_run or plan.empty:
        return Deleted(plan.checkpoint_count, plan.writes, plan.blob_count)
    return (yield from apply_flow(plan))


def delete_thread_flow(thread_id: str, *, dry_run: bool = False) -> Generator[Op, Any, Deleted]:
    state: ThreadState = yield LoadThread(thread_id)
    counts = Deleted(len(state.checkpoints), sum(w.count for w in state.writes))
    if not dry_run:
        yield DeleteThread(thread_id)
    return counts


def list_threads_flow() -> Generator[Op, Any, list[str]]:
    """The ids of every thread stored, sorted."""
    threads = yield ListThreads()
    return sorted(str(t) for t in threads)


class SweptThread(NamedTuple):
    """What ``sweep_thread_flow`` did to one thread (or, dry, would do)."""

    #: "deleted": the whole thread (idle longer than ``older_than``); "trimmed" to ``keep_last``;
    #: "skipped" (``reason`` says why); "kept": nothing to delete
    action: Literal["deleted", "trimmed", "skipped", "kept"]
    deleted: Deleted = Deleted()
    reason: str | None = None


def sweep_thread_flow(
    thread_id: str, older_than: timedelta | None, keep_last: int | None, now: datetime, dry_run: bool,
    force: bool, branch_grace: timedelta = BRANCH_GRACE,
) -> Generator[Op, Any, SweptThread]:
    """One thread of a ``sweep``: skipped while its latest checkpoint has pending writes (unless
    ``force``), deleted whole when idle longer than ``older_than``, else trimmed to ``keep_last``
    by the rules of ``rules``."""
    ts = yield NewestTs(thread_id)
    state: ThreadState = yield LoadThread(thread_id)
    if not force and waiting(state):
        return SweptThread(
            "skipped", reason="its latest checkpoint has pending writes (a step ran or an interrupt waits)"
        )
    if is_idle(ts, older_than, now):
        if not dry_run:
            yield DeleteThread(thread_id)
        return SweptThread("deleted", Deleted(len(state.checkpoints), sum(w.count for w in state.writes)))
    if keep_last is None:
        return SweptThread("kept")
    plan = plan_retention(state, keep_last=keep_last, now=now, branch_grace=branch_grace)
    if plan.empty:
        return SweptThread("kept")
    if dry_run:
        return SweptThread("trimmed", Deleted(plan.checkpoint_count, plan.writes, plan.blob_count))
    return SweptThread("trimmed", (yield from apply_flow(plan)))



# -- snapshots at the cut (DeltaChannel threads) ---------------------------------------------------

#: a rebuilt channel with no value: nothing to store a snapshot of
_EMPTY: Any = object()


def _rebuilt(spec: DeltaChannel[Any], history: DeltaChannelHistory | None) -> Any:
    """The value LangGraph rebuilds from ``history`` with the channel ``spec`` (its ``_replay``)."""
    seed = history.get("seed", None) if history is not None else None
    channel = spec.from_checkpoint(seed)
    channel.replay_writes(history["writes"] if history is not None else ())
    try:
        return channel.get()
    except EmptyChannelError:
        return _EMPTY


#: ``versions_seen`` key under which LangGraph records the versions moved on only to store a
#: snapshot (a stored format: its ``versions_seen_without_bumps`` reads it back to infer
#: ``update_state``'s node): ``"<node>|<channel>"`` -> the version moved to, ``"<node>:<channel>"``
#: -> the version the node really read
SNAPSHOT_BUMPS = "__snapshot_bumps__"


def seen_after_bumps(
    versions_seen: Mapping[str, Mapping[str, Any]], bumped: Mapping[str, tuple[Any, Any]]
) -> dict[str, dict[str, Any]]:
    """``versions_seen`` once each channel of ``bumped`` (channel -> (old version, new version))
    moved on only to store a snapshot: a node that had seen the old version sees the new one (a
    snapshot is not a write: resuming reruns no subscriber and re-fires no ``interrupt_before``),
    and ``SNAPSHOT_BUMPS`` records the move and, the first time, the version the node really read.
    A channel with no old version was never seen by any node: nothing moves. The given mapping
    is unchanged.

    >>> seen_after_bumps({"a": {"m": 1}, "b": {"m": 0}}, {"m": (1, 2)})
    {'a': {'m': 2}, 'b': {'m': 0}, '__snapshot_bumps__': {'a:m': 1, 'a|m': 2}}
    """
    marks = dict(versions_seen.get(SNAPSHOT_BUMPS) or {})
    out = {node: dict(seen) for node, seen in versions_seen.items() if node != SNAPSHOT_BUMPS}
    for node, seen in out.items():
        for channel, (old, new) in bumped.items():
            if old is None or seen.get(channel) != old:
                continue
            moved, read = f"{node}|{channel}", f"{node}:{channel}"
            if marks.get(moved) != old:  # else an earlier bump moved it: the read is recorded
                marks[read] = old
            marks[moved] = new
            seen[channel] = new
    if marks:
        out[SNAPSHOT_BUMPS] = marks
    return out


def with_snapshots(
    checkpoint: Checkpoint, values: Mapping[str, Any], next_version: Callable[[Any, None], Any]
) -> tuple[Checkpoint, dict[str, Any]]:
    """``checkpoint`` with each channel of ``values`` stored as ``_DeltaSnapshot(value)`` at a new
    version (``next_version``: the saver's ``get_next_version``), and those new versions (the
    ``new_versions`` of its ``put``). The new version leaves the blob the old one names as it is
    for the checkpoints after this one that name it; ``versions_seen`` moves on with it as
    LangGraph's own snapshot bumps do. The given checkpoint is unchanged."""
    versions = dict(checkpoint["channel_versions"])
    bumped: dict[str, tuple[Any, Any]] = {}
    for name in values:
        old = versions.get(name)
        versions[name] = next_version(old, None)
        bumped[name] = (old, versions[name])
    channel_values = {**checkpoint["channel_values"],
                      **{name: _DeltaSnapshot(value) for name, value in values.items()}}
    seen = seen_after_bumps(checkpoint["versions_seen"], bumped)
    new: Checkpoint = {**checkpoint, "channel_values": channel_values, "channel_versions": versions,
                       "versions_seen": seen}
    return new, {name: versions[name] for name in values}


def snapshot_flow(
    thread_id: str, keep_last: int, channels: Mapping[str, DeltaChannel[Any]],
    protect: Collection[tuple[str, str]] = (), *, branch_grace: timedelta = BRANCH_GRACE,
    now: datetime | None = None,
) -> Generator[Op, Any, int]:
    """Store the snapshots retention of ``thread_id`` asks for (``plan_retention(rebuildable=)``):
    at each checkpoint, the value each of its rebuilt ``channels`` has there, read through the
    saver (its ``get_delta_channel_history``) and replayed by the channel as LangGraph replays it.
    Returns how many checkpoints were stored again. A checkpoint gone meanwhile, or a channel that
    rebuilds empty there, is left as it is: retention then keeps its ancestors."""
    state: ThreadState = yield LoadThread(thread_id)
    plan = plan_retention(state, keep_last=keep_last, protect=protect, now=now,
                          branch_grace=branch_grace, rebuildable=channels.keys())
    written = 0
    for ns, points in plan.snapshots.items():
        for cid, names in points.items():
            stored: CheckpointTuple | None = yield ReadCheckpoint(thread_id, ns, cid)
            if stored is None:
                continue
            histories: Mapping[str, DeltaChannelHistory] = yield ReadHistory(
                stored.config, tuple(sorted(names))
            )
            values = {name: _rebuilt(channels[name], histories.get(name)) for name in sorted(names)}
            if any(v is _EMPTY for v in values.values()):
                continue
            yield PutSnapshot(stored, values)
            written += 1
    return written
