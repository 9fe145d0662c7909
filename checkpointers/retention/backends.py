"""Retention backends: each performs the operations of ``flows`` on one saver class, and the
registry that finds a saver's backend (``register``, ``backend_for``, ``supports_retention``).

Built in: our own parameterized SQL (``sql``) for ``SqliteSaver``/``AsyncSqliteSaver`` and
``PostgresSaver``/``AsyncPostgresSaver``, and ``InMemorySaver``'s dictionaries. Another saver
package registers its backend when the module defining its saver class is imported (the Cosmos DB
savers do, ``checkpointers.cosmosdb._retention``); this package imports no saver package.

Each flow runs in one transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction on the
saver's connection), so a process killed in the middle of a retention batch leaves the thread as
it was before the batch. A backend reads a saver through its documented attributes (``conn``,
``lock``, ``pipe``, ``loop``, ``serde``, ``setup()``, InMemorySaver's ``storage``/``writes``/
``blobs``), never its private methods.

An async saver's backend also serves sync calls (``run``, ``size``, ``vacuum``) from another
thread, on the saver's event loop, as the saver's own sync methods do.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.types import INTERRUPT

from .._flow import adrive, drive, translating
from ..offload.memory import memory_blobs
from ..offload.ops import BLOB_OPS, BlobUsage, Collect, DropRefs, HasBlobs, LoadBlobs, SaveBlobs
from ..offload.sql import BlobSql, PostgresBlobSql, SqliteBlobSql
from .flows import (
    DeleteBlobs,
    DeleteCheckpoints,
    DeleteThread,
    DeleteWrites,
    Flow,
    ListThreads,
    LoadThread,
    NewestTs,
    Op,
    PutSnapshot,
    ReadCheckpoint,
    ReadHistory,
    with_snapshots,
)
from .follow import drop_refs_flow, follow_blobs, recording
from .rules import ROOT_NS, StoredWrites, ThreadState, delta_counters, stored_checkpoint
from .sql import PG_SIZE_SQL, PG_VACUUM_SQL, PostgresDialect, Sql, SqliteDialect

__all__ = [
    "AsyncPostgresBackend",
    "AsyncSqliteBackend",
    "Backend",
    "FollowingBackend",
    "MemoryBackend",
    "PostgresBackend",
    "SqliteBackend",
    "backend_for",
    "register",
    "supported_savers",
    "supports_retention",
]


class Backend:
    """Performs retention operations on one saver; ``run``/``arun`` drive a flow in one transaction.

    A backend with ``stores_blobs`` also performs blob offload's operations
    (``checkpointers.offload.ops``) in the saver's own database, and runs every flow through
    ``follow_blobs``, so the reference rows of what retention deletes go in the same transaction
    and their blobs are collected.
    """

    is_async: bool = False
    stores_blobs: bool = False

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def run(self, flow: Flow) -> Any:
        if self.stores_blobs:
            flow = follow_blobs(flow)
        if self.is_async:
            return _on_saver_loop(self.saver, self._arun(flow))
        return self._run(flow)

    async def arun(self, flow: Flow) -> Any:
        if self.stores_blobs:
            flow = follow_blobs(flow)
        if not self.is_async:
            return await asyncio.to_thread(self._run, flow)
        return await self._arun(flow)

    def snapshots(self, flow: Flow) -> Any:
        """Drive a ``flows.snapshot_flow``: ``LoadThread`` in a transaction of its own (``run``),
        the saver operations through the saver's public methods, each committed as the saver
        commits (never inside a retention transaction: the saver takes its own lock)."""
        if self.is_async:
            return _on_saver_loop(self.saver, self.asnapshots(flow))
        return drive(flow, self._perform_saver)

    async def asnapshots(self, flow: Flow) -> Any:
        if not self.is_async:
            return await asyncio.to_thread(drive, flow, self._perform_saver)
        return await adrive(flow, self._aperform_saver)

    def _perform_saver(self, op: Op) -> Any:
        s = self.saver
        if isinstance(op, LoadThread):
            return self.run(_single(op))
        if isinstance(op, ReadCheckpoint):
            return s.get_tuple(_checkpoint_config(op))
        if isinstance(op, ReadHistory):
            return s.get_delta_channel_history(config=op.config, channels=list(op.channels))
        if isinstance(op, PutSnapshot):
            checkpoint, versions = with_snapshots(op.stored.checkpoint, op.values, s.get_next_version)
            return self._put_snapshot(_put_config(op.stored), checkpoint, op.stored.metadata, versions)
        raise TypeError(f"unknown snapshot operation {op!r}")

    async def _aperform_saver(self, op: Op) -> Any:
        s = self.saver
        if isinstance(op, LoadThread):
            return await self.arun(_single(op))
        if isinstance(op, ReadCheckpoint):
            return await s.aget_tuple(_checkpoint_config(op))
        if isinstance(op, ReadHistory):
            return await s.aget_delta_channel_history(config=op.config, channels=list(op.channels))
        if isinstance(op, PutSnapshot):
            checkpoint, versions = with_snapshots(op.stored.checkpoint, op.values, s.get_next_version)
            return await self._aput_snapshot(_put_config(op.stored), checkpoint, op.stored.metadata, versions)
        raise TypeError(f"unknown snapshot operation {op!r}")

    def _put_snapshot(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        """Store a checkpoint again with its snapshots: the saver's ``put``. A saver that reduces
        its own puts stores it without reducing (the values are the ones it stored)."""
        return self.saver.put(config, checkpoint, metadata, versions)

    async def _aput_snapshot(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        return await self.saver.aput(config, checkpoint, metadata, versions)

    def size(self) -> int | None:
        return _on_saver_loop(self.saver, self._asize()) if self.is_async else self._size()

    async def asize(self) -> int | None:
        return await self._asize() if self.is_async else await asyncio.to_thread(self._size)

    def vacuum(self) -> None:
        _on_saver_loop(self.saver, self._avacuum()) if self.is_async else self._vacuum()

    async def avacuum(self) -> None:
        await self._avacuum() if self.is_async else await asyncio.to_thread(self._vacuum)

    def version_entry(self, ns: str, channel: str, version: Any) -> tuple[str, str]:
        """How (channel, version) appears in the ``versions`` of this backend's StoredCheckpoint."""
        return channel, str(version)

    # implemented by the sync or the async backends
    def _run(self, flow: Flow) -> Any:
        raise NotImplementedError

    async def _arun(self, flow: Flow) -> Any:
        raise NotImplementedError

    def _size(self) -> int | None:
        raise NotImplementedError

    async def _asize(self) -> int | None:
        raise NotImplementedError

    def _vacuum(self) -> None:
        raise NotImplementedError

    async def _avacuum(self) -> None:
        raise NotImplementedError


