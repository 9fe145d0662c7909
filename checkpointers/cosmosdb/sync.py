"""``CosmosDBSaver``: the sync I/O half (``azure.cosmos``); its async methods run it off the event loop."""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from .. import retention as _retention
from .._flow import drive, iterate
from ..offload.checkpoint import BlobCache, read_restored
from . import _mapping as m
from ._base import CosmosSaverBase
from ._retention import CosmosBackend, delete_thread_retention_flow

__all__ = ["CosmosDBSaver"]

_DONE = object()
R = TypeVar("R")


def _cosmos() -> Any:
    try:
        import azure.cosmos
    except ImportError as exc:  # pragma: no cover - the [cosmosdb] extra is a test dependency
        raise ImportError(
            "CosmosDBSaver needs the azure-cosmos package: "
            'pip install ".[cosmosdb]" in the agentstate-reducer checkout'
        ) from exc
    return azure.cosmos


def _close_client(client: Any) -> None:
    # A new sync client checks the endpoint's health in a background thread; closing the client
    # under it makes that thread fail noisily, so let it finish first (attribute names are internal
    # to azure-cosmos 4.x; if they change this only skips the wait).
    manager = getattr(getattr(client, "client_connection", None), "_global_endpoint_manager", None)
    thread = getattr(manager, "_refresh_thread", None)
    if thread is not None:
        thread.join(timeout=30)
    client.close()


