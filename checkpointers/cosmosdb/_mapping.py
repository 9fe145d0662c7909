"""Pure document mapping of the Cosmos DB checkpointer, shared by ``CosmosDBSaver`` and
``AsyncCosmosDBSaver``: no I/O here.

Data model (one container, partition key ``/pk``):

* every item of a thread lives in the logical partition ``pk = encode(thread_id)``, so each
  operation on a thread is single-partition and a put is one transactional batch;
* ``kind == "checkpoint"``: one item per checkpoint (``id = c!<ns>!<checkpoint_id>``): the
  serialized checkpoint *without* its channel values, JSON metadata (filterable), the parent id and
  ``blobs``, the ids of the channel-value items it reads;
* ``kind == "blob"``: one channel value per (namespace, channel, version)
  (``id = b!<ns>!<channel>!<version>``), written only when the channel is in ``new_versions``, so an
  unchanged history is never rewritten;
* ``kind == "write"``: one pending write per (checkpoint, task, idx)
  (``id = w!<ns>!<checkpoint_id>!<task_id>!<idx>``), ``cp`` naming its checkpoint item.

Values are serialized with the saver's ``serde`` and stored base64 in ``data``. A value larger than
``CHUNK_BYTES`` is split: the head item (``part`` 0) holds ``parts``, the others are
``<id>!<part>``; all of one value share ``ref`` (the head id) and are fetched by it.

Every user-supplied string in an id (thread id, namespace, checkpoint id, channel, task id,
version) goes through ``encode_part``: reversible escaping into ``[A-Za-z0-9_.-~]``, or a SHA-256
when too long, so ids never hold ``/ \\ ? #`` and stay far below 1,023 bytes. Ids are never parsed
back: the raw values are stored as fields.

Multi-step operations are flows (``checkpointers._flow``): generators of ``Op``s (``Read``,
``Query``, ``Pages``, ``NextPage``, ``Batch``, ``Exists``; a listing also yields ``Emit``), each
written once for sync and async and driven by ``_flow.drive``/``iterate`` (``adrive``/``aiterate``)
with the I/O half's ``execute``. When ``execute`` answers an op with ``Missing`` (Cosmos DB said
404), ``explaining_missing`` has the flow ask with ``Exists`` ops whether the container or database
is gone and raise ``ContainerNotFoundError`` naming it (``explain_missing_flow``), so neither half
decides that on its own.

Names and keys are checked before any request (``check_name``, ``check_account_key``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import random
import re
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias, TypeVar, overload

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .._flow import Emit, recovering

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
#: Characters of ids passed as one query's array parameters; bigger sets are split across queries
#: (Cosmos DB limits a query request's size).
MAX_QUERY_PARAM_CHARS = 100_000
#: Page size of paged checkpoint listings.
PAGE_SIZE = 100

# -- names and keys, checked before any request ----------------------------------------------------

#: Cosmos DB's limit on a database or container name (characters).
MAX_NAME_CHARS = 255
#: Characters a Cosmos DB resource id may not contain: they are separators of the request's URL.
_FORBIDDEN_NAME_CHARS = ("/", "\\", "?", "#")
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def check_name(what: str, name: Any) -> None:
    """Raise ``ValueError`` unless ``name`` is a database or container name Cosmos DB accepts: a
    str of 1 to 255 characters, not blank, not ending with a space, without ``/ \\ ? #``.
    ``what`` names the argument in the message.

    >>> check_name("container_name", "checkpoints")
    >>> check_name("container_name", "a/b")
    Traceback (most recent call last):
    ...
    ValueError: container_name 'a/b' is not a valid Cosmos DB name: it contains '/' (names may not \
contain '/', '\\\\', '?' or '#', nor end with a space)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty str (or pass container=), got {name!r}")
    why = None
    bad = [ch for ch in _FORBIDDEN_NAME_CHARS if ch in name]
    if bad:
        why = f"contains {bad[0]!r}"
    elif not name.strip():
        why = "is blank"
    elif name.endswith(" "):
        why = "ends with a space"
    elif len(name) > MAX_NAME_CHARS:
        why = f"is {len(name)} characters long; the limit is {MAX_NAME_CHARS}"
    if why is not None:
        raise ValueError(
            f"{what} {name!r} is not a valid Cosmos DB name: it {why} (names may not contain "
            "'/', '\\\\', '?' or '#', nor end with a space)"
        )


