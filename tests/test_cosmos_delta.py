"""The Cosmos DB savers reduce a ``DeltaChannel`` messages channel as ``ReducingCheckpointSaver``
does (``checkpointers.delta``): every checkpoint of a thread reads back the same reduced messages
as the reference, ``ReducingCheckpointSaver(InMemorySaver(), ...)``, on the local Cosmos server."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.message import _messages_delta_reducer

from checkpointers import ReducingCheckpointSaver
from tests.cosmos_service import CosmosServer
from tests.scenario_graph import arun_turns, build_graph, run_turns, thread_config
from tests.test_cosmos_graph import MAX, ahistory, cosmos_saver, history, reducer
from tests.test_delta_reduction import delta_state

TURNS = 8


@pytest.mark.parametrize(
    ("kind", "wrapped"),
    [
        pytest.param("sync", False, id="CosmosDBSaver"),
        pytest.param("sync", True, id="CosmosDBSaver-wrapped"),
        pytest.param("async", False, id="AsyncCosmosDBSaver"),
    ],
)
async def test_a_delta_channel_thread_matches_the_reference(
    kind: str, wrapped: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    r = reducer()
    state = delta_state(_messages_delta_reducer)
    reference = build_graph(ReducingCheckpointSaver(InMemorySaver(), r), state_schema=state)
    run_turns(reference, TURNS, thread_id="t")
    expected = history(reference, "t")

    async with cosmos_saver(kind, cosmos_server, cosmos_database, reducer=None if wrapped else r) as saver:
        checkpointer: Any = ReducingCheckpointSaver(saver, r) if wrapped else saver
        graph = build_graph(checkpointer, state_schema=state)
        if kind == "sync":
            run_turns(graph, TURNS, thread_id="t")
            got = history(graph, "t")
            newest = saver.get_tuple(thread_config("t"))
        else:
            await arun_turns(graph, TURNS, thread_id="t")
            got = await ahistory(graph, "t")
            newest = await saver.aget_tuple(thread_config("t"))
    assert got == expected  # every checkpoint, in order, with the same reduced messages
    assert all(len(message_ids) <= MAX + 4 for _next, message_ids in got)  # within a run: one turn more
    assert newest is not None and isinstance(newest.checkpoint["channel_values"]["messages"], _DeltaSnapshot)
