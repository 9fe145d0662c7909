"""The items the Cosmos DB checkpointer stores: the container's layout and limits, values and
metadata as fields, the items of a put in batches, and checkpoint tuples built back from items.

Values are serialized with the saver's ``serde`` and stored base64 in ``data``. A value larger than
``CHUNK_BYTES`` is split: the head item (``part`` 0) holds ``parts``, the others are
``<id>!<part>``; all of one value share ``ref`` (the head id) and are fetched by it. The head is
written after the other chunks.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._ids import (
    CheckpointAddress,
    blob_item_id,
    checkpoint_item_id,
    chunk_item_id,
    parse_config,
    thread_config,
)

# -- one source of truth for the container ---------------------------------------------------------

#: The container's partition key path; its value is the encoded thread id.
PARTITION_KEY_PATH = "/pk"

#: Only the fields queries filter or sort on are indexed: values (``data``) are large and never
#: queried, and indexing them would cost request units on every write.
INDEXING_POLICY: dict[str, Any] = {
    "indexingMode": "consistent",
    "automatic": True,
    "includedPaths": [
        {"path": "/kind/?"},
        {"path": "/thread_id/?"},
        {"path": "/checkpoint_ns/?"},
        {"path": "/checkpoint_id/?"},
        {"path": "/ref/?"},
        {"path": "/cp/?"},
        {"path": "/metadata/*"},
    ],
    "excludedPaths": [{"path": "/*"}, {"path": '/"_etag"/?'}],
}

#: Stored in every item, so a later layout can be told apart.
SCHEMA = 1

# -- Cosmos DB limits (real Cosmos DB enforces them; the local test server does not) ----------------

#: Raw bytes per chunk: base64 makes 1 MiB into 1,398,104 characters, well under the 2 MB item limit
#: with room for the other fields.
CHUNK_BYTES = 1024 * 1024
#: Cosmos DB's item size limit (UTF-8 JSON), and the request payload limit of a transactional batch.
MAX_ITEM_BYTES = 2 * 1024 * 1024
#: What a batch may carry: the 2 MB request limit less room for the request envelope.
MAX_BATCH_BYTES = 1_900_000
#: Cosmos DB's limit on operations per transactional batch.
MAX_BATCH_OPS = 100
#: Per-operation envelope estimate in a batch request (operation type, id, ...).
_OP_OVERHEAD = 128


# -- values: serialize, chunk, reassemble ----------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def value_items(
    head_id: str, group: Mapping[str, Any], head: Mapping[str, Any], typed: tuple[str, bytes]
) -> list[dict[str, Any]]:
    """The items of one serialized value: one item per chunk after the first (``group`` fields
    only), then the head (``group`` + ``head`` fields + first chunk). All share ``ref = head_id``.

    The head comes last, so a write split across batches that stops part-way leaves chunks without
    a head, which reads ignore (``assemble``), never a head whose chunks are missing, which would
    make every read of its checkpoint fail."""
    type_, data = typed
    chunks = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    items = [
        {"id": chunk_item_id(head_id, part), **group, "ref": head_id, "part": part, "data": _b64(chunk)}
        for part, chunk in enumerate(chunks[1:], start=1)
    ]
    items.append({"id": head_id, **group, "ref": head_id, **head, "type": type_, "part": 0,
                  "parts": len(chunks), "data": _b64(chunks[0])})
    return items


@dataclass(frozen=True, slots=True)
class Value:
    """A value read back from its items: the head item and the serialized ``(type, bytes)``."""

    head: Mapping[str, Any]
    typed: tuple[str, bytes]


def assemble(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Value]:
    """Group value items by (``pk``, ``ref``) and join their chunks. Refs without a head are left
    out: a put that failed before its last batch leaves such items behind, unreferenced."""
    groups: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["pk"], row["ref"]), {})[row.get("part", 0)] = row
    out: dict[tuple[str, str], Value] = {}
    for key, parts in groups.items():
        head = parts.get(0)
        if head is None:
            continue
        n = head.get("parts", 1)
        missing = [i for i in range(n) if i not in parts]
        if missing:
            raise ValueError(
                f"Cosmos DB item {key[1]!r} of thread {head.get('thread_id')!r} is missing chunk(s) "
                f"{missing} of {n}: the stored value is incomplete (items deleted or expired?)"
            )
        data = b"".join(base64.b64decode(parts[i]["data"]) for i in range(n))
        out[key] = Value(head, (head["type"], data))
    return out


# -- metadata --------------------------------------------------------------------------------------

_MAX_EXACT_INT = 2**53  # Cosmos DB numbers are IEEE doubles


def json_exact(value: Any) -> bool:
    """True when ``value`` survives a JSON round trip through Cosmos DB unchanged."""
    t = type(value)
    if value is None or t is str or t is bool:
        return True
    if t is int:
        return abs(value) <= _MAX_EXACT_INT
    if t is float:
        return math.isfinite(value)
    if t is list:
        return all(json_exact(v) for v in value)
    if t is dict:
        return all(type(k) is str and json_exact(v) for k, v in value.items())
    return False


def metadata_fields(
    config: RunnableConfig, metadata: CheckpointMetadata, serde: SerializerProtocol
) -> dict[str, Any]:
    """``metadata`` (JSON, filterable) and, when some value is not plain JSON, ``metadata_typed``
    (the exact metadata, serialized) so reads return exactly what was put."""
    md = get_serializable_checkpoint_metadata(config, metadata)
    plain = {k: v for k, v in md.items() if json_exact(v)}
    fields: dict[str, Any] = {"metadata": plain}
    if len(plain) != len(md):
        type_, data = serde.dumps_typed(md)
        fields["metadata_typed"] = [type_, _b64(data)]
    return fields


# -- put -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ttls:
    """Per-item TTL in seconds (None: items do not expire).

    TTL counts from an item's last write. A channel value that does not change is not rewritten,
    so it must outlive every checkpoint that reads it: value items get 1.5x the checkpoint TTL and
    the saver rewrites a still-used value at least every ``ttl / 2`` seconds (``refresh_after``)."""

    ttl: int | None

    @property
    def checkpoint(self) -> int | None:
        return self.ttl

    @property
    def blob(self) -> int | None:
        return None if self.ttl is None else self.ttl + (self.ttl + 1) // 2

    @property
    def refresh_after(self) -> float | None:
        return None if self.ttl is None else self.ttl / 2


def item_fields(pk: str, kind: str, thread_id: str, ns: str, ttl: int | None, **extra: Any) -> dict[str, Any]:
    """The fields every item of a ``kind`` carries (and ``extra``); ``ttl`` only when not None."""
    fields: dict[str, Any] = {"pk": pk, "kind": kind, "v": SCHEMA, "thread_id": thread_id}
    fields["checkpoint_ns"] = ns
    fields.update(extra)
    if ttl is not None:
        fields["ttl"] = ttl
    return fields


def blob_items(
    address: CheckpointAddress, channel: str, version: Any, value: Any, serde: SerializerProtocol, ttls: Ttls
) -> list[dict[str, Any]]:
    ns = address.checkpoint_ns or ""
    head_id = blob_item_id(ns, channel, version)
    group = item_fields(address.pk, "blob", address.thread_id, ns, ttls.blob)
    return value_items(head_id, group, {"channel": channel, "version": version}, serde.dumps_typed(value))


@dataclass(frozen=True, slots=True)
class PutPlan:
    """The items of one put in batches (``put_flow`` writes them in order)."""

    pk: str
    batches: list[list[tuple[str, tuple[Any, ...]]]]
    next_config: RunnableConfig
    #: head ids of the channel values written (for the saver's TTL refresh bookkeeping)
    blob_ids: list[str]


def plan_put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    write_versions: Mapping[str, Any],
    serde: SerializerProtocol,
    ttls: Ttls,
) -> PutPlan:
    """Items of one put: a value item (or chunks) per channel in ``write_versions`` whose value is
    in the checkpoint (absent values are not stored; a read then finds the channel empty, as with
    the Postgres saver), then the checkpoint item, last, so no reader sees a checkpoint before its
    values; in as few transactional batches as the limits allow (one for small puts)."""
    address = parse_config(config)
    ns = address.checkpoint_ns or ""
    cid = checkpoint["id"]
    values = checkpoint["channel_values"]
    items: list[dict[str, Any]] = []
    blob_ids: list[str] = []
    for channel, version in write_versions.items():
        if channel in values:
            items.extend(blob_items(address, channel, version, values[channel], serde, ttls))
            blob_ids.append(items[-1]["ref"])
    body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    type_, data = serde.dumps_typed(body)
    doc = {
        "id": checkpoint_item_id(ns, cid),
        **item_fields(address.pk, "checkpoint", address.thread_id, ns, ttls.checkpoint),
        "checkpoint_id": cid,
        "parent_checkpoint_id": address.checkpoint_id,
        "blobs": [blob_item_id(ns, ch, ver) for ch, ver in checkpoint["channel_versions"].items()],
        # retention reads it: whether a step is due after this checkpoint (checkpointers.retention.rules)
        "updated_channels": checkpoint.get("updated_channels"),
        **metadata_fields(config, metadata, serde),
        "type": type_,
        "data": _b64(data),
    }
    size = item_bytes(doc)
    if size > MAX_ITEM_BYTES:
        raise ValueError(
            f"checkpoint {cid!r} of thread {address.thread_id!r} needs a {size:,}-byte Cosmos DB item, over "
            f"the {MAX_ITEM_BYTES:,}-byte item limit (its metadata or channel versions are too large)"
        )
    ops = [("upsert", (item,)) for item in items]
    ops.append(("upsert", (doc,)))
    return PutPlan(address.pk, plan_batches(ops), thread_config(address.thread_id, ns, cid), blob_ids)


def item_bytes(item: Mapping[str, Any]) -> int:
    """Size of an item's JSON as the SDK sends it (``data`` is ASCII base64, counted directly)."""
    data = item.get("data")
    if isinstance(data, str):
        rest = {k: v for k, v in item.items() if k != "data"}
        return len(json.dumps(rest)) + len(data) + 10
    return len(json.dumps(item))