class FollowingBackend(Backend):
    """``backend``, with the blobs of what its flows delete followed in a blob store outside the
    saver's database (``blobs``, a ``checkpointers.offload.config.BlobRunner``, such as a
    ``BaseStore``'s): each flow runs in ``backend``'s transaction recording its deletions
    (``retention.follow.recording``); after that transaction commits, their reference rows are
    dropped and their blobs collected by ``blobs`` (``retention.follow.drop_refs_flow``). A flow that
    raises (its transaction rolled back) drops nothing. Sizes, vacuum and versions are
    ``backend``'s."""

    def __init__(self, backend: Backend, blobs: Any) -> None:
        super().__init__(backend.saver)
        self.backend = backend
        self.blobs = blobs
        self.is_async = backend.is_async
        self.stores_blobs = backend.stores_blobs

    def run(self, flow: Flow) -> Any:
        drops: list[DropRefs] = []
        result = self.backend.run(recording(flow, drops))
        if drops:
            self.blobs.run(drop_refs_flow(drops))
        return result

    async def arun(self, flow: Flow) -> Any:
        drops: list[DropRefs] = []
        result = await self.backend.arun(recording(flow, drops))
        if drops:
            await self.blobs.arun(drop_refs_flow(drops))
        return result

    def size(self) -> int | None:
        return self.backend.size()

    async def asize(self) -> int | None:
        return await self.backend.asize()

    def vacuum(self) -> None:
        self.backend.vacuum()

    async def avacuum(self) -> None:
        await self.backend.avacuum()

    def version_entry(self, ns: str, channel: str, version: Any) -> tuple[str, str]:
        return self.backend.version_entry(ns, channel, version)


