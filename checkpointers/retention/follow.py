"""Blobs follow their references through retention: each deletion of a retention flow
(``flows``) maps to the ``checkpointers.offload.ops.DropRefs`` of what it deleted
(``drop_refs_for``), and the blobs those rows named are collected at the end (``Collect``:
each deleted unless another row names it).

Two ways, by where the blobs live:

* ``follow_blobs(flow)``: blobs in the saver's own database. After each deletion the flow
  performs, it also deletes the reference rows, and collects at its end; a backend runs it in the
  flow's one transaction, so checkpoints and their reference rows go together. A flow that
  deletes nothing costs nothing more.
* ``recording(flow, drops)`` then ``drop_refs_flow(drops)``: blobs elsewhere (a ``BaseStore``,
  ``checkpointers.offload.store``). The retention flow runs in the saver's transaction and records
  the ``DropRefs`` of each deletion it performed; only once that transaction has committed are the
  rows dropped and the blobs collected in the blob store (``backends.FollowingBackend``).
  Checkpoints go first, rows second, blobs last: a crash between two steps leaves blobs kept that
  nothing names (collected by the next retention of a thread naming them, or never), never a
  reference to a missing blob.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._flow import Flow, translating
from ..offload.ops import Collect, DropRefs, HasBlobs
from .flows import DeleteCheckpoints, DeleteThread, DeleteWrites

__all__ = ["drop_refs_flow", "drop_refs_for", "follow_blobs", "recording"]


def drop_refs_for(op: Any) -> DropRefs | None:
    """The reference rows a retention operation deletes with what it deletes (None: not a
    deletion of checkpoints, writes or threads)."""
    if isinstance(op, DeleteCheckpoints):
        return DropRefs(op.thread_id, op.ns, tuple(op.ids))
    if isinstance(op, DeleteWrites):
        return DropRefs(op.thread_id, op.ns, tuple(op.ids), writes_only=True)
    if isinstance(op, DeleteThread):
        return DropRefs(op.thread_id)
    return None


def follow_blobs(flow: Flow[Any, Any, Any]) -> Flow[Any, Any, Any]:
    digests: set[str] = set()
    has: list[bool] = []  # asked once, at the first deletion

    def perform(op: Any) -> Flow[Any, Any, Any]:
        result = yield op
        drop = drop_refs_for(op)
        if drop is not None:
            if not has:
                has.append(bool((yield HasBlobs())))
            if has[0]:
                digests.update((yield drop))
        return result

    result = yield from translating(flow, perform)
    if digests:
        yield Collect(tuple(sorted(digests)))
    return result


def recording(flow: Flow[Any, Any, Any], drops: list[DropRefs]) -> Flow[Any, Any, Any]:
    """``flow`` unchanged, appending to ``drops`` the ``DropRefs`` of each deletion once it has been
    performed (one that raised is not recorded). Apply them with ``drop_refs_flow`` after the
    transaction that ran ``flow`` has committed, never when it rolled back."""

    def perform(op: Any) -> Flow[Any, Any, Any]:
        result = yield op
        drop = drop_refs_for(op)
        if drop is not None:
            drops.append(drop)
        return result

    return translating(flow, perform)


def drop_refs_flow(drops: Iterable[DropRefs]) -> Flow[Any, Any, tuple[int, int]]:
    """Delete the reference rows ``drops`` name, then collect the blobs they named; result: (blobs,
    bytes) deleted."""
    digests: set[str] = set()
    for drop in drops:
        digests.update((yield drop))
    if not digests:
        return (0, 0)
    deleted: tuple[int, int] = yield Collect(tuple(sorted(digests)))
    return deleted
