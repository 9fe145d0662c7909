"""Blob offload with several worker processes on one database: writers storing references to one
image while another process stores it on throwaway threads and deletes them (so its deletions
collect the blob whenever no row names it). Every checkpoint must read back afterwards, and the
blobs stored must be exactly those named."""

from __future__ import annotations

import base64
import multiprocessing
import random
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from tests.scenario_graph import build_graph, open_saver, thread_config
from tests.test_offload_retention import _image_turn, _named, _stored

ROUNDS = 15


def _image() -> str:
    return base64.b64encode(random.Random(7).randbytes(4_000)).decode()


def _saver(inner: Any, keep_last: int | None) -> ReducingCheckpointSaver:
    return ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                   offload=BlobOffload(min_bytes=1024), keep_last=keep_last,
                                   retention_every=1)


def _work(role: str, kind: str, path: str, pg_url: str | None, start: Any) -> None:
    """One worker process: ``ROUNDS`` image turns on thread ``role`` (a writer, keep_last=1), or on
    a new thread per round that it deletes right after (the deleter)."""
    with open_saver(kind, path=Path(path), pg_url=pg_url) as inner:
        saver = _saver(inner, keep_last=1)
        graph = build_graph(saver)
        start.wait()
        image = _image()
        for turn in range(ROUNDS):
            thread = f"{role}-{turn}" if role == "deleter" else role
            _image_turn(graph, thread, turn, image)
            if role == "deleter":
                saver.delete_thread(thread)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_worker_processes_sharing_a_blob_lose_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    path = tmp_path / "shared.db"
    with open_saver(kind, path=path, pg_url=pg_url):
        pass  # the tables, set up once before the workers start
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(3)
    workers = [ctx.Process(target=_work, args=(role, kind, str(path), pg_url, start))
               for role in ("w1", "w2", "deleter")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0, 0]

    with open_saver(kind, path=path, pg_url=pg_url) as inner:
        saver = _saver(inner, keep_last=None)
        for thread in ("w1", "w2"):
            restored = list(saver.list(thread_config(thread)))  # raises on a missing blob
            newest = restored[0].checkpoint["channel_values"]["messages"]
            assert _image() in str(newest)  # the last turn's image, read back whole
        assert list(saver.list(thread_config("deleter-0"))) == []
        assert _stored(inner) == _named(inner) != set()
