"""The SQL of retention's operations, for the SQLite and PostgreSQL savers' own tables: each
operation (``flows``) as a flow of parameterized statements (``SqlDialect.flow``) and what their
rows mean. No I/O here: a backend (``backends``) executes the statements in its transaction.

Every statement names the thread. PostgreSQL's blob deletion checks in the statement itself that
no stored checkpoint names the version.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any

from langgraph.checkpoint.serde.types import INTERRUPT

from .._sql import Sql
from .flows import (
    DeleteBlobs,
    DeleteCheckpoints,
    DeleteThread,
    DeleteWrites,
    ListThreads,
    LoadThread,
    NewestTs,
    Op,
)
from .rules import StoredCheckpoint, StoredWrites, ThreadState, stored_checkpoint, unseeded_channels

__all__ = [
    "PG_SIZE_SQL",
    "PG_TABLES",
    "PG_VACUUM_SQL",
    "PostgresDialect",
    "Sql",
    "SqlDialect",
    "SqliteDialect",
]


class SqlDialect:
    """The statements of each operation, and what their results mean. Subclasses: SQLite, PG."""

    load_checkpoints: str
    load_writes: str
    delete_writes: str
    delete_checkpoints: str
    delete_blobs: str | None
    delete_thread: tuple[str, ...]
    list_threads: str
    newest: str

    def __init__(self, serde: Any) -> None:
        self.serde = serde

    def ids(self, ids: Sequence[str]) -> Any:
        raise NotImplementedError

    def flow(self, op: Op) -> Generator[Sql, Any, Any]:
        """``op`` as a flow of statements: each ``Sql`` is sent back its rows (as tuples) when it
        ``fetch``-es, else its row count; the flow returns the operation's result."""
        results = []
        for statement in self.statements(op):
            results.append((yield statement))
        return self.result(op, results)

    def statements(self, op: Op) -> list[Sql]:
        if isinstance(op, LoadThread):
            return [Sql(self.load_checkpoints, (op.thread_id,), True),
                    Sql(self.load_writes, (op.thread_id,), True)]
        if isinstance(op, DeleteCheckpoints):
            args = (op.thread_id, op.ns, self.ids(op.ids))
            return [Sql(self.delete_checkpoints, args), Sql(self.delete_writes, args)]
        if isinstance(op, DeleteWrites):
            return [Sql(self.delete_writes, (op.thread_id, op.ns, self.ids(op.ids)))]
        if isinstance(op, DeleteBlobs):
            assert self.delete_blobs is not None
            return [Sql(self.delete_blobs, (op.thread_id, op.ns, op.channel, self.ids(op.versions)))]
        if isinstance(op, DeleteThread):
            return [Sql(s, (op.thread_id,)) for s in self.delete_thread]
        if isinstance(op, ListThreads):
            return [Sql(self.list_threads, (), True)]
        if isinstance(op, NewestTs):
            return [Sql(self.newest, (op.thread_id,), True)]
        raise TypeError(f"unknown retention operation {op!r}")

    def result(self, op: Op, results: list[Any]) -> Any:
        if isinstance(op, LoadThread):
            checkpoints = tuple(self.checkpoint(r) for r in results[0])
            writes = tuple(StoredWrites(r[0], r[1], int(r[2]), bool(r[3])) for r in results[1])
            return ThreadState(op.thread_id, checkpoints, writes)
        if isinstance(op, DeleteCheckpoints):
            return (results[0], results[1])
        if isinstance(op, (DeleteWrites, DeleteBlobs)):
            return results[0]
        if isinstance(op, ListThreads):
            return [r[0] for r in results[0]]
        if isinstance(op, NewestTs):
            return self.ts(results[0][0]) if results[0] else None
        return None

    def checkpoint(self, row: Sequence[Any]) -> StoredCheckpoint:
        return stored_checkpoint(row[0], row[1], row[2], parent=row[3])

    def ts(self, row: Sequence[Any]) -> str | None:
        raise NotImplementedError


