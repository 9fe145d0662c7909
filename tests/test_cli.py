"""The ``agentstate-reducer`` CLI on real SQLite files and a real PostgreSQL server.

Commands run in-process through ``cli.execute`` (which returns the report the CLI printed, so
numbers are compared as data) or ``cli.main`` (exit code and the one-line errors), and once as the
installed console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

import checkpointers.cli.main as cli
from agentstate_reducer import MessageReducer
from agentstate_reducer.tokens import heuristic_counter
from checkpointers.cli.demo_graph import build_demo_graph, turn_input

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ERROR = "agentstate-reducer: error: "


def turn_dicts(turn: int) -> list[dict[str, Any]]:
    """The four messages of one demo turn, as OpenAI-style dicts with the demo's ids."""
    return [
        {"role": "user", "content": "q", "id": f"turn-{turn}-human"},
        {
            "role": "assistant",
            "content": "",
            "id": f"turn-{turn}-call",
            "tool_calls": [{"id": f"call-{turn}", "type": "function", "function": {"name": "weather"}}],
        },
        {"role": "tool", "content": "r", "tool_call_id": f"call-{turn}", "id": f"call-{turn}-result"},
        {"role": "assistant", "content": "a", "id": f"turn-{turn}-answer"},
    ]


def expected_reduced_ids(turns: int, reducer: MessageReducer) -> list[str]:
    """What the wrapper stores with durability="exit": one put per turn, each reducing the history."""
    history: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        history = reducer.reduce(history + turn_dicts(turn)).surviving
    return [m["id"] for m in history]


def only_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("cosmosdb", marks=pytest.mark.cosmos)])  # fmt: skip
def store_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An empty store: a new SQLite file, a new PostgreSQL database or a new Cosmos DB database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_server").new_database("cli"))
    return cosmos_url(request, monkeypatch)


def cosmos_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``cosmosdb://host:port/<new database>/checkpoints``, the key in ``COSMOSDB_KEY`` as users set it."""
    server = request.getfixturevalue("cosmos_server")
    database = request.getfixturevalue("cosmos_database")
    monkeypatch.setenv("COSMOSDB_KEY", server.key)
    return f"cosmosdb://{urlsplit(server.endpoint).netloc}/{database}/checkpoints"


def open_saver(url: str) -> Any:
    """A plain saver on ``url``, opened the way an application would (not through the CLI)."""
    if url.startswith("sqlite:///"):
        return SqliteSaver.from_conn_string(url[len("sqlite:///") :])
    if url.startswith("cosmosdb://"):
        from checkpointers.cosmosdb import CosmosDBSaver

        parts = urlsplit(url)
        database, container = parts.path.strip("/").split("/")
        return CosmosDBSaver.from_conn_info(
            endpoint=f"https://{parts.netloc}/", credential=os.environ["COSMOSDB_KEY"],
            database_name=database, container_name=container,
        )  # fmt: skip
    return PostgresSaver.from_conn_string(url)


def dump_rows(url: str) -> list[Any]:
    """Every stored row of the store, for "nothing changed" comparisons."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return [
                list(conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3")) for t in ("checkpoints", "writes")
            ]
        finally:
            conn.close()
    if url.startswith("cosmosdb://"):
        with open_saver(url) as saver:
            saver.setup()
            container = saver._connection.container  # the saver's own container client (test-only peek)
            return sorted(container.read_all_items(), key=lambda item: item["id"])
    import psycopg

    with psycopg.connect(url) as pg:
        return [
            list(pg.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4"))
            for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        ]


def seed_threads(url: str, turns: dict[str, int], *, written_at: datetime | None = None) -> None:
    """Run the demo agent unreduced on ``url``: ``{thread_id: number of turns}``.

    ``written_at``: the ``ts`` every checkpoint of these turns carries (as if they had been written
    then), so a test states a thread's age exactly instead of waiting for it to age."""
    with open_saver(url) as saver:
        saver.setup()
        if written_at is not None:
            put, stamp = saver.put, written_at.isoformat()
            saver.put = lambda config, checkpoint, metadata, versions: put(
                config, {**checkpoint, "ts": stamp}, metadata, versions
            )
        graph = build_demo_graph(saver)
        for thread_id, n in turns.items():
            for turn in range(1, n + 1):
                graph.invoke(turn_input(turn), {"configurable": {"thread_id": thread_id}}, durability="exit")


