"""Secrets never appear in what the CLI writes: a corpus of store URLs on every command and mode.

Every secret in the corpus holds the marker ``S3cr3t`` (a few cases add their own markers), so
"no marker anywhere in stdout or stderr" means no secret, no part of one and no re-encoding of one
was written. Commands run through ``cli.main`` with ``capfd`` (file-descriptor capture: a driver
writing to fd 2 directly is caught too), and a few once more as the installed console script.
Unreachable servers are a closed port on 127.0.0.1 / ::1, refused at once.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import checkpointers.cli.main as cli
from checkpointers.cli.conninfo import redact_conninfo
from checkpointers.cli.errors import CliError, one_line
from checkpointers.cli.redact import (
    RedactingStream,
    Redactor,
    activate_redactor,
    redact,
    redact_url,
    secrets_in_url,
)
from checkpointers.cli.urls import parse_store_url
from tests.test_cli import seed_threads

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

MARKER = "S3cr3t"
SECRET_ENV = ("COSMOSDB_KEY", "COSMOSDB_ENDPOINT", "PGPASSWORD")
# A valid base64 Cosmos DB key holding the marker (the local Cosmos DB server accepts any key).
MARKED_KEY = "S3cr3tXYZ+/AS3cr3tXYZ+/A"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


@dataclass(frozen=True)
class Case:
    """A store URL (``{port}``: a closed port, ``{tmp}``: a temporary folder) and its environment."""

    id: str
    url: str
    env: dict[str, str] = field(default_factory=dict)
    markers: tuple[str, ...] = ()  # besides MARKER
    shown: str | None = None  # a text the inspect run must print (the redacted URL, say)


CORPUS = [
    # sqlite: a host or options are refused, with the URL redacted in the message
    Case("sqlite-userinfo", "sqlite://user:S3cr3tXYZ@host/x", shown="'sqlite://user:***@host/x'"),
    Case("sqlite-password-only", "sqlite://:S3cr3tXYZ@localhost/x.db", shown="sqlite://:***@localhost/x.db"),
    Case("sqlite-user-like-password", "sqlite://S3cr3tXYZ:S3cr3tXYZ@h/x", shown="sqlite://***:***@h/x"),
    Case("sqlite-ipv6-host", "sqlite://u:S3cr3tXYZ@[::1]/x", shown="sqlite://u:***@[::1]/x"),
    Case("sqlite-encoded", "sqlite://u:S3cr3tXYZ%25%40%3A@h/x", shown="sqlite://u:***@h/x"),
    Case("sqlite-query-password", "sqlite:///{tmp}/cp.sqlite?password=S3cr3tXYZ", shown="password=***"),
    Case("sqlite-query-key", "sqlite:///{tmp}/cp.sqlite?SSLKey=S3cr3tXYZ&mode=ro",
         shown="SSLKey=***&mode=ro"),
    Case("sqlite-query-token", "sqlite:////{tmp}/cp.sqlite?x=1&access_token=S3cr3tXYZ#f", shown="token=***"),
    Case("sqlite-env-secrets", "{tmp}/seeded.sqlite",
         env={"COSMOSDB_KEY": "S3cr3tXYZ==", "PGPASSWORD": "S3cr3tPG"}, shown="1 thread"),
    # postgres: refused at parse time, or by the closed port
    Case("pg-sslpassword", "postgresql://user@127.0.0.1:{port}/db?sslpassword=S3cr3tXYZ",
         shown="postgresql://user@127.0.0.1:{port}/db?sslpassword=***: connection failed"),
    Case("pg-password", "postgresql://user:S3cr3tXYZ@127.0.0.1:{port}/db", shown="user:***@"),
    Case("pg-raw-at", "postgres://user:S3cr3tA@S3cr3tB@127.0.0.1:{port}/db", shown="'@' may appear once"),
    Case("pg-raw-at-named", "postgres://user:SECzz@RETzz@127.0.0.1:{port}/db",
         markers=("SECzz", "RETzz"), shown="'@' may appear once"),
    Case("pg-raw-percent", "postgresql://user:S3cr3tXYZ%zz@127.0.0.1:{port}/db", shown="%XX escape"),
    Case("pg-raw-percent-named", "postgresql://user:SEC%zzQQ@127.0.0.1:{port}/db",
         markers=("SEC%zz", "zzQQ"), shown="%XX escape"),
    Case("pg-encoded-at-percent", "postgresql://user:S3cr3tXYZ%40%25@127.0.0.1:{port}/db", shown="user:***@"),
    Case("pg-ipv6", "postgresql://user:S3cr3tXYZ@[::1]:{port}/db", shown="user:***@[::1]"),
    Case("pg-ipv6-unbalanced", "postgresql://user:S3cr3tXYZ@[::1:{port}/db", shown="unbalanced"),
    Case("pg-raw-slash", "postgresql://user:pa/S3cr3tXYZ@127.0.0.1:{port}/db", markers=("pa/",)),
    Case("pg-raw-question", "postgresql://user:pa?S3cr3tXYZ@127.0.0.1:{port}/db", markers=("pa?",)),
    Case("pg-raw-hash", "postgresql://user:pa#S3cr3tXYZ@127.0.0.1:{port}/db", markers=("pa#",)),
    Case("pg-user-like-password", "postgresql://S3cr3tXYZ:S3cr3tXYZ@127.0.0.1:{port}/db", shown="://***:***@"),
    Case("pg-query-password", "postgresql://user@127.0.0.1:{port}/db?password=S3cr3tXYZ",
         shown="password=***"),
    Case("pg-query-mixed-case", "postgresql://user@127.0.0.1:{port}/db?PassWord=S3cr3tXYZ&sslmode=disable"),
    Case("pg-bad-sslmode", "postgresql://user@127.0.0.1:{port}/db?sslmode=bogus&sslpassword=S3cr3tXYZ"),
    Case("pg-bad-param", "postgresql://user@127.0.0.1:{port}/db?bogus=1&password=S3cr3tXYZ"),
    Case("pg-sqlalchemy-scheme", "postgresql+psycopg://user:S3cr3tXYZ@127.0.0.1:{port}/db?connect_timeout=1"),
    Case("pg-non-ascii", "postgres://user:S3cr3tXYZ%20%C3%A9%2F@localhost:{port}/db"),
    Case("pg-encoded-user", "postgresql://us%40er:S3cr3tXYZ@127.0.0.1:{port}/db", shown="us%40er:***@"),
    Case("pg-quotes", "postgresql://user:S3cr3t'XYZ\"q\\@127.0.0.1:{port}/db"),
    Case("pg-bad-port", "postgresql://user:S3cr3tXYZ@127.0.0.1:port/db", shown="the port is not a number"),
    Case("pg-env-password", "postgresql://user@127.0.0.1:{port}/db", env={"PGPASSWORD": "S3cr3tXYZ"}),
    Case("pg-ipv6-two-secrets",
         "postgresql://user:S3cr3tXYZ@[::1]:{port}/db?application_name=x&sslpassword=S3cr3tSSL"),
    # postgres: libpq keyword connection strings, refused at parse time or by the closed port
    Case("pg-keywords", "host=127.0.0.1 port={port} dbname=db user=u password=S3cr3tXYZ",
         shown="at 'host=127.0.0.1 port={port} dbname=db user=u password=***': connection failed"),
    Case("pg-keywords-quoted",
         "host=127.0.0.1 port={port} password='S3cr3t X\\'Y\\\\Z' sslpassword=S3cr3tSSL",
         markers=("X'Y",), shown="password=*** sslpassword=***': connection failed"),
    Case("pg-keywords-spaced", "password = S3cr3tXYZ host = 127.0.0.1 port = {port}", shown="password = ***"),
    Case("pg-keywords-unclosed-quote", "host=127.0.0.1 port={port} password='S3cr3t XYZ",
         markers=("XYZ",), shown="opens a quote (') that is never closed"),
    Case("pg-keywords-misspelt", "host=127.0.0.1 port={port} passwd=S3cr3tXYZ",
         shown="'host=127.0.0.1 port={port} passwd=***': 'passwd' is not a libpq keyword"),
    Case("pg-keywords-misspelt-first", "pasword=S3cr3tXYZ dbname=db", shown="'pasword=*** dbname=db'"),
    Case("pg-keywords-no-equals", "host=127.0.0.1 password S3cr3tXYZ", shown="word 2 has no '='"),
    Case("pg-keywords-env-password", "host=127.0.0.1 port={port} dbname=db", env={"PGPASSWORD": "S3cr3tXYZ"},
         shown="connection failed"),
    # cosmosdb
    Case("cosmos-no-endpoint", "cosmosdb:///db/c?key=S3cr3tXYZ",
         shown="'cosmosdb:///db/c?key=***' has no host"),
    Case("cosmos-query-key", "cosmosdb://127.0.0.1:{port}/db/c?key=" + MARKED_KEY, shown="cannot connect"),
    Case("cosmos-env-key-not-base64", "cosmosdb://127.0.0.1:{port}/db/c",
         env={"COSMOSDB_KEY": "S3cr3t!XYZ"}),
    Case("cosmos-userinfo", "cosmosdb://user:S3cr3tXYZ@127.0.0.1:{port}/db/c",
         shown="no user name or password"),
    Case("cosmos-env-endpoint", "cosmosdb:///db/c",
         env={"COSMOSDB_ENDPOINT": "https://u:S3cr3tXYZ@127.0.0.1:{port}/?sig=S3cr3tSIG",
              "COSMOSDB_KEY": MARKED_KEY},
         shown="cannot connect to Cosmos DB at https://u:***@127.0.0.1:{port}/?sig=***: "),
    Case("cosmos-ipv6-encoded-key", "cosmosdb://[::1]:{port}/db/c?key=S3cr3tXYZ%2B%2F%3D%3D"),
    Case("cosmos-missing-container", "cosmosdb://127.0.0.1:{port}/db?key=S3cr3tXYZ", shown="key=***"),
    Case("cosmos-other-params", "cosmosdb://127.0.0.1:{port}/db/c?Key=S3cr3tXYZ&COSMOS_TOKEN=S3cr3tTOK"),
    Case("cosmos-bad-percent", "cosmosdb://127.0.0.1:{port}/db/c?key=S3cr3tXYZ%zz", shown="%XX escape"),
    # unknown schemes
    Case("mysql", "mysql://user:S3cr3tXYZ@h/db?token=S3cr3tTOK", shown="'mysql://user:***@h/db?token=***'"),
    Case("redis-ipv6", "redis://:S3cr3tXYZ@[::1]:6379/0?credentialId=S3cr3tCRED", shown="credentialId=***"),
]  # fmt: skip

# Every output mode of the three commands (demo only makes sense with a store URL).
MODES = [
    ["inspect", "{url}"],
    ["inspect", "{url}", "--json"],
    ["inspect", "{url}", "--debug"],
    ["compact", "{url}", "--dry-run"],
    ["compact", "{url}", "--dry-run", "--json"],
    ["compact", "{url}", "--dry-run", "--prune-old"],
    ["compact", "{url}", "--max-messages", "6", "--min-messages", "2"],
    ["compact", "{url}", "--json", "--max-messages", "6", "--min-messages", "2"],
    ["compact", "{url}", "--debug", "--thread", "nope"],
    ["demo", "--turns", "1", "--store", "{url}"],
]


def spellings(secret: str) -> set[str]:
    """A secret as it could be printed: raw, repr- and JSON-escaped."""
    return {secret, repr(secret)[1:-1], repr('"' + secret)[2:-1], json.dumps(secret)[1:-1]}


def assert_hidden(text: str, markers: tuple[str, ...], secrets: tuple[str, ...] = ()) -> None:
    for marker in (MARKER, *markers):
        assert marker not in text and marker.lower() not in text, text
    for secret in secrets:
        for form in spellings(secret):
            assert form not in text, text


def run_corpus_case(
    case: Case,
    url: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    env: dict[str, str],
    secrets: tuple[str, ...] = (),
    modes: list[list[str]] = MODES,
) -> dict[str, tuple[int, str, str]]:
    """Run every mode on ``url``; assert no secret was written; return ``{mode: (code, out, err)}``."""
    for name in SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capfd.readouterr()
    results = {}
    for mode in modes:
        argv = [a.replace("{url}", url) for a in mode]
        code = cli.main(argv)
        out, err = capfd.readouterr()
        assert code in (0, 1, 2), (argv, code, err)
        assert out or err, argv  # something was said
        if code == 0 and "--json" in argv:
            json.loads(out)  # redaction keeps the JSON valid
        assert_hidden(out + err, case.markers, secrets)
        results[" ".join(a for a in mode if a != "{url}")] = (code, out, err)
    return results


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_corpus_never_prints_a_secret(
    case: Case, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = str(closed_port())
    fill = {"{port}": port, "{tmp}": str(tmp_path)}
    url = case.url
    env = dict(case.env)
    for key, value in fill.items():
        url = url.replace(key, value)
        env = {k: v.replace(key, value) for k, v in env.items()}
    if case.id == "sqlite-env-secrets":
        seed_threads(f"sqlite:///{url}", {"t": 3})
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    results = run_corpus_case(case, url, capfd, monkeypatch, env=env)
    assert len(results) == len(MODES)
    # no store was created from the URL: no file anywhere is named after a part of it
    assert list(cwd.iterdir()) == []
    assert [p for p in tmp_path.rglob("*") if MARKER.lower() in p.name.lower()] == []
    if case.shown is not None:
        _, out, err = results["inspect"]
        assert case.shown.replace("{port}", port) in out + err


def test_corpus_covers_every_scheme_and_at_least_thirty_urls() -> None:
    schemes = {c.url.split("://")[0] for c in CORPUS if "://" in c.url}
    assert {"sqlite", "postgresql", "postgres", "postgresql+psycopg", "cosmosdb"} <= schemes
    assert len(CORPUS) >= 30
    assert any("[::1" in c.url for c in CORPUS) and any(c.env for c in CORPUS)


def with_secrets(url: str) -> str:
    """``url`` with a marked password (unless it has one) and a secret-named query parameter."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user or 'postgres'}:S3cr3tPW@{host}"
    query = "&".join(q for q in (parts.query, "sslpassword=S3cr3tSSL&connect_timeout=5") if q)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@pytest.mark.postgres
