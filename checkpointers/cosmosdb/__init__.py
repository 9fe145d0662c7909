"""Azure Cosmos DB checkpointers for LangGraph with the message reducer built in.

``CosmosDBSaver`` (sync, also serves ``ainvoke`` through a worker thread) and
``AsyncCosmosDBSaver`` (``azure.cosmos.aio``) share one pure document mapping
(``checkpointers.cosmosdb._mapping``: data model, ids, queries, limits); their I/O halves are thin.

>>> from checkpointers.cosmosdb import CosmosDBSaver, AsyncCosmosDBSaver
>>> CosmosDBSaver.get_next_version(None, None, None)[:33]   # string versions, like PostgresSaver
'00000000000000000000000000000001.'
"""

from ._mapping import INDEXING_POLICY, PARTITION_KEY_PATH
from .aio import AsyncCosmosDBSaver
from .sync import CosmosDBSaver

__all__ = ["INDEXING_POLICY", "PARTITION_KEY_PATH", "AsyncCosmosDBSaver", "CosmosDBSaver"]
