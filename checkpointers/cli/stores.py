"""Checkpoint databases for the CLI: a LangGraph saver opened on a store URL (``urls``), plus the
read-only measurements the commands report (threads, checkpoints, bytes).

What "bytes" means differs per database, and each ``CheckpointDb`` says it in ``bytes_meaning``.
``inspect`` and ``compact --dry-run`` open SQLite read-only (see ``_read_only_uri``): neither the
file nor its journal mode changes and no file appears beside it.

langgraph, psycopg and azure-cosmos are imported inside the functions that need them, so the CLI
starts without them and a missing extra is reported as one ``CliError`` line.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import PROG, CliError, missing_extra, one_line, require
from .redact import redact
from .urls import StoreUrl, in_text, parse_store_url


@dataclass(frozen=True)
class ThreadRow:
    thread_id: str
    checkpoints: int
    bytes: int | None


class CheckpointDb:
    """A LangGraph saver opened on a store URL, plus the read-only measurements the CLI reports."""

    kind = "generic"
    bytes_meaning = "not measured on this store"

    def __init__(self, saver: Any, label: str) -> None:
        self.saver = saver
        self.label = label

    def threads(self) -> list[ThreadRow]:
        """Every thread with its number of checkpoints (all namespaces) and bytes.

        The generic form walks ``saver.list(None)``, which loads every checkpoint: stores with SQL
        override it with one aggregate query."""
        counts: dict[str, int] = {}
        for checkpoint_tuple in self.saver.list(None):
            thread_id = str(checkpoint_tuple.config["configurable"]["thread_id"])
            counts[thread_id] = counts.get(thread_id, 0) + 1
        return [ThreadRow(thread_id, n, None) for thread_id, n in counts.items()]

    def thread_bytes(self, thread_id: str) -> int | None:
        return None

    def database_bytes(self) -> int | None:
        """The size of the whole store where it has one (a file, tables), else None."""
        return None

    def whole_database_bytes(self) -> int | None:
        """The size of the whole database the store lives in, as its server reports it (SQLite:
        the file, as ``database_bytes``; PostgreSQL: ``pg_database_size``), else None."""
        return self.database_bytes()

    def flush(self) -> None:
        """Make ``database_bytes`` final (SQLite: fold the write-ahead log into the file)."""

    def close(self) -> None:
        pass

    def __enter__(self) -> CheckpointDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SqliteCheckpointDb(CheckpointDb):
    kind = "sqlite"
    bytes_meaning = (
        "SQLite: length of the thread's stored checkpoint, metadata and write blobs (page and index "
        "overhead not included); database bytes = the file plus its -wal file"
    )

    def __init__(self, saver: Any, label: str, path: Path, *, read_only: bool = False) -> None:
        super().__init__(saver, label)
        self.path = path
        self.read_only = read_only

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        # The saver's own connection, under its lock: sqlite3 connections are not thread-safe and
        # LangGraph writes checkpoints from a background thread.
        with self.saver.lock:
            return list(self.saver.conn.execute(sql, params))

    def threads(self) -> list[ThreadRow]:
        rows = self._query(
            "SELECT thread_id, COUNT(*), SUM(LENGTH(checkpoint) + COALESCE(LENGTH(metadata), 0)) "
            "FROM checkpoints GROUP BY thread_id"
        )
        writes = dict(
            self._query("SELECT thread_id, SUM(COALESCE(LENGTH(value), 0)) FROM writes GROUP BY thread_id")
        )
        return [
            ThreadRow(str(thread_id), int(n), int(size or 0) + int(writes.get(thread_id) or 0))
            for thread_id, n, size in rows
        ]

    def thread_bytes(self, thread_id: str) -> int | None:
        ((checkpoint_bytes,),) = self._query(
            "SELECT SUM(LENGTH(checkpoint) + COALESCE(LENGTH(metadata), 0)) FROM checkpoints "
            "WHERE thread_id = ?",
            (thread_id,),
        )
        ((write_bytes,),) = self._query(
            "SELECT SUM(COALESCE(LENGTH(value), 0)) FROM writes WHERE thread_id = ?", (thread_id,)
        )
        return int(checkpoint_bytes or 0) + int(write_bytes or 0)

    def database_bytes(self) -> int | None:
        total = 0
        for suffix in ("", "-wal"):
            file = Path(str(self.path) + suffix)
            if file.exists():
                total += file.stat().st_size
        return total

    def flush(self) -> None:
        if not self.read_only:  # a checkpoint writes the log into the database file
            self._query("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.saver.conn.close()


class PostgresCheckpointDb(CheckpointDb):
    kind = "postgres"
    bytes_meaning = (
        "PostgreSQL: pg_column_size of the thread's checkpoint, metadata, blob and write values, as "
        "stored (after TOAST compression; row, index and dead-tuple overhead not included); database "
        "bytes = pg_total_relation_size of the four checkpoint tables and, where offload made them, "
        "the two tables of its blobs"
    )
    _TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations",
               "agentstate_blobs", "agentstate_blob_refs")

    def __init__(self, saver: Any, label: str, conn: Any) -> None:
        super().__init__(saver, label)
        self.conn = conn

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self.saver.lock, self.conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    _BYTES_BY_THREAD = """
        SELECT thread_id, SUM(n) AS bytes FROM (
            SELECT thread_id, pg_column_size(checkpoint) + COALESCE(pg_column_size(metadata), 0) AS n
              FROM checkpoints {where}
            UNION ALL SELECT thread_id, COALESCE(pg_column_size(blob), 0) FROM checkpoint_blobs {where}
            UNION ALL SELECT thread_id, COALESCE(pg_column_size(blob), 0) FROM checkpoint_writes {where}
        ) s GROUP BY thread_id
    """

    def threads(self) -> list[ThreadRow]:
        counts = self._query("SELECT thread_id, COUNT(*) AS n FROM checkpoints GROUP BY thread_id")
        sizes = {
            row["thread_id"]: int(row["bytes"] or 0)
            for row in self._query(self._BYTES_BY_THREAD.format(where=""))
        }
        return [
            ThreadRow(str(row["thread_id"]), int(row["n"]), sizes.get(row["thread_id"], 0)) for row in counts
        ]

    def thread_bytes(self, thread_id: str) -> int | None:
        rows = self._query(self._BYTES_BY_THREAD.format(where="WHERE thread_id = %s"), (thread_id,) * 3)
        return int(rows[0]["bytes"] or 0) if rows else 0

    def database_bytes(self) -> int | None:
        parts = " + ".join(
            f"COALESCE(pg_total_relation_size(to_regclass('{table}')), 0)" for table in self._TABLES
        )
        return int(self._query(f"SELECT {parts} AS n")[0]["n"])

    def whole_database_bytes(self) -> int | None:
        return int(self._query("SELECT pg_database_size(current_database()) AS n")[0]["n"])

    def close(self) -> None:
        self.conn.close()


#: The columns SqliteSaver reads, per table.
_SQLITE_COLUMNS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
                    "checkpoint", "metadata"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "value"),
}  # fmt: skip
_NOT_CHECKPOINTS = "is not a LangGraph checkpoint database (SqliteSaver)"


def _sqlite_header(path: Path) -> bytes:
    """The file's 100-byte SQLite header; ``CliError`` when the file is empty or not SQLite."""
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise CliError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    if not header:
        raise CliError(f"{str(path)!r} {_NOT_CHECKPOINTS}: it is an empty file (check the path)")
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise CliError(f"{str(path)!r} {_NOT_CHECKPOINTS}: it is not an SQLite file (check the path)")
    return header