def _single(op: Op) -> Flow:
    return (yield op)


def _checkpoint_config(op: ReadCheckpoint) -> Any:
    return {"configurable": {"thread_id": op.thread_id, "checkpoint_ns": op.ns, "checkpoint_id": op.id}}


def _put_config(stored: Any) -> Any:
    """The config a ``put`` of ``stored`` again takes: its parent's (the put stores the same id,
    which is in the checkpoint itself)."""
    conf = stored.config["configurable"]
    parent = (stored.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    out = {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")}
    return {"configurable": {**out, "checkpoint_id": parent} if parent else out}


def _on_saver_loop(saver: Any, coro: Any) -> Any:
    """Run ``coro`` on an async saver's event loop from another thread (as its sync methods do)."""
    loop = getattr(saver, "loop", None)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop:
        coro.close()
        raise asyncio.InvalidStateError(
            f"{type(saver).__name__} is async: from its event loop call the async form "
            "(aprune, asweep, or let the graph use aput) instead of the sync one"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


# -- InMemorySaver --------------------------------------------------------------------------------


class MemoryBackend(Backend):
    """``InMemorySaver``: its dictionaries ``storage``, ``writes`` and ``blobs``, iterated through
    copies (another thread's put may change them meanwhile); offloaded blobs in a
    ``checkpointers.offload.memory.MemoryBlobs`` kept beside the saver."""

    stores_blobs = True

    def perform(self, op: Op) -> Any:
        s = self.saver
        if isinstance(op, BLOB_OPS):
            blobs = memory_blobs(s, create=isinstance(op, SaveBlobs))
            if blobs is None:
                return _NO_BLOBS[type(op)]
            return blobs.perform(op)
        if isinstance(op, LoadThread):
            rows = []
            for ns, stored in list(s.storage.get(op.thread_id, {}).items()):
                for cid, (typed, meta, parent) in list(stored.items()):
                    body = s.serde.loads_typed(typed)
                    metadata = s.serde.loads_typed(meta)
                    versions = body.get("channel_versions", {})
                    values = {  # the delta channels whose blob holds a value (a snapshot)
                        ch for ch in delta_counters(metadata) if ch in versions
                        and s.blobs.get((op.thread_id, ns, ch, versions[ch]), ("empty",))[0] != "empty"
                    }
                    rows.append(stored_checkpoint(
                        ns, cid, metadata, versions, parent, body.get("updated_channels"), stored=values,
                    ))
            pending = [
                StoredWrites(ns, cid, len(w), any(v[1] == INTERRUPT for v in w.values()))
                for (tid, ns, cid), w in list(s.writes.items())
                if tid == op.thread_id and w
            ]
            blobs = frozenset((ns, ch, str(v)) for (tid, ns, ch, v) in list(s.blobs) if tid == op.thread_id)
            return ThreadState(op.thread_id, tuple(rows), tuple(pending), blobs)
        if isinstance(op, DeleteCheckpoints):
            stored = s.storage.get(op.thread_id, {}).get(op.ns, {})
            checkpoints = writes = 0
            for cid in op.ids:
                if stored.pop(cid, None) is not None:
                    checkpoints += 1
                writes += len(s.writes.pop((op.thread_id, op.ns, cid), None) or ())
            return checkpoints, writes
        if isinstance(op, DeleteWrites):
            return sum(len(s.writes.pop((op.thread_id, op.ns, cid), None) or ()) for cid in op.ids)
        if isinstance(op, DeleteBlobs):
            named = {  # checked again: another run's put since the load may name a version
                str(s.serde.loads_typed(typed).get("channel_versions", {}).get(op.channel))
                for typed, _meta, _parent in list(s.storage.get(op.thread_id, {}).get(op.ns, {}).values())
            }
            popped = [s.blobs.pop((op.thread_id, op.ns, op.channel, v), None) for v in op.versions
                      if v not in named]
            return sum(b is not None for b in popped)
        if isinstance(op, DeleteThread):
            s.delete_thread(op.thread_id)
            return None
        if isinstance(op, ListThreads):
            return [t for t, spaces in list(s.storage.items()) if any(spaces.values())]
        if isinstance(op, NewestTs):
            stored = s.storage.get(op.thread_id, {}).get(ROOT_NS, {})
            if not stored:
                return None
            return s.serde.loads_typed(stored[max(stored)][0]).get("ts")
        raise TypeError(f"unknown retention operation {op!r}")

    def _run(self, flow: Flow) -> Any:
        return drive(flow, self.perform)

    def _size(self) -> int | None:
        s = self.saver
        total = sum(len(t[1]) + len(m[1]) for spaces in list(s.storage.values())
                    for stored in list(spaces.values()) for t, m, _ in list(stored.values()))
        total += sum(len(v[2][1]) for w in list(s.writes.values()) for v in list(w.values()))
        return total + sum(len(b[1]) for b in list(s.blobs.values()))

    def _vacuum(self) -> None:
        return None


#: What each blob operation returns on a store that has never held a blob.
_NO_BLOBS: dict[type, Any] = {
    HasBlobs: False, LoadBlobs: {}, DropRefs: (), Collect: (0, 0), BlobUsage: (0, 0),
}


def _sql_translator(dialect: Any, blobs: BlobSql) -> Callable[[Any], Any]:
    """Each operation as its flow of statements: retention's by ``dialect``, blob offload's by
    ``blobs``; a statement (``Sql``) a flow yields itself (``checkpointers.inplace_offload``) as
    it is."""

    def translate(op: Any) -> Any:
        if isinstance(op, Sql):
            return _statement_flow(op)
        return blobs.flow(op) if isinstance(op, BLOB_OPS) else dialect.flow(op)

    return translate


def _statement_flow(statement: Sql) -> Any:
    return (yield statement)


# -- SQL: one statement at a time on a cursor -----------------------------------------------------


def _rows(cur: Any) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) if isinstance(r, Mapping) else tuple(r) for r in cur.fetchall()]


async def _arows(cur: Any) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) if isinstance(r, Mapping) else tuple(r) for r in await cur.fetchall()]


