"""Retention on Cosmos DB: the operations of ``checkpointers.retention`` (load a thread, delete
checkpoints, delete blobs, delete a thread, list threads, newest ``ts``) performed with Cosmos DB
ops, so ``plan_retention`` (the one set of rules for every saver) decides what goes.

``retention_flow(flow, serde)`` turns a retention flow into a Cosmos DB flow that both savers drive
with their ``execute``. Invariants:

* a thread is loaded with two single-partition queries (its checkpoint items; its write and value
  items' ids), every one filtered by ``thread_id`` (a hashed partition key may be shared);
* in the loaded ``ThreadState`` a checkpoint's "channel versions" are the ids of the value items it
  reads (``blobs``), each as ``{item id: ""}``: ``plan_retention``'s blob rule (delete a value only
  when a deleted checkpoint read it and no kept one does) then applies to items directly;
* deletions are collected and written when the retention flow returns, per thread: the writes and
  checkpoints (and the parent links of kept checkpoints whose parent went, set to their nearest
  kept ancestor or None, as ``prune``/``delete_for_runs`` do) in transactional batches of at most
  100 operations, then the values, so a reader never meets a checkpoint whose values are gone.
  The first value deletion reads the thread's checkpoint items again: a value a checkpoint
  stored since the load names (another run's put) stays;
  Cosmos DB has no transaction across batches: a process stopped between batches leaves the kept
  checkpoints whole (only deletable items may remain; the next run deletes them);
* a retention flow that raises deletes nothing;
* blob offload's operations (``checkpointers.offload.ops``) are ``_blobs``'s flows: the backends
  store blobs, so retention runs through ``follow_blobs``; the references a deletion drops are
  released only after its checkpoints are deleted (at ``Collect``, or when the flow returns), so
  a kept checkpoint never names a collected blob.

``CosmosBackend``/``AsyncCosmosBackend`` are retention's backends for ``CosmosDBSaver``/
``AsyncCosmosDBSaver``: ``sync`` and ``aio`` register them (``checkpointers.retention.register``)
where they define the savers, so retention itself knows nothing of Cosmos DB. They drive
``retention_flow`` with the saver's own driver (``_run``, this package's, used within it).
"""

from __future__ import annotations

import base64
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import INTERRUPT

from .. import retention as r
from .._flow import translating
from ..offload.ops import BLOB_OPS, Collect
from ._blobs import BlobWork
from ._flows import delete_thread_flow, plan_removal
from ._ids import blob_item_id, encode_part, partition_key
from ._items import plan_batches
from ._ops import Batch, CosmosFlow, NextPage, Pages, Query
from ._queries import IS_CHECKPOINT, PAGE_SIZE

__all__ = [
    "AsyncCosmosBackend",
    "CosmosBackend",
    "delete_thread_retention_flow",
    "documents_bytes",
    "retention_flow",
    "stored_bytes_flow",
]

_CHECKPOINTS_SQL = (
    "SELECT c.id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.blobs, c.updated_channels, "
    'c.metadata.parents[""] AS root, c.metadata.source AS source, c.metadata.step AS step, '
    "c.metadata.counters_since_delta_snapshot AS counters, c.metadata_typed AS metadata_typed, "
    "(IS_DEFINED(c.metadata.counters_since_delta_snapshot) OR IS_DEFINED(c.metadata.delta_writes_versioned)) "
    f"AS delta FROM c WHERE {IS_CHECKPOINT} AND c.thread_id = @thread"
)
_OTHER_ITEMS_SQL = (
    "SELECT c.id, c.kind, c.checkpoint_ns, c.checkpoint_id, c.ref, c.part, c.channel FROM c "
    "WHERE c.thread_id = @thread AND c.kind != 'checkpoint'"
)
_NEWEST_SQL = (
    f"SELECT TOP 1 c.type, c.data FROM c WHERE {IS_CHECKPOINT} AND c.thread_id = @thread "
    "AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id DESC"
)
# The local test server has no DISTINCT: thread ids are deduplicated here.
_THREADS_SQL = f"SELECT c.thread_id FROM c WHERE {IS_CHECKPOINT}"
_NAMED_SQL = f"SELECT c.id, c.blobs FROM c WHERE {IS_CHECKPOINT} AND c.thread_id = @thread"


