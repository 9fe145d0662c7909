"""Blob offload on a real PostgreSQL saver: a string channel is kept by PostgresSaver inside the
checkpoint's JSONB, so a reference must be text JSONB accepts."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver

pytestmark = pytest.mark.postgres


def test_a_string_channel_kept_in_jsonb_round_trips(pg_url: str) -> None:
    image = base64.b64encode(random.Random(3).randbytes(6_000)).decode()
    with PostgresSaver.from_conn_string(pg_url) as inner:
        inner.setup()
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=5, max_messages=10),
                                        offload=BlobOffload(min_bytes=1024))
        checkpoint: Any = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [], "img": image}
        checkpoint["channel_versions"] = {"messages": "1", "img": "1"}
        config: Any = {"configurable": {"thread_id": "jsonb", "checkpoint_ns": ""}}
        saved = saver.put(config, checkpoint, {"step": 0}, {"messages": "1", "img": "1"})

        assert saver.get_tuple(saved).checkpoint["channel_values"]["img"] == image  # type: ignore[union-attr]
        raw = inner.get_tuple(saved)
        assert raw is not None and raw.checkpoint["channel_values"]["img"] != image


def test_a_collection_blocked_by_a_writer_naming_the_blob_keeps_it(pg_url: str) -> None:
    """The interleaving a collection must survive, forced: a writer has added its reference row
    and touched the blob but not committed; a collection, which cannot see that row yet, waits on
    the blob's row lock. When the writer commits, the collection must leave the blob."""
    import hashlib
    import threading
    import time

    import psycopg

    from checkpointers.offload.ops import Collect, DropRefs, LoadBlobs, Owner, SaveBlobs
    from checkpointers.retention import backend_for

    data = random.Random(41).randbytes(2_000)
    digest = hashlib.sha256(data).hexdigest()

    held = threading.Event()

    def run(saver: Any, *ops: Any, pause: threading.Event | None = None) -> Any:
        def flow() -> Any:
            results = []
            for op in ops:
                results.append((yield op))
            if pause is not None:
                held.set()
                pause.wait()  # inside the backend's transaction: nothing committed yet
            return results

        return backend_for(saver).run(flow())

    with (PostgresSaver.from_conn_string(pg_url) as writer,
          PostgresSaver.from_conn_string(pg_url) as collector,
          psycopg.connect(pg_url, autocommit=True) as watch):
        writer.setup()
        # A blob no row names any more: what a collection deletes.
        run(writer, SaveBlobs(Owner("gone", "", "c0"), {digest: data}), DropRefs("gone"))

        release = threading.Event()
        written: list[Any] = []
        w = threading.Thread(target=lambda: written.append(
            run(writer, SaveBlobs(Owner("new", "", "c1"), {digest: data}), pause=release)))
        w.start()
        held.wait()  # the writer has named and touched the blob, uncommitted
        collected: list[Any] = []
        c = threading.Thread(target=lambda: collected.append(run(collector, Collect((digest,)))))
        c.start()
        while not _waiting_on_a_lock(watch):
            assert c.is_alive(), "the collection ended without waiting for the writer"
            time.sleep(0.01)
        release.set()
        w.join()
        c.join()

        assert written and collected == [[(0, 0)]]
        assert run(collector, LoadBlobs((digest,))) == [{digest: data}]


def _waiting_on_a_lock(watch: Any) -> bool:
    row = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' "
                        "AND query LIKE '%DELETE FROM agentstate_blobs%'").fetchone()
    return bool(row and row[0])
