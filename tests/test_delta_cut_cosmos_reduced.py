"""A Cosmos DB saver that reduces its messages channel and cuts DeltaChannel threads with a snapshot:
the snapshot is stored as it was rebuilt (never reduced again), so every checkpoint left rebuilds
what a twin that reduces the same way and was never pruned rebuilds, and each reduction is
reported once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from agentstate_reducer import MessageReducer
from tests.test_delta_cut import LARGE_K, arebuilt, build, config, rebuilt, turn_input, values
from tests.test_delta_retention import NO_GRACE, assert_like_twin

pytestmark = pytest.mark.cosmos


@contextmanager
def reducing_cosmos(request: pytest.FixtureRequest, container: str, reports: list[Any],
                    **kwargs: Any) -> Iterator[Any]:
    from checkpointers.cosmosdb import CosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    with server.client() as client:
        saver = CosmosDBSaver(database, container, client=client,
                              reducer=MessageReducer(min_messages=4, max_messages=8),
                              on_reduce=reports.append, branch_grace=NO_GRACE, **kwargs)
        saver.setup()
        yield saver


def reduced(reports: list[Any]) -> list[Any]:
    return [r.checkpoint_id for r in reports if r.stats is not None and r.stats.pruned_count]


def test_keep_last_with_the_graph_s_channels_reduces_each_checkpoint_once(
    request: pytest.FixtureRequest,
) -> None:
    mine: list[Any] = []
    theirs: list[Any] = []
    with reducing_cosmos(request, "c", mine, keep_last=1, retention_every=1) as saver, \
            reducing_cosmos(request, "twin", theirs) as twin_saver:
        graph, twin = build(saver, LARGE_K), build(twin_saver, LARGE_K)
        saver.delta_channels = graph.channels
        for turn in range(6):
            graph.invoke(turn_input(turn), config("t"))
            twin.invoke(turn_input(turn), config("t"))
        assert_like_twin(rebuilt(graph, "t"), rebuilt(twin, "t"))
        assert len(reduced(mine)) == len(set(reduced(mine))) == len(reduced(theirs)) > 0
        saver.prune(["t"])
        assert_like_twin(rebuilt(graph, "t"), rebuilt(twin, "t"))
        assert len(reduced(mine)) == len(set(reduced(mine)))
        assert values(graph.get_state(config("t"))) == values(twin.get_state(config("t")))


@asynccontextmanager
async def areducing_cosmos(request: pytest.FixtureRequest, container: str, reports: list[Any],
                           **kwargs: Any) -> AsyncIterator[Any]:
    from checkpointers.cosmosdb import AsyncCosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    async with server.async_client() as client:
        saver = AsyncCosmosDBSaver(database, container, client=client,
                                   reducer=MessageReducer(min_messages=4, max_messages=8),
                                   on_reduce=reports.append, branch_grace=NO_GRACE, **kwargs)
        await saver.asetup()
        yield saver


async def test_async_keep_last_with_the_graph_s_channels_reduces_each_checkpoint_once(
    request: pytest.FixtureRequest,
) -> None:
    mine: list[Any] = []
    theirs: list[Any] = []
    async with areducing_cosmos(request, "c", mine, keep_last=1, retention_every=1) as saver, \
            areducing_cosmos(request, "twin", theirs) as twin_saver:
        graph, twin = build(saver, LARGE_K), build(twin_saver, LARGE_K)
        saver.delta_channels = graph.channels
        for turn in range(6):
            await graph.ainvoke(turn_input(turn), config("t"))
            await twin.ainvoke(turn_input(turn), config("t"))
        assert_like_twin(await arebuilt(graph, "t"), await arebuilt(twin, "t"))
        assert len(reduced(mine)) == len(set(reduced(mine))) == len(reduced(theirs)) > 0
        await saver.aprune(["t"])
        assert_like_twin(await arebuilt(graph, "t"), await arebuilt(twin, "t"))
        assert len(reduced(mine)) == len(set(reduced(mine)))
        assert values(await graph.aget_state(config("t"))) == values(await twin.aget_state(config("t")))
