"""What the savers store and read back with offload on, as flows of blob operations (``ops``),
written once for sync and async savers (``checkpointers._flow``).

* ``stored_checkpoint_flow``: the copy of a checkpoint to store, its blobs saved first under the
  checkpoint as owner (so a blob is stored before anything names it);
* ``stored_writes_flow``: the same for one task's pending writes;
* ``restored_tuple_flow``: a ``CheckpointTuple`` read back with every reference replaced, each blob
  checked against its digest; a blob missing or corrupt raises ``BlobError`` naming the checkpoint
  and the blob, before anything is returned.
* ``read_restored``/``aread_restored``: a read (row, then blobs) that tells a lost race from a
  missing blob. Rows and blobs are read in two steps, and retention (``keep_last`` of another
  saver, ``sweep``, ``compact_store``, ``prune``) may delete the checkpoint and collect its blobs
  between them; the read then starts again from the rows, so it returns the state stored now (the
  thread's newest, or nothing when the checkpoint asked for is gone). A blob is only reported
  missing when the same checkpoint, read again, still names it: retention deletes a blob only
  once no stored checkpoint names it, so that is a blob lost outside agentstate-reducer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .._flow import Flow
from .ops import LoadBlobs, Owner, SaveBlobs
from .transform import Offloader, Reference, references, restore

__all__ = [
    "BlobCache",
    "BlobError",
    "CorruptBlobError",
    "MissingBlobError",
    "aread_restored",
    "history_read_key",
    "owner_of",
    "read_restored",
    "referenced_blobs_flow",
    "references_in",
    "restored_history_flow",
    "restored_tuple_flow",
    "stored_checkpoint_flow",
    "stored_writes_flow",
    "tuple_read_key",
]

T = TypeVar("T")

#: Reads in a row that lose a race with retention before a read gives up and raises: each loss
#: needs another deletion of what it read, so a reader exhausts this only under endless churn.
READ_ATTEMPTS = 32


class BlobError(LookupError):
    """A stored checkpoint names a blob that cannot be read back as it was stored."""

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str, checkpoint_id: str,
                 digest: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.digest = digest


class MissingBlobError(BlobError):
    """The blob is not stored (deleted by hand, or collected after a saver without offload wrote a
    checkpoint naming it without recording the reference)."""


class CorruptBlobError(BlobError):
    """The blob's bytes do not hash to its digest (changed outside agentstate-reducer)."""


class BlobCache(dict[str, bytes]):
    """Blobs read during one ``list``: a blob in many checkpoints is read once (up to 64 MB)."""

    limit = 64 << 20

    def add(self, blobs: Mapping[str, bytes]) -> None:
        if sum(map(len, self.values())) + sum(map(len, blobs.values())) > self.limit:
            self.clear()
        self.update(blobs)


def owner_of(config: Mapping[str, Any], checkpoint_id: str | None = None, task_id: str = "") -> Owner:
    conf = config.get("configurable", {})
    return Owner(str(conf.get("thread_id", "")), str(conf.get("checkpoint_ns", "")),
                 str(checkpoint_id if checkpoint_id is not None else conf.get("checkpoint_id", "")), task_id)


def stored_checkpoint_flow(
    offloader: Offloader, config: Mapping[str, Any], checkpoint: Mapping[str, Any], messages_key: str,
    keep: Mapping[str, bytes] | None = None,
) -> Flow[Any, Any, Any]:
    """``checkpoint`` itself when nothing in it is offloaded, else a copy whose changed channel
    values are new objects (the others the same); ``keep``: see ``Offloader.offload``."""
    values = checkpoint.get("channel_values") or {}
    blobs: dict[str, bytes] = {}
    changed: dict[str, Any] = {}
    for channel, value in values.items():
        stored, found = offloader.offload(value, messages=channel == messages_key, keep=keep)
        if stored is not value:
            changed[channel] = stored
        blobs.update(found)
    if blobs:
        yield SaveBlobs(owner_of(config, str(checkpoint["id"])), blobs)
    if not changed:
        return checkpoint
    return {**checkpoint, "channel_values": {k: changed.get(k, v) for k, v in values.items()}}


