"""``AsyncCosmosDBSaver``: the async I/O half (``azure.cosmos.aio``), method for method like ``sync.py``."""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from .. import retention as _retention
from .._flow import adrive, aiterate
from ..offload.checkpoint import BlobCache, aread_restored
from . import _mapping as m
from ._base import CosmosSaverBase
from ._retention import AsyncCosmosBackend, delete_thread_retention_flow

__all__ = ["AsyncCosmosDBSaver"]

R = TypeVar("R")


def _cosmos() -> Any:
    try:
        import azure.cosmos
        import azure.cosmos.aio
    except ImportError as exc:  # pragma: no cover - the [cosmosdb] extra is a test dependency
        raise ImportError(
            "AsyncCosmosDBSaver needs azure-cosmos and aiohttp: "
            'pip install ".[cosmosdb]" in the agentstate-reducer checkout'
        ) from exc
    return azure.cosmos


class AsyncCosmosDBSaver(CosmosSaverBase):
    """``CosmosDBSaver`` on ``azure.cosmos.aio``: the same constructor, data and behaviour.

    ``client=`` / ``container=`` must be ``azure.cosmos.aio`` objects; the credential of a client the
    saver creates is a key or an async TokenCredential (default:
    ``azure.identity.aio.DefaultAzureCredential``). Close an owned client with ``await aclose()`` /
    ``async with saver:``, or use ``AsyncCosmosDBSaver.from_conn_info(...)``.

    The sync methods (``graph.invoke``) run the async ones on the saver's event loop from another
    thread, like LangGraph's async savers; calling them on the loop's own thread is an error.
    """

    _aio = True
    _identity_module = "azure.identity.aio"

    @classmethod
    def _require_sdk(cls) -> None:
        _cosmos()

    @classmethod
    @asynccontextmanager
    async def from_conn_info(
        cls,
        *,
        endpoint: str | None = None,
        credential: Any = None,
        database_name: str,
        container_name: str = "checkpoints",
        **kwargs: Any,
    ) -> AsyncIterator[AsyncCosmosDBSaver]:
        """A saver owning its client, closed on exit. Same keywords as ``CosmosDBSaver.from_conn_info``."""
        cls._check_conn_info(kwargs)
        saver = cls(database_name, container_name, endpoint=endpoint, credential=credential, **kwargs)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def aclose(self) -> None:
        """Close the client (and credential) if this saver created them; a given client stays open."""
        conn = self._connection
        if conn.owns_client and conn.client is not None:
            await conn.client.close()
        if conn.owned_credential is not None:
            await conn.owned_credential.close()
        conn.client = conn.database = conn.container = conn.owned_credential = None
        conn.owns_client = conn.ready = False

    async def __aenter__(self) -> AsyncCosmosDBSaver:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- connection and setup ---------------------------------------------------------------------

    def _connect_locked(self) -> None:
        conn, settings = self._connection, self._settings
        if conn.container is not None:
            return
        assert settings.credential is not None
        credential = settings.credential.value
        if credential is None:
            credential = conn.owned_credential = self._default_credential()
        _cosmos()
        from azure.cosmos.aio import CosmosClient

        assert settings.endpoint is not None
        conn.client = CosmosClient(settings.endpoint, credential, **settings.client_kwargs)
        conn.owns_client = True
        conn.database = conn.client.get_database_client(settings.database_name)
        conn.container = conn.database.get_container_client(settings.container_name)

    def _lock(self) -> asyncio.Lock:
        conn = self._connection
        if conn.loop is None:
            conn.loop = asyncio.get_running_loop()
        if conn.alock is None:
            conn.alock = asyncio.Lock()
        return conn.alock

    async def _container(self) -> Any:
        conn = self._connection
        if not conn.ready:
            async with self._lock():
                if not conn.ready:
                    self._connect_locked()
                    if self._settings.create_if_missing:
                        await self._setup_locked()
                    conn.ready = True
        return conn.container

    async def asetup(self) -> None:
        """See ``CosmosDBSaver.setup``."""
        async with self._lock():
            self._connect_locked()
            await self._setup_locked()
            self._connection.ready = True

    async def _setup_locked(self) -> None:
        cosmos = _cosmos()
        conn, settings = self._connection, self._settings
        pk = cosmos.PartitionKey(path=m.PARTITION_KEY_PATH)
        if conn.database is not None:
            try:
                await conn.client.create_database_if_not_exists(settings.database_name)
                conn.container = await conn.database.create_container_if_not_exists(
                    id=settings.container_name, partition_key=pk, indexing_policy=m.INDEXING_POLICY,
                    default_ttl=-1 if settings.ttls.ttl is not None else None,
                )
            except cosmos.exceptions.CosmosHttpResponseError as exc:
                # Azure AD data-plane roles may not create databases or containers: use existing ones
                if exc.status_code != 403:
                    raise
        try:
            properties = await conn.container.read()
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
            conn.container = await conn.database.replace_container(
                conn.container, partition_key=pk, indexing_policy=dict(check.indexing_policy), default_ttl=-1
            )

    # -- the one place ops meet the SDK -----------------------------------------------------------

    async def _execute(self, op: m.Op) -> Any:
        container = await self._container()
        cosmos = _cosmos()
        if isinstance(op, m.Exists):
            resource = self._connection.database if op.database else container
            if resource is None:
                return None
            try:
                await resource.read()
            except cosmos.exceptions.CosmosResourceNotFoundError:
                return False
            except cosmos.exceptions.CosmosHttpResponseError:
                return None
            return True
        try:
            return await self._call(container, op)
        except cosmos.exceptions.CosmosResourceNotFoundError as exc:
            raise self._missing(op, exc) from None  # the driver finds out what is missing

    async def _call(self, container: Any, op: m.Op) -> Any:
        cosmos = _cosmos()
        if isinstance(op, m.Read):
            return await container.read_item(op.id, partition_key=op.pk)
        if isinstance(op, m.Query):
            # max_item_count=-1: the service sizes pages (up to 4 MB) instead of 100 items a page
            rows = container.query_items(op.sql, parameters=op.parameters, max_item_count=-1, **_scope(op.pk))
            return [row async for row in rows]
        if isinstance(op, m.Pages):
            q = op.query
            return container.query_items(
                q.sql, parameters=q.parameters, max_item_count=op.page_size, **_scope(q.pk)
            ).by_page()
        if isinstance(op, m.NextPage):
            try:
                page = await op.pager.__anext__()
            except StopAsyncIteration:
                return None
            return [row async for row in page]
        if isinstance(op, m.Create):
            try:
                await container.create_item(op.item)
            except cosmos.exceptions.CosmosResourceExistsError:
                return False
            return True
        if isinstance(op, (m.ReplaceIf, m.DeleteIf)):
            condition = _if_match(op.etag)
            try:
                if isinstance(op, m.ReplaceIf):
                    await container.replace_item(op.item["id"], op.item, **condition)
                else:
                    await container.delete_item(op.id, partition_key=op.pk, **condition)
            except cosmos.exceptions.CosmosAccessConditionFailedError:
                return False
            return True
        if isinstance(op, m.Batch):
            try:
                await container.execute_item_batch(builtins.list(op.operations), partition_key=op.pk)
            except cosmos.exceptions.CosmosBatchOperationError as exc:
                if not (op.missing_ok and exc.status_code == 404):
                    raise
                for kind, args in op.operations:  # some items are gone already: one by one
                    try:
                        if kind == "delete":
                            await container.delete_item(args[0], partition_key=op.pk)
                        else:
                            await container.patch_item(args[0], partition_key=op.pk, patch_operations=args[1])
                    except cosmos.exceptions.CosmosResourceNotFoundError:
                        pass
            return None
        raise TypeError(f"unknown operation {op!r}")

    async def _run(self, flow: m.CosmosFlow[R]) -> R:
        return await adrive(m.explaining_missing(flow), self._execute)

    # -- BaseCheckpointSaver, async ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await self._stored_tuple(config)
        blobs = self._blobs
        if blobs is None or tup is None:
            return tup
        # retention may delete what was read before its blobs are: read the items again
        return await aread_restored(tup, functools.partial(self._stored_tuple, config),
                                    lambda t: blobs.arun(self._restored_flow(t)))

    async def _stored_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` as stored (references not restored)."""
        return await self._run(m.get_tuple_flow(config, self.serde))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        listing = m.explaining_missing(m.list_flow(config, filter, before, limit, self.serde))
        blobs, cache = self._blobs, BlobCache()
        async for item in aiterate(listing, self._execute):
            if blobs is None:
                yield item
                continue
            # a checkpoint deleted since the listing read it is left out
            restored = await aread_restored(
                item, functools.partial(self._stored_tuple, item.config),
                lambda t: blobs.arun(self._restored_flow(t, cache)))
            if restored is not None:
                yield restored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        checkpoint = await self._areduce(config, checkpoint, new_versions)
        return await self._astore(config, checkpoint, metadata, new_versions)

    async def _astore(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if self._blobs is not None:  # after the reduction: only what is kept is offloaded
            checkpoint = await self._blobs.arun(self._stored_checkpoint_flow(config, checkpoint))
        plan, started = self._plan_put(config, checkpoint, metadata, new_versions)
        result = await self._run(m.put_flow(plan))
        self._written_by(plan, started)
        await self._aafter_put(result, metadata)
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._delta.task_paths.record(task_id, task_path)
        if self._blobs is not None:
            writes = await self._blobs.arun(self._stored_writes_flow(config, writes, task_id))
        ttls = self._settings.ttls
        await self._run(m.put_writes_flow(config, writes, task_id, task_path, self.serde, ttls))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every item of the thread; with ``offload``, then the blobs nothing names any more."""
        if self._blobs_in_container:
            await _retention.backend_for(self).arun(delete_thread_retention_flow(str(thread_id)))
        else:
            await self._run(m.delete_thread_flow(str(thread_id)))
        if self._blobs is not None and not self._blobs_in_container:
            await self._blobs.arun(self._dropped_thread_flow(str(thread_id)))
        self._written.forget([m.partition_key(str(thread_id))])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._blob_safe("delete_for_runs")
        await self._run(m.delete_for_runs_flow(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._blob_safe("copy_thread")
        await self._run(m.copy_thread_flow(source_thread_id, target_thread_id, self._settings.ttls))

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
        delta_channels: _retention.DeltaChannels | None = None,
    ) -> None:
        """LangGraph's ``aprune``: as ``CosmosDBSaver.prune``."""
        await _retention.aprune(self, thread_ids, strategy=strategy, branch_grace=self.branch_grace,
                                delta_channels=delta_channels)
        self._written.forget(m.partition_key(str(t)) for t in thread_ids)

    async def _aresource_usage(self) -> str | None:
        """The container's ``x-ms-resource-usage`` header (None where the service sends none)."""
        container = await self._container()
        await container.read(populate_quota_info=True)
        headers = getattr(container.client_connection, "last_response_headers", None) or {}
        return headers.get("x-ms-resource-usage")

    # -- sync: the async methods on the saver's loop, from another thread --------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the saver's I/O runs on (its sync methods hand their calls to it); None
        until the saver was created or first called inside a running loop."""
        return self._connection.loop

    def _sync(self, coro: Coroutine[Any, Any, R]) -> R:
        loop = self._connection.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or (running is not None and running is loop):
            coro.close()
            if loop is None:
                raise RuntimeError(
                    "AsyncCosmosDBSaver's sync methods run on its event loop, which it does not know yet: "
                    "create it inside the loop (async with AsyncCosmosDBSaver.from_conn_info(...)), or use "
                    "CosmosDBSaver in sync code"
                )
            raise asyncio.InvalidStateError(
                "synchronous calls to AsyncCosmosDBSaver are only allowed from a thread other than its event "
                "loop's; in async code call the a* methods (graph.ainvoke, aget_tuple, ...)"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def setup(self) -> None:
        self._sync(self.asetup())

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        items = self.alist(config, filter=filter, before=before, limit=limit)

        async def step() -> tuple[bool, CheckpointTuple | None]:
            try:
                return True, await items.__anext__()
            except StopAsyncIteration:
                return False, None

        while True:
            more, item = self._sync(step())
            if not more:
                return
            assert item is not None
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
        delta_channels: _retention.DeltaChannels | None = None,
    ) -> None:
        self._sync(self.aprune(thread_ids, strategy=strategy, delta_channels=delta_channels))


_retention.register(AsyncCosmosDBSaver, AsyncCosmosBackend)


def _scope(pk: str | None) -> dict[str, Any]:
    # azure.cosmos.aio queries are cross-partition unless a partition key is given
    return {} if pk is None else {"partition_key": pk}


def _if_match(etag: str) -> dict[str, Any]:
    from azure.core import MatchConditions  # azure-cosmos depends on azure-core: there when the SDK is

    return {"etag": etag, "match_condition": MatchConditions.IfNotModified}
