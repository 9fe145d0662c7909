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
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit


class CliError(Exception):
    """An error the CLI reports as one line (no traceback unless ``--debug``)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The text of an exception on one line (drivers such as psycopg answer on several), redacted
    by the active ``Redactor`` (see ``redact_text``) before it is shortened to ``limit``, so a
    secret cut in half by the shortening cannot slip through."""
    text = redact_text(" ".join(str(exc).split())) or type(exc).__name__
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


# --- secrets (pure) ---------------------------------------------------------------------------
#
# Everything the CLI writes passes through one ``Redactor`` (``cli`` installs it on stdout and
# stderr for the length of a command; ``one_line`` and the messages of ``CliError`` use it too).
# It hides secrets two ways:
#
# * by structure: in every URL of the text, the password of the user info and the value of every
#   query parameter whose name contains password, key, secret, token, sig or credential (any case);
# * by value: the secrets the user handed over (passwords and such query values of the URLs on the
#   command line, COSMOSDB_KEY, PGPASSWORD, the URL in COSMOSDB_ENDPOINT), raw, percent-decoded and
#   as Python or JSON would escape them, wherever they stand as a token in any text, third-party
#   error messages included. A part of a URL equal to a secret (a user named like its password) is
#   hidden too, since printing it would print the secret.
#
# Parsers disagree on where the user info of a URL ends (urllib takes the last ``@``, libpq the
# first, and libpq accepts a raw ``?`` or ``#`` in a password): every reading counts, so a password
# holding a raw ``@`` is a secret whole and each of its ``@``-separated parts is one as well.

MASK = "***"
_SECRET_NAME = re.compile(r"(?i)password|key|secret|token|sig|credential")
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# A URL inside free text ends at white space, a quote or an angle bracket, and does not take the
# punctuation that ends a sentence or a clause ("... at URL: refused").
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*[^\s'\"<>`.,:;!?)\]]")
_QUERY_PAIR = re.compile(r"([?&;])([^=&;?#\s]*)=([^&;#\s]*)")
#: Environment variables holding a secret as their whole value, and those holding a URL.
SECRET_ENV = ("COSMOSDB_KEY", "PGPASSWORD")
URL_ENV = ("COSMOSDB_ENDPOINT",)


def _secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(unquote_plus(name)))


def _leading(pattern: re.Pattern[str], text: str) -> str:
    match = pattern.match(text)
    return match[0] if match else ""


_AUTHORITY = re.compile(r"[^/?#]*")
_PATH = re.compile(r"[^?#]*")
_HOST = re.compile(r"\[[^\]]*\]|[^:]*")  # a bracketed IPv6 address, or up to the port


def redact_url(url: str, secrets: AbstractSet[str] = frozenset()) -> str:
    """``url`` with the user-info password and secret-named query values replaced by ``***``, and
    every other part (user name, host, path segment, query name or value) whose text or
    percent-decoded value is in ``secrets``.

    Never raises (no URL parser is involved): a malformed URL is redacted as well as a valid one."""
    start = _URL_START.match(url)
    if start is None:
        return url

    def hide(part: str) -> str:
        return MASK if part and (part in secrets or unquote(part) in secrets) else part

    head, rest = url[: start.end()], url[start.end() :]
    at = rest.rfind("@")
    if at >= 0 and not rest.startswith("/"):  # "scheme:///path" has no user info
        user, colon, _ = rest[:at].partition(":")
        head += f"{hide(user)}{':' + MASK if colon else ''}@"
        rest = rest[at + 1 :]
    authority = _leading(_AUTHORITY, rest)
    host = _leading(_HOST, authority)
    bracketed = host.startswith("[") and host.endswith("]")
    head += f"[{hide(host[1:-1])}]" if bracketed else hide(host)
    head += authority[len(host) :]  # the port
    rest = rest[len(authority) :]
    path = _leading(_PATH, rest)
    rest = "/".join(map(hide, path.split("/"))) + rest[len(path) :]

    def pair(m: re.Match[str]) -> str:
        return f"{m[1]}{hide(m[2])}={MASK if _secret_name(m[2]) else hide(m[3])}"

    return head + _QUERY_PAIR.sub(pair, rest)