def stored_writes_flow(
    offloader: Offloader, config: Mapping[str, Any], writes: Sequence[tuple[str, Any]], task_id: str,
    messages_key: str, keep: Mapping[str, bytes] | None = None,
) -> Flow[Any, Any, Any]:
    """``writes`` itself when they name no blob, else a list whose changed values are new
    objects (the others the same); ``keep``: see ``Offloader.offload``."""
    blobs: dict[str, bytes] = {}
    out = []
    for channel, value in writes:
        stored, found = offloader.offload(value, messages=channel == messages_key, keep=keep)
        out.append((channel, stored))
        blobs.update(found)
    if not blobs:
        return writes
    yield SaveBlobs(owner_of(config, task_id=task_id), blobs)
    return out


def references_in(values: Iterable[Any]) -> dict[str, Reference]:
    """The references of each of ``values`` (channel values, write values: each walked from its
    own root, as the put walked it), by digest."""
    found: dict[str, Reference] = {}
    for value in values:
        found.update(references(value))
    return found


def _check(data: bytes, ref: Reference) -> bool:
    return hashlib.sha256(data).hexdigest() == ref.digest


def restored_history_flow(
    history: Mapping[str, Any], config: Mapping[str, Any], where: str
) -> Flow[Any, Any, Any]:
    """A ``get_delta_channel_history`` result with the references in its writes and seeds restored
    (errors name the checkpoint of ``config``)."""
    refs = _history_references(history)
    if not refs:
        return history
    blobs = yield LoadBlobs(tuple(sorted(refs)))
    missing = _raiser(config, where, blobs, refs)
    out: dict[str, Any] = {}
    for channel, entry in history.items():
        new = dict(entry)
        new["writes"] = [(t, c, restore(v, blobs, missing)) for t, c, v in entry.get("writes", ())]
        if "seed" in entry:
            new["seed"] = restore(entry["seed"], blobs, missing)
        out[channel] = new
    return out


def _history_references(history: Mapping[str, Any]) -> dict[str, Reference]:
    """The references in a history's writes and seeds (each walked as its put walked it)."""
    refs: dict[str, Reference] = {}
    for entry in history.values():
        refs.update(references_in(w[2] for w in entry.get("writes", ())))
        if "seed" in entry:
            refs.update(references(entry["seed"]))
    return refs


def _raiser(config: Mapping[str, Any], where: str, blobs: Mapping[str, bytes],
            refs: Mapping[str, Reference], checkpoint_id: str | None = None) -> Any:
    """Checks ``blobs`` against their digests (raising ``CorruptBlobError``); returns the
    ``missing`` callback of ``restore`` (raising ``MissingBlobError``), both naming the checkpoint."""
    conf = config.get("configurable", {})
    thread_id, ns = str(conf.get("thread_id", "")), str(conf.get("checkpoint_ns", ""))
    checkpoint_id = str(checkpoint_id or conf.get("checkpoint_id", ""))
    named = f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (namespace {ns!r})"
    for digest, ref in sorted(refs.items()):
        data = blobs.get(digest)
        if data is not None and not _check(data, ref):
            raise CorruptBlobError(
                f"{named} names blob sha256:{digest} ({ref.size} bytes), whose stored bytes in {where} "
                "do not hash to it: the blob was changed outside agentstate-reducer. Restore it from a "
                "backup, or delete the thread (delete_thread)",
                thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id, digest=digest)

    def missing(ref: Reference) -> Any:
        raise MissingBlobError(
            f"{named} names blob sha256:{ref.digest} ({ref.size} bytes), which is not in {where}: it was "
            "deleted by hand, or collected after a saver without offload wrote checkpoints naming it "
            "(every saver on an offloaded store needs offload on). Restore it from a backup, or delete "
            "the thread (delete_thread)",
            thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id, digest=ref.digest)

    return missing


def referenced_blobs_flow(
    refs: Mapping[str, Reference], config: Mapping[str, Any], where: str, known: Mapping[str, bytes]
) -> Flow[Any, Any, dict[str, bytes]]:
    """The bytes of every blob in ``refs`` (digest -> bytes), from ``known`` or loaded, each loaded
    one checked against its digest; a blob missing or corrupt raises ``BlobError`` naming the
    checkpoint of ``config``."""
    wanted = tuple(sorted(d for d in refs if d not in known))
    loaded = (yield LoadBlobs(wanted)) if wanted else {}
    missing = _raiser(config, where, loaded, {d: refs[d] for d in wanted})
    for digest in wanted:
        if digest not in loaded:
            missing(refs[digest])
    return {**{d: known[d] for d in refs if d in known}, **loaded}