def _checkpoint_tables(conn: sqlite3.Connection, path: Path) -> set[str]:
    """The columns of the writes table; ``CliError`` unless SqliteSaver's tables are there."""
    columns = {
        table: {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        for table in _SQLITE_COLUMNS
    }
    missing = [table for table, names in columns.items() if not names]
    if missing:
        raise CliError(
            f"{str(path)!r} {_NOT_CHECKPOINTS}: it is an SQLite database without the "
            f"{' and '.join(missing)} table{'s' if len(missing) > 1 else ''} (check the path)"
        )
    for table, needed in _SQLITE_COLUMNS.items():
        lacking = [c for c in needed if c not in columns[table]]
        if lacking:
            raise CliError(
                f"{str(path)!r} {_NOT_CHECKPOINTS}: its {table} table has no column {', '.join(lacking)}"
            )
    return columns["writes"]


def _read_only_uri(path: Path, header: bytes) -> str:
    """A ``file:`` URI that reads the database and writes nothing, files beside it included.

    ``mode=ro`` never writes the database file. A rollback-journal database needs nothing more.
    In WAL mode (header bytes 18-19 are 2) ``mode=ro`` reads through the ``-wal`` and ``-shm``
    files, and creates them when they are missing (and leaves them). So: with both there (a
    writer is running, or did not close), ``mode=ro``; with no ``-wal`` or an empty one, the
    database file holds every commit, and ``immutable=1`` reads it with no lock and no side file
    (in a read-only folder too; a writer starting meanwhile is not seen). A non-empty ``-wal``
    without its ``-shm`` index cannot be read without creating the index: refused, saying so."""
    uri = path.absolute().as_uri()
    if header[18:20] != b"\x02\x02":
        return uri + "?mode=ro"
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if wal.exists() and shm.exists():
        return uri + "?mode=ro"
    if not wal.exists() or wal.stat().st_size == 0:
        return uri + "?mode=ro&immutable=1"
    raise CliError(
        f"{str(path)!r} has a write-ahead log ({wal.name}) without its index ({shm.name}): the last "
        "process writing it did not close it, and reading it would create the index. Open it once "
        f"with a writer (your application, or sqlite3 {str(path)!r} 'PRAGMA wal_checkpoint(TRUNCATE)'), "
        "then re-run"
    )


#: The files SQLite keeps beside a database while it writes (WAL mode, or a rollback journal).
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _check_writable(path: Path, feature: str) -> None:
    """``CliError`` unless ``feature`` can write ``path`` (when it exists) and create SQLite's
    side files beside it: checked before the database is opened, so a read-only or immutable file
    or folder is reported as such and nothing appears beside it."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(
            f"{str(path)!r} is read-only (no write permission, an immutable file or a read-only file "
            f"system), and {feature} writes to it: make it writable (chmod u+w {shlex.quote(str(path))}; "
            "lsattr shows an immutable 'i', chattr -i removes it), or copy it somewhere writable; "
            f"{PROG} inspect and compact --dry-run only read it"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(
            f"cannot write in the folder {str(folder)!r} (no write permission, an immutable folder or "
            f"a read-only file system): SQLite creates its -wal and -shm (or -journal) files beside "
            f"the database while {feature} writes; make the folder writable, or copy the database "
            f"somewhere writable; {PROG} inspect and compact --dry-run only read it"
        )


def _remove_new_side_files(path: Path, before: set[str]) -> None:
    """Remove the side files of ``path`` that a failed open created (an empty log, its index)."""
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        return  # holds pages: SQLite's own to recover
    for suffix in _SIDE_FILES:
        side = Path(f"{path}{suffix}")
        if suffix not in before and side.exists():
            side.unlink(missing_ok=True)


def _open_sqlite(url: StoreUrl, *, create: bool, read_only: bool, feature: str) -> CheckpointDb:
    require("langgraph.checkpoint.sqlite", extra="sqlite", feature=feature)
    from langgraph.checkpoint.sqlite import SqliteSaver

    assert url.path is not None
    path = url.path
    if create:
        if not path.parent.is_dir():
            raise CliError(
                f"cannot create the SQLite database {str(path)!r}: directory {str(path.parent)!r} "
                "does not exist"
            )
    if path.is_dir():
        raise CliError(f"{str(path)!r} is a directory, not a SQLite database file: name the file in it")
    if not create and not path.is_file():
        raise CliError(
            f"no SQLite database at {str(path)!r} (check the path; sqlite:////abs/path for an absolute one)"
        )
    header = b"" if create else _sqlite_header(path)
    if not read_only:
        _check_writable(path, feature)
    side_files = {suffix for suffix in _SIDE_FILES if Path(f"{path}{suffix}").exists()}
    conn: sqlite3.Connection | None = None
    try:
        if read_only:
            conn = sqlite3.connect(_read_only_uri(path, header), uri=True, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), check_same_thread=False)
        writes_columns = set() if create else _checkpoint_tables(conn, path)
        saver = SqliteSaver(conn)
        if read_only:
            # setup() writes (journal_mode=WAL, CREATE TABLE, ALTER TABLE): the tables are checked
            # above, so mark the saver as set up and its methods never call it.
            saver.is_setup = True
            saver._has_task_path = "task_path" in writes_columns
        else:
            saver.setup()  # idempotent; creates the tables of a new file
    except (sqlite3.Error, CliError) as exc:
        if conn is not None:
            conn.close()
        if not read_only:
            _remove_new_side_files(path, side_files)
        if isinstance(exc, CliError):
            raise
        raise CliError(f"cannot open the SQLite database {str(path)!r}: {one_line(exc)}") from exc
    return SqliteCheckpointDb(saver, url.label, path, read_only=read_only)


def _open_postgres(url: StoreUrl, *, create: bool, feature: str) -> CheckpointDb:
    psycopg = require("psycopg", extra="postgres", feature=feature)
    require("langgraph.checkpoint.postgres", extra="postgres", feature=feature)
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    try:
        # PostgresSaver's own connection settings (autocommit, no prepared statements, dict rows).
        conn = psycopg.connect(
            url.url, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=10
        )
    except psycopg.Error as exc:
        raise CliError(f"cannot connect to PostgreSQL at {in_text(url.label)}: {one_line(exc)}") from exc
    try:
        saver = PostgresSaver(conn)
        if create:
            saver.setup()
        else:
            row = conn.execute(
                "SELECT to_regclass('checkpoints') IS NOT NULL "
                "AND to_regclass('checkpoint_blobs') IS NOT NULL "
                "AND to_regclass('checkpoint_writes') IS NOT NULL AS ok"
            ).fetchone()
            if not row["ok"]:
                raise CliError(
                    f"{in_text(url.label)} has no LangGraph checkpoint tables (run PostgresSaver.setup() "
                    "first, or check the database name)"
                )
    except BaseException:
        conn.close()
        raise
    return PostgresCheckpointDb(saver, url.label, conn)


class CosmosCheckpointDb(CheckpointDb):
    kind = "cosmosdb"
    bytes_meaning = (
        "Cosmos DB: characters of the base64 data fields of the thread's items (its serialized "
        "checkpoints, channel values and writes, about 4/3 of their raw bytes; item envelopes not "
        "included); database bytes are not measured"
    )

    def __init__(self, saver: Any, label: str, client: Any, container: Any) -> None:
        super().__init__(saver, label)
        self.client = client  # the CLI's own: closed with the database
        self.container = container

    def threads(self) -> list[ThreadRow]:
        # Cross-partition, one small field per checkpoint item; counted here because GROUP BY and
        # DISTINCT are not in every Cosmos DB query engine (the local protocol server lacks them).
        counts: dict[str, int] = {}
        for row in self.container.query_items(
            "SELECT c.thread_id FROM c WHERE c.kind = 'checkpoint'", enable_cross_partition_query=True
        ):
            thread_id = str(row["thread_id"])
            counts[thread_id] = counts.get(thread_id, 0) + 1
        return [ThreadRow(thread_id, n, self.thread_bytes(thread_id)) for thread_id, n in counts.items()]

    def thread_bytes(self, thread_id: str) -> int | None:
        from checkpointers.cosmosdb import partition_key

        partition = partition_key(thread_id)
        rows = list(
            self.container.query_items(
                "SELECT VALUE SUM(LENGTH(c.data)) FROM c WHERE c.pk = @pk",
                parameters=[{"name": "@pk", "value": partition}],
                partition_key=partition,
            )
        )
        return int(rows[0] or 0) if rows else 0

    def close(self) -> None:
        from checkpointers.cosmosdb import close_client

        close_client(self.client)


def _open_cosmosdb(url: StoreUrl, *, create: bool, feature: str) -> CheckpointDb:
    """``CosmosDBSaver`` on a client the CLI owns (closed with the database, or here on failure).
    The key and the names are checked before the client is made; ``create``: run ``setup()``
    (database and container created if missing); otherwise the container must exist."""
    import warnings

    require("azure.cosmos", extra="cosmosdb", feature=feature)
    try:
        from checkpointers.cosmosdb import CosmosDBSaver, check_account_key, check_name, close_client
    except ImportError as exc:
        missing = exc.name or "checkpointers.cosmosdb"
        extra = "langgraph" if missing.partition(".")[0] in ("langgraph", "langchain_core") else "cosmosdb"
        raise missing_extra(feature, extra, missing) from exc
    from azure.core.exceptions import AzureError
    from azure.cosmos import CosmosClient, exceptions

    assert url.endpoint and url.key and url.database and url.container
    try:
        host = (urlsplit(url.endpoint).hostname or "").lower()
    except ValueError:
        raise CliError(
            f"bad Cosmos DB endpoint {redact(url.endpoint)!r}: use https://host[:port]/", exit_code=2
        ) from None
    try:
        check_account_key(url.key, url.key_source)
        check_name("the database name in the URL", url.database)
        check_name("the container name in the URL", url.container)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if host in ("127.0.0.1", "localhost"):
        # The SDK skips certificate checks for a local emulator by itself; urllib3 then warns on
        # every request, which would bury the CLI's output.
        warnings.filterwarnings("ignore", message=r"Unverified HTTPS request is being made to host")
    endpoint = redact(url.endpoint)
    where = f"Cosmos DB at {endpoint}"
    try:
        client = CosmosClient(url.endpoint, url.key)
    except (AzureError, ValueError) as exc:
        raise CliError(f"cannot connect to {where}: {one_line(exc)}") from exc
    opened = None
    try:
        saver = CosmosDBSaver(url.database, url.container, client=client, create_if_missing=False)
        container = client.get_database_client(url.database).get_container_client(url.container)
        if create:
            saver.setup()
        else:
            container.read()
        opened = CosmosCheckpointDb(saver, url.label, client, container)
    except exceptions.CosmosResourceNotFoundError as exc:
        raise CliError(
            f"no container {url.container!r} in database {url.database!r} at {endpoint} "
            "(check the names; demo creates them)"
        ) from exc
    except exceptions.CosmosHttpResponseError as exc:
        hint = ": check COSMOSDB_KEY" if exc.status_code in (401, 403) else ""
        raise CliError(f"{where} answered {exc.status_code}{hint}: {one_line(exc, 200)}") from exc
    except (AzureError, ValueError) as exc:
        raise CliError(f"cannot use {where}: {one_line(exc)}") from exc
    finally:
        if opened is None:
            close_client(client)
    return opened


def open_checkpoint_db(url: str, *, create: bool, feature: str, read_only: bool = False) -> CheckpointDb:
    """Parse ``url`` and open a saver on it. ``create``: set the database up (demo); otherwise it
    must already hold LangGraph checkpoints (inspect, compact), so a typo never creates an empty
    one. ``read_only`` (inspect, compact --dry-run): SQLite is opened read-only and never set up, so
    neither the file nor its journal mode changes and no file appears beside it."""
    if create and read_only:
        raise ValueError("open_checkpoint_db: create and read_only exclude each other")
    parsed = parse_store_url(url)
    if parsed.kind == "sqlite":
        return _open_sqlite(parsed, create=create, read_only=read_only, feature=feature)
    if parsed.kind == "postgres":
        return _open_postgres(parsed, create=create, feature=feature)
    return _open_cosmosdb(parsed, create=create, feature=feature)


def latest_checkpoints(db: CheckpointDb, thread_ids: list[str]) -> Iterator[tuple[str, Any]]:
    """``(thread_id, latest CheckpointTuple of the root namespace or None)`` for each thread."""
    for thread_id in thread_ids:
        yield thread_id, db.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
