"""LangGraph's official checkpointer conformance suite (all eight suites) against CosmosDBSaver and
AsyncCosmosDBSaver on a real Cosmos DB protocol server (``tests/cosmos_service.py``), bare and
with a reducer; and wrapped in ReducingCheckpointSaver, which adopts the saver's reducer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.cosmosdb import AsyncCosmosDBSaver, CosmosDBSaver
from tests.cosmos_service import CosmosServer

pytestmark = [pytest.mark.cosmos, pytest.mark.slow]

EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "wrapped"])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_conformance_full(
    kind: str, wrapped: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    reducer = MessageReducer(min_messages=2, max_messages=4)
    counter = iter(range(100))

    async def factory() -> AsyncIterator[Any]:
        # a container of its own per capability suite: the suites list and delete across threads
        container = f"conformance-{next(counter)}"
        saver: Any
        if kind == "sync":
            with cosmos_server.client() as client:
                saver = CosmosDBSaver(
                    cosmos_database, container, client=client, reducer=None if wrapped else reducer
                )
                saver.setup()
                yield ReducingCheckpointSaver(saver, reducer) if wrapped else saver
        else:
            async with cosmos_server.async_client() as client:
                saver = AsyncCosmosDBSaver(
                    cosmos_database, container, client=client, reducer=None if wrapped else reducer
                )
                await saver.asetup()
                yield ReducingCheckpointSaver(saver, reducer) if wrapped else saver

    registered = checkpointer_test(name=f"{kind} CosmosDBSaver ({'wrapped' if wrapped else 'bare'})")(factory)
    report = await validate(registered)
    # Captured like any test output: pytest shows the report with a failure, not among the dots.
    report.print_report()
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    assert {cap: (r.tests_passed, r.tests_failed) for cap, r in report.results.items() if r.detected} == {
        cap: (n, 0) for cap, n in EXPECTED.items()
    }
