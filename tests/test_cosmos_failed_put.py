"""A Cosmos DB put (or put_writes) that fails part-way leaves nothing a reader meets, against the
real local server.

A put of a large value takes several transactional batches (value chunks first, the checkpoint
item last). A healthy server cannot be made to fail the Nth one, so the test arms the real SDK
container: its ``execute_item_batch`` raises the SDK's connection error at the Nth call, and every
other call (the batches before it, the saver's clean-up, all reads) is the real one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from azure.core.exceptions import ServiceResponseError
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointers.cosmosdb import AsyncCosmosDBSaver, CosmosDBSaver
from checkpointers.cosmosdb import _mapping as m
from tests.cosmos_service import CosmosServer

pytestmark = pytest.mark.cosmos

THREAD = "big"


def checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> Checkpoint:
    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": datetime.now(timezone.utc).isoformat(),
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }


def config(checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": THREAD, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


class FailingBatch:
    """Arms a real container: its ``fail_at``-th ``execute_item_batch`` call from now raises the
    SDK's ``ServiceResponseError`` (a dropped connection) before sending anything."""

    def __init__(self, container: Any, fail_at: int, *, is_async: bool) -> None:
        self.calls = 0
        self.fail_at = fail_at
        real = container.execute_item_batch

        def fail_now() -> bool:
            self.calls += 1
            return self.calls == self.fail_at

        if is_async:
            async def aexecute(*args: Any, **kwargs: Any) -> Any:
                if fail_now():
                    raise ServiceResponseError("connection reset by peer")
                return await real(*args, **kwargs)

            container.execute_item_batch = aexecute
        else:
            def execute(*args: Any, **kwargs: Any) -> Any:
                if fail_now():
                    raise ServiceResponseError("connection reset by peer")
                return real(*args, **kwargs)

            container.execute_item_batch = execute


@pytest.fixture(params=["sync", "async"])
async def armed(
    request: pytest.FixtureRequest, cosmos_server: CosmosServer, cosmos_database: str
) -> AsyncIterator[tuple[Any, Callable[[int], FailingBatch], Callable[..., Awaitable[Any]]]]:
    """``(saver, arm, call)``: a set-up saver on a real container; ``arm(n)`` fails its n-th batch
    call from then on; ``await call("put", ...)`` runs ``put`` or ``aput``."""
    is_async = request.param == "async"
    if is_async:
        async with cosmos_server.async_client() as client:
            container = await client.get_database_client(cosmos_database).create_container_if_not_exists(
                "checkpoints", partition_key=_pk()
            )
            saver: Any = AsyncCosmosDBSaver(container=container)
            await saver.asetup()

            async def acall(name: str, *args: Any) -> Any:
                return await getattr(saver, f"a{name}")(*args)

            yield saver, lambda n: FailingBatch(container, n, is_async=True), acall
        return
    with cosmos_server.client() as client:
        container = client.get_database_client(cosmos_database).create_container_if_not_exists(
            "checkpoints", partition_key=_pk()
        )
        saver = CosmosDBSaver(container=container)
        saver.setup()

        async def call(name: str, *args: Any) -> Any:
            return getattr(saver, name)(*args)

        yield saver, lambda n: FailingBatch(container, n, is_async=False), call


def _pk() -> Any:
    from azure.cosmos import PartitionKey

    return PartitionKey(path=m.PARTITION_KEY_PATH)


def items_of_thread(server: CosmosServer, database: str) -> list[dict[str, Any]]:
    with server.client() as client:
        container = client.get_database_client(database).get_container_client("checkpoints")
        return [i for i in container.read_all_items() if i.get("thread_id") == THREAD]


def batches_of(saver: Any, cp: Checkpoint, versions: dict[str, Any], parent: str | None = None) -> int:
    return len(m.plan_put(config(parent), cp, {"step": 1}, versions, saver.serde, m.Ttls(None)).batches)


@pytest.mark.parametrize("fail", ["second", "last"])
async def test_a_put_failing_at_a_later_batch_leaves_no_item_and_the_retry_stores_it_whole(
    armed: Any, fail: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    saver, arm, call = armed
    big = os.urandom(3 * 1024 * 1024 + 1000)  # 4 chunks: 3 batches, the last with the checkpoint
    versions: dict[str, Any] = {"blob": "1", "small": "1"}
    cp = checkpoint({"blob": big, "small": 1}, versions)
    n = batches_of(saver, cp, versions)
    assert n >= 3
    failing = arm(2 if fail == "second" else n)
    with pytest.raises(ServiceResponseError, match="connection reset"):
        await call("put", config(), cp, {"step": 1}, versions)
    assert failing.calls >= (2 if fail == "second" else n)  # the batches before it were written
    assert items_of_thread(cosmos_server, cosmos_database) == []
    assert await call("get_tuple", config()) is None

    stored = await call("put", config(), cp, {"step": 1}, versions)  # the retry
    got = await call("get_tuple", stored)
    assert got.checkpoint["channel_values"] == {"blob": big, "small": 1}
    kinds = sorted(i["kind"] for i in items_of_thread(cosmos_server, cosmos_database))
    parts = len(m.value_items("x", {}, {}, saver.serde.dumps_typed(big)))
    assert kinds == ["blob"] * (parts + 1) + ["checkpoint"]


async def test_a_failed_put_keeps_the_values_a_stored_checkpoint_reads(
    armed: Any, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """The same put repeated (it rewrites values a stored checkpoint names) fails part-way: the
    stored checkpoint still reads back whole."""
    _, arm, call = armed
    big = os.urandom(3 * 1024 * 1024 + 1000)
    versions: dict[str, Any] = {"blob": "1", "small": "1"}
    cp = checkpoint({"blob": big, "small": 1}, versions)
    stored = await call("put", config(), cp, {"step": 1}, versions)
    before = sorted(i["id"] for i in items_of_thread(cosmos_server, cosmos_database))
    arm(3)
    with pytest.raises(ServiceResponseError):
        await call("put", config(), cp, {"step": 1}, versions)
    got = await call("get_tuple", stored)
    assert got.checkpoint["channel_values"] == {"blob": big, "small": 1}
    assert sorted(i["id"] for i in items_of_thread(cosmos_server, cosmos_database)) == before


@pytest.mark.slow
async def test_pending_writes_failing_at_a_later_batch_leave_the_checkpoint_readable(
    armed: Any, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """A large pending write spans batches. When a later one fails, what was written is never
    read as the write (its chunks are incomplete): the checkpoint reads back without it, and the
    retried call stores it whole."""
    _, arm, call = armed
    versions: dict[str, Any] = {"small": "1"}
    cp = checkpoint({"small": 1}, versions)
    stored = await call("put", config(), cp, {"step": 1}, versions)
    big = os.urandom(3 * 1024 * 1024 + 1000)
    arm(2)
    with pytest.raises(ServiceResponseError):
        await call("put_writes", stored, [("blob", big)], "task-1")
    got = await call("get_tuple", stored)
    assert got.checkpoint["channel_values"] == {"small": 1} and got.pending_writes == []
    await call("put_writes", stored, [("blob", big)], "task-1")
    got = await call("get_tuple", stored)
    assert got.pending_writes == [("task-1", "blob", big)]
