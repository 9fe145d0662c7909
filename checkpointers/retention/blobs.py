"""Where a saver's offloaded blobs are read and written: ``bind_offload(offload, saver)`` gives the
runner of ``offload``'s blob operations (``checkpointers.offload.ops``) for a saver. Blobs kept in
the saver's own database run through its retention backend, one transaction per flow (none for a
flow that asks for nothing); blobs kept in a ``BaseStore`` run there
(``checkpointers.offload.config.StoreRunner``).

It sits on retention's side because it needs the backends; offload imports nothing of retention.
"""

from __future__ import annotations

from typing import Any

from .._flow import Flow
from ..offload.config import BlobOffload, BlobRunner, StoreRunner
from .backends import Backend, backend_for, supported_savers, supports_retention

__all__ = ["BackendBlobRunner", "bind_offload"]


def bind_offload(offload: BlobOffload, saver: Any) -> BlobRunner:
    """The runner of ``offload``'s blob operations for ``saver`` (the innermost saver that stores),
    offloading with ``offload``'s thresholds.

    Raises:
        TypeError: ``offload.store`` is None and ``saver`` keeps no blobs of its own.
    """
    runner: BlobRunner
    if offload.store is not None:
        runner = StoreRunner(offload.store)
    else:
        if not supports_retention(type(saver)) or not backend_for(saver).stores_blobs:
            raise TypeError(
                f"BlobOffload keeps blobs in the saver's own database on {', '.join(supported_savers())}; "
                f"{type(saver).__name__} has no blob storage of its own: pass BlobOffload(store=<a "
                "BaseStore>) to keep them there"
            )
        runner = BackendBlobRunner(backend_for(saver), saver)
    runner.offloader = offload.offloader
    return runner


def _started(flow: Flow[Any, Any, Any]) -> tuple[bool, Any]:
    """(False, what ``flow`` returns) when it asks for nothing; else (True, the same flow, its
    first operation asked again), so a flow without I/O opens no transaction."""
    try:
        op = next(flow)
    except StopIteration as stop:
        return False, stop.value

    def rest() -> Flow[Any, Any, Any]:
        nonlocal op
        while True:
            try:
                result = yield op
            except Exception as exc:
                error: Exception | None = exc
            else:
                error = None
            try:
                op = flow.send(result) if error is None else flow.throw(error)
            except StopIteration as stop:
                return stop.value

    return True, rest()


class BackendBlobRunner(BlobRunner):
    """In the saver's own database, through its retention backend (one transaction per flow; none
    for a flow that asks for nothing)."""

    def __init__(self, backend: Backend, saver: Any) -> None:
        self.backend = backend
        conn = getattr(saver, "conn", None)
        self.storage = conn if conn is not None else getattr(saver, "storage", saver)
        name = type(saver).__name__
        where = getattr(backend, "blob_where", None)
        if where is None:
            where = "the InMemorySaver's blobs" if "Memory" in name else f"the {name}'s blob table"
        self.where = where

    @property
    def loop(self) -> Any:
        # read when asked: an async saver may learn its loop only at its first call
        return getattr(self.backend.saver, "loop", None) if self.backend.is_async else None

    def run(self, flow: Flow[Any, Any, Any]) -> Any:
        asks, value = _started(flow)
        return self.backend.run(value) if asks else value

    async def arun(self, flow: Flow[Any, Any, Any]) -> Any:
        asks, value = _started(flow)
        return await self.backend.arun(value) if asks else value
