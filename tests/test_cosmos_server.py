"""The Cosmos DB endpoint of the test suite behaves like Cosmos DB, through the real Python SDK.

Each test proves one fix of ``tests/cosmos_server/launcher.js`` (404 on a missing read, transactional
batch with rollback, partition-scoped queries, delete by partition key) or a property the Cosmos DB
checkpointer relies on (TOP + ORDER BY, counting round trips with a
``raw_response_hook``). They hold on real Cosmos DB too (``COSMOSDB_ENDPOINT``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cosmos_service import CosmosServer

try:
    from azure.cosmos import PartitionKey, exceptions
except ImportError:  # a skip is fine locally, never under CI
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        raise
    pytest.skip("azure-cosmos is not installed (the [cosmosdb] extra)", allow_module_level=True)

pytestmark = pytest.mark.cosmos


@pytest.fixture
def container(cosmos_server: CosmosServer, cosmos_database: str) -> Iterator[Any]:
    """A sync ContainerProxy partitioned on /pk in a fresh database."""
    with cosmos_server.client() as client:
        db = client.get_database_client(cosmos_database)
        yield db.create_container(id="items", partition_key=PartitionKey(path="/pk"))


def _aio_container(client: Any, database: str) -> Any:
    return client.get_database_client(database).get_container_client("items")


def _ids(items: Any) -> list[str]:
    return sorted(item["id"] for item in items)


def _wait_until_empty(container: Any, pk: str) -> list[Any]:
    """Real Cosmos DB deletes a partition in the background; the local server at once."""
    deadline = time.monotonic() + 60
    while True:
        left = list(container.query_items("SELECT c.id FROM c", partition_key=pk))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


# -- fix 1: point read of a missing item is a 404 ---------------------------------------------------


def test_read_missing_item_raises_not_found(container: Any) -> None:
    container.upsert_item({"id": "a", "pk": "p1", "v": 1})
    assert container.read_item("a", partition_key="p1")["v"] == 1
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("missing", partition_key="p1")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("a", partition_key="wrong-partition")


async def test_read_missing_item_raises_not_found_async(
    cosmos_server: CosmosServer, cosmos_database: str, container: Any
) -> None:
    container.upsert_item({"id": "a", "pk": "p1"})
    async with cosmos_server.async_client() as client:
        aio = _aio_container(client, cosmos_database)
        assert (await aio.read_item("a", partition_key="p1"))["id"] == "a"
        with pytest.raises(exceptions.CosmosResourceNotFoundError) as info:
            await aio.read_item("missing", partition_key="p1")
        assert info.value.status_code == 404


# -- fix 2: transactional batch ----------------------------------------------------------------------


def test_batch_all_operation_types(container: Any) -> None:
    container.upsert_item({"id": "old", "pk": "p1", "n": 1})
    container.upsert_item({"id": "gone", "pk": "p1"})
    results = container.execute_item_batch(
        [
            ("create", ({"id": "new", "pk": "p1"},)),
            ("upsert", ({"id": "up", "pk": "p1", "n": 2},)),
            ("replace", ("old", {"id": "old", "pk": "p1", "n": 3})),
            ("patch", ("old", [{"op": "incr", "path": "/n", "value": 10}])),
            ("read", ("old",)),
            ("delete", ("gone",)),
        ],
        partition_key="p1",
    )
    assert [r["statusCode"] for r in results] == [201, 201, 200, 200, 200, 204]
    assert results[4]["resourceBody"]["n"] == 13
    assert _ids(container.read_all_items()) == ["new", "old", "up"]


def test_batch_rolls_back_when_one_operation_fails(container: Any) -> None:
    container.upsert_item({"id": "existing", "pk": "p1", "v": "before"})
    with pytest.raises(exceptions.CosmosBatchOperationError) as info:
        container.execute_item_batch(
            [
                ("upsert", ({"id": "x1", "pk": "p1"},)),
                ("upsert", ({"id": "existing", "pk": "p1", "v": "after"},)),
                ("create", ({"id": "existing", "pk": "p1"},)),  # 409 Conflict
                ("upsert", ({"id": "x2", "pk": "p1"},)),
            ],
            partition_key="p1",
        )
    err = info.value
    assert err.error_index == 2
    assert err.status_code == 409
    assert [r["statusCode"] for r in err.operation_responses] == [424, 424, 409, 424]
    # Nothing of the batch was applied.
    assert _ids(container.read_all_items()) == ["existing"]
    assert container.read_item("existing", partition_key="p1")["v"] == "before"


async def test_batch_rolls_back_when_one_operation_fails_async(
    cosmos_server: CosmosServer, cosmos_database: str, container: Any
) -> None:
    container.upsert_item({"id": "keep", "pk": "p1"})
    async with cosmos_server.async_client() as client:
        aio = _aio_container(client, cosmos_database)
        with pytest.raises(exceptions.CosmosBatchOperationError) as info:
            await aio.execute_item_batch(
                [
                    ("delete", ("keep",)),
                    ("create", ({"id": "n1", "pk": "p1"},)),
                    ("replace", ("missing", {"id": "missing", "pk": "p1"})),  # 404
                ],
                partition_key="p1",
            )
        assert info.value.status_code == 404
        assert [r["statusCode"] for r in info.value.operation_responses] == [424, 424, 404]
        assert _ids([i async for i in aio.read_all_items()]) == ["keep"]


def test_batch_of_100_operations_succeeds(container: Any) -> None:
    ops = [("upsert", ({"id": f"item-{i:03d}", "pk": "p1", "i": i},)) for i in range(100)]
    results = container.execute_item_batch(ops, partition_key="p1")
    assert len(results) == 100
    assert {r["statusCode"] for r in results} == {201}
    assert list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p1")) == [100]


def test_batch_over_100_operations_is_rejected(container: Any) -> None:
    """Real Cosmos DB allows at most 100 operations per batch; the local server enforces it too."""
    ops = [("upsert", ({"id": f"item-{i:03d}", "pk": "p1"},)) for i in range(101)]
    with pytest.raises(exceptions.CosmosHttpResponseError) as info:
        container.execute_item_batch(ops, partition_key="p1")
    assert info.value.status_code == 400
    assert list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p1")) == [0]


# -- fix 3: queries scoped by the partition_key argument --------------------------------------------


def test_query_is_scoped_to_partition_without_pk_in_where(container: Any) -> None:
    for pk in ("p1", "p2"):
        for i in range(3):
            container.upsert_item({"id": f"{pk}-{i}", "pk": pk, "kind": "a" if i else "b"})
    assert _ids(container.query_items("SELECT * FROM c", partition_key="p1")) == ["p1-0", "p1-1", "p1-2"]
    kind_a = [{"name": "@kind", "value": "a"}]
    rows = container.query_items(
        "SELECT c.id FROM c WHERE c.kind = @kind", parameters=kind_a, partition_key="p2"
    )
    assert _ids(rows) == ["p2-1", "p2-2"]
    assert list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p2")) == [3]
    # Paging stays inside the partition.
    pages = container.query_items("SELECT c.id FROM c", partition_key="p1", max_item_count=2).by_page()
    assert sorted(len(list(page)) for page in pages) == [1, 2]
    # The usual form, with the partition key in WHERE, still works; and cross-partition queries too.
    pk_p2 = [{"name": "@pk", "value": "p2"}]
    rows = container.query_items("SELECT c.id FROM c WHERE c.pk = @pk", parameters=pk_p2)
    assert len(_ids(rows)) == 3
    assert len(_ids(container.query_items("SELECT c.id FROM c", enable_cross_partition_query=True))) == 6


async def test_query_is_scoped_to_partition_async(
    cosmos_server: CosmosServer, cosmos_database: str, container: Any
) -> None:
    for pk in ("p1", "p2"):
        container.upsert_item({"id": f"{pk}-x", "pk": pk})
    async with cosmos_server.async_client() as client:
        aio = _aio_container(client, cosmos_database)
        rows = [r async for r in aio.query_items("SELECT c.id FROM c", partition_key="p2")]
        assert rows == [{"id": "p2-x"}]


def test_top_with_order_by(container: Any) -> None:
    for i in range(10):
        container.upsert_item({"id": f"cp-{i}", "pk": "thread-1", "ts": i})
    container.upsert_item({"id": "other", "pk": "thread-2", "ts": 99})
    rows = list(
        container.query_items(
            "SELECT TOP @n c.id, c.ts FROM c ORDER BY c.ts DESC",
            parameters=[{"name": "@n", "value": 3}],
            partition_key="thread-1",
        )
    )
    assert [r["ts"] for r in rows] == [9, 8, 7]


# -- fix 4: delete_all_items_by_partition_key ---------------------------------------------------------


def test_delete_all_items_by_partition_key(container: Any) -> None:
    for pk in ("p1", "p2"):
        for i in range(5):
            container.upsert_item({"id": f"{pk}-{i}", "pk": pk})
    container.delete_all_items_by_partition_key("p1")
    assert _wait_until_empty(container, "p1") == []
    assert len(_ids(container.query_items("SELECT c.id FROM c", partition_key="p2"))) == 5
    # Deleted ids can be created again.
    container.create_item({"id": "p1-0", "pk": "p1"})


async def test_delete_all_items_by_partition_key_async(
    cosmos_server: CosmosServer, cosmos_database: str, container: Any
) -> None:
    for pk in ("p1", "p2"):
        container.upsert_item({"id": f"{pk}-0", "pk": pk})
    async with cosmos_server.async_client() as client:
        await _aio_container(client, cosmos_database).delete_all_items_by_partition_key("p2")
    assert _wait_until_empty(container, "p2") == []
    assert _ids(container.query_items("SELECT c.id FROM c", partition_key="p1")) == ["p1-0"]


# -- round trips --------------------------------------------------------------------------------------


def _counting_hook() -> tuple[list[str], Any]:
    """A raw_response_hook recording each data-plane HTTP response (one per round trip).

    The account read ``GET /`` is left out: the SDK sends it on its own (at start-up, for endpoint
    health checks in the background in the async client, and on periodic refreshes), not per operation.
    """
    seen: list[str] = []

    def hook(response: Any) -> None:
        request = response.http_request
        if urlsplit(request.url).path.strip("/"):
            seen.append(f"{request.method} {request.url}")

    return seen, hook


def test_raw_response_hook_counts_round_trips(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    seen, hook = _counting_hook()
    with cosmos_server.client(raw_response_hook=hook) as client:
        db = client.get_database_client(cosmos_database)
        c = db.create_container(id="items", partition_key=PartitionKey(path="/pk"))
        c.upsert_item({"id": "warm-up", "pk": "p"})  # caches container properties

        def round_trips(op: Any) -> int:
            seen.clear()
            op()
            return len(seen)

        key = uuid.uuid4().hex
        assert round_trips(lambda: c.upsert_item({"id": key, "pk": "p"})) == 1
        assert round_trips(lambda: c.read_item(key, partition_key="p")) == 1
        assert round_trips(lambda: c.execute_item_batch([("read", (key,))], partition_key="p")) == 1
        assert round_trips(lambda: list(c.query_items("SELECT * FROM c", partition_key="p"))) == 1
        assert round_trips(lambda: c.delete_item(key, partition_key="p")) == 1
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            c.read_item(key, partition_key="p")


async def test_raw_response_hook_counts_round_trips_async(
    cosmos_server: CosmosServer, cosmos_database: str, container: Any
) -> None:
    container.upsert_item({"id": "a", "pk": "p"})
    seen, hook = _counting_hook()
    async with cosmos_server.async_client(raw_response_hook=hook) as client:
        aio = _aio_container(client, cosmos_database)
        await aio.read_item("a", partition_key="p")  # warm-up: account and container metadata
        seen.clear()
        await aio.read_item("a", partition_key="p")
        assert len(seen) == 1, seen