def _op_bytes(op: tuple[str, tuple[Any, ...]]) -> int:
    kind, args = op
    if kind in ("upsert", "create"):
        return item_bytes(args[0]) + _OP_OVERHEAD
    return len(json.dumps(args, default=str)) + _OP_OVERHEAD


def plan_batches(
    ops: Sequence[tuple[str, tuple[Any, ...]]],
    *,
    max_ops: int = MAX_BATCH_OPS,
    max_bytes: int = MAX_BATCH_BYTES,
) -> list[list[tuple[str, tuple[Any, ...]]]]:
    """Split ``ops`` in order into batches within Cosmos DB's limits (100 operations, 2 MB)."""
    batches: list[list[tuple[str, tuple[Any, ...]]]] = []
    current: list[tuple[str, tuple[Any, ...]]] = []
    size = 0
    for op in ops:
        n = _op_bytes(op)
        if current and (len(current) >= max_ops or size + n > max_bytes):
            batches.append(current)
            current, size = [], 0
        current.append(op)
        size += n
    if current:
        batches.append(current)
    return batches


def build_tuple(
    doc: Mapping[str, Any],
    values: Mapping[str, Value],
    writes: Mapping[str, list[Value]],
    serde: SerializerProtocol,
) -> CheckpointTuple:
    """The one place a CheckpointTuple is built from stored items."""
    checkpoint = serde.loads_typed((doc["type"], base64.b64decode(doc["data"])))
    channel_values: dict[str, Any] = {}
    for ref in doc.get("blobs") or ():
        value = values.get(ref)
        if value is not None:
            channel_values[value.head["channel"]] = serde.loads_typed(value.typed)
    checkpoint["channel_values"] = channel_values
    typed = doc.get("metadata_typed")
    if typed:
        metadata = serde.loads_typed((typed[0], base64.b64decode(typed[1])))
    else:
        metadata = dict(doc.get("metadata") or {})
    pending = sorted(
        writes.get(doc["id"], ()),
        key=lambda w: writes_sort_key(w.head.get("task_path", ""), w.head["task_id"], int(w.head["idx"])),
    )
    thread_id, ns = doc["thread_id"], doc["checkpoint_ns"]
    parent = doc.get("parent_checkpoint_id")
    return CheckpointTuple(
        config=thread_config(thread_id, ns, doc["checkpoint_id"]),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=thread_config(thread_id, ns, parent) if parent else None,
        pending_writes=[(w.head["task_id"], w.head["channel"], serde.loads_typed(w.typed)) for w in pending],
    )