def _executing(cur: Any, **options: Any) -> Callable[[Sql], Any]:
    """Performs a statement of ``SqlDialect.flow`` on ``cur``: its rows when it fetches, else its
    row count. ``options``: keyword arguments of the driver's ``execute``."""

    def execute(statement: Sql) -> Any:
        cur.execute(statement.text, statement.params, **options)
        return _rows(cur) if statement.fetch else cur.rowcount

    return execute


def _aexecuting(cur: Any, **options: Any) -> Callable[[Sql], Awaitable[Any]]:
    """``_executing`` on an async cursor."""

    async def execute(statement: Sql) -> Any:
        await cur.execute(statement.text, statement.params, **options)
        return await _arows(cur) if statement.fetch else cur.rowcount

    return execute


# -- SQLite ---------------------------------------------------------------------------------------


class SqliteBackend(Backend):
    """``SqliteSaver``: the dialect's statements on the saver's connection, under its lock, in
    one ``BEGIN IMMEDIATE`` transaction per flow."""

    stores_blobs = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = SqliteDialect(saver.serde)
        self.translate = _sql_translator(self.dialect, SqliteBlobSql())

    def _run(self, flow: Flow) -> Any:
        saver = self.saver
        saver.setup()
        with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                conn.commit()
            cur = conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                result = drive(translating(flow, self.translate), _executing(cur))
                conn.commit()
                return result
            except BaseException:
                conn.rollback()
                raise
            finally:
                cur.close()

    def _size(self) -> int | None:
        with self.saver.lock:
            conn = self.saver.conn
            return _sqlite_size(conn.execute, conn.execute("PRAGMA database_list").fetchall())

    def _vacuum(self) -> None:
        with self.saver.lock:
            conn = self.saver.conn
            if conn.in_transaction:
                conn.commit()
            mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
            if mode == 2:
                conn.execute("PRAGMA incremental_vacuum").fetchall()
            else:
                conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _sqlite_size(execute: Callable[..., Any], databases: Iterable[Sequence[Any]]) -> int | None:
    path = next((r[2] for r in databases if r[1] == "main"), "")
    if not path:
        return None  # an in-memory database
    execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(p.stat().st_size for p in (Path(path), Path(path + "-wal")) if p.exists())


