"""Blob offload reads on the Cosmos DB savers, on the local Cosmos DB server: a forged reference
string reads back as written at every depth (tests/test_offload_forged.py states the rule), and a
reader racing another client's retention returns the thread's newest state, never
``MissingBlobError`` (tests/test_offload_read_race.py).

The race is forced through the reader's serializer (``serde=``, public): the Cosmos DB saver
deserializes a checkpoint once its items are read and before its blobs are, so a serializer whose
first ``loads_typed`` runs the other client's turn and retention puts them exactly in between."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpointers import BlobOffload
from checkpointers.cosmosdb import CosmosDBSaver
from tests.cosmos_service import CosmosServer
from tests.scenario_graph import thread_config
from tests.test_cosmos_retention import async_saver, sync_saver
from tests.test_offload_forged import check_every_depth, wrapped
from tests.test_offload_read_race import build, ids, image, turn

pytestmark = [pytest.mark.cosmos, pytest.mark.slow]

MIN = 256


def test_forged_references_read_back_as_written(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    """The depths around the walk's limit (48) and both ends: each depth is a graph run against
    the server, and the other savers' tests cover every depth."""
    with sync_saver(cosmos_server, cosmos_database) as inner:
        check_every_depth(wrapped(inner), depths=(0, 1, 2, 45, 46, 47, 48, 49, 50, 51, 52, 53, 60))


class HookedSerde(JsonPlusSerializer):
    """LangGraph's serializer, running ``hook`` once at the first ``loads_typed`` after it is set."""

    hook: Callable[[], None] | None = None

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().loads_typed(data)


@pytest.mark.parametrize("how", ["keep_last", "sweep"])
def test_get_state_racing_retention_returns_the_newest_state(
    how: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    from checkpointers.retention import sweep

    config = thread_config(f"race-{how}")
    keep_last = 1 if how == "keep_last" else None
    serde = HookedSerde()
    with (sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), keep_last=keep_last,
                     retention_every=1) as writer,
          sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), serde=serde) as reader):
        writing = build(writer)

        def other(n: int) -> None:
            writing.invoke(turn(n, config), config)
            if how == "sweep":
                sweep(writer, keep_last=1)

        other(1)
        first = writer.get_tuple(config)
        assert first is not None
        serde.hook = lambda: other(2)
        state = build(reader).get_state(config)
        assert writer.get_tuple(first.config) is None  # the race happened: what was read is gone
        assert ids(state) == ["h1", "a1", "h2", "a2"]
        assert state.values["image"] == image(2, config["configurable"]["thread_id"])
        serde.hook = lambda: other(3)
        result = build(reader).invoke(turn(4, config), config)
        assert [m.id for m in result["messages"]] == ["h1", "a1", "h2", "a2", "h3", "a3", "h4", "a4"]


async def test_aget_state_racing_retention_returns_the_newest_state(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """The async saver; the other client's turn runs on a thread of its own (a serializer is sync)."""
    config = thread_config("arace")
    serde = HookedSerde()
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), keep_last=1,
                    retention_every=1) as writer:
        writing = build(writer)
        writing.invoke(turn(1, config), config)
        reading = async_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), serde=serde)
        async with reading as reader:
            done: list[Any] = []

            def other() -> None:
                # the reader's loop is blocked in this call: the writer runs on another thread
                thread = threading.Thread(target=lambda: done.append(writing.invoke(turn(2, config), config)))
                thread.start()
                thread.join()

            serde.hook = other
            state = await build(reader).aget_state(config)
            assert done and ids(state) == ["h1", "a1", "h2", "a2"]
            assert state.values["image"] == image(2, config["configurable"]["thread_id"])


def test_a_sync_saver_read_from_async_code_too(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    """``CosmosDBSaver.aget_tuple`` runs ``get_tuple`` on a worker thread: the same retry."""
    config = thread_config("sync-from-async")
    serde = HookedSerde()
    with (sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), keep_last=1,
                     retention_every=1) as writer,
          sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN), serde=serde) as reader):
        assert isinstance(reader, CosmosDBSaver)
        writing = build(writer)
        writing.invoke(turn(1, config), config)
        serde.hook = lambda: writing.invoke(turn(2, config), config)
        state = asyncio.run(build(reader).aget_state(config))
        assert ids(state) == ["h1", "a1", "h2", "a2"]