def latest(url: str, thread_id: str) -> Any:
    with open_saver(url) as saver:
        return saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})


def message_ids(tup: Any) -> list[str]:
    return [m.id for m in tup.checkpoint["channel_values"]["messages"]]


# --- demo ------------------------------------------------------------------------------------


def test_demo_on_sqlite_files_stores_far_less_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "growth.png"
    report = cli.execute(["demo", "--turns", "30", "--db-dir", str(tmp_path), "--plot", str(png),
                          "--max-messages", "12", "--min-messages", "6"])  # fmt: skip
    bare, reduced = report.bare, report.reduced
    assert (bare.turns, reduced.turns) == (30, 30)
    assert bare.messages == 120
    ids = expected_reduced_ids(30, MessageReducer(min_messages=6, max_messages=12))
    assert reduced.messages == len(ids)
    with open_saver(f"sqlite:///{tmp_path / 'demo-reduced.sqlite'}") as saver:
        stored = saver.get_tuple({"configurable": {"thread_id": "demo-reduced", "checkpoint_ns": ""}})
    assert message_ids(stored) == ids
    # The numbers the CLI computed, compared as data: the reduced run stores far less.
    assert bare.stored_bytes is not None and reduced.stored_bytes is not None
    assert bare.database_bytes is not None and reduced.database_bytes is not None
    assert reduced.stored_bytes * 3 < bare.stored_bytes
    assert reduced.database_bytes * 2 < bare.database_bytes
    assert len(bare.growth) == len(reduced.growth) == 30
    assert bare.growth == sorted(bare.growth)  # checkpoints are only added
    assert bare.growth[-1] == bare.stored_bytes
    assert reduced.reductions > 0
    assert png.read_bytes()[:8] == PNG_MAGIC
    out = capsys.readouterr().out
    assert "bare/reduced" in out and "* bare   o reduced" in out and f"chart written to {png}" in out


@pytest.mark.postgres
def test_demo_on_postgres_uses_two_threads_of_one_store(postgres_server: Any) -> None:
    url = postgres_server.new_database("cli_demo")
    report = cli.execute(
        ["demo", "--turns", "40", "--store", url, "--max-messages", "12", "--min-messages", "6"]
    )
    assert report.bare.messages == 160
    assert report.reduced.messages == len(expected_reduced_ids(40, MessageReducer(6, 12)))
    assert report.reduced.stored_bytes * 2 < report.bare.stored_bytes
    assert report.bare.database_bytes is None  # one database holds both runs: only per-thread bytes
    assert message_ids(latest(url, report.reduced.thread_id)) == expected_reduced_ids(
        40, MessageReducer(6, 12)
    )