class AsyncSqliteBackend(Backend):
    """``AsyncSqliteSaver``: as ``SqliteBackend``, on aiosqlite."""

    is_async = True
    stores_blobs = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = SqliteDialect(saver.serde)
        self.translate = _sql_translator(self.dialect, SqliteBlobSql())

    async def _arun(self, flow: Flow) -> Any:
        saver = self.saver
        await saver.setup()
        async with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                await conn.commit()
            cur = await conn.cursor()
            try:
                await cur.execute("BEGIN IMMEDIATE")
                result = await adrive(translating(flow, self.translate), _aexecuting(cur))
                await conn.commit()
                return result
            except BaseException:
                await conn.rollback()
                raise
            finally:
                await cur.close()

    async def _asize(self) -> int | None:
        saver = self.saver
        await saver.setup()
        async with saver.lock:
            databases = await saver.conn.execute_fetchall("PRAGMA database_list")
            path = next((r[2] for r in databases if r[1] == "main"), "")
            if not path:
                return None
            await saver.conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            return sum(p.stat().st_size for p in (Path(path), Path(path + "-wal")) if p.exists())

    async def _avacuum(self) -> None:
        saver = self.saver
        await saver.setup()
        async with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                await conn.commit()
            mode = (await conn.execute_fetchall("PRAGMA auto_vacuum"))[0][0]
            await conn.execute_fetchall("PRAGMA incremental_vacuum" if mode == 2 else "VACUUM")
            await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")


# -- PostgreSQL -----------------------------------------------------------------------------------


@contextmanager
def _pg_cursor(saver: Any) -> Iterator[Any]:
    """A cursor on a ``PostgresSaver``'s ``conn`` (a connection, or a pool: one of its
    connections), holding the saver's ``lock``, as the saver holds it for its own statements."""
    conn = saver.conn
    with saver.lock, (nullcontext(conn) if hasattr(conn, "cursor") else conn.connection()) as c:
        with c.cursor(binary=True) as cur:
            yield cur


@asynccontextmanager
async def _apg_cursor(saver: Any) -> AsyncIterator[Any]:
    """``_pg_cursor`` for an ``AsyncPostgresSaver``."""
    conn = saver.conn
    async with saver.lock, (nullcontext(conn) if hasattr(conn, "cursor") else conn.connection()) as c:
        async with c.cursor(binary=True) as cur:
            yield cur


def _vacuum_error(exc: Exception) -> RuntimeError:
    return RuntimeError(
        "VACUUM cannot run inside a transaction: give the Postgres saver a connection in autocommit "
        f"mode (from_conn_string does), or vacuum from psql ({type(exc).__name__}: {exc})"
    )


class PostgresBackend(Backend):
    """``PostgresSaver``: the dialect's statements on the saver's connection (``_pg_cursor``), in
    one transaction per flow."""

    stores_blobs = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = PostgresDialect(saver.serde)
        self.translate = _sql_translator(self.dialect, PostgresBlobSql())

    def _run(self, flow: Flow) -> Any:
        saver = self.saver
        with _pg_cursor(saver) as cur:
            if saver.pipe:
                saver.pipe.sync()
            with cur.connection.transaction():
                return drive(translating(flow, self.translate), _executing(cur, prepare=False))

    def _size(self) -> int | None:
        with _pg_cursor(self.saver) as cur:
            cur.execute(PG_SIZE_SQL)
            return int(_rows(cur)[0][0])

    def _vacuum(self) -> None:
        import psycopg

        with _pg_cursor(self.saver) as cur:
            try:
                cur.execute(PG_VACUUM_SQL)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _vacuum_error(exc) from None


