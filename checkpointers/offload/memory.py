"""Blob offload's operations (``ops``) on an ``InMemorySaver``: a dictionary of blobs and one of
reference rows per saver, kept beside it (the saver's own dictionaries are LangGraph's). Every
operation holds one lock, so a collection and a writer never interleave."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .ops import BlobOp, BlobUsage, Collect, DropRefs, HasBlobs, LoadBlobs, Owner, SaveBlobs

__all__ = ["MemoryBlobs", "memory_blobs"]


class MemoryBlobs:
    """The blobs of one in-memory saver: ``blobs`` (digest -> bytes), ``refs`` (owner -> digests)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.refs: dict[Owner, set[str]] = {}
        self.lock = threading.Lock()

    def perform(self, op: BlobOp) -> Any:
        with self.lock:
            if isinstance(op, HasBlobs):
                return True
            if isinstance(op, SaveBlobs):
                self.refs.setdefault(op.owner, set()).update(op.blobs)
                stored = 0
                for digest, data in op.blobs.items():
                    if digest not in self.blobs:
                        self.blobs[digest] = bytes(data)
                        stored += len(data)
                return stored
            if isinstance(op, LoadBlobs):
                return {d: self.blobs[d] for d in op.digests if d in self.blobs}
            if isinstance(op, DropRefs):
                dropped: set[str] = set()
                for owner in list(self.refs):
                    if owner.thread_id != op.thread_id:
                        continue
                    if op.ids is not None and (owner.checkpoint_ns != (op.ns or "")
                                               or owner.checkpoint_id not in op.ids):
                        continue
                    if op.writes_only and not owner.task_id:
                        continue
                    dropped |= self.refs.pop(owner)
                return tuple(sorted(dropped))
            if isinstance(op, Collect):
                named = set().union(*self.refs.values()) if self.refs else set()
                count = size = 0
                for digest in set(op.digests) - named:
                    popped = self.blobs.pop(digest, None)
                    if popped is not None:
                        count, size = count + 1, size + len(popped)
                return (count, size)
            if isinstance(op, BlobUsage):
                if op.thread_id is None:
                    digests = set(self.blobs)
                else:
                    digests = set().union(*(d for o, d in self.refs.items() if o.thread_id == op.thread_id))
                return (len(digests), sum(len(self.blobs.get(d, b"")) for d in digests))
        raise TypeError(f"unknown blob operation {op!r}")


_of: weakref.WeakKeyDictionary[Any, MemoryBlobs] = weakref.WeakKeyDictionary()
_of_lock = threading.Lock()


def memory_blobs(saver: Any, *, create: bool = True) -> MemoryBlobs | None:
    """The blobs kept beside ``saver`` (made on first use when ``create``). A shallow copy of a
    saver (``with_allowlist``'s clone) shares its checkpoint dictionaries, so it shares its blobs."""
    with _of_lock:
        found = _of.get(saver)
        if found is None:
            storage = getattr(saver, "storage", None)
            found = next((b for s, b in _of.items() if storage is not None and s.storage is storage), None)
            if found is None and create:
                found = MemoryBlobs()
            if found is not None:
                _of[saver] = found
        return found
