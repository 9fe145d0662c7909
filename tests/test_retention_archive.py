"""The archive follows the thread: deleting a thread through the wrapper deletes its archived
messages; StoreArchive(ttl=...) expires them with the store's TTL; keep_last + archive keep the
whole transcript readable."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from agentstate_reducer import MessageReducer, ReducerConfig
from checkpointers import ReducingCheckpointSaver, StoreArchive, aread_transcript, read_transcript
from checkpointers.retention import asweep
from tests.scenario_graph import (
    aopen_saver,
    arun_turns,
    build_graph,
    open_saver,
    run_turns,
    thread_config,
    turn_ids,
)


def archived_reducer(archive: StoreArchive) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))


def archived(archive: StoreArchive, thread_id: str) -> list[str]:
    return [m.id for m in archive.messages(("memories", thread_id))]


@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_deleting_a_thread_deletes_its_archive(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    archive = StoreArchive(InMemoryStore())
    with open_saver(kind, path=tmp_path / "a.db", pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, archived_reducer(archive))
        graph = build_graph(saver)
        for thread_id in ("a", "b", "c"):
            run_turns(graph, 4, thread_id=thread_id)
        assert all(archived(archive, t) for t in ("a", "b", "c"))
        kept_c = archived(archive, "c")

        saver.delete_thread("a")
        assert archived(archive, "a") == [] and saver.get_tuple(thread_config("a")) is None
        # prune(..., "delete"): retention's on every saver here; the archive follows
        saver.prune(["b"], strategy="delete")
        assert archived(archive, "b") == [] and saver.get_tuple(thread_config("b")) is None
        saver.prune(["c"], strategy="keep_latest")  # not a deletion: the archive stays
        assert archived(archive, "c") == kept_c


@pytest.mark.parametrize(
    "kind", ["memory", "aiosqlite", pytest.param("apostgres", marks=pytest.mark.postgres)]
)
async def test_adelete_thread_and_asweep_delete_the_archive(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = (str(request.getfixturevalue("postgres_server").new_database("retention_archive"))
              if kind == "apostgres" else None)
    archive = StoreArchive(InMemoryStore())
    async with aopen_saver(kind, path=tmp_path / "a.db", pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, archived_reducer(archive))
        graph = build_graph(saver)
        for thread_id in ("a", "idle", "live"):
            await arun_turns(graph, 4, thread_id=thread_id)
        await saver.adelete_thread("a")
        assert archived(archive, "a") == []
        # make "idle" idle: a newer checkpoint whose ts is 40 days old
        state = await saver.aget_tuple(thread_config("idle"))
        assert state is not None
        cp = empty_checkpoint()
        cp["ts"] = (datetime.now(timezone.utc) - timedelta(days=40)).isoformat()
        await inner.aput(state.config, cp, {"step": 99}, {})
        live = archived(archive, "live")
        report = await asweep(saver, older_than=timedelta(days=30))
        assert report.threads_deleted == ["idle"]
        assert archived(archive, "idle") == [] and archived(archive, "live") == live


def test_store_archive_ttl_expires_with_the_store(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "store.db", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    archive = StoreArchive(store, ttl=60)  # minutes
    with open_saver("sqlite", path=tmp_path / "c.db") as inner:
        graph = build_graph(ReducingCheckpointSaver(inner, archived_reducer(archive)))
        run_turns(graph, 4, thread_id="t")
    assert archived(archive, "t")
    expiries = conn.execute("SELECT ttl_minutes, expires_at > CURRENT_TIMESTAMP FROM store").fetchall()
    assert expiries and all(e == (60, 1) for e in expiries)
    assert store.sweep_ttl() == 0  # not expired yet
    # the hour passes: every item's expiry is now in the past (stated, not waited for)
    conn.execute("UPDATE store SET expires_at = DATETIME(CURRENT_TIMESTAMP, '-1 minute')")
    assert store.sweep_ttl() == len(expiries)
    assert archived(archive, "t") == []


@pytest.mark.parametrize(
    ("ttl", "store", "message"),
    [
        (5, InMemoryStore(), "InMemoryStore does not support TTL"),
        (0, InMemoryStore(), "ttl must be a positive number of minutes"),
        ("5", InMemoryStore(), "ttl must be a positive number of minutes"),
    ],
)
def test_store_archive_ttl_is_validated(ttl: Any, store: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StoreArchive(store, ttl=ttl)


def test_keep_last_with_an_archive_keeps_the_whole_transcript(tmp_path: Path) -> None:
    archive = StoreArchive(InMemoryStore())
    with open_saver("sqlite", path=tmp_path / "t.db") as inner:
        saver = ReducingCheckpointSaver(inner, archived_reducer(archive), keep_last=2)
        graph = build_graph(saver)
        run_turns(graph, 120, thread_id="long")
        assert len(list(saver.list(thread_config("long")))) <= 2 + saver.retention_every
        transcript = [m.id for m in read_transcript(archive.store, saver, thread_config("long"))]
        assert transcript == ["sys"] + [i for turn in range(120) for i in turn_ids(turn)]


async def test_keep_last_with_an_archive_keeps_the_whole_transcript_async(tmp_path: Path) -> None:
    archive = StoreArchive(InMemoryStore())
    async with aopen_saver("aiosqlite", path=tmp_path / "t.db") as inner:
        saver = ReducingCheckpointSaver(inner, archived_reducer(archive), keep_last=1, retention_every=1)
        graph = build_graph(saver)
        await arun_turns(graph, 30, thread_id="long")
        transcript = [m.id for m in await aread_transcript(archive.store, saver, thread_config("long"))]
        assert transcript == ["sys"] + [i for turn in range(30) for i in turn_ids(turn)]
