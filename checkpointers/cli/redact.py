"""Secrets never reach the CLI's output: a ``Redactor`` hides them in any text, and
``RedactingStream`` passes a stream's text through one.

Everything the CLI writes passes through one ``Redactor`` (``main`` installs it on stdout and
stderr for the length of a command; ``errors.one_line`` and the messages of ``CliError`` use it
too). It hides secrets two ways:

* by structure: in every URL of the text, the password of the user info and the value of every
  query parameter whose name contains password, key, secret, token, sig or credential (any case);
  anywhere in the text, the value of a libpq secret keyword (``password=...``, ``sslpassword=``...:
  ``conninfo.SECRET_KEYWORDS``), quoted or not;
* by value: the secrets the user handed over (passwords and such query values of the URLs on the
  command line, the secret keywords' values of its keyword connection strings, COSMOSDB_KEY,
  PGPASSWORD, the URL in COSMOSDB_ENDPOINT), raw, percent-decoded and
  as Python or JSON would escape them, wherever they stand as a token in any text, third-party
  error messages included. A part of a URL equal to a secret (a user named like its password) is
  hidden too, since printing it would print the secret.

Parsers disagree on where the user info of a URL ends (urllib takes the last ``@``, libpq the
first, and libpq accepts a raw ``?`` or ``#`` in a password): every reading counts, so a password
holding a raw ``@`` is a secret whole and each of its ``@``-separated parts is one as well.

Pure: no I/O besides the wrapped stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from typing import Any, TextIO
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from .conninfo import MASK, SECRET_PAIR_IN_TEXT, conninfo_secrets

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
            if secret.strip():  # a blank part ("pw@ @host" splits into "pw" and " ") hides nothing
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
            secrets |= secrets_in_url(arg) | conninfo_secrets(arg)
        for name in SECRET_ENV:
            secrets.add(environ.get(name, ""))
        for name in URL_ENV:
            secrets |= secrets_in_url(environ.get(name, ""))
        return cls(secrets)

    def text(self, text: str) -> str:
        """``text`` with every URL and every libpq secret keyword's value in it redacted, then
        every known secret standing as a token."""
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m[0], self._values), text)
        text = SECRET_PAIR_IN_TEXT.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
        return self._known.sub(MASK, text) if self._known is not None else text

    def url(self, url: str) -> str:
        """One whole URL (spaces and quotes included) redacted, then its known secrets."""
        return self.text(redact_url(url, self._values))


_ACTIVE: ContextVar[Redactor | None] = ContextVar("checkpointers_cli_redactor", default=None)


def active_redactor() -> Redactor | None:
    """The redactor of the command running in this context, if any (``main`` sets it)."""
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
    return Redactor(secrets_in_url(url) | conninfo_secrets(url)).url(url)


class RedactingStream:
    """A text stream that hands every line written to it through ``redact`` before ``stream``.

    Text is held until a newline or ``flush()``, so a secret written in several pieces (``print``
    writes its arguments one by one) is seen whole. Everything else (``isatty``, ``encoding``,
    ``fileno``...) is the wrapped stream's."""

    def __init__(self, stream: TextIO, redact: Callable[[str], str]) -> None:
        self.stream = stream
        self.redact = redact
        self._pending = ""
        #: set when the wrapped stream's reader went away (``BrokenPipeError``, raised on)
        self.reader_gone = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(self.redact(text))
        except BrokenPipeError:
            self.reader_gone = True
            raise

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            done, self._pending = self._pending.rsplit("\n", 1)
            self._write(done + "\n")
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self._write(text)
        try:
            self.stream.flush()
        except BrokenPipeError:
            self.reader_gone = True
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
