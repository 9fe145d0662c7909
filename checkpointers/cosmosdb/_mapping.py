"""The pure document mapping of the Cosmos DB checkpointer, shared by ``CosmosDBSaver`` and
``AsyncCosmosDBSaver``, as one namespace: no I/O here.

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

It is written by concern, each module with its invariants:

* ``_ids``: names and keys checked before any request, ids and partition keys (every user string
  encoded), the config a call addresses;
* ``_items``: the container's layout and limits, values (chunked) and metadata as item fields, the
  items of a put in transactional batches, checkpoint tuples built back from items;
* ``_queries``: parameterized queries (metadata filters, listings, values and writes);
* ``_ops``: what a flow asks the I/O half to do (``Read``, ``Query``, ``Pages``, ``NextPage``,
  ``Batch``, ``Exists``) and how a 404 is explained (``ContainerNotFoundError``);
* ``_flows``: every multi-step operation as a flow (``checkpointers._flow``), written once and
  driven by both savers with their ``execute``;
* ``_retention``: the operations of ``checkpointers.retention`` (keep_last, prune, sweep) as
  flows of the ops above, and the retention backends ``sync`` and ``aio`` register for the savers.
"""

from ._flows import (
    Removal,
    copy_thread_flow,
    delete_for_runs_flow,
    delete_thread_flow,
    get_tuple_flow,
    list_flow,
    plan_removal,
    put_flow,
    put_writes_flow,
    removal_flow,
)
from ._ids import (
    MAX_NAME_CHARS,
    CheckpointAddress,
    blob_item_id,
    check_account_key,
    check_name,
    checkpoint_item_id,
    encode_part,
    next_version,
    parse_config,
    partition_key,
    thread_config,
    write_item_id,
)
from ._items import (
    CHUNK_BYTES,
    INDEXING_POLICY,
    MAX_BATCH_BYTES,
    MAX_BATCH_OPS,
    MAX_ITEM_BYTES,
    PARTITION_KEY_PATH,
    SCHEMA,
    ContainerCheck,
    PutPlan,
    Ttls,
    Value,
    assemble,
    build_tuple,
    check_container,
    item_bytes,
    metadata_fields,
    plan_batches,
    plan_put,
    value_items,
)
from ._ops import (
    ITEM_OPS,
    Batch,
    ContainerNotFoundError,
    CosmosFlow,
    Create,
    DeleteIf,
    Exists,
    ListingFlow,
    Missing,
    NextPage,
    Op,
    Pages,
    Query,
    Read,
    ReplaceIf,
    explain_missing_flow,
    explaining_missing,
)
from ._queries import (
    MAX_QUERY_PARAM_CHARS,
    PAGE_SIZE,
    latest_query,
    list_query,
    metadata_conditions,
    values_queries,
)

__all__ = [
    "CHUNK_BYTES",
    "INDEXING_POLICY",
    "ITEM_OPS",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_OPS",
    "MAX_ITEM_BYTES",
    "MAX_NAME_CHARS",
    "MAX_QUERY_PARAM_CHARS",
    "PAGE_SIZE",
    "PARTITION_KEY_PATH",
    "SCHEMA",
    "Batch",
    "CheckpointAddress",
    "ContainerCheck",
    "ContainerNotFoundError",
    "CosmosFlow",
    "Create",
    "DeleteIf",
    "Exists",
    "ListingFlow",
    "Missing",
    "NextPage",
    "Op",
    "Pages",
    "PutPlan",
    "Query",
    "Read",
    "Removal",
    "ReplaceIf",
    "Ttls",
    "Value",
    "assemble",
    "blob_item_id",
    "build_tuple",
    "check_account_key",
    "check_container",
    "check_name",
    "checkpoint_item_id",
    "copy_thread_flow",
    "delete_for_runs_flow",
    "delete_thread_flow",
    "encode_part",
    "explain_missing_flow",
    "explaining_missing",
    "get_tuple_flow",
    "item_bytes",
    "latest_query",
    "list_flow",
    "list_query",
    "metadata_conditions",
    "metadata_fields",
    "next_version",
    "parse_config",
    "partition_key",
    "plan_batches",
    "plan_put",
    "plan_removal",
    "put_flow",
    "put_writes_flow",
    "removal_flow",
    "thread_config",
    "value_items",
    "values_queries",
    "write_item_id",
]
