"""libpq keyword connection strings (``host=db port=5432 dbname=app user=me password=...``), the
form psycopg and ``PostgresSaver.from_conn_string`` accept besides ``postgresql://`` URLs.

The syntax is libpq's: ``keyword = value`` pairs separated by white space; a value is either a run
of non-blank characters or a single-quoted string, and in both a backslash escapes the next
character (``\\'``, ``\\\\``). Keywords are lowercase and from libpq's list (``LIBPQ_KEYWORDS``).

``looks_like_conninfo`` decides which strings are meant as one (so the CLI never takes one for a
SQLite file name): a libpq keyword followed by ``=`` starts the string or a word of it.
``redact_conninfo`` hides the values of the secret keywords (``SECRET_KEYWORDS``; with
``strict``, also those of unknown keywords, which may be a misspelt ``password``, and every word
without ``=``); ``conninfo_secrets`` lists them for redaction by value. Both are tolerant: a
malformed string (an unterminated quote) is redacted too, its unterminated value hidden to the end.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MASK = "***"

#: libpq's connection keywords (PostgreSQL 18; the names psycopg passes to libpq as they are).
LIBPQ_KEYWORDS = frozenset(
    """host hostaddr port dbname user password passfile require_auth channel_binding
    connect_timeout client_encoding options application_name fallback_application_name keepalives
    keepalives_idle keepalives_interval keepalives_count tcp_user_timeout replication gssencmode
    sslmode sslnegotiation requiressl sslcompression sslcert sslkey sslkeylogfile sslpassword
    sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer ssl_min_protocol_version
    ssl_max_protocol_version min_protocol_version max_protocol_version krbsrvname gsslib
    gssdelegation service target_session_attrs load_balance_hosts scram_client_key
    scram_server_key oauth_issuer oauth_client_id oauth_client_secret oauth_scope""".split()
)
#: The keywords whose value is a secret.
SECRET_KEYWORDS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)

_SECRET_WORDS = "|".join(sorted(SECRET_KEYWORDS))
#: A secret keyword and its value as they stand in any text: a quoted value to its closing quote
#: (or to the end of the text when there is none); a plain one to the white space, not taking the
#: quote and punctuation that close the sentence around it ("at 'password=x': failed").
SECRET_PAIR_IN_TEXT = re.compile(
    rf"(?i)(?<![\w.\-])({_SECRET_WORDS})(\s*=\s*)"
    r"('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)+?(?=['\"]?[:,;.)\]}]*(?:\s|$)))"
)
# any case: ``HOST=db PASSWORD=x`` is meant as one too (and refused: libpq's keywords are lowercase)
_KEYWORD_WORD = re.compile(rf"(?i)(?:^|\s)(?:{'|'.join(sorted(LIBPQ_KEYWORDS))})\s*=")


@dataclass(frozen=True)
class Pair:
    """One ``keyword=value`` of a connection string: the value decoded, and where its text is."""

    keyword: str  # "" for a word without "=" (only in a malformed string)
    value: str
    start: int  # the value's text (quotes included) is text[start:end]
    end: int


class ConninfoError(ValueError):
    """A connection string libpq would refuse; the message never quotes a value."""


def looks_like_conninfo(text: str) -> bool:
    """Whether ``text`` (no ``://`` in it) is meant as a libpq keyword connection string."""
    return bool(_KEYWORD_WORD.search(text))


def _pairs(text: str, *, strict: bool) -> Iterator[Pair]:
    i, n, word = 0, len(text), 0
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return
        word += 1
        start = i
        while i < n and not text[i].isspace() and text[i] != "=":
            i += 1
        keyword = text[start:i]
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "=":
            if strict:
                raise ConninfoError(
                    f"word {word} has no '=' (each part is keyword=value; quote a value holding "
                    "spaces: password='a b')"
                )
            yield Pair("", keyword, start, start + len(keyword))
            continue
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value: list[str] = []
        start = i
        quoted = i < n and text[i] == "'"
        if quoted:
            i += 1
            while True:
                if i >= n:
                    if strict:
                        raise ConninfoError(
                            f"the value of {keyword!r} opens a quote (') that is never closed"
                        )
                    yield Pair(keyword, "".join(value), start, n)
                    return
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                elif text[i] == "'":
                    i += 1
                    break
                else:
                    value.append(text[i])
                    i += 1
        else:
            while i < n and not text[i].isspace():
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                else:
                    value.append(text[i])
                    i += 1
        yield Pair(keyword, "".join(value), start, i)


def parse_conninfo(text: str) -> list[Pair]:
    """The pairs of ``text``; ``ConninfoError`` for a part without ``=``, an unterminated quote
    or a keyword libpq does not know (the message names the keyword, never a value)."""
    pairs = list(_pairs(text, strict=True))
    if not pairs:
        raise ConninfoError("it has no keyword=value pair")
    unknown = sorted({p.keyword for p in pairs if p.keyword not in LIBPQ_KEYWORDS})
    cased = [k for k in unknown if k.lower() in LIBPQ_KEYWORDS]
    if cased:
        raise ConninfoError(
            f"libpq's keywords are lowercase: write {', '.join(repr(k.lower()) for k in cased)}, "
            f"not {', '.join(map(repr, cased))}"
        )
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ConninfoError(
            f"{names} {'is not a libpq keyword' if len(unknown) == 1 else 'are not libpq keywords'} "
            "(e.g. host, port, dbname, user, password, sslmode)"
        )
    return pairs


def conninfo_secrets(text: str) -> set[str]:
    """The values of the secret keywords in ``text``, decoded and as written."""
    found: set[str] = set()
    for pair in _pairs(text, strict=False):
        if pair.keyword.lower() in SECRET_KEYWORDS:
            found |= {pair.value, text[pair.start : pair.end]}
    return {s for s in found if s}


def redact_conninfo(text: str, *, strict: bool = False) -> str:
    """``text`` with the value of every secret keyword replaced by ``***``; ``strict`` (for a
    string libpq would refuse): also the values of unknown keywords and the words without ``=``.
    Never raises."""
    out, last = [], 0
    for pair in _pairs(text, strict=False):
        hidden = pair.keyword in SECRET_KEYWORDS or (strict and pair.keyword not in LIBPQ_KEYWORDS)
        if hidden and pair.end > pair.start:
            out += [text[last : pair.start], MASK]
            last = pair.end
    return "".join(out) + text[last:]