@dataclass(slots=True)
class _Thread:
    """A loaded thread, and what the flow has asked to delete of it so far."""

    pk: str
    rows: list[Mapping[str, Any]]
    #: (ns, checkpoint id) -> the checkpoint item's id
    checkpoint_ids: dict[tuple[str, str], str]
    #: (ns, checkpoint id) -> ids of its write items (chunks included)
    write_ids: dict[tuple[str, str], list[str]]
    #: (ns, checkpoint id) -> number of its pending writes (head items)
    write_counts: dict[tuple[str, str], int]
    #: value head id -> ids of its items (chunks included)
    value_ids: dict[str, list[str]]
    remove: set[str] = field(default_factory=set)
    writes: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    #: value head ids the thread's checkpoints name, read again before the first value deletion
    named: set[str] | None = None

    @property
    def deletes(self) -> bool:
        return bool(self.remove or self.writes or self.values)


def _delta_counters(row: Mapping[str, Any], serde: SerializerProtocol) -> frozenset[str]:
    """The channels of a checkpoint item's ``counters_since_delta_snapshot``: LangGraph's counters
    are tuples, not plain JSON, so they are in ``metadata_typed`` (``_items.metadata_fields``)."""
    if isinstance(row.get("counters"), Mapping):
        return r.delta_counters({"counters_since_delta_snapshot": row["counters"]})
    typed = row.get("metadata_typed")
    if not typed:
        return frozenset()
    return r.delta_counters(serde.loads_typed((typed[0], base64.b64decode(typed[1]))))


def _delta_values(
    ns: str, refs: Sequence[str], counters: frozenset[str], values: Mapping[str, Any]
) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """(the delta channels a checkpoint item rebuilds from its ancestors, the ``versions`` entries
    of those it reads stored), as ``rules.StoredCheckpoint`` has them: its ``blobs`` name a value
    item id per channel version (``blob_item_id``), and a value item is stored only where a
    checkpoint held a value."""
    unseeded, held = set(), set()
    for channel in counters:  # blob_item_id's segments: "b!<ns>!<channel>!<version>"
        prefix = f"b!{encode_part(ns)}!{encode_part(channel)}!"
        ref = next((ref for ref in refs if ref.startswith(prefix)), None)
        if ref is None:
            continue
        if ref in values:
            held.add((ref, ""))
        else:
            unseeded.add(channel)
    return frozenset(unseeded), frozenset(held)


def _load(thread_id: str, serde: SerializerProtocol) -> Generator[Any, Any, tuple[r.ThreadState, _Thread]]:
    pk = partition_key(thread_id)
    params = (("@thread", thread_id),)
    rows: list[Mapping[str, Any]] = yield Query(_CHECKPOINTS_SQL, params, pk)
    others = yield Query(_OTHER_ITEMS_SQL, params, pk)
    write_ids: dict[tuple[str, str], list[str]] = {}
    heads: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    value_ids: dict[str, list[str]] = {}
    value_ns: dict[str, str] = {}
    for item in others:
        if item.get("kind") == "write":
            key = (str(item.get("checkpoint_ns", "")), str(item.get("checkpoint_id")))
            write_ids.setdefault(key, []).append(item["id"])
            if not item.get("part"):
                heads.setdefault(key, []).append(item)
        elif item.get("kind") == "blob" and item.get("ref") is not None:
            value_ids.setdefault(item["ref"], []).append(item["id"])
            if not item.get("part"):
                value_ns[item["ref"]] = str(item.get("checkpoint_ns", ""))
    writes = tuple(
        r.StoredWrites(ns, cid, len(items), any(i.get("channel") == INTERRUPT for i in items))
        for (ns, cid), items in heads.items()
    )
    checkpoints = []
    for row in rows:
        root = row.get("root")
        refs = [str(ref) for ref in row.get("blobs") or ()]
        parent = row.get("parent_checkpoint_id")
        ns = str(row["checkpoint_ns"])
        counters = _delta_counters(row, serde)
        checkpoints.append(r.StoredCheckpoint(
            ns, str(row["checkpoint_id"]), root if isinstance(root, str) else None,
            bool(row.get("delta")) or bool(counters), dict.fromkeys(refs, ""),
            None if parent is None else str(parent), row.get("source") == "loop",
            r.checkpoint_step(row.get("step")), r.step_due(row.get("updated_channels")),
            *_delta_values(ns, refs, counters, value_ids),
        ))
    blobs = frozenset((ns, ref, "") for ref, ns in value_ns.items())
    state = r.ThreadState(thread_id, tuple(checkpoints), writes, blobs)
    thread = _Thread(
        pk, rows, {(str(row["checkpoint_ns"]), str(row["checkpoint_id"])): row["id"] for row in rows},
        write_ids, {key: len(items) for key, items in heads.items()}, value_ids,
    )
    return state, thread