def restored_tuple_flow(tup: Any, where: str, cache: Any = None) -> Flow[Any, Any, Any]:
    """``tup`` (a ``CheckpointTuple`` or None) with its references restored; ``where`` names the
    blob store in errors; ``cache`` (a dict with ``add(blobs)``, optional) keeps the blobs read
    for the next tuple of one listing."""
    if tup is None:
        return None
    values = tup.checkpoint.get("channel_values") or {}
    writes = tup.pending_writes or []
    refs = references_in(values.values())
    refs.update(references_in(w[2] for w in writes))
    if not refs:
        return tup
    known = cache if cache is not None else {}
    wanted = tuple(sorted(d for d in refs if d not in known))
    loaded = (yield LoadBlobs(wanted)) if wanted else {}
    blobs = {**{d: known[d] for d in refs if d in known}, **loaded}
    missing = _raiser(tup.config, where, blobs, refs, tup.checkpoint.get("id"))
    restored = {k: restore(v, blobs, missing) for k, v in values.items()}
    checkpoint = {**tup.checkpoint, "channel_values": restored}
    if cache is not None:
        cache.add(loaded)
    pending = [(t, c, restore(v, blobs, missing)) for t, c, v in writes] if writes else tup.pending_writes
    return tup._replace(checkpoint=checkpoint, pending_writes=pending)


def tuple_read_key(tup: Any) -> Hashable:
    """What a repeated read of ``tup`` must differ in to have lost a race: the checkpoint and the
    blobs it names."""
    conf = tup.config.get("configurable", {})
    refs = references_in((tup.checkpoint.get("channel_values") or {}).values())
    refs.update(references_in(w[2] for w in tup.pending_writes or ()))
    return (conf.get("thread_id"), conf.get("checkpoint_ns", ""), tup.checkpoint.get("id"), frozenset(refs))


def history_read_key(history: Mapping[str, Any]) -> Hashable:
    """``tuple_read_key`` for a ``get_delta_channel_history`` result: the blobs it names."""
    return frozenset(_history_references(history))


class _Attempts:
    """The decision of ``read_restored``: read again after a ``MissingBlobError``, or raise it."""

    def __init__(self, key: Callable[[Any], Hashable]) -> None:
        self.key = key
        self.failed: Hashable = None
        self.count = 0

    def lost(self, read: Any, error: MissingBlobError) -> None:
        """Returns when ``read`` (whose restore raised ``error``) may have lost a race; raises
        ``error`` when the read before it was the same (the blob is gone for good) or after
        ``READ_ATTEMPTS`` losses in a row."""
        key = self.key(read)
        self.count += 1
        if key == self.failed or self.count >= READ_ATTEMPTS:
            raise error
        self.failed = key


def read_restored(first: T | None, again: Callable[[], T | None], restore: Callable[[T], T],
                  key: Callable[[T], Hashable] = tuple_read_key) -> T | None:
    """``restore(first)``; when a blob is missing, ``restore(again())`` with the rows read anew,
    until a read restores, reads None (the checkpoint is gone: None), or is the same as the read
    before it (the ``MissingBlobError`` is raised). ``key``: what tells two reads apart."""
    attempts = _Attempts(key)
    read = first
    while read is not None:
        try:
            return restore(read)
        except MissingBlobError as error:
            attempts.lost(read, error)
        read = again()
    return None


async def aread_restored(first: T | None, again: Callable[[], Awaitable[T | None]],
                         restore: Callable[[T], Awaitable[T]],
                         key: Callable[[T], Hashable] = tuple_read_key) -> T | None:
    """``read_restored`` for async reads."""
    attempts = _Attempts(key)
    read = first
    while read is not None:
        try:
            return await restore(read)
        except MissingBlobError as error:
            attempts.lost(read, error)
        read = await again()
    return None
