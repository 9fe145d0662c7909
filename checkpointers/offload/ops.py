"""The operations of blob offload, performed by a saver's backend (``checkpointers.retention.
backends``) in the saver's own database, or by ``checkpointers.offload.store`` in a ``BaseStore``.

A blob is stored bytes keyed by their SHA-256 (hex). A *reference row* says that one owner names a
blob: an owner is a stored checkpoint (``task_id`` ``""``) or the pending writes of one task on a
checkpoint (``task_id`` the task's id), so the rows of a checkpoint go when it goes. A blob is
deleted (``Collect``) only when no reference row names it, and every backend makes that check safe
against a writer adding a row for the same blob at the same moment (each backend's docstring says
how).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["BlobOp", "BlobUsage", "Collect", "DropRefs", "HasBlobs", "LoadBlobs", "Owner", "SaveBlobs"]


class Owner(NamedTuple):
    """What names a blob: a checkpoint (``task_id == ""``) or one task's writes on it."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str = ""


class SaveBlobs(NamedTuple):
    """Record that ``owner`` names each of ``blobs`` (digest -> bytes), storing the blobs not yet
    stored; result: the bytes newly stored."""

    owner: Owner
    blobs: Mapping[str, bytes]


class LoadBlobs(NamedTuple):
    """The stored bytes of these digests (digest -> bytes; a digest not stored is absent)."""

    digests: tuple[str, ...]


class DropRefs(NamedTuple):
    """Delete the reference rows of a thread's checkpoints: of ``ids`` in namespace ``ns`` (both
    None: the whole thread); ``writes_only``: the rows of their writes only. Result: the digests
    the deleted rows named."""

    thread_id: str
    ns: str | None = None
    ids: tuple[str, ...] | None = None
    writes_only: bool = False


class Collect(NamedTuple):
    """Delete each of these blobs that no reference row names; result: (blobs, bytes) deleted."""

    digests: tuple[str, ...]


class BlobUsage(NamedTuple):
    """(blobs, bytes) stored for ``thread_id`` (the distinct blobs its rows name), or for the
    whole store (None)."""

    thread_id: str | None = None


class HasBlobs(NamedTuple):
    """Whether this store holds offloaded blobs at all (their tables or items exist)."""


BlobOp = SaveBlobs | LoadBlobs | DropRefs | Collect | BlobUsage | HasBlobs
BLOB_OPS = (SaveBlobs, LoadBlobs, DropRefs, Collect, BlobUsage, HasBlobs)

EMPTY: Mapping[str, bytes] = {}