def secrets_in_url(text: str) -> set[str]:
    """The secrets of every URL in ``text``: each reading of the user-info password (and its
    ``@``-separated parts), and the values of secret-named query parameters, as written."""
    found: set[str] = set()
    for start in _URL_START.finditer(text):
        rest = text[start.end() :]
        if not rest.startswith("/"):
            for at in (i for i, ch in enumerate(rest) if ch == "@"):
                _, colon, password = rest[:at].partition(":")
                if colon:
                    found.add(password)
                    found.update(password.split("@"))
        found.update(m[3] for m in _QUERY_PAIR.finditer(rest) if _secret_name(m[2]))
    return {s for s in found if s}


def _spellings(secret: str) -> set[str]:
    """How ``secret`` can appear in text: as given, percent-decoded or -encoded, and escaped the
    way ``repr`` (either quote) and ``json.dumps`` (ASCII or not) escape it."""
    out: set[str] = set()
    for s in {secret, secret.strip(), unquote(secret), unquote_plus(secret)}:
        if s:
            out.update(
                (s, repr(s)[1:-1], repr('"' + s)[2:-1], json.dumps(s)[1:-1],
                 json.dumps(s, ensure_ascii=False)[1:-1], quote(s), quote(s, safe=""), quote_plus(s))
            )  # fmt: skip
    return {s for s in out if s}


