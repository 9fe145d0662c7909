"""Blobs follow their references through retention: after every turn with ``keep_last``, after
``prune`` and ``delete_thread``, the blobs stored are exactly those the stored checkpoints and
writes name (read from the inner saver's raw rows), on every saver that keeps blobs itself."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.offload.memory import memory_blobs
from checkpointers.offload.ops import BlobUsage
from checkpointers.offload.transform import references
from checkpointers.retention import backend_for
from tests.scenario_graph import build_graph, open_saver, thread_config

KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _named(inner: Any) -> set[str]:
    """The digests every stored checkpoint and pending write of ``inner`` names."""
    found: set[str] = set()
    for tup in inner.list(None):
        found |= set(references(tup.checkpoint.get("channel_values")))
        found |= set(references([w[2] for w in tup.pending_writes or ()]))
    return found


def _stored(inner: Any) -> set[str]:
    blobs = memory_blobs(inner, create=False)
    if blobs is not None:
        return set(blobs.blobs)
    conn = inner.conn
    if hasattr(conn, "connection") and not hasattr(conn, "cursor"):  # a pool
        with conn.connection() as c:
            return {r[0] for r in c.execute("SELECT digest FROM agentstate_blobs").fetchall()}
    rows = conn.execute("SELECT digest FROM agentstate_blobs").fetchall()
    return {r[0] if isinstance(r, tuple) else r["digest"] for r in rows}


def _usage(inner: Any) -> tuple[int, int]:
    def flow() -> Any:
        return (yield BlobUsage(None))

    usage: tuple[int, int] = backend_for(inner).run(flow())
    return usage


def _image_turn(graph: Any, thread: str, turn: int, image: str) -> None:
    block = {"type": "image", "base64": image, "mime_type": "image/png"}
    message = HumanMessage(content=[{"type": "text", "text": f"h{turn}"}, block], id=f"{thread}-img{turn}")
    graph.invoke({"messages": [message]}, thread_config(thread))


@pytest.mark.parametrize("kind", KINDS)
def test_blobs_are_exactly_those_named_through_retention(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    rng = random.Random(11)
    images = [base64.b64encode(rng.randbytes(6_000)).decode() for _ in range(4)]
    shared = images[0]
    with open_saver(kind, path=tmp_path / "ckpt.db", pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024), keep_last=2, retention_every=1)
        graph = build_graph(saver)
        for turn in range(6):
            for thread in ("a", "b"):
                _image_turn(graph, thread, turn, shared if turn % 3 == 0 else images[1 + turn % 3])
            assert _stored(inner) == _named(inner) != set()
        state = graph.get_state(thread_config("a")).values["messages"]
        newest: Any = [m for m in state if isinstance(m, HumanMessage)][-1]
        assert newest.content[1]["base64"] == images[1 + 5 % 3]  # read back whole
        count, size = _usage(inner)
        assert count == len(_stored(inner)) and size == count * len(images[0])

        saver.prune(["a"], strategy="keep_latest")
        assert _stored(inner) == _named(inner)
        saver.delete_thread("a")
        assert _stored(inner) == _named(inner) != set()  # thread b still names its blobs
        saver.delete_thread("b")
        assert _stored(inner) == set() and _named(inner) == set()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_writers_naming_a_blob_while_others_drop_it_lose_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two writers keep storing new references to one image (each with keep_last=1, so each also
    runs retention) while a third stores it on a throwaway thread and deletes that thread, again
    and again: every saver on its own connection. No checkpoint may end up naming a missing blob."""
    import threading

    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    image = base64.b64encode(random.Random(5).randbytes(4_000)).decode()
    path = tmp_path / "shared.db"
    with open_saver(kind, path=path, pg_url=pg_url):
        pass  # the tables, set up once before the workers start
    start = threading.Barrier(3)
    errors: list[BaseException] = []

    def work(role: str) -> None:
        try:
            with open_saver(kind, path=path, pg_url=pg_url) as inner:
                saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                                offload=BlobOffload(min_bytes=1024), keep_last=1,
                                                retention_every=1)
                graph = build_graph(saver)
                start.wait()
                for turn in range(12):
                    thread = f"{role}-{turn}" if role == "deleter" else role
                    _image_turn(graph, thread, turn, image)
                    if role == "deleter":
                        saver.delete_thread(thread)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(r,)) for r in ("w1", "w2", "deleter")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024))
        for thread in ("w1", "w2"):
            restored = list(saver.list(thread_config(thread)))  # raises on a missing blob
            assert restored and any(image in str(t.checkpoint["channel_values"]) for t in restored)
        assert _stored(inner) == _named(inner) != set()