def _delete_ops(ids: Sequence[str]) -> list[tuple[str, tuple[Any, ...]]]:
    return [("delete", (i,)) for i in ids]


def _flush(thread: _Thread) -> CosmosFlow[None]:
    ops = _delete_ops(thread.writes) + _delete_ops([i for i in thread.checkpoint_ids.values()
                                                    if i in thread.remove])
    ops += [
        ("patch", (i, [{"op": "set", "path": "/parent_checkpoint_id", "value": parent}]))
        for i, parent in plan_removal(thread.rows, thread.remove).relink
    ]
    for batch in plan_batches(ops):
        yield Batch(thread.pk, tuple(batch), missing_ok=True)
    for batch in plan_batches(_delete_ops(thread.values)):
        yield Batch(thread.pk, tuple(batch), missing_ok=True)
    # written: what a later deletion of the same flow plans starts from the kept checkpoints
    thread.rows = [row for row in thread.rows if row["id"] not in thread.remove]
    thread.checkpoint_ids = {k: v for k, v in thread.checkpoint_ids.items() if v not in thread.remove}
    thread.remove, thread.writes, thread.values = set(), [], []


def _flush_all(threads: Mapping[str, _Thread]) -> CosmosFlow[None]:
    for thread in threads.values():
        if thread.deletes:
            yield from _flush(thread)


def _perform(
    op: r.Op, threads: dict[str, _Thread], serde: SerializerProtocol, blobs: BlobWork
) -> Generator[Any, Any, Any]:
    if isinstance(op, BLOB_OPS):
        if isinstance(op, Collect):  # the deletions first: a blob goes after what named it
            yield from _flush_all(threads)
        return (yield from blobs.perform(op))
    if isinstance(op, r.LoadThread):
        state, thread = yield from _load(op.thread_id, serde)
        threads.setdefault(op.thread_id, thread)
        return state
    if isinstance(op, r.DeleteCheckpoints):
        thread = threads[op.thread_id]
        checkpoints = writes = 0
        for cid in op.ids:
            item_id = thread.checkpoint_ids.get((op.ns, cid))
            if item_id is None or item_id in thread.remove:
                continue
            thread.remove.add(item_id)
            checkpoints += 1
            thread.writes.extend(thread.write_ids.get((op.ns, cid), []))
            writes += thread.write_counts.get((op.ns, cid), 0)
        return checkpoints, writes
    if isinstance(op, r.DeleteWrites):
        thread = threads[op.thread_id]
        writes = 0
        for cid in op.ids:
            thread.writes.extend(thread.write_ids.pop((op.ns, cid), []))
            writes += thread.write_counts.pop((op.ns, cid), 0)
        return writes
    if isinstance(op, r.DeleteBlobs):
        thread = threads[op.thread_id]
        if thread.named is None:  # another run's put since the load may name a value
            rows = yield Query(_NAMED_SQL, (("@thread", op.thread_id),), thread.pk)
            thread.named = {str(ref) for row in rows if row.get("id") not in thread.remove
                            for ref in (row.get("blobs") or ())}
        if op.channel in thread.named:
            return 0
        ids = thread.value_ids.pop(op.channel, None)
        if not ids:
            return 0
        thread.values.extend(ids)
        return 1
    if isinstance(op, r.DeleteThread):
        threads.pop(op.thread_id, None)
        yield from blobs.load_refs(op.thread_id)  # for the DropRefs that follows: they go with it
        yield from delete_thread_flow(op.thread_id)
        return None
    if isinstance(op, r.ListThreads):
        found: dict[str, None] = {}
        pager = yield Pages(Query(_THREADS_SQL, (), None), PAGE_SIZE)
        while rows := (yield NextPage(pager)):
            found.update(dict.fromkeys(str(row["thread_id"]) for row in rows))
        return list(found)
    if isinstance(op, r.NewestTs):
        rows = yield Query(_NEWEST_SQL, (("@thread", op.thread_id),), partition_key(op.thread_id))
        if not rows:
            return None
        body = serde.loads_typed((rows[0]["type"], base64.b64decode(rows[0]["data"])))
        ts = body.get("ts") if isinstance(body, Mapping) else None
        return None if ts is None else str(ts)
    raise TypeError(f"unknown retention operation {op!r}")


