"""The Cosmos DB checkpointer's operations as flows (``checkpointers._flow``): each is written once
and driven by both savers; ``plan_*`` functions are pure plans the flows carry out."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from .._flow import Emit
from ._ids import checkpoint_item_id, parse_config, partition_key, write_item_id
from ._items import PutPlan, Ttls, checkpoint_tuples, item_fields, plan_batches, value_items
from ._ops import Batch, ContainerNotFoundError, CosmosFlow, ListingFlow, NextPage, Pages, Query, Read
from ._queries import (
    IS_CHECKPOINT,
    PAGE_SIZE,
    ids_where_in,
    latest_query,
    list_query,
    split_by_size,
    values_queries,
)

logger = logging.getLogger("agentstate_reducer.checkpointers")

# -- put -------------------------------------------------------------------------------------------


def put_flow(plan: PutPlan) -> CosmosFlow[RunnableConfig]:
    """Write the batches of ``plan``, in order; return the config of the checkpoint put.

    The checkpoint item is in the last batch, so a put that fails earlier stored no checkpoint,
    and the value items its earlier batches wrote are named by none. Before the error is raised
    they are deleted (``discard_values_flow``): a failed put leaves nothing behind. A retry writes
    everything again."""
    written: list[Mapping[str, Any]] = []
    try:
        for batch in plan.batches:
            yield Batch(plan.pk, tuple(batch))
            written.extend(args[0] for kind, args in batch if kind == "upsert" and args[0]["kind"] == "blob")
    except ContainerNotFoundError:
        raise  # nothing left to clean up
    except Exception:
        if written:
            yield from discard_values_flow(plan.pk, written)
        raise
    return plan.next_config


def discard_values_flow(pk: str, items: Sequence[Mapping[str, Any]]) -> CosmosFlow[None]:
    """Delete the value ``items`` a failed put wrote, except those of a value a stored checkpoint
    names (a put may rewrite a value its parent reads: the TTL refresh, a put repeated); one
    query per value, then the deletes. If that fails too (the service still unreachable), the
    items stay, named by no checkpoint and never read, and a warning says how many."""
    refs = list(dict.fromkeys(item["ref"] for item in items))
    try:
        named: set[str] = set()
        for ref in refs:
            count = yield Query(
                f"SELECT VALUE COUNT(1) FROM c WHERE {IS_CHECKPOINT} AND ARRAY_CONTAINS(c.blobs, @ref)",
                (("@ref", ref),),
                pk,
            )
            if count and count[0]:
                named.add(ref)
        ids = [item["id"] for item in items if item["ref"] not in named]
        for batch in plan_batches(_delete_ops(ids)):
            yield Batch(pk, tuple(batch), missing_ok=True)
    except Exception as exc:
        logger.warning(
            "a failed Cosmos DB put left %d value item(s) of %d value(s) that no checkpoint names; "
            "deleting them failed too (%s: %s)",
            len(items), len(refs), type(exc).__name__, exc,
        )


def put_writes_flow(
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    serde: SerializerProtocol,
    ttls: Ttls,
) -> CosmosFlow[None]:
    """Pending writes: one item (or chunks) each, keyed by (task, idx) so a retried call
    overwrites instead of duplicating; special channels (ERROR, INTERRUPT, ...) use their fixed
    negative idx as LangGraph requires."""
    address = parse_config(config)
    if address.checkpoint_id is None:
        raise ValueError(
            "put_writes needs config['configurable']['checkpoint_id'] (the checkpoint the writes belong to)"
        )
    ns = address.checkpoint_ns or ""
    cid = address.checkpoint_id
    cp = checkpoint_item_id(ns, cid)
    group = item_fields(address.pk, "write", address.thread_id, ns, ttls.checkpoint, checkpoint_id=cid, cp=cp)
    by_id: dict[str, list[dict[str, Any]]] = {}
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        head = {"task_id": task_id, "task_path": task_path, "idx": idx, "channel": channel}
        head_id = write_item_id(ns, cid, task_id, idx)
        # two writes to one special channel share an idx: the last one wins (one op per id in a batch)
        by_id[head_id] = value_items(head_id, group, head, serde.dumps_typed(value))
    ops = [("upsert", (item,)) for items in by_id.values() for item in items]
    for batch in plan_batches(ops):
        yield Batch(address.pk, tuple(batch))


def get_tuple_flow(config: RunnableConfig, serde: SerializerProtocol) -> CosmosFlow[CheckpointTuple | None]:
    """A checkpoint by id: point read; the latest: ``TOP 1 ... ORDER BY``. Then one query for its
    values and writes: two requests."""
    address = parse_config(config)
    if address.checkpoint_id is not None:
        doc = yield Read(address.pk, checkpoint_item_id(address.checkpoint_ns or "", address.checkpoint_id))
        if doc is not None and doc.get("thread_id") != address.thread_id:
            doc = None  # another thread whose hashed partition key collides: not ours
    else:
        rows = yield latest_query(address)
        doc = rows[0] if rows else None
    if doc is None:
        return None
    rows = []
    for query in values_queries([doc]):
        rows.extend((yield query))
    return checkpoint_tuples([doc], rows, serde)[0]


def list_flow(
    config: RunnableConfig | None,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    serde: SerializerProtocol,
) -> ListingFlow:
    """Checkpoints newest first, a page at a time: one query for a page of checkpoint items, one
    for all their values and writes (``list(limit=10)``: two requests)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
    if limit == 0:
        return
    address = None if config is None else parse_config(config, any_namespace=True)
    query = list_query(address, filter, before, limit)
    pager = yield Pages(query, min(limit or PAGE_SIZE, PAGE_SIZE))
    left = limit
    while left is None or left > 0:
        docs = yield NextPage(pager)
        if not docs:
            return
        if left is not None:
            docs = docs[:left]
            left -= len(docs)
        rows: list[Mapping[str, Any]] = []
        for q in values_queries(docs):
            rows.extend((yield q))
        for tup in checkpoint_tuples(docs, rows, serde):
            yield Emit(tup)