def _as_token(spelling: str) -> str:
    # A token boundary: a secret starting (ending) with a word character must not be preceded
    # (followed) by one, so "ab" hides "ab" and "x@ab:" but leaves "abc" alone.
    before = r"(?<!\w)" if re.match(r"\w", spelling[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", spelling[-1]) else ""
    return before + re.escape(spelling) + after


class Redactor:
    """Hides secrets in text: by URL structure always, and ``secrets`` by value (see above)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            if secret:
                spellings |= _spellings(secret)
        # A URL part is compared by its text and its percent-decoded value.
        self._values = frozenset(spellings | {unquote(s) for s in spellings})
        # Longest first: at one position the alternation takes the first that matches.
        ordered = sorted(spellings, key=lambda s: (-len(s), s))
        self._known = re.compile("|".join(map(_as_token, ordered))) if ordered else None

    @classmethod
    def for_command(cls, argv: Iterable[str], environ: Mapping[str, str]) -> Redactor:
        """The secrets of one command line: its URLs, and the secret environment variables."""
        secrets: set[str] = set()
        for arg in argv:
            secrets |= secrets_in_url(arg)
        for name in SECRET_ENV:
            secrets.add(environ.get(name, ""))
        for name in URL_ENV:
            secrets |= secrets_in_url(environ.get(name, ""))
        return cls(secrets)

    def text(self, text: str) -> str:
        """``text`` with every URL in it redacted, then every known secret standing as a token."""
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m[0], self._values), text)
        return self._known.sub(MASK, text) if self._known is not None else text

    def url(self, url: str) -> str:
        """One whole URL (spaces and quotes included) redacted, then its known secrets."""
        return self.text(redact_url(url, self._values))


_ACTIVE: ContextVar[Redactor | None] = ContextVar("agentstate_reducer_cli_redactor", default=None)


def active_redactor() -> Redactor | None:
    """The redactor of the command running in this context, if any (``cli`` sets it)."""
    return _ACTIVE.get()


def activate_redactor(redactor: Redactor | None) -> Callable[[], None]:
    """Make ``redactor`` the active one; returns the function that restores the previous one."""
    token = _ACTIVE.set(redactor)
    return lambda: _ACTIVE.reset(token)


def redact_text(text: str) -> str:
    """``text`` through the active redactor, or through URL-structure redaction when none is."""
    return (active_redactor() or Redactor()).text(text)


def redact(url: str) -> str:
    """``url`` for printing: its secrets hidden by structure, then by value wherever else they
    occur in it (a user named like its password)."""
    return Redactor(secrets_in_url(url)).url(url)


# --- URLs (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreSpec:
    kind: str  # "sqlite" | "postgres" | "cosmosdb"
    url: str = field(repr=False)  # as given (may hold a password; never print it, print ``label``)
    label: str  # the URL with its secrets hidden (``redact``)
    path: Path | None = None  # sqlite
    endpoint: str | None = None  # cosmosdb
    key: str | None = field(default=None, repr=False)  # cosmosdb
    database: str | None = None  # cosmosdb
    container: str | None = None  # cosmosdb


_SCHEMES = "sqlite:///path, postgresql://user@host/db or cosmosdb://host/database/container"
_ENCODE_HINT = "percent-encode '@' as %40, '/' as %2F, '?' as %3F, '#' as %23 and '%' as %25"


def _query_value(query: str, name: str) -> str | None:
    """The percent-decoded value of parameter ``name`` ('+' stays '+': base64 keys hold it)."""
    for pair in re.split("[&;]", query):
        key, eq, value = pair.partition("=")
        if eq and unquote(key) == name:
            return unquote(value)
    return None


def _check_authority(url: str, label: str, what: str) -> None:
    """Reject what libpq and urllib would read differently (so what the CLI shows and checks is
    what the driver uses): a '%' that starts no escape, an '@' that is not the single separator
    between the user info and the host."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", url):
        raise CliError(
            f"bad {what} URL {label!r}: it has a '%' that starts no %XX escape; in the user name, "
            f"password and database name {_ENCODE_HINT}",
            exit_code=2,
        )
    rest = url.split("://", 1)[1]
    if rest.count("@") > 1 or ("@" in rest and "@" not in urlsplit(url).netloc):
        raise CliError(
            f"bad {what} URL {label!r}: '@' may appear once, between user:password and the host; "
            f"in the user name and password {_ENCODE_HINT}",
            exit_code=2,
        )


def _check_port(url: str, label: str, what: str) -> None:
    try:
        urlsplit(url).port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise CliError(
            f"bad {what} URL {label!r}: the port is not a number (an IPv6 host goes in brackets, "
            "e.g. [::1]:5432)",
            exit_code=2,
        ) from None


def parse_store_url(url: str, *, environ: Mapping[str, str] | None = None) -> StoreSpec:
    """Parse a store URL (see the module docstring); raise ``CliError`` saying what is wrong.

    Error messages show the URL only as ``redact`` hides it."""
    env = os.environ if environ is None else environ
    if not url or not url.strip():
        raise CliError(f"empty store URL: use {_SCHEMES}", exit_code=2)
    if "://" not in url:
        # A plain path: the SQLite file itself (the most common case for a local store).
        return StoreSpec("sqlite", url, url, path=Path(url).expanduser())
    label = redact(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # urllib's text may quote a part of the password: not shown
        raise CliError(
            f"bad store URL {label!r}: unbalanced '[' or ']' (an IPv6 host goes in brackets, "
            "e.g. [::1]:5432)",
            exit_code=2,
        ) from None
    scheme = parts.scheme.lower().split("+", 1)[0]  # postgresql+psycopg:// is SQLAlchemy's spelling
    if scheme == "sqlite":
        if parts.netloc:
            raise CliError(
                f"bad SQLite URL {label!r}: it has a host part; use sqlite:///relative/path "
                "or sqlite:////absolute/path",
                exit_code=2,
            )
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise CliError(
                f"bad SQLite URL {label!r}: SQLite URLs take no '?' options or '#' part (the CLI opens "
                "the file read-only where it only reads); percent-encode '?' as %3F and '#' as %23 "
                "in a file name",
                exit_code=2,
            )
        raw = unquote(parts.path)[1:]  # "sqlite:///x" -> "/x" -> "x"; "sqlite:////x" -> "//x" -> "/x"
        if not raw or raw == ":memory:":
            raise CliError(
                f"bad SQLite URL {label!r}: give a file path (an in-memory database would vanish with "
                "the process), e.g. sqlite:///checkpoints.sqlite",
                exit_code=2,
            )
        return StoreSpec("sqlite", url, label, path=Path(raw).expanduser())
    if scheme in ("postgresql", "postgres"):
        if not parts.path.strip("/") and not parts.netloc:
            raise CliError(
                f"bad PostgreSQL URL {label!r}: use postgresql://user@host:port/dbname", exit_code=2
            )
        _check_authority(url, label, "PostgreSQL")
        _check_port(url, label, "PostgreSQL")
        plain = "postgresql" + url[url.index("://") :]
        return StoreSpec("postgres", plain, redact(plain))
    if scheme == "cosmosdb":
        _check_authority(url, label, "Cosmos DB")
        _check_port(url, label, "Cosmos DB")
        names = [unquote(p) for p in parts.path.split("/") if p]
        if len(names) != 2:
            raise CliError(
                f"bad Cosmos DB URL {label!r}: use cosmosdb://host[:port]/database/container "
                "(or cosmosdb:///database/container with COSMOSDB_ENDPOINT set)",
                exit_code=2,
            )
        if "@" in parts.netloc:
            raise CliError(
                f"bad Cosmos DB URL {label!r}: it takes no user name or password; give the account key "
                "in COSMOSDB_KEY",
                exit_code=2,
            )
        if parts.netloc:
            endpoint = f"https://{parts.netloc}/"
        else:
            endpoint = env.get("COSMOSDB_ENDPOINT", "")
            if not endpoint:
                raise CliError(
                    f"Cosmos DB URL {label!r} has no host and COSMOSDB_ENDPOINT is not set: use "
                    "cosmosdb://host[:port]/database/container or set COSMOSDB_ENDPOINT",
                    exit_code=2,
                )
        key = _query_value(parts.query, "key") or env.get("COSMOSDB_KEY")
        if not key:
            raise CliError(
                "Cosmos DB needs a key: set COSMOSDB_KEY (the emulator's well-known key works for "
                "the emulator)",
                exit_code=2,
            )
        return StoreSpec(
            "cosmosdb", url, label, endpoint=endpoint, key=key, database=names[0], container=names[1]
        )
    shown = redact_text(parts.scheme) or "(none)"
    raise CliError(f"unknown store scheme {shown!r} in {label!r}: use {_SCHEMES}", exit_code=2)


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
        if not self.read_only:  # a checkpoint writes the log into the database file
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
    missing = [t for t, cols in columns.items() if not cols]
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


def _sqlite(spec: StoreSpec, *, create: bool, read_only: bool, feature: str) -> Store:
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
    header = b"" if create else _sqlite_header(path)
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
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        raise CliError(f"cannot read the SQLite database {str(path)!r}: {one_line(exc)}") from exc
    except CliError:
        if conn is not None:
            conn.close()
        raise
    return SqliteStore(saver, spec.label, path, read_only=read_only)


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
    try:
        host = (urlsplit(spec.endpoint).hostname or "").lower()
    except ValueError:
        raise CliError(
            f"bad Cosmos DB endpoint {redact(spec.endpoint)!r}: use https://host[:port]/", exit_code=2
        ) from None
    if host in ("127.0.0.1", "localhost"):
        # The SDK skips certificate checks for a local emulator by itself; urllib3 then warns on
        # every request, which would bury the CLI's output.
        warnings.filterwarnings("ignore", message=r"Unverified HTTPS request is being made to host")
    endpoint = redact(spec.endpoint)
    where = f"Cosmos DB at {endpoint}"
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
            f"no container {spec.container!r} in database {spec.database!r} at {endpoint} "
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


def open_store(url: str, *, create: bool, feature: str, read_only: bool = False) -> Store:
    """Parse ``url`` and open a saver on it. ``create``: set the store up (demo); otherwise it must
    already hold LangGraph checkpoints (inspect, compact), so a typo never creates an empty store.
    ``read_only`` (inspect, compact --dry-run): SQLite is opened read-only and never set up, so
    neither the file nor its journal mode changes and no file appears beside it."""
    if create and read_only:
        raise ValueError("open_store: create and read_only exclude each other")
    spec = parse_store_url(url)
    if spec.kind == "sqlite":
        return _sqlite(spec, create=create, read_only=read_only, feature=feature)
    if spec.kind == "postgres":
        return _postgres(spec, create=create, feature=feature)
    return _cosmosdb(spec, create=create, feature=feature)


def iter_latest(store: Store, thread_ids: list[str]) -> Iterator[tuple[str, Any]]:
    """``(thread_id, latest CheckpointTuple of the root namespace or None)`` for each thread."""
    for tid in thread_ids:
        yield tid, store.saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}})
