"""Azure Cosmos DB checkpointers for LangGraph with the message reducer built in.

``CosmosDBSaver`` (sync, also serves ``ainvoke`` through a worker thread) and
``AsyncCosmosDBSaver`` (``azure.cosmos.aio``) share one pure document mapping
(``checkpointers.cosmosdb._mapping``: data model, ids, queries, limits); their I/O halves are thin.

>>> from checkpointers.cosmosdb import PARTITION_KEY_PATH, CosmosDBSaver, AsyncCosmosDBSaver
>>> PARTITION_KEY_PATH   # one logical partition per thread: the encoded thread id
'/pk'
"""

from typing import Any

from ._mapping import (
    INDEXING_POLICY,
    PARTITION_KEY_PATH,
    ContainerNotFoundError,
    check_account_key,
    check_name,
    partition_key,
)
from .aio import AsyncCosmosDBSaver
from .sync import CosmosDBSaver, _close_client

__all__ = [
    "INDEXING_POLICY",
    "PARTITION_KEY_PATH",
    "AsyncCosmosDBSaver",
    "ContainerNotFoundError",
    "CosmosDBSaver",
    "check_account_key",
    "check_name",
    "close_client",
    "partition_key",
]


def close_client(client: Any) -> None:
    """Close a sync ``azure.cosmos.CosmosClient`` the way ``CosmosDBSaver`` closes the clients it
    creates: after the client's start-up health check has finished, so closing never makes that
    check fail with a stray traceback. For a client you created and handed to a saver as
    ``client=`` (the saver never closes those)."""
    _close_client(client)