# -- deletes, prune, copy --------------------------------------------------------------------------

#: What delete_for_runs reads of a thread's checkpoints (retention reads its own: ``_retention``).
_CHECKPOINT_ROWS_SQL = (
    "SELECT c.id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.blobs, "
    'c.metadata.run_id AS run_id, c.metadata.parents[""] AS root, '
    "(IS_DEFINED(c.metadata.counters_since_delta_snapshot) OR IS_DEFINED(c.metadata.delta_writes_versioned)) "
    f"AS delta FROM c WHERE {IS_CHECKPOINT} AND c.thread_id = @thread"
)


def _delete_ops(ids: Iterable[str]) -> list[tuple[str, tuple[Any, ...]]]:
    return [("delete", (i,)) for i in ids]


def delete_thread_flow(thread_id: str) -> CosmosFlow[None]:
    """Every item of the thread: checkpoints first, values last, so a concurrent reader never sees
    a checkpoint whose values are gone. (Items are listed and deleted in batches rather than with
    delete_all_items_by_partition_key, which real Cosmos DB runs in the background, later, and only
    where the preview feature is enabled.)"""
    pk = partition_key(thread_id)
    sql = "SELECT c.id, c.kind FROM c WHERE c.thread_id = @thread"
    rows = yield Query(sql, (("@thread", thread_id),), pk)
    order = {"checkpoint": 0, "write": 1, "blob": 2}
    ids = [r["id"] for r in sorted(rows, key=lambda r: order.get(r.get("kind"), 3))]
    for batch in plan_batches(_delete_ops(ids)):
        yield Batch(pk, tuple(batch), missing_ok=True)


@dataclass(frozen=True, slots=True)
class Removal:
    """What removing some checkpoints of one thread takes."""

    #: checkpoint item ids to delete
    checkpoints: list[str]
    #: (kept checkpoint item id, new parent checkpoint id or None): parents that were removed
    relink: list[tuple[str, str | None]]
    #: value head ids that only removed checkpoints read
    garbage: list[str]


def plan_removal(rows: Sequence[Mapping[str, Any]], remove: set[str]) -> Removal:
    """Pure: remove the checkpoint items ``remove`` (ids) of a thread whose checkpoints are ``rows``.

    A kept checkpoint whose parent is removed gets its nearest kept ancestor as parent (None when
    there is none), so histories stay walkable; values no kept checkpoint reads become garbage.
    """
    by_key = {(r["checkpoint_ns"], r["checkpoint_id"]): r for r in rows}
    kept = [r for r in rows if r["id"] not in remove]
    removed = [r for r in rows if r["id"] in remove]
    relink: list[tuple[str, str | None]] = []
    for r in kept:
        parent = new = r.get("parent_checkpoint_id")
        for _ in range(len(rows) + 1):  # bounded: corrupt data could hold a cycle
            row = None if new is None else by_key.get((r["checkpoint_ns"], new))
            if row is None or row["id"] not in remove:
                break
            new = row.get("parent_checkpoint_id")
        else:
            new = None
        if new != parent:
            relink.append((r["id"], new))
    used = {b for r in kept for b in r.get("blobs") or ()}
    freed = dict.fromkeys(b for r in removed for b in r.get("blobs") or ())
    return Removal([r["id"] for r in removed], relink, [b for b in freed if b not in used])