def test_real_postgres_with_secrets_in_the_url_and_the_environment(
    postgres_server: Any, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = postgres_server.new_database("cli_secrets")
    seed_threads(plain, {"long": 9, "short": 2})
    url = with_secrets(plain)
    case = Case("pg-real", url)
    results = run_corpus_case(case, url, capfd, monkeypatch, env={"PGPASSWORD": "S3cr3tENV"})
    # The commands worked: the URL is shown redacted where the CLI names the store.
    for mode in ("inspect", "inspect --json", "compact --dry-run", "demo --turns 1 --store"):
        assert results[mode][0] == 0, results[mode]
    assert "store: postgresql://" in results["inspect"][1]
    assert ":***@" in results["inspect"][1] and "sslpassword=***" in results["inspect"][1]
    assert json.loads(results["inspect --json"][1])["summary"]["threads"] == 2
    shown = shlex.quote(redact(url))
    assert f"(try: agentstate-reducer inspect {shown})" in results["demo --turns 1 --store"][1]


@pytest.mark.postgres
def test_real_postgres_with_a_keyword_connection_string(
    postgres_server: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``host=... password=...`` (libpq's keyword form) is PostgreSQL: every command works on the
    database it names, and its password is printed nowhere and names no file."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    plain = postgres_server.new_database("cli_keywords")
    seed_threads(plain, {"long": 9, "short": 2})
    params = conninfo_to_dict(plain)
    password = str(params.pop("password", None) or "S3cr3tPQ")  # the local server trusts any
    conninfo = make_conninfo("", **params, password=f"{password} x'y")  # quoted, as libpq takes it
    if "S3cr3t" not in password:  # an external server's own password: it is the secret then
        conninfo = make_conninfo("", **params, password=password)
    assert "://" not in conninfo and "password=" in conninfo
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    modes = [*MODES, ["compact", "{url}", "--keep-last", "1", "--older-than", "30d", "--yes"]]
    results = run_corpus_case(
        Case("pg-keywords-real", conninfo), conninfo, capfd, monkeypatch, env={}, secrets=(password,),
        modes=modes,
    )
    for mode, (code, _, err) in results.items():
        if "--thread" not in mode:
            assert code == 0, (mode, err)
    shown = redact_conninfo(conninfo)
    assert shown.endswith("password=***")
    assert f"store: {shown}" in results["inspect"][1]
    assert json.loads(results["inspect --json"][1])["summary"]["threads"] == 2
    assert f"(try: agentstate-reducer inspect {shlex.quote(shown)})" in results["demo --turns 1 --store"][1]
    # the commands ran on the database the string names, and nothing was written beside it
    with psycopg.connect(plain) as pg:
        threads = [row[0] for row in pg.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]
        per_thread = set(pg.execute("SELECT COUNT(*) FROM checkpoints GROUP BY thread_id"))
    assert len(threads) == 4 and threads[2:] == ["long", "short"]
    assert [t.split("-")[1] for t in threads[:2]] == ["bare", "reduced"]
    assert per_thread == {(1,)}  # the last compact kept one checkpoint per thread
    assert list(cwd.iterdir()) == []


@pytest.mark.cosmos
def test_real_cosmosdb_with_the_key_in_the_url(
    request: pytest.FixtureRequest, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = request.getfixturevalue("cosmos_server")
    database = request.getfixturevalue("cosmos_database")
    # The local server accepts any key; an external account needs its own (then that is the secret).
    key = MARKED_KEY if server.pid is not None else server.key
    url = f"cosmosdb://{urlsplit(server.endpoint).netloc}/{database}/checkpoints?key={key}"
    demo_first = [MODES[-1], *MODES[:-1]]  # demo creates the container the others read
    results = run_corpus_case(
        Case("cosmos-real", url), url, capfd, monkeypatch, env={}, secrets=(key,), modes=demo_first
    )
    for mode in ("demo --turns 1 --store", "inspect", "inspect --json", "compact --dry-run"):
        assert results[mode][0] == 0, results[mode]  # the '+' and '/' of the key arrived intact
    assert "?key=***" in results["inspect"][1]
    assert json.loads(results["inspect --json"][1])["summary"]["threads"] == 2


@pytest.mark.parametrize(
    "case_id", ["pg-sslpassword", "pg-raw-at-named", "cosmos-no-endpoint", "cosmos-env-endpoint"]
)
def test_console_script_never_prints_a_secret(case_id: str) -> None:
    case = next(c for c in CORPUS if c.id == case_id)
    port = str(closed_port())
    url = case.url.replace("{port}", port)
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env.update({k: v.replace("{port}", port) for k, v in case.env.items()})
    script = Path(sys.executable).with_name("agentstate-reducer")
    for argv in (["inspect", url, "--json", "--debug"], ["demo", "--turns", "1", "--store", url]):
        done = subprocess.run([str(script), *argv], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode in (1, 2)
        assert done.stderr.strip().splitlines()[-1].startswith("agentstate-reducer: error: ")
        assert_hidden(done.stdout + done.stderr, case.markers)


# --- the redactor itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?sslpassword=x&a=1&SECRET_id=y;sig=z", "postgresql://u@h/db?sslpassword=***&a=1&SECRET_id=***;sig=***"),
        ("postgresql://u@h/db?pass%77ord=x", "postgresql://u@h/db?pass%77ord=***"),
        ("postgres://u:a@b@h/db", "postgres://u:***@h/db"),
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pw@[::1/db", "postgresql://u:***@[::1/db"),
        ("sqlite:///data/me@home.db", "sqlite:///data/me@home.db"),
        ("cosmosdb:///db/c?key=a+b/c==", "cosmosdb:///db/c?key=***"),
        ("https://h/?apiToken=t#x", "https://h/?apiToken=***#x"),
        ("/plain/path?key=x", "/plain/path?key=x"),
    ],
)  # fmt: skip
def test_redact_url_by_structure(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_secrets_of_a_url_cover_every_reading_of_the_user_info() -> None:
    assert secrets_in_url("postgres://u:SEC@RET@h/db") == {"SEC", "RET", "SEC@RET"}
    assert secrets_in_url("postgresql://u:pa#ss@h/db") == {"pa#ss"}
    assert secrets_in_url("postgresql://u@h/db?sslpassword=a%20b&x=c") == {"a%20b"}
    assert secrets_in_url("sqlite:///data/me:x@home.db") == set()
    assert secrets_in_url("--store=postgresql://u:pw@h/db") == {"pw"}


def test_known_secrets_are_hidden_at_token_boundaries_in_any_text() -> None:
    r = Redactor(["ab", "SEC%zz", "p'q\"r"])
    assert r.text("ab abc cab x@ab: 'ab'") == "*** abc cab x@***: '***'"
    assert r.text('invalid percent-encoded token: "SEC%zz"') == 'invalid percent-encoded token: "***"'
    assert r.text("SEC%25zz and SEC%zz") == "*** and ***"  # percent-encoded spelling too
    assert r.text(repr("a p'q\"r b") + json.dumps("p'q\"r")) == "'a *** b'\"***\""
    # A part of a URL equal to a secret is hidden as well: printing it would print the secret.
    assert redact("postgresql://S3cr3t:S3cr3t@S3cr3t/db") == "postgresql://***:***@***/db"
    # Compared by decoded value too: any percent-encoding of the secret is the secret.
    assert redact("postgresql://p%61ss:pass@[pass]:5/pass?db=p%61ss&x=1") == (
        "postgresql://***:***@[***]:5/***?db=***&x=1"
    )


def test_a_blank_part_of_a_password_is_no_secret() -> None:
    r = Redactor.for_command(["inspect", "postgresql://user:S3cr3t@ @127.0.0.1:5/db"], {})
    assert r.text("error: bad URL, S3cr3t here") == "error: bad URL, *** here"  # spaces stay spaces


def test_secrets_from_the_environment() -> None:
    r = Redactor.for_command(
        ["inspect", "cosmosdb:///db/c"],
        {
            "COSMOSDB_KEY": "k3yXYZ==\n",
            "PGPASSWORD": "pgPW",
            "COSMOSDB_ENDPOINT": "https://u:epPW@h/?sig=s1g",
        },
    )
    text = r.text("key k3yXYZ== pw pgPW endpoint epPW sig s1g other")
    assert text == "key *** pw *** endpoint *** sig *** other"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host=h port=5 dbname=app user=me password=pw", "host=h port=5 dbname=app user=me password=***"),
        ("at 'host=h password=pw': refused", "at 'host=h password=***': refused"),
        ("password = 'a b\\'c' sslpassword=x:y next", "password = *** sslpassword=*** next"),
        ("connect(password='unclosed and more", "connect(password=***"),
        ('{"store": "host=h password=pw"}', '{"store": "host=h password=***"}'),
        ("messages_key=password token_counter=heuristic", "messages_key=password token_counter=heuristic"),
    ],
)
def test_libpq_secret_keywords_are_hidden_in_any_text(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


def test_a_keyword_connection_string_is_postgres_and_its_secrets_known_by_value() -> None:
    conninfo = "host=db port=5432 dbname=app user=me password='pw 1' sslpassword=ssl2"
    url = parse_store_url(conninfo)
    assert (url.kind, url.url, url.label) == (
        "postgres", conninfo, "host=db port=5432 dbname=app user=me password=*** sslpassword=***")
    r = Redactor.for_command(["inspect", conninfo], {})
    assert r.text("pw 1, ssl2 or 'pw 1'") == "***, *** or ***"
    # a file name is a SQLite path unless a libpq keyword and '=' start it or a word of it
    for path in ("run=1.sqlite", "data/host=1.sqlite", "./host=x.sqlite"):
        assert parse_store_url(path).kind == "sqlite"
    assert parse_store_url("sqlite:///host=x.sqlite").path == Path("host=x.sqlite")
    for refused, why in [
        ("host=db user", "word 2 has no '='"),
        ("dbname=app passwd=pw", "'passwd' is not a libpq keyword"),
        ("host=db password='pw", "opens a quote (') that is never closed"),
        ("HOST=db PASSWORD=pw", "libpq's keywords are lowercase: write 'host', 'password'"),
    ]:
        with pytest.raises(CliError, match=re.escape(why)) as caught:
            parse_store_url(refused)
        assert caught.value.exit_code == 2 and "pw" not in str(caught.value).replace("password", "")


def test_an_uppercase_keyword_string_is_refused_and_its_password_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store = "HOST=127.0.0.1 PASSWORD=S3cr3tXYZ"
    assert cli.main(["demo", "--turns", "2", "--store", store]) == 2
    out = capsys.readouterr()
    assert "S3cr3tXYZ" not in out.out + out.err and "lowercase" in out.err
    assert list(tmp_path.iterdir()) == []
    assert Redactor().text("at PASSWORD=S3cr3tXYZ: refused") == "at PASSWORD=***: refused"


def test_the_stream_sees_a_secret_written_in_pieces() -> None:
    sink = io.StringIO()
    stream = RedactingStream(sink, Redactor(["S3cr3tXYZ"]).text)
    for piece in ("a S3cr", "3tX", "YZ b", "\n", "c S3cr3tXYZ"):
        stream.write(piece)
    assert sink.getvalue() == "a *** b\n"
    stream.flush()
    assert sink.getvalue() == "a *** b\nc ***"


def test_one_line_redacts_before_it_shortens() -> None:
    restore = activate_redactor(Redactor(["S3cr3tXYZ"]))
    try:
        text = one_line(RuntimeError("x" * 290 + " S3cr3tXYZ tail"), limit=300)
    finally:
        restore()
    # Shortened first, "S3cr3t..." would be left, and no longer match the whole secret.
    assert text == "x" * 290 + " *** tail"


def test_execute_raises_cli_errors_with_the_message_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSMOSDB_ENDPOINT", raising=False)
    with pytest.raises(CliError) as caught:
        cli.execute(["inspect", "cosmosdb:///db/c?key=S3cr3tXYZ"])
    assert MARKER not in str(caught.value) and "key=***" in str(caught.value)


# --- generated secrets -----------------------------------------------------------------------

_PORT = closed_port()
_ODD = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x24F, blacklist_categories=["Cs"]), max_size=12
)
_SECRET_NAMES = st.sampled_from(
    [
        "password",
        "sslpassword",
        "PassWord",
        "key",
        "sslkey",
        "api_key",
        "secret",
        "x_token",
        "Sig",
        "credential",
    ]
)


@st.composite
def secret_urls(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A store URL of any scheme carrying a marked secret with odd characters, raw or encoded."""
    secret = MARKER + draw(_ODD)
    written = draw(st.sampled_from([secret, quote(secret, safe=""), quote(secret)]))
    host = draw(st.sampled_from([f"127.0.0.1:{_PORT}", f"[::1]:{_PORT}", f"localhost:{_PORT}"]))
    form = draw(st.sampled_from(["password", "query", "cosmos-key", "cosmos-env", "sqlite", "user-like"]))
    scheme = draw(st.sampled_from(["postgresql", "postgres", "postgresql+psycopg"]))
    env: dict[str, str] = {}
    if form == "password":
        url = f"{scheme}://user:{written}@{host}/db"
    elif form == "user-like":  # a raw ':' would end the user name there: that user is no secret
        url = f"{scheme}://{written.replace(':', '%3A')}:{written}@{host}/db"
    elif form == "query":
        url = f"{scheme}://user@{host}/db?sslmode=disable&{draw(_SECRET_NAMES)}={written}"
    elif form == "cosmos-key":
        url = f"cosmosdb://{host}/db/c?key={written}"
    elif form == "cosmos-env":
        url, env = f"cosmosdb://{host}/db/c", {"COSMOSDB_KEY": secret}
    else:
        url = f"sqlite://user:{written}@{host}/x.sqlite"
    return url, env


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=secret_urls(),
    command=st.sampled_from([["inspect"], ["inspect", "--json"], ["compact", "--dry-run"]]),
)
def test_generated_secret_urls_never_print_the_marker(
    case: tuple[str, dict[str, str]], command: list[str]
) -> None:
    url, env = case
    out, err = io.StringIO(), io.StringIO()
    saved = {name: os.environ.pop(name, None) for name in SECRET_ENV}
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main([command[0], url, *command[1:]])
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    assert code in (1, 2) and err.getvalue().startswith("agentstate-reducer: error: ")
    assert MARKER not in out.getvalue() + err.getvalue(), err.getvalue()
