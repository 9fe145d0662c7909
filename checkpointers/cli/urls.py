"""Store URLs, parsed and checked before anything is opened (pure: no I/O).

* ``sqlite:///relative/path.sqlite``, ``sqlite:////absolute/path.sqlite`` (SQLAlchemy's
  convention: three slashes then the path), or a plain file path;
* ``postgresql://user:password@host:port/dbname`` (also ``postgres://``), handed to psycopg;
* a libpq keyword connection string, ``host=... port=... dbname=... user=... password=...``
  (``conninfo``: a libpq keyword and ``=`` start the string or a word of it; a SQLite file named
  so is written ``sqlite:///NAME`` or ``./NAME``), handed to psycopg as it is;
* ``cosmosdb://host[:port]/database/container`` (``https://host:port/`` is the endpoint), or
  ``cosmosdb:///database/container`` with the endpoint in ``COSMOSDB_ENDPOINT``; the key comes
  from ``COSMOSDB_KEY`` (or a ``?key=`` query parameter, which then lands in shell history).

Refused, each with a message saying what to write instead: an empty URL; a keyword connection
string with a part that is not ``keyword=value``, an unclosed quote or a keyword libpq does not
know; an unknown scheme; an unbalanced ``[`` or ``]``; a SQLite URL with a host, ``?`` options, a
``#`` part or no path (``:memory:`` included); a PostgreSQL URL with neither host nor database; a
PostgreSQL or Cosmos DB URL with a ``%`` that starts no ``%XX`` escape, an ``@`` other than the one
before the host, or a port that is not a number; a Cosmos DB URL without exactly
``database/container``, with a user name or password, without an endpoint (no host and no
``COSMOSDB_ENDPOINT``) or without a key.

Error messages show the URL only as ``redact.redact`` (``conninfo.redact_conninfo``) hides it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .conninfo import ConninfoError, looks_like_conninfo, parse_conninfo, redact_conninfo
from .errors import CliError
from .redact import redact, redact_text


@dataclass(frozen=True)
class StoreUrl:
    """A parsed store URL: which kind of database, where, and its label for printing."""

    kind: str  # "sqlite" | "postgres" | "cosmosdb"
    url: str = field(repr=False)  # as given (may hold a password; never print it, print ``label``)
    label: str  # the URL with its secrets hidden (``redact``)
    path: Path | None = None  # sqlite
    endpoint: str | None = None  # cosmosdb
    key: str | None = field(default=None, repr=False)  # cosmosdb
    key_source: str = ""  # cosmosdb: where the key came from, for messages ("in COSMOSDB_KEY")
    database: str | None = None  # cosmosdb
    container: str | None = None  # cosmosdb


_SCHEMES = "sqlite:///path, postgresql://user@host/db or cosmosdb://host/database/container"
_ENCODE_HINT = "percent-encode '@' as %40, '/' as %2F, '?' as %3F, '#' as %23 and '%' as %25"


def in_text(label: str) -> str:
    """``label`` as it stands in a sentence: quoted when it holds white space (a keyword connection
    string), so where it ends is plain."""
    return repr(label) if any(ch.isspace() for ch in label) else label


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


def _parse_conninfo(text: str) -> StoreUrl:
    """A libpq keyword connection string (``conninfo``), checked as libpq would read it."""
    try:
        parse_conninfo(text)
    except ConninfoError as exc:
        raise CliError(
            f"bad PostgreSQL connection string {redact_conninfo(text, strict=True)!r}: {exc}; "
            "or write postgresql://user@host:port/db "
            "(a SQLite file whose name looks like this: sqlite:///NAME or ./NAME)",
            exit_code=2,
        ) from None
    return StoreUrl("postgres", text, redact_conninfo(text))


def parse_store_url(url: str, *, environ: Mapping[str, str] | None = None) -> StoreUrl:
    """Parse a store URL (see the module docstring); raise ``CliError`` saying what is wrong.

    Error messages show the URL only as ``redact`` hides it."""
    env = os.environ if environ is None else environ
    if not url or not url.strip():
        raise CliError(f"empty store URL: use {_SCHEMES}", exit_code=2)
    if "://" not in url:
        if looks_like_conninfo(url):
            return _parse_conninfo(url)
        # A plain path: the SQLite file itself (the most common case for a local store).
        return StoreUrl("sqlite", url, url, path=Path(url).expanduser())
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
        return StoreUrl("sqlite", url, label, path=Path(raw).expanduser())
    if scheme in ("postgresql", "postgres"):
        if not parts.path.strip("/") and not parts.netloc:
            raise CliError(
                f"bad PostgreSQL URL {label!r}: use postgresql://user@host:port/dbname", exit_code=2
            )
        _check_authority(url, label, "PostgreSQL")
        _check_port(url, label, "PostgreSQL")
        plain = "postgresql" + url[url.index("://") :]
        return StoreUrl("postgres", plain, redact(plain))
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
        key = _query_value(parts.query, "key")
        key_source = "in the URL's key= parameter"
        if not key:
            key, key_source = env.get("COSMOSDB_KEY"), "in COSMOSDB_KEY"
        if not key:
            raise CliError(
                "Cosmos DB needs a key: set COSMOSDB_KEY (the emulator's well-known key works for "
                "the emulator)",
                exit_code=2,
            )
        return StoreUrl(
            "cosmosdb", url, label, endpoint=endpoint, key=key, key_source=key_source,
            database=names[0], container=names[1],
        )  # fmt: skip
    shown = redact_text(parts.scheme) or "(none)"
    raise CliError(f"unknown store scheme {shown!r} in {label!r}: use {_SCHEMES}", exit_code=2)