def removal_flow(pk: str, removal: Removal) -> CosmosFlow[None]:
    """Writes of the removed checkpoints, then the checkpoints (and parent relinks), then the
    garbage values: a reader never meets a checkpoint whose values are gone."""
    write_ids: list[str] = []
    for query in ids_where_in(pk, "cp", removal.checkpoints):
        write_ids.extend(r["id"] for r in (yield query))
    ops = _delete_ops(write_ids) + _delete_ops(removal.checkpoints)
    ops += [
        ("patch", (i, [{"op": "set", "path": "/parent_checkpoint_id", "value": parent}]))
        for i, parent in removal.relink
    ]
    for batch in plan_batches(ops):
        yield Batch(pk, tuple(batch), missing_ok=True)
    blob_ids: list[str] = []
    for query in ids_where_in(pk, "ref", removal.garbage):
        blob_ids.extend(r["id"] for r in (yield query))
    for batch in plan_batches(_delete_ops(blob_ids)):
        yield Batch(pk, tuple(batch), missing_ok=True)


def delete_for_runs_flow(run_ids: Sequence[str]) -> CosmosFlow[None]:
    """Checkpoints whose ``metadata.run_id`` is one of ``run_ids`` (any thread), with their writes
    and the values only they read; later checkpoints are relinked to their nearest kept ancestor."""
    if isinstance(run_ids, str):
        raise TypeError("run_ids must be a list of run ids, not one string")
    runs = list(dict.fromkeys(str(r) for r in run_ids))
    if not runs:
        return
    threads: dict[str, None] = {}
    for part in split_by_size(runs):
        rows = yield Query(
            f"SELECT c.thread_id FROM c WHERE {IS_CHECKPOINT} AND ARRAY_CONTAINS(@runs, c.metadata.run_id)",
            (("@runs", part),),
            None,
        )
        threads.update(dict.fromkeys(r["thread_id"] for r in rows))
    wanted = set(runs)
    for thread_id in threads:
        pk = partition_key(thread_id)
        rows = yield Query(_CHECKPOINT_ROWS_SQL, (("@thread", thread_id),), pk)
        remove = {r["id"] for r in rows if r.get("run_id") in wanted}
        if remove:
            yield from removal_flow(pk, plan_removal(rows, remove))


#: Cosmos DB system properties, not copied.
_SYSTEM_PROPERTIES = frozenset(("_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"))


def copy_thread_flow(source_thread_id: str, target_thread_id: str, ttls: Ttls) -> CosmosFlow[None]:
    """Every item of the source thread into the target's partition, values first and checkpoints
    last; item ids do not name the thread, so they stay as they are. The copies get this saver's
    TTL."""
    source, target = str(source_thread_id), str(target_thread_id)
    src_pk, dst_pk = partition_key(source), partition_key(target)
    if (src_pk, source) == (dst_pk, target):
        return
    for kind, ttl in (("blob", ttls.blob), ("write", ttls.checkpoint), ("checkpoint", ttls.checkpoint)):
        query = Query(
            "SELECT * FROM c WHERE c.kind = @kind AND c.thread_id = @thread",
            (("@kind", kind), ("@thread", source)),
            src_pk,
        )
        pager = yield Pages(query, PAGE_SIZE)
        while rows := (yield NextPage(pager)):
            ops: list[tuple[str, tuple[Any, ...]]] = []
            for row in rows:
                item = {k: v for k, v in row.items() if k not in _SYSTEM_PROPERTIES and k != "ttl"}
                item["pk"], item["thread_id"] = dst_pk, target
                if ttl is not None:
                    item["ttl"] = ttl
                ops.append(("upsert", (item,)))
            for batch in plan_batches(ops):
                yield Batch(dst_pk, tuple(batch))