@pytest.mark.parametrize("thread", ["a.b", "%2E", ""])
def test_a_base_store_keeps_the_rows_of_any_thread_id(thread: str) -> None:
    """A ``BaseStore`` refuses "." and empty namespace labels; a thread id may hold either."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    image = base64.b64encode(random.Random(2).randbytes(3_000)).decode()
    saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=4, max_messages=8),
                                    offload=BlobOffload(min_bytes=1024, store=store))
    graph = build_graph(saver)
    for other in (thread, "plain"):
        _image_turn(graph, other, 0, image)
    state: Any = graph.get_state(thread_config(thread)).values["messages"]
    first: Any = next(m for m in state if isinstance(m, HumanMessage))
    assert first.content[1]["base64"] == image
    saver.delete_thread(thread)
    assert len(store.search(("agentstate_blobs",))) == 1  # "plain" still names it
    saver.delete_thread("plain")
    assert store.search(("agentstate_blobs",)) == []


# -- async, sweep(older_than=...), prune(strategy="delete"): the same equality --------------------


def _blob_store(kind: str, path: Path) -> Any:
    """None (blobs in the saver's own database) or an open ``BaseStore`` on ``path``."""
    if kind == "own":
        return None
    if kind == "memory":
        from langgraph.store.memory import InMemoryStore

        return InMemoryStore()
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    store = SqliteStore(sqlite3.connect(str(path), check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def _store_digests(store: Any) -> set[str]:
    return {item.key for item in store.search(("agentstate_blobs",), limit=10_000)}


async def _astored(inner: Any, store: Any) -> set[str]:
    if store is not None:
        return _store_digests(store)
    async with inner.conn.execute("SELECT digest FROM agentstate_blobs") as cursor:
        return {row[0] for row in await cursor.fetchall()}


async def _anamed(inner: Any) -> set[str]:
    found: set[str] = set()
    async for tup in inner.alist(None):
        found |= set(references(tup.checkpoint.get("channel_values")))
        found |= set(references([w[2] for w in tup.pending_writes or ()]))
    return found


@pytest.mark.parametrize("blobs", ["own", "memory", "sqlite"])
async def test_async_retention_keeps_exactly_the_named_blobs(blobs: str, tmp_path: Path) -> None:
    from tests.scenario_graph import aopen_saver

    rng = random.Random(21)
    images = [base64.b64encode(rng.randbytes(5_000)).decode() for _ in range(3)]
    store = _blob_store(blobs, tmp_path / "blobs.db")
    async with aopen_saver("aiosqlite", path=tmp_path / "a.db") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024, store=store), keep_last=2,
                                        retention_every=1)
        graph = build_graph(saver)
        for turn in range(5):
            for thread in ("a", "b"):
                block = {"type": "image", "base64": images[turn % 3], "mime_type": "image/png"}
                message = HumanMessage(content=[{"type": "text", "text": f"h{turn}"}, block])
                await graph.ainvoke({"messages": [message]}, thread_config(thread))
            assert await _astored(inner, store) == await _anamed(inner) != set()
        assert saver.retention_stats is not None and saver.retention_stats.failures == 0
        assert images[0] not in str(await _anamed(inner)) and len(await _anamed(inner)) < 3
        await saver.aprune(["a"], strategy="delete")
        assert await _astored(inner, store) == await _anamed(inner) != set()
        await saver.adelete_thread("b")
        assert await _astored(inner, store) == set()


def _stored_in(inner: Any, store: Any) -> set[str]:
    return _stored(inner) if store is None else _store_digests(store)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("blobs", ["own", "memory", "sqlite"])
def test_sweep_older_than_deletes_idle_threads_and_their_blobs_only(
    kind: str, blobs: str, tmp_path: Path
) -> None:
    """A thread whose newest checkpoint is a year old goes with the blobs only it names; the
    blob it shares with a live thread stays."""
    from datetime import datetime, timedelta, timezone

    from langgraph.checkpoint.base import empty_checkpoint

    from checkpointers.retention import sweep

    rng = random.Random(8)
    shared, own = (base64.b64encode(rng.randbytes(5_000)).decode() for _ in range(2))
    store = _blob_store(blobs, tmp_path / "blobs.db")
    with open_saver(kind, path=tmp_path / "ckpt.db") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024, store=store))
        graph = build_graph(saver)
        _image_turn(graph, "live", 0, shared)
        old = empty_checkpoint()
        old["ts"] = (datetime.now(timezone.utc) - timedelta(days=400)).isoformat()
        old["channel_values"] = {"messages": [
            HumanMessage(content=[{"type": "image", "base64": image, "mime_type": "image/png"}], id=f"m{i}")
            for i, image in enumerate((shared, own))
        ]}
        old["channel_versions"] = {"messages": saver.get_next_version(None, None)}
        idle: Any = {"configurable": {"thread_id": "idle", "checkpoint_ns": ""}}
        saver.put(idle, old, {"step": 0, "source": "input"}, dict(old["channel_versions"]))
        assert len(_stored_in(inner, store)) == 2

        report = sweep(saver, older_than=timedelta(days=365))
        assert report.threads_deleted == ["idle"]
        assert _stored_in(inner, store) == _named(inner) != set()
        assert len(_stored_in(inner, store)) == 1  # the shared image, named by "live"
        assert saver.get_tuple(thread_config("idle")) is None
        first: Any = next(m for m in graph.get_state(thread_config("live")).values["messages"]
                          if isinstance(m, HumanMessage))
        assert first.content[1]["base64"] == shared


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("blobs", ["own", "memory", "sqlite"])
def test_prune_delete_takes_the_blobs_only_that_thread_named(kind: str, blobs: str, tmp_path: Path) -> None:
    rng = random.Random(9)
    shared, a_only, b_only = (base64.b64encode(rng.randbytes(5_000)).decode() for _ in range(3))
    store = _blob_store(blobs, tmp_path / "blobs.db")
    with open_saver(kind, path=tmp_path / "ckpt.db") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024, store=store))
        graph = build_graph(saver)
        for thread, image in (("a", a_only), ("b", b_only)):
            _image_turn(graph, thread, 0, shared)
            _image_turn(graph, thread, 1, image)
        assert len(_stored_in(inner, store)) == 3
        saver.prune(["a"], strategy="delete")
        assert saver.get_tuple(thread_config("a")) is None
        assert _stored_in(inner, store) == _named(inner) != set()
        assert len(_stored_in(inner, store)) == 2  # shared and b's: b still names them
        saver.prune(["b"], strategy="delete")
        assert _stored_in(inner, store) == set() and _named(inner) == set()


@pytest.mark.parametrize("ns", ["", "sub\x1fgraph", "sub%1Fgraph", "%"])
def test_a_base_store_keeps_the_rows_of_any_namespace(ns: str) -> None:
    """Reference rows in a ``BaseStore`` are keyed by namespace, checkpoint and task: a namespace
    holding the key's separator or its escape is followed through retention like any other."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=4, max_messages=8),
                                    offload=BlobOffload(min_bytes=1024, store=store), keep_last=1,
                                    retention_every=1)
    rng = random.Random(4)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
    images = [base64.b64encode(rng.randbytes(2_000)).decode() for _ in range(3)]
    for step, image in enumerate(images):
        checkpoint: Any = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [], "img": image}
        checkpoint["channel_versions"] = {"img": str(step + 1)}
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"img": str(step + 1)})
    tup = saver.get_tuple(config)
    assert tup is not None and tup.checkpoint["channel_values"]["img"] == images[-1]
    assert len(store.search(("agentstate_blobs",))) == 1  # the pruned checkpoints' images went
    saver.delete_thread("t")
    assert store.search(("agentstate_blobs",)) == []
