"""Compiled LangGraph graphs on CosmosDBSaver / AsyncCosmosDBSaver with the reducer (issue 5).

The deterministic tool-using agent of ``scenario_graph.py`` runs multi-turn conversations through
``graph.invoke`` and ``graph.ainvoke``. Each run is compared, message id by message id and
checkpoint by checkpoint, with the same run on ``ReducingCheckpointSaver(InMemorySaver())`` and
the same reducer: the Cosmos savers must store exactly what the reference stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.cosmosdb import AsyncCosmosDBSaver, CosmosDBSaver
from tests.cosmos_service import CosmosServer
from tests.scenario_graph import (
    arun_turns,
    build_graph,
    contract_violations,
    human_message,
    run_turns,
    system_message,
    thread_config,
)

pytestmark = [pytest.mark.cosmos, pytest.mark.slow]

TURNS = 8
MAX = 12


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=6, max_messages=MAX)


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


@asynccontextmanager
async def cosmos_saver(
    kind: str, server: CosmosServer, database: str, **kwargs: Any
) -> AsyncIterator[CosmosDBSaver | AsyncCosmosDBSaver]:
    if kind == "sync":
        with server.client() as client:
            saver = CosmosDBSaver(database, "checkpoints", client=client, **kwargs)
            saver.setup()
            yield saver
    else:
        async with server.async_client() as client:
            asaver = AsyncCosmosDBSaver(database, "checkpoints", client=client, **kwargs)
            await asaver.asetup()
            yield asaver


def history(graph: Any, thread: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """Every checkpoint of the thread's root namespace, newest first: (next nodes, message ids)."""
    return [
        (s.next, ids(s.values.get("messages", []))) for s in graph.get_state_history(thread_config(thread))
    ]


async def ahistory(graph: Any, thread: str) -> list[tuple[tuple[str, ...], list[str]]]:
    return [
        (s.next, ids(s.values.get("messages", [])))
        async for s in graph.aget_state_history(thread_config(thread))
    ]


@pytest.mark.parametrize(
    ("kind", "mode", "wrapped"),
    [
        pytest.param("sync", "invoke", False, id="CosmosDBSaver-invoke"),
        pytest.param("sync", "invoke", True, id="CosmosDBSaver-wrapped-invoke"),
        pytest.param("sync", "ainvoke", False, id="CosmosDBSaver-ainvoke"),
        pytest.param("async", "ainvoke", False, id="AsyncCosmosDBSaver-ainvoke"),
        pytest.param("async", "ainvoke", True, id="AsyncCosmosDBSaver-wrapped-ainvoke"),
        pytest.param("async", "invoke-in-thread", False, id="AsyncCosmosDBSaver-invoke"),
    ],
)
async def test_multi_turn_tool_conversation_matches_the_reference(
    kind: str, mode: str, wrapped: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    r = reducer()
    options: dict[str, Any] = {"tool_rounds": 2, "calls_per_round": 2, "bookkeeping": True}
    reference = build_graph(ReducingCheckpointSaver(InMemorySaver(), r), **options)
    run_turns(reference, TURNS, thread_id="t")
    expected = history(reference, "t")

    async with cosmos_saver(kind, cosmos_server, cosmos_database, reducer=None if wrapped else r) as saver:
        checkpointer: Any = ReducingCheckpointSaver(saver, r) if wrapped else saver
        graph = build_graph(checkpointer, **options)
        if mode == "invoke":
            out = run_turns(graph, TURNS, thread_id="t")
        elif mode == "ainvoke":
            out = await arun_turns(graph, TURNS, thread_id="t")
        else:  # graph.invoke on a worker thread, AsyncCosmosDBSaver's loop serving it
            out = await asyncio.to_thread(run_turns, graph, TURNS, thread_id="t")
        got = await ahistory(graph, "t") if kind == "async" else history(graph, "t")
        config = thread_config("t")
        last = graph.get_state(config) if kind == "sync" else await graph.aget_state(config)
        stored = last.values["messages"]

    assert ids(out["messages"])[-1] == f"ai{TURNS - 1}-final"
    assert ids(stored) == expected[0][1]
    assert got == expected  # every checkpoint, in order, with the same (reduced) messages
    assert len(got) > TURNS * 5
    for _next, message_ids in got:
        assert len(message_ids) <= MAX + 6  # bounded (within a run the live list grows by one turn)
    assert contract_violations(stored, max_len=MAX) == []


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_interrupts_subgraphs_and_resume(
    kind: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """Pending INTERRUPT/RESUME writes and subgraph namespaces, compared with the reference."""
    r = reducer()

    def drive(graph: Any, invoke: Callable[..., Any]) -> list[Any]:
        config = thread_config("approve")
        seen = []
        for turn in range(4):
            msgs = [system_message(), human_message(turn)] if turn == 0 else [human_message(turn)]
            paused = invoke(graph, {"messages": msgs}, config)
            seen.append(paused["__interrupt__"][0].value)
            done = invoke(graph, Command(resume=True), config)
            seen.append(ids(done["messages"])[-2:])
        return seen

    reference = build_graph(ReducingCheckpointSaver(InMemorySaver(), r), approve_tools=True, as_subgraph=True)
    expected = drive(reference, lambda g, i, c: g.invoke(i, c))
    expected_state = ids(reference.get_state(thread_config("approve")).values["messages"])

    async with cosmos_saver(kind, cosmos_server, cosmos_database, reducer=r) as saver:
        graph = build_graph(saver, approve_tools=True, as_subgraph=True)
        if kind == "sync":
            got = drive(graph, lambda g, i, c: g.invoke(i, c))
            state = graph.get_state(thread_config("approve"))
            namespaces = {
                t.config["configurable"]["checkpoint_ns"] for t in saver.list(thread_config("approve"))
            }
        else:
            got = await asyncio.to_thread(drive, graph, lambda g, i, c: g.invoke(i, c))
            state = await graph.aget_state(thread_config("approve"))
            namespaces = {
                t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(thread_config("approve"))
            }
    assert got == expected
    assert expected[0] == {"approve": ["c0-0-0"]} and expected[1] == ["t0-0-0", "ai0-final"]
    assert ids(state.values["messages"]) == expected_state
    assert "" in namespaces and len({ns for ns in namespaces if ns.startswith("agent_loop:")}) == 4