def checkpoint_tuples(
    docs: Sequence[Mapping[str, Any]], rows: Iterable[Mapping[str, Any]], serde: SerializerProtocol
) -> list[CheckpointTuple]:
    """The tuples of the checkpoint items ``docs``, their values and writes found in ``rows``."""
    values: dict[tuple[str, str], Value] = {}
    writes: dict[tuple[str, str], list[Value]] = {}
    for key, value in assemble(rows).items():
        if value.head["kind"] == "write":
            writes.setdefault((key[0], value.head["cp"]), []).append(value)
        else:
            values[key] = value
    out = []
    for doc in docs:
        pk = doc["pk"]
        doc_values = {ref: values[(pk, ref)] for ref in doc.get("blobs") or () if (pk, ref) in values}
        doc_writes = {doc["id"]: writes.get((pk, doc["id"]), [])}
        out.append(build_tuple(doc, doc_values, doc_writes, serde))
    return out


# -- container settings ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerCheck:
    """What an existing container needs changed for the saver."""

    #: TTL must be switched on (default_ttl=-1: only items with a ``ttl`` field expire)
    enable_ttl: bool
    indexing_policy: Mapping[str, Any] = field(default_factory=dict)


def check_container(properties: Mapping[str, Any], name: str, ttl: int | None) -> ContainerCheck:
    """Validate an existing container's settings against what the saver needs."""
    paths = (properties.get("partitionKey") or {}).get("paths") or []
    if paths != [PARTITION_KEY_PATH]:
        raise ValueError(
            f"Cosmos DB container {name!r} is partitioned on {paths}, but CosmosDBSaver needs "
            f"[{PARTITION_KEY_PATH!r}]; use a new container name (setup() creates it) or drop this one"
        )
    ttl_on = properties.get("defaultTtl") is not None
    return ContainerCheck(ttl is not None and not ttl_on, properties.get("indexingPolicy") or INDEXING_POLICY)
