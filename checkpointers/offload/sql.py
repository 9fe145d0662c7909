"""Blob offload's operations (``ops``) as SQL on two tables of the saver's own database, next to
its checkpoint tables: ``agentstate_blobs`` (digest, size, gen, data) and
``agentstate_blob_refs`` (thread_id, checkpoint_ns, checkpoint_id, task_id, digest). No I/O here:
each operation is a flow of ``Sql`` statements that a backend executes in its transaction.

Concurrency: SQLite runs every flow in a ``BEGIN IMMEDIATE`` transaction, so a collection and a
writer's ``SaveBlobs`` never interleave. PostgreSQL runs them concurrently; a writer adding a
reference row to a stored blob also bumps the blob's ``gen`` in its transaction, and a collection
deletes a blob only if its ``gen`` is still the one read with the reference check. A writer that
committed first is seen by the check; one still running holds the row, and once it commits the
deletion re-reads the row, finds another ``gen`` and leaves the blob; one that starts after the
deletion finds no blob to bump and stores the bytes again. Both lock blob rows one statement at a
time in digest order, so two flows naming the same blobs never wait on each other crosswise.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any

from .._sql import Sql
from .ops import BlobOp, BlobUsage, Collect, DropRefs, HasBlobs, LoadBlobs, SaveBlobs

__all__ = ["BLOB_TABLES", "BlobSql", "PostgresBlobSql", "SqliteBlobSql"]

BLOB_TABLES = ("agentstate_blobs", "agentstate_blob_refs")


class BlobSql:
    """The statements of each blob operation for one SQL dialect."""

    setup: tuple[str, ...]
    has: str
    p: str  # the parameter placeholder

    def ids(self, ids: Sequence[str]) -> Any:
        raise NotImplementedError

    def in_list(self, column: str) -> str:
        raise NotImplementedError

    def flow(self, op: BlobOp) -> Generator[Sql, Any, Any]:
        p = self.p
        if isinstance(op, HasBlobs):
            return bool((yield Sql(self.has, (), True)))
        if isinstance(op, SaveBlobs):
            if not op.blobs:
                return 0
            if not (yield Sql(self.has, (), True)):
                for statement in self.setup:
                    yield Sql(statement, ())
            o = op.owner
            digests = sorted(op.blobs)
            yield Sql(self.insert_refs, (o.thread_id, o.checkpoint_ns, o.checkpoint_id, o.task_id,
                                         self.ids(digests)))
            present = set()
            for digest in digests:  # one at a time, in digest order: no two flows lock crosswise
                if (yield Sql(self.touch, (self.ids([digest]),), True)):
                    present.add(digest)
            stored = 0
            for digest in digests:
                if digest not in present:
                    data = op.blobs[digest]
                    yield Sql(self.insert_blob, (digest, len(data), data))
                    stored += len(data)
            return stored
        if isinstance(op, LoadBlobs):
            if not op.digests or not (yield Sql(self.has, (), True)):
                return {}
            rows = yield Sql(f"SELECT digest, data FROM agentstate_blobs WHERE {self.in_list('digest')}",
                             (self.ids(sorted(set(op.digests))),), True)
            return {r[0]: bytes(r[1]) for r in rows}
        if isinstance(op, DropRefs):
            if not (yield Sql(self.has, (), True)):
                return ()
            where, params = f"thread_id = {p}", [op.thread_id]
            if op.ids is not None:
                where += f" AND checkpoint_ns = {p} AND {self.in_list('checkpoint_id')}"
                params += [op.ns or "", self.ids(op.ids)]
            if op.writes_only:
                where += " AND task_id <> ''"
            rows = yield Sql(f"DELETE FROM agentstate_blob_refs WHERE {where} RETURNING digest",
                             tuple(params), True)
            return tuple(sorted({r[0] for r in rows}))
        if isinstance(op, Collect):
            if not op.digests or not (yield Sql(self.has, (), True)):
                return (0, 0)
            count = size = 0
            for digest in sorted(set(op.digests)):  # in digest order, as a writer locks them
                rows = yield Sql(self.collect, (self.ids([digest]),), True)
                count, size = count + len(rows), size + sum(int(r[0]) for r in rows)
            return (count, size)
        if isinstance(op, BlobUsage):
            if not (yield Sql(self.has, (), True)):
                return (0, 0)
            if op.thread_id is None:
                rows = yield Sql("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM agentstate_blobs", (), True)
            else:
                rows = yield Sql(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM agentstate_blobs WHERE digest IN "
                    f"(SELECT digest FROM agentstate_blob_refs WHERE thread_id = {p})", (op.thread_id,), True)
            return (int(rows[0][0]), int(rows[0][1]))
        raise TypeError(f"unknown blob operation {op!r}")

    insert_refs: str
    touch: str
    insert_blob: str
    collect: str


_TABLES = (
    "CREATE TABLE IF NOT EXISTS agentstate_blobs (digest TEXT PRIMARY KEY, size BIGINT NOT NULL, "
    "gen BIGINT NOT NULL DEFAULT 0, data {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agentstate_blob_refs (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
    "checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, digest TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, digest))",
    "CREATE INDEX IF NOT EXISTS agentstate_blob_refs_digest ON agentstate_blob_refs (digest)",
)


class SqliteBlobSql(BlobSql):
    p = "?"
    setup = tuple(s.format(blob="BLOB") for s in _TABLES)
    has = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agentstate_blob_refs'"
    insert_refs = ("INSERT OR IGNORE INTO agentstate_blob_refs SELECT ?, ?, ?, ?, value FROM json_each(?)")
    # BEGIN IMMEDIATE serializes every flow: no gen to bump (an UPDATE would rewrite the blob)
    touch = "SELECT digest FROM agentstate_blobs WHERE digest IN (SELECT value FROM json_each(?))"
    insert_blob = "INSERT OR IGNORE INTO agentstate_blobs (digest, size, gen, data) VALUES (?, ?, 0, ?)"
    collect = (
        "DELETE FROM agentstate_blobs WHERE digest IN (SELECT value FROM json_each(?)) AND NOT EXISTS "
        "(SELECT 1 FROM agentstate_blob_refs r WHERE r.digest = agentstate_blobs.digest) RETURNING size"
    )

    def ids(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def in_list(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"


class PostgresBlobSql(BlobSql):
    p = "%s"
    # two first writers creating the tables at once: the lock makes the second see the first's
    setup = ("SELECT pg_advisory_xact_lock(5836014729)", *(s.format(blob="BYTEA") for s in _TABLES))
    has = "SELECT 1 WHERE to_regclass('agentstate_blob_refs') IS NOT NULL"
    insert_refs = (
        "INSERT INTO agentstate_blob_refs SELECT %s, %s, %s, %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
    )
    touch = "UPDATE agentstate_blobs SET gen = gen + 1 WHERE digest = ANY(%s) RETURNING digest"
    insert_blob = (
        "INSERT INTO agentstate_blobs (digest, size, gen, data) VALUES (%s, %s, 0, %s) "
        "ON CONFLICT (digest) DO UPDATE SET gen = agentstate_blobs.gen + 1"
    )
    collect = (
        "WITH s AS (SELECT digest, gen FROM agentstate_blobs WHERE digest = ANY(%s)) "
        "DELETE FROM agentstate_blobs b USING s WHERE b.digest = s.digest AND b.gen = s.gen "
        "AND NOT EXISTS (SELECT 1 FROM agentstate_blob_refs r WHERE r.digest = b.digest) RETURNING b.size"
    )

    def ids(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def in_list(self, column: str) -> str:
        return f"{column} = ANY(%s)"
