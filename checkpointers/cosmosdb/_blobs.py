"""Blob offload's operations (``checkpointers.offload.ops``) as Cosmos DB flows, in the saver's own
container: the pure item mapping and one flow per operation, driven by both savers through the
retention backends (``_retention``).

Items:

* a blob lives in a logical partition of its own, ``!blob!<digest>`` (``blob_pk``): a thread's
  partition key never contains ``!`` (``_ids.encode_part`` escapes it), so the two cannot meet,
  and no partition holds more than one blob (Cosmos DB limits a logical partition to 20 GB; one
  shared partition would cap every store's blobs there). Its *head* item (``o!<digest>``, kind
  ``offblob``) holds the size, the generation ``gen`` of its data and ``owners``: the keys of the
  owners that name it. The bytes are in chunk items ``o!<digest>!<gen>!<part>`` (kind
  ``offchunk``) of at most ``CHUNK_BYTES`` raw bytes each (base64 keeps an item under the 2 MB
  limit), so a 500 kB image is one chunk and a head rewrite never rewrites the bytes;
* a reference item per (owner, digest), kind ``blobref``, in the owner's thread partition (id
  ``r!<ns>!<checkpoint>!<task>!<digest>``), so deleting a thread's items deletes them, and
  ``DropRefs``/``BlobUsage`` of a thread are single-partition queries.

Concurrency: the head's ``owners`` is the one record a collection trusts, changed only by
conditional writes (If-Match on the ``_etag`` read), so Cosmos DB orders every change of one blob's
owners whatever the account's consistency level. A writer (``SaveBlobs``) first upserts its
reference items, then adds its owner key to the head (read, ``ReplaceIf``; retried when another
writer changed it in between), or, when there is no head, writes the chunks of a new generation and
creates the head with its key (``Create``; when another writer created it first, its own chunks go
and it adds its key to that head). ``DropRefs`` removes the owners' keys from the heads the same
way, then deletes the reference items. A collection (``Collect``) reads the head and deletes it
only if ``owners`` is empty and only with If-Match on the ``_etag`` it read, then deletes the
chunks of that head's generation. A writer that added its key after the read makes the delete fail
(412: the blob stays); one that read the head before the delete finds it gone at its
``ReplaceIf`` (404) and stores a new generation, whose chunks the collection never touches. So a
blob is deleted only when no owner names it.

Cost and limit: a put naming a blob its checkpoint does not yet own costs one point read and one
replace of the small head (plus one batch of reference items per put); the bytes of a blob already stored are
never written again. ``owners`` has one key (about 60 bytes) per checkpoint or task's writes naming
the blob, so one head holds some 30,000 of them within Cosmos DB's 2 MB item limit; past that a put
fails with the service's error (413), never silently. The reducer's window and ``keep_last`` bound
how many checkpoints name one image.

A process stopped part-way never loses a blob a stored checkpoint names: it may leave chunks
without a head (never read), or owner keys whose checkpoint is gone (the blob then stays: a leak,
not a loss).
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..offload.ops import BlobUsage, Collect, DropRefs, HasBlobs, LoadBlobs, Owner, SaveBlobs
from ._ids import encode_part, partition_key
from ._items import CHUNK_BYTES, SCHEMA, plan_batches
from ._ops import Batch, CosmosFlow, Create, DeleteIf, NextPage, Pages, Query, Read, ReplaceIf
from ._queries import PAGE_SIZE

__all__ = [
    "BLOB_KIND",
    "CHUNK_KIND",
    "REF_KIND",
    "BlobWork",
    "blob_bytes",
    "blob_pk",
    "chunk_items",
    "head_id",
    "owner_key",
    "ref_items",
]

BLOB_KIND = "offblob"
CHUNK_KIND = "offchunk"
REF_KIND = "blobref"

#: Conditional writes of one head lost to other writers before a ``SaveBlobs``/``DropRefs`` gives up.
ATTEMPTS = 50

_DIGEST = re.compile(r"[0-9a-f]{64}\Z")

_REFS_SQL = (
    "SELECT c.id, c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.task_id, c.digest FROM c "
    f"WHERE c.kind = '{REF_KIND}' AND c.thread_id = @thread"
)
_BLOB_SQL = "SELECT * FROM c WHERE c.pk = @pk"
_HAS_SQL = f"SELECT TOP 1 c.id FROM c WHERE c.kind = '{BLOB_KIND}'"
_SIZES_SQL = f"SELECT c.size FROM c WHERE c.kind = '{BLOB_KIND}'"


# -- the pure item mapping ---------------------------------------------------------------------------


def _digest(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ValueError(f"a blob digest is a SHA-256 in lowercase hex (64 characters), got {digest!r}")
    return digest


def blob_pk(digest: str) -> str:
    """The partition key value of a blob's items.

    >>> blob_pk("0" * 64)[:8]
    '!blob!00'
    """
    return f"!blob!{_digest(digest)}"


def head_id(digest: str) -> str:
    return f"o!{_digest(digest)}"


def _chunk_id(digest: str, gen: str, part: int) -> str:
    return f"o!{digest}!{gen}!{part}"


def owner_key(owner: Owner) -> str:
    """The key of ``owner`` in a head's ``owners`` (injective: segments never contain ``!``).

    >>> owner_key(Owner("t 1", "", "c1", "task"))
    't~201!!c1!task'
    """
    return "!".join((partition_key(owner.thread_id), encode_part(owner.checkpoint_ns),
                     encode_part(owner.checkpoint_id), encode_part(owner.task_id)))


def ref_items(owner: Owner, digests: Iterable[str]) -> list[dict[str, Any]]:
    """The reference items of ``owner`` naming ``digests``, in its thread partition."""
    pk = partition_key(owner.thread_id)
    prefix = "!".join(("r", encode_part(owner.checkpoint_ns), encode_part(owner.checkpoint_id),
                       encode_part(owner.task_id)))
    return [
        {"id": f"{prefix}!{_digest(d)}", "pk": pk, "kind": REF_KIND, "schema": SCHEMA,
         "thread_id": owner.thread_id, "checkpoint_ns": owner.checkpoint_ns,
         "checkpoint_id": owner.checkpoint_id, "task_id": owner.task_id, "digest": d}
        for d in sorted(set(digests))
    ]


def chunk_items(digest: str, gen: str, data: bytes) -> list[dict[str, Any]]:
    """The chunk items of one generation of a blob (at least one, for empty bytes too)."""
    chunks = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    return [
        {"id": _chunk_id(digest, gen, part), "pk": blob_pk(digest), "kind": CHUNK_KIND, "schema": SCHEMA,
         "digest": digest, "gen": gen, "part": part, "data": base64.b64encode(chunk).decode("ascii")}
        for part, chunk in enumerate(chunks)
    ]


def _head(digest: str, gen: str, data: bytes, parts: int, owners: Mapping[str, int]) -> dict[str, Any]:
    return {"id": head_id(digest), "pk": blob_pk(digest), "kind": BLOB_KIND, "schema": SCHEMA,
            "digest": digest, "size": len(data), "gen": gen, "parts": parts, "owners": dict(owners)}


def blob_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """The bytes of a blob from the items of its partition, or None when it has no head or the
    head's generation misses a chunk (chunks of other generations are ignored).

    >>> items = chunk_items("0" * 64, "g", b"abc")
    >>> blob_bytes([*items, _head("0" * 64, "g", b"abc", len(items), {})])
    b'abc'
    >>> blob_bytes(items) is None
    True
    """
    head = next((r for r in rows if r.get("kind") == BLOB_KIND), None)
    if head is None:
        return None
    parts = {int(r["part"]): r["data"] for r in rows
             if r.get("kind") == CHUNK_KIND and r.get("gen") == head.get("gen")}
    count = int(head.get("parts") or 0)
    if any(p not in parts for p in range(count)):
        return None
    return b"".join(base64.b64decode(parts[p]) for p in range(count))


def _fields(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


# -- the flows ---------------------------------------------------------------------------------------


def _add_owner(digest: str, key: str, data: bytes) -> CosmosFlow[int]:
    """Add ``key`` to the blob's owners, storing the blob when it has no head; the bytes stored."""
    pk, hid = blob_pk(digest), head_id(digest)
    for _ in range(ATTEMPTS):
        head = yield Read(pk, hid)
        if head is None:
            gen = uuid.uuid4().hex
            chunks = chunk_items(digest, gen, data)
            for batch in plan_batches([("upsert", (item,)) for item in chunks]):
                yield Batch(pk, tuple(batch))
            if (yield Create(pk, _head(digest, gen, data, len(chunks), {key: 1}))):
                return len(data)
            # another writer created the head first: ours go, and we join theirs
            for batch in plan_batches([("delete", (item["id"],)) for item in chunks]):
                yield Batch(pk, tuple(batch), missing_ok=True)
            continue
        owners = head.get("owners") or {}
        if key in owners:
            return 0
        if (yield ReplaceIf(pk, {**_fields(head), "owners": {**owners, key: 1}}, head["_etag"])):
            return 0
    raise RuntimeError(
        f"could not record a reference to blob sha256:{digest}: {ATTEMPTS} attempts in a row lost to "
        "concurrent writers of the same blob; the checkpoint was not stored, retry the put"
    )


