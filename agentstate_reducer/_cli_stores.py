"""Store URLs for the CLI: parse them (pure), open a saver on them, and measure what they hold.

Supported URLs (``parse_store_url``):

* ``sqlite:///relative/path.sqlite``, ``sqlite:////absolute/path.sqlite`` (SQLAlchemy's
  convention: three slashes then the path), or a plain file path;
* ``postgresql://user:password@host:port/dbname`` (also ``postgres://``), handed to psycopg;
* ``cosmosdb://host[:port]/database/container`` (``https://host:port/`` is the endpoint), or
  ``cosmosdb:///database/container`` with the endpoint in ``COSMOSDB_ENDPOINT``; the key comes
  from ``COSMOSDB_KEY`` (or a ``?key=`` query parameter, which then lands in shell history).

What "bytes" means differs per store, and each ``Store`` says it in ``bytes_meaning``.

langgraph, psycopg and azure-cosmos are imported inside the functions that need them: the
package itself has no dependencies, and a missing extra is reported as one ``CliError`` line.
"""

from __future__ import annotations

import importlib
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit


class CliError(Exception):
    """An error the CLI reports as one line (no traceback unless ``--debug``)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The text of an exception on one line (drivers such as psycopg answer on several)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise the one-line "needs the X extra" error."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        raise CliError(
            f"{feature} needs the {extra} extra (module {missing!r} is missing): "
            f'pip install "agentstate-reducer[{extra}]"'
        ) from exc


# --- URLs (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreSpec:
    kind: str  # "sqlite" | "postgres" | "cosmosdb"
    url: str  # as given (may hold a password; never print it, print ``label``)
    label: str  # the URL with password and key hidden
    path: Path | None = None  # sqlite
    endpoint: str | None = None  # cosmosdb
    key: str | None = field(default=None, repr=False)  # cosmosdb
    database: str | None = None  # cosmosdb
    container: str | None = None  # cosmosdb


_SCHEMES = "sqlite:///path, postgresql://user@host/db or cosmosdb://host/database/container"


def redact(url: str) -> str:
    """``url`` with the password and any ``key=`` query parameter replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = re.sub(r"(?i)\b(key|password)=[^&]*", r"\1=***", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def parse_store_url(url: str, *, environ: dict[str, str] | None = None) -> StoreSpec:
    """Parse a store URL (see the module docstring); raise ``CliError`` saying what is wrong."""
    env = os.environ if environ is None else environ
    if not url or not url.strip():
        raise CliError(f"empty store URL: use {_SCHEMES}", exit_code=2)
    if "://" not in url:
        # A plain path: the SQLite file itself (the most common case for a local store).
        return StoreSpec("sqlite", url, url, path=Path(url).expanduser())
    parts = urlsplit(url)
    scheme = parts.scheme.lower().split("+", 1)[0]  # postgresql+psycopg:// is SQLAlchemy's spelling
    if scheme == "sqlite":
        if parts.netloc:
            raise CliError(
                f"bad SQLite URL {url!r}: it has a host ({parts.netloc!r}); use sqlite:///relative/path "
                "or sqlite:////absolute/path",
                exit_code=2,
            )
        raw = unquote(parts.path)[1:]  # "sqlite:///x" -> "/x" -> "x"; "sqlite:////x" -> "//x" -> "/x"
        if not raw or raw == ":memory:":
            raise CliError(
                f"bad SQLite URL {url!r}: give a file path (an in-memory database would vanish with the "
                "process), e.g. sqlite:///checkpoints.sqlite",
                exit_code=2,
            )
        return StoreSpec("sqlite", url, url, path=Path(raw).expanduser())
    if scheme in ("postgresql", "postgres"):
        if not parts.path.strip("/") and not parts.netloc:
            raise CliError(
                f"bad PostgreSQL URL {redact(url)!r}: use postgresql://user@host:port/dbname", exit_code=2
            )
        plain = urlunsplit(parts._replace(scheme="postgresql"))
        return StoreSpec("postgres", plain, redact(plain))
    if scheme == "cosmosdb":
        names = [unquote(p) for p in parts.path.split("/") if p]
        if len(names) != 2:
            raise CliError(
                f"bad Cosmos DB URL {redact(url)!r}: use cosmosdb://host[:port]/database/container "
                "(or cosmosdb:///database/container with COSMOSDB_ENDPOINT set)",
                exit_code=2,
            )
        if parts.netloc:
            host = parts.netloc.rsplit("@", 1)[-1]
            endpoint = f"https://{host}/"
        else:
            endpoint = env.get("COSMOSDB_ENDPOINT", "")
            if not endpoint:
                raise CliError(
                    f"Cosmos DB URL {url!r} has no host and COSMOSDB_ENDPOINT is not set: use "
                    "cosmosdb://host[:port]/database/container or set COSMOSDB_ENDPOINT",
                    exit_code=2,
                )
        query_key = parse_qs(parts.query).get("key", [None])[0]
        key = query_key or env.get("COSMOSDB_KEY")
        if not key:
            raise CliError(
                "Cosmos DB needs a key: set COSMOSDB_KEY (the emulator's well-known key works for "
                "the emulator)",
                exit_code=2,
            )
        return StoreSpec(
            "cosmosdb", url, redact(url), endpoint=endpoint, key=key, database=names[0], container=names[1]
        )
    shown = parts.scheme or url
    raise CliError(f"unknown store scheme {shown!r} in {redact(url)!r}: use {_SCHEMES}", exit_code=2)


# --- opened stores ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadRow:
    thread_id: str
    checkpoints: int
    bytes: int | None


class Store:
    """A saver on a store plus the read-only measurements the CLI reports."""

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
        for tup in self.saver.list(None):
            tid = str(tup.config["configurable"]["thread_id"])
            counts[tid] = counts.get(tid, 0) + 1
        return [ThreadRow(t, n, None) for t, n in counts.items()]

    def thread_bytes(self, thread_id: str) -> int | None:
        return None

    def database_bytes(self) -> int | None:
        """The size of the whole store where it has one (a file, tables), else None."""
        return None

    def flush(self) -> None:
        """Make ``database_bytes`` final (SQLite: fold the write-ahead log into the file)."""

    def close(self) -> None:
        pass

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SqliteStore(Store):
    kind = "sqlite"
    bytes_meaning = (
        "SQLite: length of the thread's stored checkpoint, metadata and write blobs (page and index "
        "overhead not included); database bytes = the file plus its -wal file"
    )

    def __init__(self, saver: Any, label: str, path: Path) -> None:
        super().__init__(saver, label)
        self.path = path

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
        return [ThreadRow(str(t), int(n), int(b or 0) + int(writes.get(t) or 0)) for t, n, b in rows]

    def thread_bytes(self, thread_id: str) -> int | None:
        (a,) = self._query(
            "SELECT SUM(LENGTH(checkpoint) + COALESCE(LENGTH(metadata), 0)) FROM checkpoints "
            "WHERE thread_id = ?",
            (thread_id,),
        )
        (b,) = self._query(
            "SELECT SUM(COALESCE(LENGTH(value), 0)) FROM writes WHERE thread_id = ?", (thread_id,)
        )
        return int(a[0] or 0) + int(b[0] or 0)

    def database_bytes(self) -> int | None:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def flush(self) -> None:
        self._query("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.saver.conn.close()


class PostgresStore(Store):
    kind = "postgres"
    bytes_meaning = (
        "PostgreSQL: pg_column_size of the thread's checkpoint, metadata, blob and write values, as "
        "stored (after TOAST compression; row, index and dead-tuple overhead not included); database "
        "bytes = pg_total_relation_size of the four checkpoint tables"
    )
    _TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")

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
            r["thread_id"]: int(r["bytes"] or 0) for r in self._query(self._BYTES_BY_THREAD.format(where=""))
        }
        return [ThreadRow(str(r["thread_id"]), int(r["n"]), sizes.get(r["thread_id"], 0)) for r in counts]

    def thread_bytes(self, thread_id: str) -> int | None:
        rows = self._query(self._BYTES_BY_THREAD.format(where="WHERE thread_id = %s"), (thread_id,) * 3)
        return int(rows[0]["bytes"] or 0) if rows else 0

    def database_bytes(self) -> int | None:
        parts = " + ".join(f"COALESCE(pg_total_relation_size(to_regclass('{t}')), 0)" for t in self._TABLES)
        return int(self._query(f"SELECT {parts} AS n")[0]["n"])

    def close(self) -> None:
        self.conn.close()


def _sqlite(spec: StoreSpec, *, create: bool, feature: str) -> Store:
    require("langgraph.checkpoint.sqlite", extra="sqlite", feature=feature)
    from langgraph.checkpoint.sqlite import SqliteSaver

    assert spec.path is not None
    path = spec.path
    if create:
        if not path.parent.is_dir():
            raise CliError(
                f"cannot create the SQLite database {str(path)!r}: directory {str(path.parent)!r} "
                "does not exist"
            )
    elif not path.is_file():
        raise CliError(
            f"no SQLite database at {str(path)!r} (check the path; sqlite:////abs/path for an absolute one)"
        )
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        if not create:
            found = conn.execute(
                "SELECT COUNT(*) FROM sqlite_master "
                "WHERE type = 'table' AND name IN ('checkpoints', 'writes')"
            ).fetchone()[0]
            if found != 2:
                conn.close()
                raise CliError(
                    f"{str(path)!r} is an SQLite database without LangGraph's checkpoints and "
                    "writes tables: is it a SqliteSaver database?"
                )
        saver = SqliteSaver(conn)
        saver.setup()  # idempotent; creates the tables of a new file
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the SQLite database {str(path)!r}: {one_line(exc)}") from exc
    return SqliteStore(saver, spec.label, path)


def _postgres(spec: StoreSpec, *, create: bool, feature: str) -> Store:
    psycopg = require("psycopg", extra="postgres", feature=feature)
    require("langgraph.checkpoint.postgres", extra="postgres", feature=feature)
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    try:
        # PostgresSaver's own connection settings (autocommit, no prepared statements, dict rows).
        conn = psycopg.connect(
            spec.url, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=10
        )
    except psycopg.Error as exc:
        raise CliError(f"cannot connect to PostgreSQL at {spec.label}: {one_line(exc)}") from exc
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
                    f"{spec.label} has no LangGraph checkpoint tables (run PostgresSaver.setup() "
                    "first, or check the database name)"
                )
    except BaseException:
        conn.close()
        raise
    return PostgresStore(saver, spec.label, conn)


