"""LangGraph checkpoint savers that keep the messages channel bounded where state is persisted.

``ReducingCheckpointSaver`` wraps any saver; ``PutReduction`` is what its ``on_reduce`` callback
receives for every put; ``SummaryMemo`` keeps a summarizer from re-summarizing within a run;
``reduce_checkpoint`` / ``areduce_checkpoint`` are the one reduction path every saver here uses
(for authors of savers that reduce by themselves); ``StoreArchive`` keeps pruned messages in a
LangGraph ``BaseStore`` and ``read_transcript`` / ``aread_transcript`` read a whole thread back.
"""

from .archive import StoreArchive, aread_transcript, read_transcript
from .reduction import PutReduction, SummaryMemo, areduce_checkpoint, reduce_checkpoint
from .saver import ReducingCheckpointSaver

__all__ = [
    "PutReduction",
    "ReducingCheckpointSaver",
    "StoreArchive",
    "SummaryMemo",
    "aread_transcript",
    "areduce_checkpoint",
    "read_transcript",
    "reduce_checkpoint",
]