def _remove_owners(digest: str, keys: set[str]) -> CosmosFlow[None]:
    pk, hid = blob_pk(digest), head_id(digest)
    for _ in range(ATTEMPTS):
        head = yield Read(pk, hid)
        if head is None:
            return
        owners = head.get("owners") or {}
        if not keys & set(owners):
            return
        kept = {k: v for k, v in owners.items() if k not in keys}
        if (yield ReplaceIf(pk, {**_fields(head), "owners": kept}, head["_etag"])) is not False:
            return
    raise RuntimeError(
        f"could not release blob sha256:{digest}: {ATTEMPTS} attempts in a row lost to concurrent "
        "writers of the same blob; run the deletion again"
    )


def _collect_one(digest: str) -> CosmosFlow[int | None]:
    """Delete the blob if no owner names it; its size, or None when it stays."""
    pk, hid = blob_pk(digest), head_id(digest)
    head = yield Read(pk, hid)
    if head is None or head.get("owners"):
        return None
    if not (yield DeleteIf(pk, hid, head["_etag"])):
        return None  # a writer named it since the read, or another collection took it
    gen, parts = str(head.get("gen")), int(head.get("parts") or 0)
    ids = [_chunk_id(digest, gen, part) for part in range(parts)]
    for batch in plan_batches([("delete", (i,)) for i in ids]):
        yield Batch(pk, tuple(batch), missing_ok=True)
    return int(head.get("size") or 0)


