"""LangGraph checkpoint savers that keep the messages channel bounded where state is persisted.

``ReducingCheckpointSaver`` wraps any saver; ``PutReduction`` is what its ``on_reduce`` callback
receives for every put; ``SummaryMemo`` keeps a summarizer from re-summarizing within a run;
``reduce_checkpoint`` / ``areduce_checkpoint`` reduce one checkpoint's messages channel as every
saver here does on a put, and return what they did (for authors of savers that reduce by
themselves); ``BlobOffload`` stores large and binary content once, by its SHA-256 (with
``BlobError`` and its two kinds when a stored blob cannot be read back); ``StoreArchive``
keeps pruned messages in a LangGraph ``BaseStore`` and ``read_transcript`` /
``aread_transcript`` read a whole thread back.

The names are loaded on first use, so ``import checkpointers`` works without LangGraph installed;
a name that needs it raises one ``ImportError`` naming the extra to install.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .archive import StoreArchive, aread_transcript, read_transcript
    from .offload.checkpoint import BlobError, CorruptBlobError, MissingBlobError
    from .offload.config import BlobOffload
    from .reduction import PutReduction, SummaryMemo, areduce_checkpoint, reduce_checkpoint
    from .saver import ReducingCheckpointSaver

__all__ = [
    "BlobError",
    "BlobOffload",
    "CorruptBlobError",
    "MissingBlobError",
    "PutReduction",
    "ReducingCheckpointSaver",
    "StoreArchive",
    "SummaryMemo",
    "aread_transcript",
    "areduce_checkpoint",
    "read_transcript",
    "reduce_checkpoint",
]

#: the module defining each public name
_MODULE_OF = {
    "BlobOffload": "offload.config",
    "BlobError": "offload.checkpoint",
    "CorruptBlobError": "offload.checkpoint",
    "MissingBlobError": "offload.checkpoint",
    "PutReduction": "reduction",
    "SummaryMemo": "reduction",
    "areduce_checkpoint": "reduction",
    "reduce_checkpoint": "reduction",
    "ReducingCheckpointSaver": "saver",
    "StoreArchive": "archive",
    "aread_transcript": "archive",
    "read_transcript": "archive",
}

#: top-level packages of the ``langgraph`` extra that the modules above import
_LANGGRAPH_PACKAGES = frozenset({"langgraph", "langchain_core"})


def __getattr__(name: str) -> Any:
    module_name = _MODULE_OF.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{module_name}", __name__)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in _LANGGRAPH_PACKAGES:
            raise
        raise ImportError(
            f"checkpointers.{name} needs LangGraph ({missing} is not installed): install the "
            'langgraph extra from the agentstate-reducer checkout: pip install ".[langgraph]"',
            name=f"{__name__}.{module_name}",
        ) from None
    value = getattr(module, name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
