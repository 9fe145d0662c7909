"""``BlobOffload``: what a saver offloads, and where the blobs live. A saver gets the runner of its
blob operations from ``checkpointers.retention.blobs.bind_offload`` (blobs in its own database run
through its retention backend).

>>> from checkpointers import BlobOffload
>>> BlobOffload(min_bytes=8192)
BlobOffload(min_bytes=8192, tool_min_bytes=None, store=None)
"""

from __future__ import annotations

from typing import Any

from .._flow import Flow, adrive, drive
from .transform import Offloader

__all__ = ["BlobOffload", "BlobRunner", "StoreRunner"]


class BlobRunner:
    """Performs blob operations for one saver: ``run``/``arun`` drive a flow of them; ``where``
    names the blob store in errors; ``separate``: the blobs live outside the saver's database, so
    retention follows them after its transaction (``retention.backends.FollowingBackend``) rather
    than in it; ``storage`` is the object holding the blobs (the saver's connection or dictionary,
    or the ``BaseStore``): two runners with the same ``storage`` read and write the same blobs;
    ``loop`` is the event loop its I/O runs on (an async saver's), None when any thread can run it."""

    where: str
    #: what a put offloads with (the bound ``BlobOffload``'s)
    offloader: Offloader
    separate: bool = False
    storage: object
    loop: Any = None

    def run(self, flow: Flow[Any, Any, Any]) -> Any:
        raise NotImplementedError

    async def arun(self, flow: Flow[Any, Any, Any]) -> Any:
        raise NotImplementedError


class StoreRunner(BlobRunner):
    """In a ``BaseStore`` (``BlobOffload(store=...)``), outside the saver's database."""

    separate = True

    def __init__(self, store: Any) -> None:
        from .store import StoreBlobs

        self.blobs = StoreBlobs(store)
        self.storage = store
        self.where = f"the {type(store).__name__} given as BlobOffload(store=...)"

    def run(self, flow: Flow[Any, Any, Any]) -> Any:
        return drive(flow, self.blobs.perform)

    async def arun(self, flow: Flow[Any, Any, Any]) -> Any:
        return await adrive(flow, self.blobs.aperform)


class BlobOffload:
    """Store large and binary message content once, by its SHA-256, instead of in every checkpoint.

    Args:
        min_bytes: binary content of at least this many bytes is offloaded: ``bytes`` values and
            base64 text (a ``data:`` URL or base64 alone) in any block of any message shape
            (``checkpointers.offload.transform`` lists them). An int >= 1; default 4096.
        tool_min_bytes: when set (an int >= 1), any text of at least this many UTF-8 bytes inside a
            tool result is offloaded too; None (the default) leaves tool results in the checkpoint.
        store: a LangGraph ``BaseStore`` to keep the blobs in; None (the default) keeps them in the
            saver's own database: two tables beside the checkpoint tables on SQLite and PostgreSQL,
            a dictionary beside an ``InMemorySaver``, items in the container on Cosmos DB.

    Raises:
        TypeError: a size is not an int, or ``store`` is not a ``BaseStore``.
        ValueError: a size is below 1.
    """

    def __init__(
        self, min_bytes: int = 4096, *, tool_min_bytes: int | None = None, store: Any = None
    ) -> None:
        sizes = (("min_bytes", min_bytes), ("tool_min_bytes", tool_min_bytes))
        for name, value in sizes:
            if value is None and name == "tool_min_bytes":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"BlobOffload({name}=...) must be an int >= 1 (bytes), got {value!r}")
            if value < 1:
                raise ValueError(f"BlobOffload({name}=...) must be >= 1 (bytes), got {value}")
        if store is not None:
            from langgraph.store.base import BaseStore

            if not isinstance(store, BaseStore):
                raise TypeError(
                    "BlobOffload(store=...) must be a langgraph BaseStore (InMemoryStore, SqliteStore, "
                    f"PostgresStore, ...) or None for the saver's own database, got {type(store).__name__}"
                )
        self.min_bytes = min_bytes
        self.tool_min_bytes = tool_min_bytes
        self.store = store
        self.offloader = Offloader(min_bytes, tool_min_bytes)

    def __repr__(self) -> str:
        store = None if self.store is None else type(self.store).__name__
        return f"BlobOffload(min_bytes={self.min_bytes}, tool_min_bytes={self.tool_min_bytes}, store={store})"