class AsyncPostgresBackend(Backend):
    """``AsyncPostgresSaver``: as ``PostgresBackend``, on psycopg's async connection."""

    is_async = True
    stores_blobs = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = PostgresDialect(saver.serde)
        self.translate = _sql_translator(self.dialect, PostgresBlobSql())

    async def _arun(self, flow: Flow) -> Any:
        saver = self.saver
        async with _apg_cursor(saver) as cur:
            if saver.pipe:
                await saver.pipe.sync()
            async with cur.connection.transaction():
                return await adrive(translating(flow, self.translate), _aexecuting(cur, prepare=False))

    async def _asize(self) -> int | None:
        async with _apg_cursor(self.saver) as cur:
            await cur.execute(PG_SIZE_SQL)
            return int((await _arows(cur))[0][0])

    async def _avacuum(self) -> None:
        import psycopg

        async with _apg_cursor(self.saver) as cur:
            try:
                await cur.execute(PG_VACUUM_SQL)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _vacuum_error(exc) from None


# -- the registry ---------------------------------------------------------------------------------

#: LangGraph's savers, by module and class name: found in ``sys.modules`` only (a saver of the
#: class exists only once its module is imported), so retention imports no optional driver.
_LANGGRAPH_SAVERS: tuple[tuple[str, str, type[Backend]], ...] = (
    ("langgraph.checkpoint.memory", "InMemorySaver", MemoryBackend),
    ("langgraph.checkpoint.sqlite", "SqliteSaver", SqliteBackend),
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", AsyncSqliteBackend),
    ("langgraph.checkpoint.postgres", "PostgresSaver", PostgresBackend),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", AsyncPostgresBackend),
)

_registered: dict[type, type[Backend]] = {}


def register(saver_class: type, backend: type[Backend]) -> None:
    """Make ``backend`` the retention backend of ``saver_class`` and its subclasses (a subclass's
    own registration wins). A saver package calls it in the module defining the class, so
    ``backend_for``/``supports_retention`` know the class whenever a saver of it can exist."""
    if not (isinstance(saver_class, type) and issubclass(saver_class, BaseCheckpointSaver)):
        raise TypeError(f"register needs a BaseCheckpointSaver subclass, got {saver_class!r}")
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise TypeError(f"register needs a retention Backend subclass, got {backend!r}")
    _registered[saver_class] = backend


def _known() -> dict[type, type[Backend]]:
    known: dict[type, type[Backend]] = {}
    for module, name, backend in _LANGGRAPH_SAVERS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            known[cls] = backend
    known.update(_registered)
    return known


def _backend_class(saver_class: type) -> type[Backend] | None:
    """The backend for a saver class: that of the nearest class in its MRO with one."""
    known = _known()
    return next((known[cls] for cls in getattr(saver_class, "__mro__", ()) if cls in known), None)


def supported_savers() -> tuple[str, ...]:
    """The names of the saver classes retention has a backend for (LangGraph's, then those
    registered)."""
    return (*(name for _, name, _ in _LANGGRAPH_SAVERS), *(cls.__name__ for cls in _registered))


def supports_retention(saver_class: type) -> bool:
    """Whether retention has a backend for savers of this class."""
    return _backend_class(saver_class) is not None


def backend_for(saver: Any) -> Backend:
    """The retention backend of ``saver`` (a wrapper with an ``inner`` saver property, such as
    ``ReducingCheckpointSaver``, is looked through to its inner saver). A wrapper whose
    ``blob_runner`` property is a runner with ``separate`` (blobs in a ``BaseStore``) gets a
    ``FollowingBackend``: every retention entry point that finds its backend here (per-put
    ``keep_last``, ``prune``, ``sweep``, ``compact_store``) then drops the deleted checkpoints'
    reference rows there after its transaction commits."""
    inner = saver
    stores: list[Any] = []  # blob runners of wrappers keeping blobs outside the saver, outermost first
    while isinstance(getattr(type(inner), "inner", None), property) and isinstance(
        inner.inner, BaseCheckpointSaver
    ):
        if isinstance(getattr(type(inner), "blob_runner", None), property):
            runner = inner.blob_runner
            if runner is not None and runner.separate:
                stores.append(runner)
        inner = inner.inner
    backend_class = _backend_class(type(inner))
    if backend_class is None:
        raise TypeError(
            f"retention supports {', '.join(supported_savers())} (bare or wrapped in a "
            f"ReducingCheckpointSaver), got {type(inner).__name__}"
        )
    backend = backend_class(inner)
    for runner in reversed(stores):
        backend = FollowingBackend(backend, runner)
    return backend
