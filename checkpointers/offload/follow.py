"""Blobs follow their references through retention: ``follow_blobs(flow)`` is a retention flow
(``checkpointers.retention.flows``) that, after each deletion it performs, also deletes the
reference rows of what was deleted, and at its end collects the blobs those rows named
(``ops.Collect``: each deleted unless another row names it). A backend runs it in the flow's one
transaction, so checkpoints and their reference rows go together; a flow that deletes nothing
costs nothing more."""

from __future__ import annotations

from typing import Any

from .._flow import Flow, translating
from ..retention.flows import DeleteCheckpoints, DeleteThread, DeleteWrites
from .ops import Collect, DropRefs, HasBlobs

__all__ = ["follow_blobs"]


def follow_blobs(flow: Flow[Any, Any, Any]) -> Flow[Any, Any, Any]:
    digests: set[str] = set()
    has: list[bool] = []  # asked once, at the first deletion

    def perform(op: Any) -> Flow[Any, Any, Any]:
        result = yield op
        drop: DropRefs | None = None
        if isinstance(op, DeleteCheckpoints):
            drop = DropRefs(op.thread_id, op.ns, tuple(op.ids))
        elif isinstance(op, DeleteWrites):
            drop = DropRefs(op.thread_id, op.ns, tuple(op.ids), writes_only=True)
        elif isinstance(op, DeleteThread):
            drop = DropRefs(op.thread_id)
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