@pytest.mark.cosmos
def test_demo_on_cosmosdb(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = cosmos_url(request, monkeypatch)
    report = cli.execute(
        ["demo", "--turns", "20", "--store", url, "--max-messages", "12", "--min-messages", "6"]
    )
    out = capsys.readouterr().out
    # the store is shown as the URL it was given, so it can be pasted into inspect
    assert report.store == url and f"store: {url}; reducer:" in out
    assert f"kept: {url} threads {report.bare.thread_id}, {report.reduced.thread_id}" in out
    assert (report.bare.saver, report.reduced.saver) == (
        "CosmosDBSaver",
        "ReducingCheckpointSaver(CosmosDBSaver)",
    )
    assert report.bare.messages == 80
    assert message_ids(latest(url, report.reduced.thread_id)) == expected_reduced_ids(
        20, MessageReducer(6, 12)
    )
    assert report.reduced.stored_bytes * 2 < report.bare.stored_bytes
    assert report.bare.growth == sorted(report.bare.growth)


def test_demo_token_mode(tmp_path: Path) -> None:
    report = cli.execute(["demo", "--turns", "12", "--db-dir", str(tmp_path), "--max-tokens", "600",
                          "--target-tokens", "300"])  # fmt: skip
    assert report.bare.messages == 48
    assert report.reduced.tokens <= 600 < report.bare.tokens
    assert report.reducer == "MessageReducer(max_tokens=600, target_tokens=300)"


# --- inspect ---------------------------------------------------------------------------------


def _expected_thread(url: str, thread_id: str, checkpoints: int) -> dict[str, Any]:
    tup = latest(url, thread_id)
    messages = tup.checkpoint["channel_values"]["messages"]
    count = heuristic_counter()
    return {
        "thread_id": thread_id,
        "checkpoints": checkpoints,
        "messages": len(messages),
        "tokens": sum(count(m) for m in messages),
    }


def test_inspect_json_fields(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed_threads(store_url, {"long": 9, "short": 2})
    capsys.readouterr()
    assert cli.main(["inspect", store_url, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["store", "messages_key", "token_counter", "bytes_meaning", "threads", "summary"]
    assert data["store"] == store_url  # no password in these URLs, so nothing is hidden
    assert (data["messages_key"], data["token_counter"]) == ("messages", "heuristic")
    threads = data["threads"]
    assert [t["thread_id"] for t in threads] == ["long", "short"]  # biggest first
    for t, n in zip(threads, (9, 2), strict=True):
        assert list(t) == ["thread_id", "checkpoints", "messages", "tokens", "bytes", "blob_bytes"]
        assert {k: t[k] for k in ("thread_id", "checkpoints", "messages", "tokens")} == _expected_thread(
            store_url, t["thread_id"], n
        )
        assert t["messages"] == 4 * n
    assert threads[0]["bytes"] > threads[1]["bytes"] > 0
    summary = data["summary"]
    assert list(summary) == [
        "threads", "checkpoints", "messages", "tokens", "bytes", "blob_bytes", "database_bytes"]
    assert summary["threads"] == 2 and summary["checkpoints"] == 11 and summary["messages"] == 44
    assert summary["tokens"] == threads[0]["tokens"] + threads[1]["tokens"]
    assert summary["bytes"] == threads[0]["bytes"] + threads[1]["bytes"]
    if store_url.startswith("cosmosdb://"):
        assert summary["database_bytes"] is None  # not measured on Cosmos DB
    else:
        assert summary["database_bytes"] >= summary["bytes"]


def test_inspect_sqlite_bytes_are_the_stored_blob_lengths(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 3})
    report = cli.execute(["inspect", url])
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    (cp,) = conn.execute("SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints").fetchone()
    (wr,) = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
    conn.close()
    assert [t.bytes for t in report.threads] == [cp + wr]


def test_inspect_text_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"alpha": 2})
    capsys.readouterr()
    assert cli.main(["inspect", str(tmp_path / "x.sqlite")]) == 0  # a plain path works too
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["thread", "checkpoints", "messages", "tokens", "bytes"]
    assert out[3].split()[:3] == ["alpha", "2", "8"]
    assert out[4].startswith("1 thread, 2 checkpoints, 8 messages and ")


# --- compact ---------------------------------------------------------------------------------


def test_compact_dry_run_changes_nothing(store_url: str) -> None:
    seed_threads(store_url, {"long": 14, "short": 3})
    before = dump_rows(store_url)
    report = cli.execute(["compact", store_url, "--dry-run"])
    assert dump_rows(store_url) == before
    by_id = {t.thread_id: t for t in report.threads}
    assert (by_id["long"].action, by_id["long"].messages_before) == ("would compact", 56)
    assert by_id["long"].messages_after == len(expected_ids_after_compact(store_url, "long"))
    assert (by_id["short"].action, by_id["short"].reason) == ("skipped", "within bounds")
    # the prediction counts the checkpoint the compaction of "long" writes, as the run does
    assert (report.checkpoints_before, report.checkpoints_after) == (17, 18)
    real = cli.execute(["compact", store_url])
    assert (real.checkpoints_before, real.checkpoints_after) == (17, 18)


def expected_ids_after_compact(url: str, thread_id: str, reducer: MessageReducer | None = None) -> list[str]:
    reducer = reducer or MessageReducer(min_messages=20, max_messages=40)
    return [
        m.id
        for m in reducer.reduce(latest(url, thread_id).checkpoint["channel_values"]["messages"]).surviving
    ]


def test_compact_reduces_then_rerun_is_a_no_op_and_the_graph_continues(store_url: str) -> None:
    seed_threads(store_url, {"long": 14, "short": 3})
    expected = expected_ids_after_compact(store_url, "long")
    old_latest = latest(store_url, "long")
    report = cli.execute(["compact", store_url])
    by_id = {t.thread_id: t for t in report.threads}
    assert (by_id["long"].action, by_id["long"].messages_before, by_id["long"].messages_after) == (
        "compacted", 56, len(expected),
    )  # fmt: skip
    assert (by_id["short"].action, by_id["short"].reason) == ("skipped", "within bounds")
    assert report.checkpoints_after == report.checkpoints_before + 1
    new = latest(store_url, "long")
    assert new.checkpoint["id"] == by_id["long"].checkpoint_id != old_latest.checkpoint["id"]
    assert new.parent_config["configurable"]["checkpoint_id"] == old_latest.checkpoint["id"]
    assert new.metadata["agentstate_reducer"] == "compact"
    assert (new.metadata["source"], new.metadata["step"]) == ("update", old_latest.metadata["step"] + 1)
    assert message_ids(new) == expected
    assert message_ids(latest(store_url, "short")) == [m["id"] for t in (1, 2, 3) for m in turn_dicts(t)]

    # Re-run (e.g. after an interruption): nothing left to do, nothing written.
    rows = dump_rows(store_url)
    again = cli.execute(["compact", store_url])
    assert [(t.thread_id, t.action, t.reason) for t in again.threads] == [
        ("long", "skipped", "within bounds"),
        ("short", "skipped", "within bounds"),
    ]
    assert dump_rows(store_url) == rows

    # A compiled graph continues the compacted thread from the reduced messages.
    with open_saver(store_url) as saver:
        graph = build_demo_graph(saver)
        config = {"configurable": {"thread_id": "long"}}
        assert [m.id for m in graph.get_state(config).values["messages"]] == expected
        graph.invoke(turn_input(15), config)
        state = graph.get_state(config)
    assert [m.id for m in state.values["messages"]] == expected + [m["id"] for m in turn_dicts(15)]
    assert state.next == ()


def test_compact_token_mode_and_thread_selection(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"a": 10, "b": 10})
    report = cli.execute(["compact", url, "--thread", "b", "--max-tokens", "500", "--target-tokens", "250"])
    assert [(t.thread_id, t.action) for t in report.threads] == [("b", "compacted")]
    assert report.threads[0].tokens_after is not None and report.threads[0].tokens_after <= 250
    assert len(message_ids(latest(url, "a"))) == 40  # not selected: untouched