def _cosmosdb(spec: StoreSpec, *, create: bool, feature: str) -> Store:
    require("azure.cosmos", extra="cosmosdb", feature=feature)
    try:
        module = importlib.import_module("checkpointers.cosmosdb")
    except ImportError as exc:
        if exc.name not in ("checkpointers.cosmosdb", "checkpointers"):
            raise CliError(
                f"{feature} needs the cosmosdb extra (module {exc.name!r} is missing): "
                'pip install "agentstate-reducer[cosmosdb]"'
            ) from exc
        raise CliError(
            "cosmosdb:// stores need checkpointers.cosmosdb.CosmosDBSaver, which this "
            "installation of agentstate-reducer does not have"
        ) from exc
    return open_cosmos_store(module, spec, create=create)


class CosmosStore(Store):
    kind = "cosmosdb"
    bytes_meaning = (
        "Cosmos DB: characters of the base64 data fields of the thread's items (its serialized "
        "checkpoints, channel values and writes, about 4/3 of their raw bytes; item envelopes not "
        "included); database bytes are not measured"
    )

    def __init__(self, saver: Any, label: str, client: Any, container: Any, mapping: ModuleType) -> None:
        super().__init__(saver, label)
        self.client = client
        self.container = container
        self.mapping = mapping  # checkpointers.cosmosdb._mapping: the item layout (same distribution)

    def threads(self) -> list[ThreadRow]:
        # Cross-partition, one small field per checkpoint item; counted here because GROUP BY and
        # DISTINCT are not in every Cosmos DB query engine (the local protocol server lacks them).
        counts: dict[str, int] = {}
        for row in self.container.query_items(
            "SELECT c.thread_id FROM c WHERE c.kind = 'checkpoint'", enable_cross_partition_query=True
        ):
            tid = str(row["thread_id"])
            counts[tid] = counts.get(tid, 0) + 1
        return [ThreadRow(t, n, self.thread_bytes(t)) for t, n in counts.items()]

    def thread_bytes(self, thread_id: str) -> int | None:
        pk = self.mapping.partition_key(thread_id)
        rows = list(
            self.container.query_items(
                "SELECT VALUE SUM(LENGTH(c.data)) FROM c WHERE c.pk = @pk",
                parameters=[{"name": "@pk", "value": pk}],
                partition_key=pk,
            )
        )
        return int(rows[0] or 0) if rows else 0

    def close(self) -> None:
        sync = importlib.import_module("checkpointers.cosmosdb.sync")
        # The saver module's close waits for the client's start-up health check thread first.
        getattr(sync, "_close_client", lambda c: c.close())(self.client)