class CosmosDBSaver(CosmosSaverBase):
    """A LangGraph checkpointer on Azure Cosmos DB (NoSQL API), with the message reducer built in.

    >>> saver = CosmosDBSaver(database_name="mydb", container_name="checkpoints",   # doctest: +SKIP
    ...                       reducer=reducer, messages_key="messages")
    >>> graph = builder.compile(checkpointer=saver)                                   # doctest: +SKIP

    Connection, in order: ``container=`` (a ready ``ContainerProxy``), ``client=`` (a
    ``CosmosClient``; the saver opens ``database_name``/``container_name`` in it), else a client the
    saver creates and owns from ``endpoint=`` (default: ``COSMOSDB_ENDPOINT``) and ``credential=``
    (a key or a TokenCredential; default: ``COSMOSDB_KEY``, else
    ``azure.identity.DefaultAzureCredential``); ``client_kwargs`` go to that client. Close an owned
    client with ``close()`` / ``with saver:``, or use ``CosmosDBSaver.from_conn_info(...)``.

    A key (``credential=`` or ``COSMOSDB_KEY``) must be base64 and the names must follow Cosmos DB's
    rules (no ``/ \\ ? #``, no trailing space, at most 255 characters): both are checked at
    construction (``ValueError``; the key is never shown). A call that finds the container or its
    database gone (deleted under a running saver, or never created with ``create_if_missing=False``)
    raises ``ContainerNotFoundError`` naming it; ``setup()`` creates it again.

    Args:
        database_name, container_name: where checkpoints live (one container; partition key ``/pk``).
        serde: the serializer (default LangGraph's JsonPlusSerializer).
        ttl: seconds a checkpoint lives after it is written (Cosmos DB per-item TTL; None: forever).
            setup() switches TTL on in the container (default_ttl=-1: only items with a ttl expire).
        create_if_missing: the first operation runs ``setup()`` (create database and container if
            missing); False: they must exist (``setup()`` still creates them when called).
        reducer, messages_key, on_reduce, summary_memo: reduce ``channel_values[messages_key]`` on
            every put exactly as ``ReducingCheckpointSaver`` does (the same function); wrapping this
            saver in a ``ReducingCheckpointSaver`` never reduces twice (adoption rule).
        keep_last: keep each thread's newest ``keep_last`` root checkpoints and what they need (the
            rules of ``checkpointers.retention.rules``: subgraph calls follow their root checkpoint, a
            value goes when no kept checkpoint reads it); None (the default) keeps all. Deletions
            run in the thread's partition, in transactional batches of at most 100 operations,
            after the put stored its checkpoint; a failing one never fails the put (logged,
            counted in ``retention_stats``, retried at the thread's next put).
        retention_every, branch_grace: when retention runs, and how long a checkpoint another
            run may still extend is kept, as for ``ReducingCheckpointSaver``.
        offload: a ``checkpointers.BlobOffload``: large and binary content is stored once by its
            SHA-256, as for ``ReducingCheckpointSaver`` (after the reduction), in items of the
            same container (``checkpointers.cosmosdb._blobs``: one partition per blob), or in its
            ``store``; retention, ``prune`` and ``delete_thread`` delete a blob once nothing names
            it. Not with ``ttl`` (``ValueError``); ``copy_thread``/``delete_for_runs`` then raise
            ``NotImplementedError``.

    ``prune(thread_ids, strategy="keep_latest" | "delete")`` follows the same rules (``keep_latest``
    is ``keep_last=1``); ``checkpointers.retention.sweep``/``asweep`` work on this saver too.

    ``aget_tuple``/``alist``/``aput``/... run the sync client in a worker thread
    (``asyncio.to_thread``), so the saver also serves ``graph.ainvoke``; ``AsyncCosmosDBSaver`` uses
    ``azure.cosmos.aio`` natively.
    """

    _aio = False

    @classmethod
    def _require_sdk(cls) -> None:
        _cosmos()

    @classmethod
    @contextmanager
    def from_conn_info(
        cls,
        *,
        endpoint: str | None = None,
        credential: Any = None,
        database_name: str,
        container_name: str = "checkpoints",
        **kwargs: Any,
    ) -> Iterator[CosmosDBSaver]:
        """A saver owning its client, closed on exit. Same keywords as the constructor (without
        ``client=``/``container=``) and as ``AsyncCosmosDBSaver.from_conn_info``."""
        cls._check_conn_info(kwargs)
        saver = cls(database_name, container_name, endpoint=endpoint, credential=credential, **kwargs)
        try:
            yield saver
        finally:
            saver.close()

    def close(self) -> None:
        """Close the client (and credential) if this saver created them; a given client stays open."""
        conn = self._connection
        with conn.lock:
            if conn.owns_client and conn.client is not None:
                _close_client(conn.client)
            if conn.owned_credential is not None:
                conn.owned_credential.close()
            conn.client = conn.database = conn.container = conn.owned_credential = None
            conn.owns_client = conn.ready = False

    def __enter__(self) -> CosmosDBSaver:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- connection and setup ---------------------------------------------------------------------

    def _connect_locked(self) -> None:
        conn, settings = self._connection, self._settings
        if conn.container is not None:
            return
        assert settings.credential is not None
        credential = settings.credential.value
        if credential is None:
            credential = conn.owned_credential = self._default_credential()
        conn.client = _cosmos().CosmosClient(settings.endpoint, credential, **settings.client_kwargs)
        conn.owns_client = True
        conn.database = conn.client.get_database_client(settings.database_name)
        conn.container = conn.database.get_container_client(settings.container_name)

    def _container(self) -> Any:
        conn = self._connection
        if not conn.ready:
            with conn.lock:
                if not conn.ready:
                    self._connect_locked()
                    if self._settings.create_if_missing:
                        self._setup_locked()
                    conn.ready = True
        return conn.container

    def setup(self) -> None:
        """Create the database and container if missing (partition key ``/pk``, the indexing policy
        of ``checkpointers.cosmosdb._mapping``), check an existing one, and switch TTL on when
        ``ttl`` is used. Idempotent."""
        with self._connection.lock:
            self._connect_locked()
            self._setup_locked()
            self._connection.ready = True

    def _setup_locked(self) -> None:
        cosmos = _cosmos()
        conn, settings = self._connection, self._settings
        pk = cosmos.PartitionKey(path=m.PARTITION_KEY_PATH)
        if conn.database is not None:
            try:
                conn.client.create_database_if_not_exists(settings.database_name)
                conn.container = conn.database.create_container_if_not_exists(
                    id=settings.container_name, partition_key=pk, indexing_policy=m.INDEXING_POLICY,
                    default_ttl=-1 if settings.ttls.ttl is not None else None,
                )
            except cosmos.exceptions.CosmosHttpResponseError as exc:
                # Azure AD data-plane roles may not create databases or containers: use existing ones
                if exc.status_code != 403:
                    raise
        try:
            properties = conn.container.read()
        except cosmos.exceptions.CosmosResourceNotFoundError:
            raise ValueError(
                f"Cosmos DB container {conn.container.id!r} does not exist and could not be created with "
                f"this credential; create it with partition key {m.PARTITION_KEY_PATH!r}"
            ) from None
        check = m.check_container(properties, conn.container.id, settings.ttls.ttl)
        if check.enable_ttl:
            if conn.database is None:
                raise ValueError(
                    f"ttl is set but TTL is off in container {conn.container.id!r}; switch it on "
                    "(default_ttl=-1) or pass database_name=/client= so setup() can"
                )
            conn.container = conn.database.replace_container(
                conn.container, partition_key=pk, indexing_policy=dict(check.indexing_policy), default_ttl=-1
            )

    # -- the one place ops meet the SDK -----------------------------------------------------------

    def _execute(self, op: m.Op) -> Any:
        container = self._container()
        cosmos = _cosmos()
        if isinstance(op, m.Exists):
            resource = self._connection.database if op.database else container
            if resource is None:
                return None
            try:
                resource.read()
            except cosmos.exceptions.CosmosResourceNotFoundError:
                return False
            except cosmos.exceptions.CosmosHttpResponseError:
                return None
            return True
        try:
            return self._call(container, op)
        except cosmos.exceptions.CosmosResourceNotFoundError as exc:
            raise self._missing(op, exc) from None  # the driver finds out what is missing

    def _call(self, container: Any, op: m.Op) -> Any:
        cosmos = _cosmos()
        if isinstance(op, m.Read):
            return container.read_item(op.id, partition_key=op.pk)
        if isinstance(op, m.Query):
            # max_item_count=-1: the service sizes pages (up to 4 MB) instead of 100 items a page
            rows = container.query_items(op.sql, parameters=op.parameters, max_item_count=-1, **_scope(op.pk))
            return builtins.list(rows)
        if isinstance(op, m.Pages):
            q = op.query
            return container.query_items(
                q.sql, parameters=q.parameters, max_item_count=op.page_size, **_scope(q.pk)
            ).by_page()
        if isinstance(op, m.NextPage):
            page = next(op.pager, None)
            return None if page is None else builtins.list(page)
        if isinstance(op, m.Create):
            try:
                container.create_item(op.item)
            except cosmos.exceptions.CosmosResourceExistsError:
                return False
            return True
        if isinstance(op, (m.ReplaceIf, m.DeleteIf)):
            condition = _if_match(op.etag)
            try:
                if isinstance(op, m.ReplaceIf):
                    container.replace_item(op.item["id"], op.item, **condition)
                else:
                    container.delete_item(op.id, partition_key=op.pk, **condition)
            except cosmos.exceptions.CosmosAccessConditionFailedError:
                return False
            return True
        if isinstance(op, m.Batch):
            try:
                container.execute_item_batch(builtins.list(op.operations), partition_key=op.pk)
            except cosmos.exceptions.CosmosBatchOperationError as exc:
                if not (op.missing_ok and exc.status_code == 404):
                    raise
                for kind, args in op.operations:  # some items are gone already: one by one
                    try:
                        if kind == "delete":
                            container.delete_item(args[0], partition_key=op.pk)
                        else:
                            container.patch_item(args[0], partition_key=op.pk, patch_operations=args[1])
                    except cosmos.exceptions.CosmosResourceNotFoundError:
                        pass
            return None
        raise TypeError(f"unknown operation {op!r}")

    def _run(self, flow: m.CosmosFlow[R]) -> R:
        return drive(m.explaining_missing(flow), self._execute)

    # -- BaseCheckpointSaver ----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = self._stored_tuple(config)
        blobs = self._blobs
        if blobs is None or tup is None:
            return tup
        # retention may delete what was read before its blobs are: read the items again
        return read_restored(tup, functools.partial(self._stored_tuple, config),
                             lambda t: blobs.run(self._restored_flow(t)))

    def _stored_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` as stored (references not restored)."""
        return self._run(m.get_tuple_flow(config, self.serde))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        listing = m.explaining_missing(m.list_flow(config, filter, before, limit, self.serde))
        listed = iterate(listing, self._execute)
        return listed if self._blobs is None else self._restored(listed)

    def _restored(self, listed: Iterator[CheckpointTuple]) -> Iterator[CheckpointTuple]:
        blobs, cache = self._blobs, BlobCache()
        assert blobs is not None
        for tup in listed:
            # a checkpoint deleted since the listing read it is left out
            restored = read_restored(tup, functools.partial(self._stored_tuple, tup.config),
                                     lambda t: blobs.run(self._restored_flow(t, cache)))
            if restored is not None:
                yield restored

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._store(config, self._reduce(config, checkpoint, new_versions), metadata, new_versions)

    def _store(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if self._blobs is not None:  # after the reduction: only what is kept is offloaded
            checkpoint = self._blobs.run(self._stored_checkpoint_flow(config, checkpoint))
        plan, started = self._plan_put(config, checkpoint, metadata, new_versions)
        result = self._run(m.put_flow(plan))
        self._written_by(plan, started)
        self._after_put(result, metadata)
        return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._delta.task_paths.record(task_id, task_path)
        if self._blobs is not None:
            writes = self._blobs.run(self._stored_writes_flow(config, writes, task_id))
        ttls = self._settings.ttls
        self._run(m.put_writes_flow(config, writes, task_id, task_path, self.serde, ttls))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every item of the thread; with ``offload``, then the blobs nothing names any more."""
        if self._blobs_in_container:
            _retention.backend_for(self).run(delete_thread_retention_flow(str(thread_id)))
        else:
            self._run(m.delete_thread_flow(str(thread_id)))
        if self._blobs is not None and not self._blobs_in_container:
            self._blobs.run(self._dropped_thread_flow(str(thread_id)))
        self._written.forget([m.partition_key(str(thread_id))])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._blob_safe("delete_for_runs")
        self._run(m.delete_for_runs_flow(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._blob_safe("copy_thread")
        self._run(m.copy_thread_flow(source_thread_id, target_thread_id, self._settings.ttls))

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
        delta_channels: _retention.DeltaChannels | None = None,
    ) -> None:
        """LangGraph's ``prune`` (``checkpointers.retention.prune``), with the saver's
        ``branch_grace``. ``delta_channels``: the graph's channels (``graph.channels``; default:
        the saver's ``delta_channels``): a DeltaChannel thread then gets a snapshot at the
        checkpoint kept, and its ancestors go; without them it keeps those ancestors."""
        _retention.prune(self, thread_ids, strategy=strategy, branch_grace=self.branch_grace,
                         delta_channels=delta_channels)
        self._written.forget(m.partition_key(str(t)) for t in thread_ids)

    def _resource_usage(self) -> str | None:
        """The container's ``x-ms-resource-usage`` header (None where the service sends none)."""
        container = self._container()
        container.read(populate_quota_info=True)
        headers = getattr(container.client_connection, "last_response_headers", None) or {}
        return headers.get("x-ms-resource-usage")

    # -- async: the same methods in a worker thread -----------------------------------------------

    async def asetup(self) -> None:
        await asyncio.to_thread(self.setup)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, items, _DONE)) is not _DONE:
            yield item  # type: ignore[misc]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # the async reduction path (an async summarizer runs on the loop), then the sync store
        checkpoint = await self._areduce(config, checkpoint, new_versions)
        return await asyncio.to_thread(self._store, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
        delta_channels: _retention.DeltaChannels | None = None,
    ) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy, delta_channels=delta_channels)


_retention.register(CosmosDBSaver, CosmosBackend)


def _scope(pk: str | None) -> dict[str, Any]:
    return {"enable_cross_partition_query": True} if pk is None else {"partition_key": pk}


def _if_match(etag: str) -> dict[str, Any]:
    from azure.core import MatchConditions  # azure-cosmos depends on azure-core: there when the SDK is

    return {"etag": etag, "match_condition": MatchConditions.IfNotModified}