def test_compact_skips_a_thread_with_pending_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"busy": 12})
    with open_saver(url) as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "busy", "checkpoint_ns": ""}})
        saver.put_writes(tup.config, [("messages", [])], task_id="task-1")
    before = dump_rows(url)
    report = cli.execute(["compact", url])
    assert [(t.action, t.reason.split(" (")[0]) for t in report.threads] == [("skipped", "pending writes")]
    assert dump_rows(url) == before


def test_compact_keeps_an_interrupted_run_resumable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 12})
    with open_saver(url) as saver:
        graph = build_demo_graph(saver, interrupt_before=["tools"])
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke(turn_input(13), config)
        assert graph.get_state(config).next == ("tools",)
    report = cli.execute(["compact", url])
    assert report.threads[0].action == "compacted"
    with open_saver(url) as saver:
        graph = build_demo_graph(saver, interrupt_before=["tools"])
        assert graph.get_state(config).next == ("tools",)  # still waiting for the same step
        graph.invoke(None, config)
        ids = [m.id for m in graph.get_state(config).values["messages"]]
    assert ids[-4:] == [m["id"] for m in turn_dicts(13)]
    assert len(ids) < 13 * 4


def test_compact_prune_old_is_keep_last_1_and_its_dry_run_predicts_it(store_url: str) -> None:
    url = store_url
    seed_threads(url, {"long": 14, "short": 3})
    expected = expected_ids_after_compact(url, "long")
    before = dump_rows(url)
    dry = cli.execute(["compact", url, "--prune-old", "--dry-run"])
    assert dump_rows(url) == before
    report = cli.execute(["compact", url, "--prune-old", "--yes"])
    assert report.keep_last == 1 and dry.keep_last == 1
    assert report.checkpoints_before == 17 and report.checkpoints_after == 2
    assert report.checkpoints_deleted == 16  # 17, plus the compacted one, less the 2 kept
    numbers = ("checkpoints_after", "checkpoints_written", "checkpoints_deleted", "writes_deleted",
               "blobs_deleted", "threads_trimmed", "threads_deleted")
    assert [getattr(dry, n) for n in numbers] == [getattr(report, n) for n in numbers]
    assert report.prune is not None and report.prune.startswith("deleted 16 checkpoints")
    assert dry.prune is not None and dry.prune.startswith("would delete 16 checkpoints")
    with open_saver(url) as saver:
        assert len(list(saver.list({"configurable": {"thread_id": "long"}}))) == 1
        graph = build_demo_graph(saver)
        config = {"configurable": {"thread_id": "long"}}
        graph.invoke(turn_input(15), config)
        assert [m.id for m in graph.get_state(config).values["messages"]] == expected + [
            m["id"] for m in turn_dicts(15)
        ]