def check_account_key(key: str, source: str) -> None:
    """Raise ``ValueError`` unless ``key`` is a base64 account key (what the SDK signs requests
    with; it would fail on the first request with ``binascii.Error``). Surrounding whitespace is
    allowed. ``source`` says where the key came from. The message never contains the key.

    >>> check_account_key("c2VjcmV0", "given as credential=")
    >>> check_account_key("not-base64", "in COSMOSDB_KEY")
    Traceback (most recent call last):
    ...
    ValueError: the Cosmos DB key in COSMOSDB_KEY is not a valid base64 account key (it has \
characters outside A-Z, a-z, 0-9, '+', '/' and '=' padding): use the account's primary or \
secondary key as the Azure portal shows it (Keys), or pass a TokenCredential
    """
    text = key.strip()
    hint = (
        "use the account's primary or secondary key as the Azure portal shows it (Keys), or pass a "
        "TokenCredential"
    )
    if not text:
        raise ValueError(f"the Cosmos DB key {source} is empty: {hint}")
    if not set(text) <= _BASE64_CHARS:
        why = "it has characters outside A-Z, a-z, 0-9, '+', '/' and '=' padding"
    else:
        try:
            base64.b64decode(text, validate=True)
            return
        except (binascii.Error, ValueError):
            why = "its length or '=' padding is wrong"
    raise ValueError(f"the Cosmos DB key {source} is not a valid base64 account key ({why}): {hint}")


# -- ids -------------------------------------------------------------------------------------------

_SAFE = re.compile(r"[A-Za-z0-9_.\-]*\Z")
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
#: Longest escaped segment kept readable; longer ones are hashed (ids stay < 1,023 bytes).
_PART_BUDGET = 128
#: Partition key values: up to 2 KB on Cosmos DB; escaped thread ids longer than this are hashed.
_PK_BUDGET = 256