def retention_flow(flow: r.Flow, serde: SerializerProtocol, *, offload: bool = False) -> CosmosFlow[Any]:
    """``flow`` (a retention flow, with blob offload's operations) as a Cosmos DB flow; what it
    deletes is written at its first ``Collect`` or when it returns, the blob references it drops
    after that (``_blobs.BlobWork``). ``offload``: the saver keeps blobs (``HasBlobs`` is True
    without asking)."""
    threads: dict[str, _Thread] = {}
    blobs = BlobWork(known=offload)
    returned = yield from translating(flow, lambda op: _perform(op, threads, serde, blobs))
    yield from _flush_all(threads)
    yield from blobs.release_flow()
    return returned


def delete_thread_retention_flow(thread_id: str) -> r.Flow:
    """Delete one thread as a retention flow, so a backend's ``run`` has its blobs follow."""
    yield r.DeleteThread(thread_id)


def stored_bytes_flow() -> CosmosFlow[int]:
    """The UTF-8 JSON bytes of every item in the container (a paged scan): what ``sweep`` reports
    when the service does not report the container's usage (the local test server)."""
    import json

    total = 0
    pager = yield Pages(Query("SELECT * FROM c", (), None), PAGE_SIZE)
    while rows := (yield NextPage(pager)):
        for row in rows:
            item = {k: v for k, v in row.items() if not k.startswith("_")}
            total += len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return total


def documents_bytes(usage: str | None) -> int | None:
    """Bytes of the ``documentsSize`` (KB) in an ``x-ms-resource-usage`` header, or None.

    >>> documents_bytes("documentSize=0;documentsSize=12;documentsCount=3")
    12288
    >>> documents_bytes(None) is None
    True
    """
    for part in (usage or "").split(";"):
        name, _, value = part.partition("=")
        if name.strip() == "documentsSize" and value.strip().isdigit():
            return int(value) * 1024
    return None


# -- the backends: registered for the savers by ``sync`` and ``aio`` ------------------------------


def _offloads(saver: Any) -> bool:
    return getattr(saver, "offload", None) is not None


class _CosmosVersions:
    #: how blob errors name where the blobs are
    blob_where = "the Cosmos DB container's blob items"

    def version_entry(self, ns: str, channel: str, version: Any) -> tuple[str, str]:
        return blob_item_id(ns, channel, version), ""  # versions are the value items' ids


class CosmosBackend(_CosmosVersions, r.Backend):
    """``CosmosDBSaver``: the operations as Cosmos DB ops (``retention_flow``), in transactional
    batches of at most 100 operations per thread; no transaction spans batches. Blob offload's
    operations are ``_blobs``'s flows, safe against concurrent writers without a transaction."""

    stores_blobs = True

    def _run(self, flow: r.Flow) -> Any:
        return self.saver._run(retention_flow(flow, self.saver.serde, offload=_offloads(self.saver)))

    def _put_snapshot(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        # the saver's put without its reduction: the values are those it stored, reduced once
        return self.saver._store(config, checkpoint, metadata, versions)

    def _size(self) -> int | None:
        reported = documents_bytes(self.saver._resource_usage())
        return reported if reported is not None else self.saver._run(stored_bytes_flow())

    def _vacuum(self) -> None:
        return None


class AsyncCosmosBackend(_CosmosVersions, r.Backend):
    """``AsyncCosmosDBSaver``: as ``CosmosBackend``, on ``azure.cosmos.aio``; the sync forms run
    on the saver's event loop from another thread."""

    is_async = True
    stores_blobs = True

    def run(self, flow: r.Flow) -> Any:
        return self.saver._sync(self.arun(flow))

    def snapshots(self, flow: r.Flow) -> Any:
        return self.saver._sync(self.asnapshots(flow))

    def size(self) -> int | None:
        return self.saver._sync(self._asize())

    def vacuum(self) -> None:
        return None

    async def _arun(self, flow: r.Flow) -> Any:
        return await self.saver._run(retention_flow(flow, self.saver.serde, offload=_offloads(self.saver)))

    async def _aput_snapshot(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        # the saver's aput without its reduction: the values are those it stored, reduced once
        return await self.saver._astore(config, checkpoint, metadata, versions)

    async def _asize(self) -> int | None:
        reported = documents_bytes(await self.saver._aresource_usage())
        return reported if reported is not None else await self.saver._run(stored_bytes_flow())

    async def _avacuum(self) -> None:
        return None