def test_compact_prune_old_without_yes_and_without_a_terminal_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"long": 14})
    before = dump_rows(url)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # no terminal to ask on
    assert cli.main(["compact", url, "--prune-old"]) == 2
    line = only_line(capsys.readouterr().err)
    assert line.startswith(ERROR + "compact with --keep-last, --older-than or --prune-old deletes "
                           "checkpoints: pass --yes to confirm")
    assert dump_rows(url) == before


# --- errors ----------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["inspect", "mysql://db/x"], 2, "unknown store scheme 'mysql' in 'mysql://db/x': use sqlite:"),
        (["inspect", "sqlite://host/x.db"], 2, "bad SQLite URL 'sqlite://host/x.db': it has a host part"),
        (["inspect", "sqlite:///x.db?mode=ro"], 2, "bad SQLite URL 'sqlite:///x.db?mode=ro': SQLite URLs"),
        (["inspect", "postgresql://u@[::1/db"], 2, "bad store URL 'postgresql://u@[::1/db': unbalanced '['"),
        (["inspect", "postgresql://u@h:p/db"], 2, "bad PostgreSQL URL 'postgresql://u@h:p/db': the port"),
        (["inspect", "cosmosdb://u:p@h/db/c"], 2, "bad Cosmos DB URL 'cosmosdb://u:***@h/db/c': it takes no"),
        (["compact", "cosmosdb://h/db"], 2, "bad Cosmos DB URL 'cosmosdb://h/db': use cosmosdb://host"),
        (["inspect", "sqlite:////nonexistent/x.sqlite"], 1, "no SQLite database at '/nonexistent/x.sqlite'"),
        (["inspect", "/tmp"], 1, "'/tmp' is a directory, not a SQLite database file"),
        (["demo", "--turns", "0"], 2, "--turns must be at least 1, got 0"),
        (["compact", "sqlite:///x.db", "--min-messages", "50"], 2,
         "bad reducer options: --min-messages (50) must be <= --max-messages (40)"),
    ],
)  # fmt: skip
def test_errors_are_one_line(
    argv: list[str], code: int, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == code
    assert only_line(capsys.readouterr().err).startswith(ERROR + expected)


def test_unreachable_postgres_is_one_line_without_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    assert cli.main(["inspect", f"postgresql://me:s3cret@127.0.0.1:{port}/db"]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(
        f"{ERROR}cannot connect to PostgreSQL at postgresql://me:***@127.0.0.1:{port}/db: "
    )
    assert "s3cret" not in line
    # the driver's lines stay apart as sentences: "... refused; Is the server running ..."
    assert "refused Is" not in line and "refused; Is the server running" in line


def test_unreachable_cosmosdb_is_one_line_without_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSMOSDB_KEY", "c2VjcmV0LWtleQ==")
    port = _closed_port()
    assert cli.main(["inspect", f"cosmosdb://127.0.0.1:{port}/db/checkpoints"]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(f"{ERROR}cannot connect to Cosmos DB at https://127.0.0.1:{port}/: ")
    assert "c2VjcmV0LWtleQ" not in line


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("S3cr3tK3y!not-base64", "it has characters outside A-Z, a-z, 0-9, '+', '/' and '=' padding"),
        ("S3cr3tK3yNotBase64x", "its length or '=' padding is wrong"),  # the SDK said "Incorrect padding"
    ],
)
def test_a_cosmosdb_key_that_is_not_base64_is_one_line_without_the_key(
    key: str, why: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before any client is made: no request, no SDK error text, the key not shown."""
    monkeypatch.setenv("COSMOSDB_KEY", key)
    port = _closed_port()
    assert cli.main(["inspect", f"cosmosdb://127.0.0.1:{port}/db/checkpoints"]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert only_line(err) == (
        f"{ERROR}the Cosmos DB key in COSMOSDB_KEY is not a valid base64 account key ({why}): use the "
        "account's primary or secondary key as the Azure portal shows it (Keys), or pass a TokenCredential"
    )
    assert "S3cr3tK3y" not in err and "padding" not in err.replace("'=' padding", "")


def test_a_cosmosdb_name_cosmos_db_refuses_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSMOSDB_KEY", "c2VjcmV0LWtleQ==")
    assert cli.main(["inspect", f"cosmosdb://127.0.0.1:{_closed_port()}/db/a%2Fb"]) == 2
    assert only_line(capsys.readouterr().err) == (
        f"{ERROR}the container name in the URL 'a/b' is not a valid Cosmos DB name: it contains '/' "
        "(names may not contain '/', '\\\\', '?' or '#', nor end with a space)"
    )


@pytest.mark.cosmos
def test_a_failed_cosmosdb_open_closes_its_client_quietly(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client the CLI made is closed after its start-up health check: that check's thread logs
    no failure, even when it would finish after the command has returned."""
    from azure.cosmos import _global_endpoint_manager as endpoints

    url = cosmos_url(request, monkeypatch)  # the database exists, the container not yet
    check: Callable[..., Any] = endpoints._GlobalEndpointManager._endpoints_health_check

    def slow_check(self: Any, **kwargs: Any) -> Any:
        # A health check still running when the command fails (a slow network), every time: the
        # real check, on the real server, half a second late.
        time.sleep(0.5)
        return check(self, **kwargs)

    monkeypatch.setattr(endpoints._GlobalEndpointManager, "_endpoints_health_check", slow_check)
    for _ in range(2):
        before = set(threading.enumerate())
        assert cli.main(["inspect", url]) == 1
        for thread in set(threading.enumerate()) - before:
            if thread.name == "cosmos-endpoint-refresh":  # azure-cosmos's health check thread
                thread.join(timeout=30)
        out, err = capfd.readouterr()
        assert out == ""
        assert only_line(err).startswith(f"{ERROR}no container 'checkpoints' in database ")
    assert [r.getMessage() for r in caplog.records if "Health check" in r.getMessage()] == []


@pytest.mark.cosmos
def test_cosmosdb_missing_container_is_one_line(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = cosmos_url(request, monkeypatch)  # the database exists, the container not yet
    assert cli.main(["compact", url]) == 1
    assert only_line(capsys.readouterr().err).startswith(f"{ERROR}no container 'checkpoints' in database ")


@pytest.mark.postgres
def test_postgres_database_without_checkpoint_tables(
    postgres_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres_server.new_database("cli_empty")
    assert cli.main(["compact", url]) == 1
    assert "has no LangGraph checkpoint tables" in only_line(capsys.readouterr().err)


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", "mysql://x/y", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith(ERROR + "unknown store scheme")


def test_missing_plot_extra_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` meets without the extra
    assert (
        cli.main(["demo", "--turns", "2", "--db-dir", str(tmp_path), "--plot", str(tmp_path / "x.png")]) == 1
    )
    assert only_line(capsys.readouterr().err) == (
        "agentstate-reducer demo --plot needs the plot extra (module 'matplotlib' is missing): "
        'pip install ".[plot]"'
    )
    assert not (tmp_path / "x.png").exists()


def test_missing_langgraph_extra_is_one_line() -> None:
    # A fresh interpreter where langgraph cannot be imported: the CLI module itself still loads.
    code = (
        "import sys; sys.modules['langgraph'] = None; "
        "from checkpointers.cli.main import main; sys.exit(main(['demo', '--turns', '2']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    line = only_line(done.stderr)
    assert line.startswith("agentstate-reducer demo needs the langgraph extra (module 'langgraph")
    assert line.endswith(' is missing): pip install ".[langgraph]"')


def test_cosmosdb_without_a_key_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COSMOSDB_KEY", raising=False)
    assert cli.main(["inspect", "cosmosdb://localhost:8081/db/checkpoints"]) == 2
    assert only_line(capsys.readouterr().err) == (
        f"{ERROR}Cosmos DB needs a key: set COSMOSDB_KEY "
        "(the emulator's well-known key works for the emulator)"
    )


def test_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("agentstate-reducer")
    assert script.exists(), f"console script not installed next to {sys.executable}: pip install -e ."
    done = subprocess.run(
        [str(script), "demo", "--turns", "6", "--db-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "bare/reduced" in done.stdout and "stored bytes of the thread after each turn" in done.stdout
    bad = subprocess.run([str(script), "inspect", "redis://x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert only_line(bad.stderr).startswith(ERROR + "unknown store scheme 'redis'")
    inspected = subprocess.run(
        [str(script), "inspect", str(tmp_path / "demo-bare.sqlite"), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["threads"][0]["messages"] == 24


# --- python -m benchmarks --------------------------------------------------------------------


def test_benchmarks_runner_reports_a_missing_module_and_formats_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # `benchmarks` is not installed
    from benchmarks.__main__ import run_module, to_row

    assert run_module("bench_does_not_exist", quick=True, debug=False) == (
        None,
        "bench_does_not_exist: not present (benchmarks/bench_does_not_exist.py does not exist yet), skipped",
    )
    row = to_row("bench_x", {"benchmark": "b", "ratio": 2.5, "met": True, "bare_ms": 1234.5, "n": 10_000})
    assert row == ["bench_x", "b", "", "2.5", "", "yes", "bare_ms=1,234 n=10,000"]
