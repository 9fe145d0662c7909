"""Retention's I/O, written once: flows (``checkpointers._flow``) of a few operations (load a
thread, delete checkpoints, delete writes, delete blobs, delete a thread, list the threads, read
the newest root ``ts``), which a backend per saver class performs (``backends``), each flow in one
transaction where the store has them. The decisions are ``rules``; a flow only asks for what they
need and deletes what they say.
"""

from __future__ import annotations

from collections.abc import Collection, Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from .rules import (
    BRANCH_GRACE,
    RetentionPlan,
    ThreadState,
    is_idle,
    plan_retention,
    waiting,
)

__all__ = [
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
    "SweptThread",
    "apply_flow",
    "delete_thread_flow",
    "list_threads_flow",
    "retain_flow",
    "sweep_thread_flow",
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


Op = LoadThread | DeleteCheckpoints | DeleteWrites | DeleteBlobs | DeleteThread | ListThreads | NewestTs
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

