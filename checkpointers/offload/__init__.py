"""Content-addressed blob offload for the savers: ``BlobOffload`` (``checkpointers.offload.config``)
stores each large or binary value of a checkpoint once, keyed by its SHA-256, and the stored
checkpoint names it by a small reference; reads put the value back.

Modules, each stating its invariants: ``transform`` (pure: what is offloaded, the reference form,
the round trip), ``ops`` (the blob operations), ``checkpoint`` (what a saver stores and reads, as
flows), ``sql``/``memory``/``store`` (the operations on SQLite and PostgreSQL tables, beside an
``InMemorySaver``, in a ``BaseStore``). Offload imports nothing of retention: retention makes blobs
follow its deletions (``checkpointers.retention.follow``), and offloading a stored thread in place
composes both (``checkpointers.inplace_offload``).

Names load on first use: importing one module (``ops``) loads no other.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoint import BlobError, CorruptBlobError, MissingBlobError
    from .config import BlobOffload

__all__ = ["BlobError", "BlobOffload", "CorruptBlobError", "MissingBlobError"]

_MODULE_OF = {
    "BlobOffload": "config",
    "BlobError": "checkpoint",
    "CorruptBlobError": "checkpoint",
    "MissingBlobError": "checkpoint",
}


def __getattr__(name: str) -> Any:
    module_name = _MODULE_OF.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