def encode_part(value: str, budget: int = _PART_BUDGET) -> str:
    """``value`` as a legal, injective id segment over ``[A-Za-z0-9_.-~]``.

    Characters outside ``[A-Za-z0-9_.-]`` become ``~XX`` per UTF-8 byte (uppercase hex); a result
    longer than ``budget`` becomes ``~h`` + SHA-256 of the value. Escapes never contain ``~h``, so the
    two forms cannot collide, and ``!`` (the separator between segments) never occurs in a segment.

    >>> encode_part("thread 1/ä#")
    'thread~201~2F~C3~A4~23'
    >>> encode_part("x" * 300)[:2], len(encode_part("x" * 300))
    ('~h', 66)
    """
    if _SAFE.match(value):
        escaped = value
    else:
        escaped = "".join(
            ch if ch in _SAFE_CHARS else "".join(f"~{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
            for ch in value
        )
    if len(escaped) <= budget:
        return escaped
    return "~h" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _encode_version(version: Any) -> str:
    # Versions are strings here (get_next_version) but conformance tests and other savers use ints:
    # the type is part of the segment so 1 and "1" stay distinct.
    if isinstance(version, str):
        return encode_part(version)
    if isinstance(version, bool) or not isinstance(version, (int, float)):
        raise TypeError(f"channel versions must be str, int or float, got {type(version).__name__}")
    return f"~i{version}" if isinstance(version, int) else f"~f{version!r}"


def partition_key(thread_id: str) -> str:
    """The partition key value of a thread."""
    return encode_part(thread_id, _PK_BUDGET)


def checkpoint_item_id(checkpoint_ns: str, checkpoint_id: str) -> str:
    return f"c!{encode_part(checkpoint_ns)}!{encode_part(checkpoint_id)}"


def blob_item_id(checkpoint_ns: str, channel: str, version: Any) -> str:
    return f"b!{encode_part(checkpoint_ns)}!{encode_part(channel)}!{_encode_version(version)}"


def write_item_id(checkpoint_ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return f"w!{encode_part(checkpoint_ns)}!{encode_part(checkpoint_id)}!{encode_part(task_id)}!{idx}"


def _chunk_id(head_id: str, part: int) -> str:
    return f"{head_id}!{part}"


def next_version(current: Any) -> str:
    """String versions like LangGraph's Postgres saver: a zero-padded counter, then a random
    fraction. Forks from one parent get distinct versions, so a (channel, version) item is written
    once and never means two values."""
    if current is None:
        n = 0
    elif isinstance(current, int):
        n = current
    else:
        n = int(str(current).split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


# -- config ----------------------------------------------------------------------------------------


class CheckpointAddress(NamedTuple):
    """The thread, namespace and checkpoint a RunnableConfig's ``configurable`` part names, parsed
    once."""

    thread_id: str
    #: None only where "every namespace" is meant (list)
    checkpoint_ns: str | None
    checkpoint_id: str | None

    @property
    def pk(self) -> str:
        return partition_key(self.thread_id)


def parse_config(config: RunnableConfig, *, any_namespace: bool = False) -> CheckpointAddress:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ValueError(
            "config['configurable']['thread_id'] is required, e.g. "
            "{'configurable': {'thread_id': 'my-thread'}}"
        )
    ns = conf.get("checkpoint_ns")
    if ns is None and not any_namespace:
        ns = ""
    return CheckpointAddress(str(thread_id), None if ns is None else str(ns), get_checkpoint_id(config))


def thread_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    conf = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
    return {"configurable": conf}


# -- ops -------------------------------------------------------------------------------------------


class Op:
    """What a flow asks its saver's I/O half to do: ``Read``, ``Query``, ``Pages``, ``NextPage``,
    ``Batch`` or ``Exists``; each says what its result is."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Read(Op):
    """Point read of one item; result: the item, or None when it does not exist."""

    pk: str
    id: str


@dataclass(frozen=True, slots=True)
class Query(Op):
    """A parameterized query; result: all rows. ``pk`` None: cross-partition."""

    sql: str
    params: tuple[tuple[str, Any], ...]
    pk: str | None

    @property
    def parameters(self) -> list[dict[str, Any]]:
        return [{"name": n, "value": v} for n, v in self.params]


@dataclass(frozen=True, slots=True)
class Pages(Op):
    """Start a paged query; result: a pager handle for ``NextPage``."""

    query: Query
    page_size: int


@dataclass(frozen=True, slots=True)
class NextPage(Op):
    """Next page of a ``Pages`` query; result: its rows, or None when there are no more."""

    pager: Any


@dataclass(frozen=True, slots=True)
class Batch(Op):
    """One transactional batch (<= 100 operations, <= 2 MB) in one partition; result: None.

    ``missing_ok``: the operations are deletes/patches of items that may already be gone (TTL,
    a concurrent delete); the driver then retries them one by one, ignoring 404."""

    pk: str
    operations: tuple[tuple[str, tuple[Any, ...]], ...]
    missing_ok: bool = False


@dataclass(frozen=True, slots=True)
class Exists(Op):
    """Does the saver's container (or, ``database=True``, its database) exist? Result: True, False,
    or None when that cannot be told (no database handle, or the service refused to say)."""

    database: bool = False


R = TypeVar("R")
#: A flow of Cosmos DB ops returning ``R``; each op's result is as its class says.
CosmosFlow: TypeAlias = Generator[Op, Any, R]
#: A listing: a flow that also emits the checkpoints it lists, newest first.
ListingFlow: TypeAlias = Generator[Op | Emit[CheckpointTuple], Any, None]


# -- a missing container or database ---------------------------------------------------------------


class ContainerNotFoundError(LookupError):
    """The saver's Cosmos DB container (or its database) does not exist: deleted under a running
    saver, or never created (``create_if_missing=False``). ``setup()`` creates them. The SDK's
    404 error is the ``__cause__``."""

    def __init__(self, message: str, database: str | None, container: str) -> None:
        super().__init__(message)
        #: the database name, or None for a saver given only ``container=``
        self.database = database
        self.container = container


class Missing(Exception):
    """What an I/O half's ``execute`` raises when Cosmos DB answered an op with 404; the driver
    then finds out what is missing (``explaining_missing``). Never escapes a saver."""

    def __init__(
        self, error: BaseException, *, database: str | None, container: str, sub_status: Any = None,
        item: bool = False,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.database = database
        self.container = container
        #: the 404's sub-status: 0 on Cosmos DB means "no such item", 1003 "no such container"
        self.sub_status = sub_status
        #: the op was a point read, which may miss an item of an existing container
        self.item = item


def explain_missing_flow(miss: Missing) -> CosmosFlow[None]:
    """After a 404: return (the op's result is None) when it was a point read of a missing item
    in an existing container; raise ``ContainerNotFoundError`` when the container or database is
    gone; else re-raise the SDK's error. One round trip (container properties) unless Cosmos DB
    already said "no such item" (sub-status 0), two when the container is gone."""
    if miss.item and miss.sub_status == 0:
        return None
    container_exists = yield Exists()
    if container_exists is not False:  # there, or cannot be checked: a point read missed its item
        if miss.item:
            return None
        raise miss.error  # some other 404: not ours to explain
    database_exists = None if miss.database is None else (yield Exists(database=True))
    raise _missing_error(miss.database, miss.container, database_exists) from miss.error


def _missing_error(
    database: str | None, container: str, database_exists: bool | None
) -> ContainerNotFoundError:
    if database is None:
        text = (
            f"Cosmos DB container {container!r} does not exist (deleted, or never created): create it with "
            f"partition key {PARTITION_KEY_PATH!r}, or pass client= and database_name= so setup() can"
        )
    elif database_exists is False:
        text = (
            f"Cosmos DB database {database!r} does not exist (deleted, or never created), so neither does "
            f"its container {container!r}: run the saver's setup() to create them"
        )
    else:
        text = (
            f"Cosmos DB container {container!r} does not exist in database {database!r} (deleted, or "
            "never created): run the saver's setup() to create it"
        )
    return ContainerNotFoundError(text, database, container)


@overload
def explaining_missing(flow: ListingFlow) -> ListingFlow: ...


@overload
def explaining_missing(flow: CosmosFlow[R]) -> CosmosFlow[R]: ...


def explaining_missing(flow: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """``flow`` with each ``Missing`` explained by ``explain_missing_flow``: the op's result is
    None (an item's miss) or the flow gets ``ContainerNotFoundError`` (or the SDK's error) there."""
    return recovering(flow, Missing, explain_missing_flow)


# -- values: serialize, chunk, reassemble ----------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def value_items(
    head_id: str, group: Mapping[str, Any], head: Mapping[str, Any], typed: tuple[str, bytes]
) -> list[dict[str, Any]]:
    """The items of one serialized value: the head (``group`` + ``head`` fields + first chunk) and
    one item per further chunk (``group`` fields only). All share ``ref = head_id``."""
    type_, data = typed
    chunks = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    items = [{"id": head_id, **group, "ref": head_id, **head, "type": type_, "part": 0,
              "parts": len(chunks), "data": _b64(chunks[0])}]
    items.extend(
        {"id": _chunk_id(head_id, part), **group, "ref": head_id, "part": part, "data": _b64(chunk)}
        for part, chunk in enumerate(chunks[1:], start=1)
    )
    return items


@dataclass(frozen=True, slots=True)
class Value:
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


def _json_exact(value: Any) -> bool:
    """True when ``value`` survives a JSON round trip through Cosmos DB unchanged."""
    t = type(value)
    if value is None or t is str or t is bool:
        return True
    if t is int:
        return abs(value) <= _MAX_EXACT_INT
    if t is float:
        return math.isfinite(value)
    if t is list:
        return all(_json_exact(v) for v in value)
    if t is dict:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    return False


def metadata_fields(
    config: RunnableConfig, metadata: CheckpointMetadata, serde: SerializerProtocol
) -> dict[str, Any]:
    """``metadata`` (JSON, filterable) and, when some value is not plain JSON, ``metadata_typed``
    (the exact metadata, serialized) so reads return exactly what was put."""
    md = get_serializable_checkpoint_metadata(config, metadata)
    plain = {k: v for k, v in md.items() if _json_exact(v)}
    fields: dict[str, Any] = {"metadata": plain}
    if len(plain) != len(md):
        type_, data = serde.dumps_typed(md)
        fields["metadata_typed"] = [type_, _b64(data)]
    return fields


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def metadata_conditions(filter: Mapping[str, Any] | None) -> tuple[list[str], list[tuple[str, Any]]]:
    """WHERE conditions and parameters for a metadata filter.

    Keys come from users: each must be identifier-like (``[A-Za-z_][A-Za-z0-9_]*``), dots separate
    nested keys (``{"parents.child": "x"}``), and a dict value matches by containment like the
    Postgres saver's ``@>`` (``{"a": {"b": 1}}`` is ``a.b == 1``). A validated key is written as a
    quoted property name (``c["metadata"]["step"]``: brackets also allow names that are Cosmos SQL
    keywords, such as ``value``); values are always parameters.
    """
    conds: list[str] = []
    params: list[tuple[str, Any]] = []
    if not filter:
        return conds, params
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict of metadata keys to values, got {type(filter).__name__}")

    def add(path: list[str], value: Any) -> None:
        expr = 'c["metadata"]' + "".join(f'["{p}"]' for p in path)
        if type(value) is dict and value:
            for k, v in value.items():
                add([*path, *_split_key(k)], v)
            return
        if type(value) is dict:  # {} matches any object, as containment does
            conds.append(f"IS_OBJECT({expr})")
            return
        if not _json_exact(value):
            raise TypeError(
                f"metadata filter value for {'.'.join(path)!r} must be JSON (str, int, float, bool, None, "
                f"list, dict), got {type(value).__name__}"
            )
        name = f"@f{len(params)}"
        params.append((name, value))
        conds.append(f"{expr} = {name}")

    for key, value in filter.items():
        add(_split_key(key), value)
    return conds, params


def _split_key(key: Any) -> list[str]:
    if not isinstance(key, str):
        raise ValueError(f"metadata filter keys must be strings, got {type(key).__name__}: {key!r}")
    parts = key.split(".")
    if not all(_KEY.match(p) for p in parts):
        raise ValueError(
            f"invalid metadata filter key {key!r}: use letters, digits and '_' (not starting with a "
            "digit), with '.' between nested keys, e.g. 'source' or 'parents.child'"
        )
    return parts


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


def _group(pk: str, kind: str, thread_id: str, ns: str, ttl: int | None, **extra: Any) -> dict[str, Any]:
    g: dict[str, Any] = {"pk": pk, "kind": kind, "v": SCHEMA, "thread_id": thread_id, "checkpoint_ns": ns}
    g.update(extra)
    if ttl is not None:
        g["ttl"] = ttl
    return g


def blob_items(
    address: CheckpointAddress, channel: str, version: Any, value: Any, serde: SerializerProtocol, ttls: Ttls
) -> list[dict[str, Any]]:
    ns = address.checkpoint_ns or ""
    head_id = blob_item_id(ns, channel, version)
    group = _group(address.pk, "blob", address.thread_id, ns, ttls.blob)
    return value_items(head_id, group, {"channel": channel, "version": version}, serde.dumps_typed(value))


@dataclass(frozen=True, slots=True)
class PutPlan:
    pk: str
    batches: list[list[tuple[str, tuple[Any, ...]]]]
    next_config: RunnableConfig
    #: head ids of the channel values written (for the saver's TTL refresh bookkeeping)
    blob_ids: list[str]

    def flow(self) -> CosmosFlow[RunnableConfig]:
        for batch in self.batches:
            yield Batch(self.pk, tuple(batch))
        return self.next_config


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
        **_group(address.pk, "checkpoint", address.thread_id, ns, ttls.checkpoint),
        "checkpoint_id": cid,
        "parent_checkpoint_id": address.checkpoint_id,
        "blobs": [blob_item_id(ns, ch, ver) for ch, ver in checkpoint["channel_versions"].items()],
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
    group = _group(address.pk, "write", address.thread_id, ns, ttls.checkpoint, checkpoint_id=cid,
                   cp=checkpoint_item_id(ns, cid))
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


# -- reads -----------------------------------------------------------------------------------------

_CHECKPOINT = "c.kind = 'checkpoint'"


def latest_query(address: CheckpointAddress) -> Query:
    return Query(
        f"SELECT TOP 1 * FROM c WHERE {_CHECKPOINT} AND c.thread_id = @thread AND c.checkpoint_ns = @ns "
        "ORDER BY c.checkpoint_id DESC",
        (("@thread", address.thread_id), ("@ns", address.checkpoint_ns or "")),
        address.pk,
    )


def list_query(
    address: CheckpointAddress | None,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> Query:
    conds = [_CHECKPOINT]
    params: list[tuple[str, Any]] = []
    if address is not None:
        conds.append("c.thread_id = @thread")
        params.append(("@thread", address.thread_id))
        if address.checkpoint_ns is not None:
            conds.append("c.checkpoint_ns = @ns")
            params.append(("@ns", address.checkpoint_ns))
        if address.checkpoint_id is not None:
            conds.append("c.checkpoint_id = @cid")
            params.append(("@cid", address.checkpoint_id))
    md_conds, md_params = metadata_conditions(filter)
    conds += md_conds
    params += md_params
    if before is not None and (before_id := get_checkpoint_id(before)) is not None:
        conds.append("c.checkpoint_id < @before")
        params.append(("@before", before_id))
    top = ""
    if limit is not None:
        top = "TOP @limit "
        params.append(("@limit", limit))
    sql = f"SELECT {top}* FROM c WHERE {' AND '.join(conds)} ORDER BY c.checkpoint_id DESC"
    return Query(sql, tuple(params), None if address is None else address.pk)


def _split_by_size(values: Sequence[str], budget: int = MAX_QUERY_PARAM_CHARS) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for v in values:
        if current and size + len(v) > budget:
            out.append(current)
            current, size = [], 0
        current.append(v)
        size += len(v) + 4
    if current:
        out.append(current)
    return out


def values_queries(docs: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries for the channel values and pending writes of ``docs`` (checkpoint items): one in the
    usual case, whatever the number of checkpoints (never a query per checkpoint); more only when
    the ids would make one query too large."""
    units: list[tuple[str, str, list[str]]] = []  # (pk, field, ids): "ref" for values, "cp" for writes
    by_pk: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for doc in docs:
        blobs, cps = by_pk.setdefault(doc["pk"], ({}, {}))
        blobs.update(dict.fromkeys(doc.get("blobs") or ()))
        cps[doc["id"]] = None
    for pk, (blobs, cps) in by_pk.items():
        units += [(pk, "ref", part) for part in _split_by_size(list(blobs))]
        units += [(pk, "cp", part) for part in _split_by_size(list(cps))]
    queries: list[Query] = []
    clauses: list[str] = []
    params: list[tuple[str, Any]] = []
    pks: set[str] = set()
    size = 0
    for pk, column, ids in units:
        n = sum(len(i) + 4 for i in ids)
        if clauses and size + n > MAX_QUERY_PARAM_CHARS:
            queries.append(_or_query(clauses, params, pks))
            clauses, params, pks, size = [], [], set(), 0
        i = len(clauses)
        params += [(f"@p{i}", pk), (f"@v{i}", ids)]
        clauses.append(f"(c.pk = @p{i} AND ARRAY_CONTAINS(@v{i}, c.{column}))")
        pks.add(pk)
        size += n
    if clauses:
        queries.append(_or_query(clauses, params, pks))
    return queries


def _or_query(clauses: list[str], params: list[tuple[str, Any]], pks: set[str]) -> Query:
    # one partition: a partition-scoped query; several (list across threads): cross-partition
    pk = next(iter(pks)) if len(pks) == 1 else None
    return Query(f"SELECT * FROM c WHERE {' OR '.join(clauses)}", tuple(params), pk)


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


def _tuples(
    docs: Sequence[Mapping[str, Any]], rows: Iterable[Mapping[str, Any]], serde: SerializerProtocol
) -> list[CheckpointTuple]:
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
    return _tuples([doc], rows, serde)[0]


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
        for tup in _tuples(docs, rows, serde):
            yield Emit(tup)


# -- deletes, prune, copy --------------------------------------------------------------------------

#: What prune and delete_for_runs read of a thread's checkpoints.
_CHECKPOINT_ROWS_SQL = (
    "SELECT c.id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.blobs, "
    'c.metadata.run_id AS run_id, c.metadata.parents[""] AS root, '
    "(IS_DEFINED(c.metadata.counters_since_delta_snapshot) OR IS_DEFINED(c.metadata.delta_writes_versioned)) "
    f"AS delta FROM c WHERE {_CHECKPOINT} AND c.thread_id = @thread"
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


def plan_keep_latest(rows: Sequence[Mapping[str, Any]]) -> Removal:
    """Pure: keep the latest checkpoint of each namespace of a thread.

    A subgraph call's namespace (``node:<task id>``) goes with the root checkpoint it started from
    (``metadata.parents[""]``): when that root checkpoint is saved but not kept, the call's whole
    namespace is removed, as the Postgres saver's keep_latest does.
    """
    if delta := sorted({r["checkpoint_ns"] for r in rows if r.get("delta")}):
        raise NotImplementedError(
            f"keep_latest can't prune a thread that uses a DeltaChannel (namespaces {delta}): its values "
            "are rebuilt from the history of writes; use strategy='delete' or keep the history"
        )
    heads: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        ns = r["checkpoint_ns"]
        if ns not in heads or r["checkpoint_id"] > heads[ns]["checkpoint_id"]:
            heads[ns] = r
    root_ids = {r["checkpoint_id"] for r in rows if r["checkpoint_ns"] == ""}
    kept_root = heads[""]["checkpoint_id"] if "" in heads else None
    keep = {
        head["id"]
        for ns, head in heads.items()
        if not (":" in ns and head.get("root") in root_ids and head.get("root") != kept_root)
    }
    return plan_removal(rows, {r["id"] for r in rows if r["id"] not in keep})


def _ids_where_in(pk: str, column: str, values: Sequence[str]) -> Iterator[Query]:
    for part in _split_by_size(values):
        yield Query(f"SELECT c.id FROM c WHERE ARRAY_CONTAINS(@v, c.{column})", (("@v", part),), pk)


def removal_flow(pk: str, removal: Removal) -> CosmosFlow[None]:
    """Writes of the removed checkpoints, then the checkpoints (and parent relinks), then the
    garbage values: a reader never meets a checkpoint whose values are gone."""
    write_ids: list[str] = []
    for query in _ids_where_in(pk, "cp", removal.checkpoints):
        write_ids.extend(r["id"] for r in (yield query))
    ops = _delete_ops(write_ids) + _delete_ops(removal.checkpoints)
    ops += [
        ("patch", (i, [{"op": "set", "path": "/parent_checkpoint_id", "value": parent}]))
        for i, parent in removal.relink
    ]
    for batch in plan_batches(ops):
        yield Batch(pk, tuple(batch), missing_ok=True)
    blob_ids: list[str] = []
    for query in _ids_where_in(pk, "ref", removal.garbage):
        blob_ids.extend(r["id"] for r in (yield query))
    for batch in plan_batches(_delete_ops(blob_ids)):
        yield Batch(pk, tuple(batch), missing_ok=True)


PRUNE_STRATEGIES = ("keep_latest", "delete")


def prune_flow(thread_ids: Sequence[str], strategy: str) -> CosmosFlow[None]:
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}; use one of {PRUNE_STRATEGIES}")
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a list of thread ids, not one string")
    for thread_id in dict.fromkeys(str(t) for t in thread_ids):
        if strategy == "delete":
            yield from delete_thread_flow(thread_id)
            continue
        pk = partition_key(thread_id)
        rows = yield Query(_CHECKPOINT_ROWS_SQL, (("@thread", thread_id),), pk)
        yield from removal_flow(pk, plan_keep_latest(rows))


def delete_for_runs_flow(run_ids: Sequence[str]) -> CosmosFlow[None]:
    """Checkpoints whose ``metadata.run_id`` is one of ``run_ids`` (any thread), with their writes
    and the values only they read; later checkpoints are relinked to their nearest kept ancestor."""
    if isinstance(run_ids, str):
        raise TypeError("run_ids must be a list of run ids, not one string")
    runs = list(dict.fromkeys(str(r) for r in run_ids))
    if not runs:
        return
    threads: dict[str, None] = {}
    for part in _split_by_size(runs):
        rows = yield Query(
            f"SELECT c.thread_id FROM c WHERE {_CHECKPOINT} AND ARRAY_CONTAINS(@runs, c.metadata.run_id)",
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
_SYSTEM = frozenset(("_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"))


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
                item = {k: v for k, v in row.items() if k not in _SYSTEM and k != "ttl"}
                item["pk"], item["thread_id"] = dst_pk, target
                if ttl is not None:
                    item["ttl"] = ttl
                ops.append(("upsert", (item,)))
            for batch in plan_batches(ops):
                yield Batch(dst_pk, tuple(batch))


# -- container settings ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerCheck:
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