class SqliteDialect(SqlDialect):
    # The checkpoints themselves (one msgpack value each) only of a thread whose metadata shows a
    # DeltaChannel: which delta channels one rebuilds needs its versions and values
    # (rules.unseeded_channels), and whether a step is due after it its updated_channels.
    load_checkpoints = (
        "WITH d(delta) AS (SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ? "
        "AND instr(CAST(metadata AS TEXT), 'counters_since_delta_snapshot'))) "
        "SELECT checkpoint_ns, checkpoint_id, CAST(metadata AS TEXT), parent_checkpoint_id, "
        "CASE WHEN d.delta THEN type END, CASE WHEN d.delta THEN checkpoint END "
        "FROM checkpoints, d WHERE thread_id = ?"
    )
    load_writes = (
        "SELECT checkpoint_ns, checkpoint_id, COUNT(*), MAX(channel = ?) FROM writes "
        "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id"
    )
    delete_checkpoints = (
        "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id IN (SELECT value FROM json_each(?))"
    )
    delete_writes = (
        "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id IN (SELECT value FROM json_each(?))"
    )
    delete_blobs = None
    delete_thread = ("DELETE FROM checkpoints WHERE thread_id = ?", "DELETE FROM writes WHERE thread_id = ?")
    list_threads = "SELECT DISTINCT thread_id FROM checkpoints"
    newest = (
        "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    )

    def ids(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def statements(self, op: Op) -> list[Sql]:
        out = super().statements(op)
        if isinstance(op, LoadThread):
            out[0] = Sql(self.load_checkpoints, (op.thread_id, op.thread_id), True)
            out[1] = Sql(self.load_writes, (INTERRUPT, op.thread_id), True)
        return out

    def checkpoint(self, row: Sequence[Any]) -> StoredCheckpoint:
        if row[5] is None:
            return stored_checkpoint(row[0], row[1], row[2], parent=row[3], unseeded=())
        body = self.serde.loads_typed((row[4], row[5]))
        values = body.get("channel_values") or {}
        unseeded = unseeded_channels(row[2], body.get("channel_versions") or {}, values.keys())
        # its versions stay unread: a row saver has no blobs to collect
        return stored_checkpoint(
            row[0], row[1], row[2], parent=row[3], updated=body.get("updated_channels"), unseeded=unseeded
        )

    def ts(self, row: Sequence[Any]) -> str | None:
        ts = self.serde.loads_typed((row[0], row[1])).get("ts")
        return str(ts) if ts is not None else None


class PostgresDialect(SqlDialect):
    load_checkpoints = (
        "SELECT checkpoint_ns, checkpoint_id, metadata, parent_checkpoint_id, "
        "checkpoint -> 'channel_versions' AS versions, checkpoint -> 'updated_channels' AS updated "
        "FROM checkpoints WHERE thread_id = %s"
    )
    load_writes = (
        "SELECT checkpoint_ns, checkpoint_id, COUNT(*), BOOL_OR(channel = %s) FROM checkpoint_writes "
        "WHERE thread_id = %s GROUP BY checkpoint_ns, checkpoint_id"
    )
    delete_checkpoints = (
        "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
    )
    delete_writes = (
        "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
        "AND checkpoint_id = ANY(%s)"
    )
    # A checkpoint committed since the thread was loaded (another run's put) may name a version
    # the plan found unreferenced: the statement checks again.
    delete_blobs = (
        "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
        "AND b.channel = %s AND b.version = ANY(%s) AND NOT EXISTS (SELECT 1 FROM checkpoints c "
        "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
    )
    delete_thread = (
        "DELETE FROM checkpoints WHERE thread_id = %s",
        "DELETE FROM checkpoint_blobs WHERE thread_id = %s",
        "DELETE FROM checkpoint_writes WHERE thread_id = %s",
    )
    list_threads = "SELECT DISTINCT thread_id FROM checkpoints"
    newest = (
        "SELECT checkpoint ->> 'ts' FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    )

    load_blobs = (
        "SELECT checkpoint_ns, channel, version, type <> 'empty' FROM checkpoint_blobs WHERE thread_id = %s"
    )

    def ids(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def statements(self, op: Op) -> list[Sql]:
        out = super().statements(op)
        if isinstance(op, LoadThread):
            out[1] = Sql(self.load_writes, (INTERRUPT, op.thread_id), True)
            out.append(Sql(self.load_blobs, (op.thread_id,), True))
        return out

    def result(self, op: Op, results: list[Any]) -> Any:
        value = super().result(op, results)
        if isinstance(op, LoadThread):
            blobs = frozenset((r[0], r[1], str(r[2])) for r in results[2])
            filled = {(r[0], r[1], str(r[2])) for r in results[2] if r[3]}
            checkpoints = tuple(self._held(c, filled) if c.unseeded else c for c in value.checkpoints)
            return ThreadState(value.thread_id, checkpoints, value.writes, blobs)
        return value

    def checkpoint(self, row: Sequence[Any]) -> StoredCheckpoint:
        return stored_checkpoint(row[0], row[1], row[2], row[4], row[3], row[5])

    @staticmethod
    def _held(c: StoredCheckpoint, filled: set[tuple[str, str, str]]) -> StoredCheckpoint:
        """``c`` with the delta channels whose blob at its version holds a value moved from
        ``unseeded`` to ``held``."""
        held = {ch for ch in c.unseeded if (c.ns, ch, c.versions.get(ch)) in filled}
        return replace(c, unseeded=c.unseeded - held, held=frozenset((ch, c.versions[ch]) for ch in held))

    def ts(self, row: Sequence[Any]) -> str | None:
        return str(row[0]) if row[0] is not None else None


PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
PG_SIZE_SQL = "SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in PG_TABLES)
PG_VACUUM_SQL = "VACUUM (ANALYZE) " + ", ".join(PG_TABLES)
