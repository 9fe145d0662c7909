"""Blobs kept in a ``BaseStore`` (``BlobOffload(store=...)``) follow their references through
retention: after every turn with ``keep_last``, after ``prune`` and after ``sweep``, the blobs in
the store are exactly those the inner saver's raw stored checkpoints and writes name."""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.retention import sweep
from tests.scenario_graph import build_graph, open_saver, thread_config
from tests.test_offload_retention import _image_turn, _named

BLOBS = ("agentstate_blobs",)

#: (inner saver, blob store)
CASES = [
    ("memory", "memory"),
    ("memory", "sqlite"),
    ("sqlite", "memory"),
    ("sqlite", "sqlite"),
    pytest.param("postgres", "postgres", marks=pytest.mark.postgres),
]


def _in_store(store: Any) -> set[str]:
    """The digests of every blob ``store`` holds."""
    found: list[Any] = []
    while True:
        page = store.search(BLOBS, limit=200, offset=len(found))
        found.extend(page)
        if len(page) < 200:
            return {item.key for item in found}


@contextmanager
def _open_store(kind: str, path: Path, pg_url: str | None) -> Iterator[Any]:
    if kind == "memory":
        from langgraph.store.memory import InMemoryStore

        yield InMemoryStore()
    elif kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(str(path)) as store:
            store.setup()
            yield store
    else:
        from langgraph.store.postgres import PostgresStore

        assert pg_url is not None
        with PostgresStore.from_conn_string(pg_url) as store:
            store.setup()
            yield store


@contextmanager
def _stores(
    saver_kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    pg_url = None
    if "postgres" in (saver_kind, store_kind):  # a fresh database per case: _named lists every thread
        pg_url = request.getfixturevalue("postgres_server").new_database("offload_store_retention")
    with open_saver(saver_kind, path=tmp_path / "ckpt.db", pg_url=pg_url) as inner, \
            _open_store(store_kind, tmp_path / "blobs.db", pg_url) as store:
        yield inner, store


def _images(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [base64.b64encode(rng.randbytes(5_000)).decode() for _ in range(n)]


@pytest.mark.parametrize(("saver_kind", "store_kind"), CASES)
def test_store_blobs_follow_keep_last_prune_and_sweep(
    saver_kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    images = _images(4, seed=3)
    shared = images[0]
    with _stores(saver_kind, store_kind, tmp_path, request) as (inner, store):
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                        offload=BlobOffload(min_bytes=1024, store=store), keep_last=2,
                                        retention_every=1)
        graph = build_graph(saver)
        for turn in range(6):
            for thread in ("a", "b"):  # both threads send the shared image every third turn
                _image_turn(graph, thread, turn, shared if turn % 3 == 0 else images[1 + turn % 3])
            assert _in_store(store) == _named(inner) != set()
        assert saver.retention_stats is not None and saver.retention_stats.failures == 0
        assert shared not in _in_store(store)  # last sent at turn 3, trimmed away by keep_last=2
        newest: Any = [m for m in graph.get_state(thread_config("a")).values["messages"]
                       if isinstance(m, HumanMessage)][-1]
        assert newest.content[1]["base64"] == images[1 + 5 % 3]

        before = _in_store(store)
        saver.prune(["a"], strategy="keep_latest")
        assert _in_store(store) == _named(inner) != set()

        report = sweep(saver, keep_last=1)
        assert report.threads_trimmed == ["b"]
        assert _in_store(store) == _named(inner) != set()
        assert _in_store(store) < before

        for thread in ("a", "b"):  # what is kept still reads back
            last: Any = [m for m in graph.get_state(thread_config(thread)).values["messages"]
                         if isinstance(m, HumanMessage)][-1]
            assert last.content[1]["base64"] == images[3]


@pytest.mark.parametrize(("saver_kind", "store_kind"), [("memory", "memory"), ("sqlite", "sqlite")])
def test_store_blobs_follow_compact_store_retention(
    saver_kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from checkpointers.compact import compact_store

    images = _images(5, seed=4)
    with _stores(saver_kind, store_kind, tmp_path, request) as (inner, store):
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=40, max_messages=80),
                                        offload=BlobOffload(min_bytes=1024, store=store))
        graph = build_graph(saver)
        for turn in range(5):
            for thread in ("a", "b"):
                _image_turn(graph, thread, turn, images[turn])
        assert _in_store(store) == _named(inner) and len(_in_store(store)) == 5
        report = compact_store(saver, MessageReducer(min_messages=2, max_messages=4), keep_last=1)
        assert sorted(report.threads_trimmed) == ["a", "b"] and report.checkpoints_written == 2
        assert _in_store(store) == _named(inner) != set()
        assert len(_in_store(store)) < 5  # the compacted checkpoints no longer name the oldest images
        last: Any = [m for m in graph.get_state(thread_config("a")).values["messages"]
                     if isinstance(m, HumanMessage)][-1]
        assert last.content[1]["base64"] == images[4]