@dataclass(slots=True)
class BlobWork:
    """The blob operations of one retention flow (``_retention.retention_flow``).

    ``DropRefs`` answers at once (the digests) but its writes wait in ``pending`` until the
    flow's checkpoint deletions are written (``release_flow``), so a reader never meets a kept
    checkpoint whose blob went; ``Collect`` first has the retention flow write them.
    """

    #: the saver keeps blobs (offload configured): ``HasBlobs`` needs no query
    known: bool = False
    #: thread id -> its reference items not yet dropped (loaded at its first ``DropRefs``, or
    #: before ``DeleteThread`` deletes them)
    refs: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    #: reference items dropped, their owner keys not yet removed from the heads
    pending: list[Mapping[str, Any]] = field(default_factory=list)

    def load_refs(self, thread_id: str) -> CosmosFlow[None]:
        if thread_id not in self.refs:
            self.refs[thread_id] = list((yield Query(_REFS_SQL, (("@thread", thread_id),),
                                                     partition_key(thread_id))))

    def perform(self, op: Any) -> CosmosFlow[Any]:
        if isinstance(op, HasBlobs):
            if not self.known:
                self.known = bool((yield Query(_HAS_SQL, (), None)))
            return self.known
        if isinstance(op, SaveBlobs):
            if not op.blobs:
                return 0
            refs = ref_items(op.owner, op.blobs)
            for batch in plan_batches([("upsert", (item,)) for item in refs]):
                yield Batch(refs[0]["pk"], tuple(batch))
            self.known = True
            key = owner_key(op.owner)
            stored = 0
            for digest in sorted(op.blobs):
                stored += yield from _add_owner(digest, key, bytes(op.blobs[digest]))
            return stored
        if isinstance(op, LoadBlobs):
            out: dict[str, bytes] = {}
            for digest in sorted(set(op.digests)):
                rows = yield Query(_BLOB_SQL, (("@pk", blob_pk(digest)),), blob_pk(digest))
                data = blob_bytes(rows)
                if data is not None:
                    out[digest] = data
            return out
        if isinstance(op, DropRefs):
            yield from self.load_refs(op.thread_id)
            taken: list[Mapping[str, Any]] = []
            left: list[Mapping[str, Any]] = []
            for row in self.refs[op.thread_id]:
                chosen = op.ids is None or (str(row.get("checkpoint_ns", "")) == (op.ns or "")
                                            and row.get("checkpoint_id") in op.ids)
                if chosen and op.writes_only and not row.get("task_id"):
                    chosen = False
                (taken if chosen else left).append(row)
            self.refs[op.thread_id] = left
            self.pending.extend(taken)
            return tuple(sorted({str(row["digest"]) for row in taken}))
        if isinstance(op, Collect):
            yield from self.release_flow()
            count = size = 0
            for digest in sorted(set(op.digests)):
                freed = yield from _collect_one(digest)
                if freed is not None:
                    count, size = count + 1, size + freed
            return (count, size)
        if isinstance(op, BlobUsage):
            if op.thread_id is None:
                count = size = 0
                pager = yield Pages(Query(_SIZES_SQL, (), None), PAGE_SIZE)
                while rows := (yield NextPage(pager)):
                    count += len(rows)
                    size += sum(int(r.get("size") or 0) for r in rows)
                return (count, size)
            rows = yield Query(_REFS_SQL, (("@thread", op.thread_id),), partition_key(op.thread_id))
            digests = sorted({str(r["digest"]) for r in rows})
            size = 0
            for digest in digests:
                head = yield Read(blob_pk(digest), head_id(digest))
                size += int((head or {}).get("size") or 0)
            return (len(digests), size)
        raise TypeError(f"unknown blob operation {op!r}")

    def release_flow(self) -> CosmosFlow[None]:
        """Remove the dropped reference items' owner keys from the heads, then delete the items."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        by_digest: dict[str, set[str]] = {}
        by_pk: dict[str, list[str]] = {}
        for row in pending:
            owner = Owner(str(row.get("thread_id", "")), str(row.get("checkpoint_ns", "")),
                          str(row.get("checkpoint_id", "")), str(row.get("task_id", "")))
            by_digest.setdefault(str(row["digest"]), set()).add(owner_key(owner))
            by_pk.setdefault(partition_key(owner.thread_id), []).append(str(row["id"]))
        for digest in sorted(by_digest):  # keys first: a stop here leaves the blob stored
            yield from _remove_owners(digest, by_digest[digest])
        for pk, ids in by_pk.items():
            for batch in plan_batches([("delete", (i,)) for i in ids]):
                yield Batch(pk, tuple(batch), missing_ok=True)

