"""Azure Cosmos DB checkpointers for LangGraph with the message reducer built in.

``CosmosDBSaver`` (sync, also serves ``ainvoke`` through a worker thread) and
``AsyncCosmosDBSaver`` (``azure.cosmos.aio``) share one pure document mapping
(``checkpointers.cosmosdb._mapping``: data model, ids, queries, limits); their I/O halves are thin.

>>> from checkpointers.cosmosdb import PARTITION_KEY_PATH, CosmosDBSaver, AsyncCosmosDBSaver
>>> PARTITION_KEY_PATH   # one logical partition per thread: the encoded thread id
'/pk'
"""

from ._mapping import INDEXING_POLICY, PARTITION_KEY_PATH, ContainerNotFoundError
from .aio import AsyncCosmosDBSaver
from .sync import CosmosDBSaver

__all__ = [
    "INDEXING_POLICY",
    "PARTITION_KEY_PATH",
    "AsyncCosmosDBSaver",
    "ContainerNotFoundError",
    "CosmosDBSaver",
]