def open_cosmos_store(module: ModuleType, spec: StoreSpec, *, create: bool) -> Store:
    """``CosmosDBSaver`` on a client the CLI owns (closed with the store). ``create``: run
    ``setup()`` (database and container created if missing); otherwise the container must exist."""
    import warnings

    from azure.core.exceptions import AzureError
    from azure.cosmos import CosmosClient, exceptions

    mapping = importlib.import_module("checkpointers.cosmosdb._mapping")
    assert spec.endpoint and spec.key and spec.database and spec.container
    host = (urlsplit(spec.endpoint).hostname or "").lower()
    if host in ("127.0.0.1", "localhost"):
        # The SDK skips certificate checks for a local emulator by itself; urllib3 then warns on
        # every request, which would bury the CLI's output.
        warnings.filterwarnings("ignore", message=r"Unverified HTTPS request is being made to host")
    where = f"Cosmos DB at {spec.endpoint}"
    try:
        client = CosmosClient(spec.endpoint, spec.key)
    except (AzureError, ValueError) as exc:
        raise CliError(f"cannot connect to {where}: {one_line(exc)}") from exc
    store = None
    try:
        saver = module.CosmosDBSaver(spec.database, spec.container, client=client, create_if_missing=False)
        container = client.get_database_client(spec.database).get_container_client(spec.container)
        if create:
            saver.setup()
        else:
            container.read()
        store = CosmosStore(saver, spec.label, client, container, mapping)
    except exceptions.CosmosResourceNotFoundError as exc:
        raise CliError(
            f"no container {spec.container!r} in database {spec.database!r} at {spec.endpoint} "
            "(check the names; demo creates them)"
        ) from exc
    except exceptions.CosmosHttpResponseError as exc:
        hint = ": check COSMOSDB_KEY" if exc.status_code in (401, 403) else ""
        raise CliError(f"{where} answered {exc.status_code}{hint}: {one_line(exc, 200)}") from exc
    except (AzureError, ValueError) as exc:
        raise CliError(f"cannot use {where}: {one_line(exc)}") from exc
    finally:
        if store is None:
            client.close()
    return store


def open_store(url: str, *, create: bool, feature: str) -> Store:
    """Parse ``url`` and open a saver on it. ``create``: set the store up (demo); otherwise it must
    already hold LangGraph checkpoints (inspect, compact), so a typo never creates an empty store."""
    spec = parse_store_url(url)
    if spec.kind == "sqlite":
        return _sqlite(spec, create=create, feature=feature)
    if spec.kind == "postgres":
        return _postgres(spec, create=create, feature=feature)
    return _cosmosdb(spec, create=create, feature=feature)


def iter_latest(store: Store, thread_ids: list[str]) -> Iterator[tuple[str, Any]]:
    """``(thread_id, latest CheckpointTuple of the root namespace or None)`` for each thread."""
    for tid in thread_ids:
        yield tid, store.saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}})
