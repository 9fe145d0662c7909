"""Blob offload's operations (``ops``) in a LangGraph ``BaseStore`` given as
``BlobOffload(store=...)``.

Items: each blob at ``("agentstate_blobs",)``, key its digest, value ``{"data": <base64>, "size":
n}``; each reference row at ``("agentstate_blob_refs", <thread_id, "%" and "." escaped>)``, key
``<ns>\\x1f<checkpoint_id>\\x1f<task_id>`` (each with "%" and "\\x1f" escaped), value
``{"digests": [...]}``; and, so that a collection asks one namespace, each use of a blob at
``("agentstate_blob_users", digest)``, key ``<thread_id>\\x1f<row key>``.

A ``BaseStore`` has no transactions and no conditional delete, so a collection re-checks after it
deletes: it reads the blob, deletes it, and puts it back when a writer named it meanwhile; a writer
records its use before it looks for the blob and stores the blob when it finds none. The blob is
then never lost, but a read of the writer's checkpoint in the moment between the two may find it
missing.

Retention follows the rows here although they live outside the saver's database: every entry point
that deletes checkpoints of a wrapper with ``BlobOffload(store=...)`` (its ``keep_last`` after a
put, ``prune``, ``delete_thread``, ``checkpointers.retention.sweep``, ``compact_store``) finds its
backend through ``retention.backend_for``, which gives it a ``FollowingBackend``: the flow runs in
the saver's transaction and records what it deleted (``retention.follow.recording``), and only
after that transaction commits are those checkpoints' rows dropped and their blobs collected here
(``retention.follow.drop_refs_flow``), sync and async alike. The order is what makes a crash safe:
checkpoints first, then their rows, then the blobs. Stopped between two steps, the store keeps what
nothing needs and loses nothing: rows of deleted checkpoints (dropped with their thread by
``delete_thread`` or a ``sweep``'s ``older_than``) or blobs no row names (collected when a later
deletion drops a row naming them); no stored checkpoint ever names a missing blob. A flow whose
transaction rolls back drops nothing. Retention run on the bare inner saver (not the wrapper)
cannot see this store and leaves its rows and blobs in place.
"""

from __future__ import annotations

import base64
from typing import Any

from .ops import BlobOp, BlobUsage, Collect, DropRefs, HasBlobs, LoadBlobs, Owner, SaveBlobs

__all__ = ["StoreBlobs"]

BLOBS = ("agentstate_blobs",)
_SEP = "\x1f"
_PAGE = 500


def _part(text: str) -> str:
    """``text`` without the separator, one to one (``"%"`` and ``"\x1f"`` escaped)."""
    return text.replace("%", "%25").replace(_SEP, "%1F")


def _unpart(text: str) -> str:
    return text.replace("%1F", _SEP).replace("%25", "%")


def _row_key(owner: Owner) -> str:
    return _SEP.join(_part(p) for p in (owner.checkpoint_ns, owner.checkpoint_id, owner.task_id))


def _label(text: str) -> str:
    """``text`` as a namespace label a ``BaseStore`` accepts (no ".", never empty), one to one."""
    return text.replace("%", "%25").replace(".", "%2E") or "%"


def _rows_ns(thread_id: str) -> tuple[str, ...]:
    return ("agentstate_blob_refs", _label(thread_id))


def _users_ns(digest: str) -> tuple[str, ...]:
    return ("agentstate_blob_users", digest)


def _wanted(op: DropRefs, key: str) -> bool:
    ns, checkpoint_id, task_id = (_unpart(p) for p in key.split(_SEP))
    if op.ids is not None and (ns != (op.ns or "") or checkpoint_id not in op.ids):
        return False
    return not (op.writes_only and not task_id)


class StoreBlobs:
    """Performs blob operations on ``store`` (``perform`` sync, ``aperform`` async)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def perform(self, op: BlobOp) -> Any:
        s = self.store
        if isinstance(op, HasBlobs):
            return True
        if isinstance(op, SaveBlobs):
            key = _row_key(op.owner)
            s.put(_rows_ns(op.owner.thread_id), key, {"digests": sorted(op.blobs)})
            for digest in op.blobs:
                s.put(_users_ns(digest), op.owner.thread_id + _SEP + key, {})
            stored = 0
            for digest, data in op.blobs.items():
                if s.get(BLOBS, digest) is None:
                    s.put(BLOBS, digest, {"data": base64.b64encode(data).decode(), "size": len(data)})
                    stored += len(data)
            return stored
        if isinstance(op, LoadBlobs):
            out = {}
            for digest in op.digests:
                item = s.get(BLOBS, digest)
                if item is not None:
                    out[digest] = base64.b64decode(item.value["data"])
            return out
        if isinstance(op, DropRefs):
            dropped: set[str] = set()
            for item in self._all(_rows_ns(op.thread_id)):
                if _wanted(op, item.key):
                    digests = item.value.get("digests", [])
                    for digest in digests:
                        s.delete(_users_ns(digest), op.thread_id + _SEP + item.key)
                    s.delete(_rows_ns(op.thread_id), item.key)
                    dropped.update(digests)
            return tuple(sorted(dropped))
        if isinstance(op, Collect):
            count = size = 0
            for digest in op.digests:
                if s.search(_users_ns(digest), limit=1):
                    continue
                item = s.get(BLOBS, digest)
                if item is None:
                    continue
                s.delete(BLOBS, digest)
                if s.search(_users_ns(digest), limit=1):  # named meanwhile: put it back
                    s.put(BLOBS, digest, item.value)
                    continue
                count, size = count + 1, size + int(item.value.get("size", 0))
            return (count, size)
        if isinstance(op, BlobUsage):
            if op.thread_id is None:
                items = self._all(BLOBS)
                return (len(items), sum(int(i.value.get("size", 0)) for i in items))
            digests = {d for i in self._all(_rows_ns(op.thread_id)) for d in i.value.get("digests", [])}
            sizes = [s.get(BLOBS, d) for d in digests]
            return (sum(i is not None for i in sizes), sum(int(i.value.get("size", 0)) for i in sizes if i))
        raise TypeError(f"unknown blob operation {op!r}")

    def _all(self, ns: tuple[str, ...]) -> list[Any]:
        out: list[Any] = []
        while True:
            page = self.store.search(ns, limit=_PAGE, offset=len(out))
            out.extend(i for i in page if tuple(i.namespace) == ns)
            if len(page) < _PAGE:
                return out

    async def aperform(self, op: BlobOp) -> Any:
        # A BaseStore's sync methods are safe from a worker thread; one code path for both.
        import asyncio

        return await asyncio.to_thread(self.perform, op)
