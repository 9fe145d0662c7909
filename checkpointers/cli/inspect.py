"""``agentstate-reducer inspect``: per thread, the checkpoints, the messages and tokens of the latest
one, the bytes stored, and the bytes of the offloaded blobs its checkpoints name (``BlobOffload``).
Reads only: SQLite is opened read-only."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .errors import PROG
from .options import count_tokens, token_counter_from
from .render import Progress, human_bytes, plural, table
from .stores import ThreadRow, latest_checkpoints, open_checkpoint_db

if TYPE_CHECKING:
    from checkpointers._flow import Flow


@dataclass(frozen=True)
class ThreadInfo:
    thread_id: str
    checkpoints: int  # all namespaces (subgraphs included)
    messages: int | None  # in the latest root checkpoint; None: no checkpoint or no list there
    tokens: int | None
    bytes: int | None  # see InspectReport.bytes_meaning
    #: the distinct offloaded blobs the thread's checkpoints and writes name; 0 on a SQL store
    #: without blob tables, None where the store keeps no blobs of its own (Cosmos DB)
    blob_bytes: int | None = None


@dataclass(frozen=True)
class InspectReport:
    store: str
    messages_key: str
    token_counter: str
    bytes_meaning: str
    threads: list[ThreadInfo]
    database_bytes: int | None
    #: every offloaded blob stored once (blobs shared by threads counted once); None as above
    blob_bytes: int | None = None

    def summary(self) -> dict[str, Any]:
        def total(name: str) -> int | None:
            values = [getattr(thread, name) for thread in self.threads]
            known = [v for v in values if v is not None]
            return sum(known) if known or not values else None

        return {
            "threads": len(self.threads),
            "checkpoints": sum(thread.checkpoints for thread in self.threads),
            "messages": total("messages"),
            "tokens": total("tokens"),
            "bytes": total("bytes"),
            "blob_bytes": self.blob_bytes,
            "database_bytes": self.database_bytes,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "messages_key": self.messages_key,
            "token_counter": self.token_counter,
            "bytes_meaning": self.bytes_meaning,
            "threads": [asdict(thread) for thread in self.threads],
            "summary": self.summary(),
        }


def _biggest_first(rows: list[ThreadRow]) -> list[ThreadRow]:
    # The threads a user with a bloated store wants to see first.
    return sorted(rows, key=lambda row: (-(row.bytes or 0), -row.checkpoints, row.thread_id))


def _blob_usage_flow(thread_ids: list[str]) -> Flow[Any, Any, Any]:
    """(bytes per thread, bytes of the whole store) of the offloaded blobs, or None when the store
    has never held one (no blob tables): read in one transaction."""
    from checkpointers.offload.ops import BlobUsage, HasBlobs  # langgraph: imported by the command

    if not (yield HasBlobs()):
        return None
    per_thread = {}
    for thread_id in thread_ids:
        per_thread[thread_id] = int((yield BlobUsage(thread_id))[1])
    return per_thread, int((yield BlobUsage(None))[1])


def _blob_usage(saver: Any, thread_ids: list[str]) -> tuple[dict[str, int], int] | None:
    """``_blob_usage_flow`` on ``saver``'s own database; None where it keeps no blobs itself."""
    from checkpointers.retention import backend_for, supports_retention

    if not supports_retention(type(saver)):
        return None
    backend = backend_for(saver)
    if not backend.stores_blobs:
        return None
    found = backend.run(_blob_usage_flow(thread_ids))
    return found if found is not None else ({t: 0 for t in thread_ids}, 0)


def run_inspect(args: argparse.Namespace) -> InspectReport:
    feature = f"{PROG} inspect"
    counter, counter_name = token_counter_from(args)
    with open_checkpoint_db(args.store, create=False, read_only=True, feature=feature) as db:
        from checkpointers.compact import checkpoint_messages

        rows = _biggest_first(db.threads())
        usage = _blob_usage(db.saver, [row.thread_id for row in rows])
        infos = []
        with Progress(len(rows), "inspect") as bar:
            latest = latest_checkpoints(db, [row.thread_id for row in rows])
            for row, (_, checkpoint_tuple) in zip(rows, latest, strict=True):
                messages = checkpoint_messages(checkpoint_tuple, args.messages_key)
                infos.append(
                    ThreadInfo(
                        row.thread_id,
                        row.checkpoints,
                        len(messages) if messages is not None else None,
                        count_tokens(counter, messages),
                        row.bytes,
                        None if usage is None else usage[0].get(row.thread_id, 0),
                    )
                )
                bar.update()
        report = InspectReport(
            db.label,
            args.messages_key,
            counter_name,
            db.bytes_meaning,
            infos,
            db.database_bytes(),
            None if usage is None else usage[1],
        )
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        _print_inspect(report)
    return report


def _print_inspect(report: InspectReport) -> None:
    print(f"store: {report.store}")
    if report.threads:
        blobs = bool(report.blob_bytes)  # the column only where blobs were offloaded
        rows = [
            [thread.thread_id, thread.checkpoints, thread.messages, thread.tokens, human_bytes(thread.bytes)]
            + ([human_bytes(thread.blob_bytes)] if blobs else [])
            for thread in report.threads
        ]
        headers = ["thread", "checkpoints", "messages", "tokens", "bytes"] + (["blob bytes"] if blobs else [])
        print(table(headers, rows))
    totals = report.summary()
    print(
        f"{plural(totals['threads'], 'thread')}, {plural(totals['checkpoints'], 'checkpoint')}, "
        f"{totals['messages'] or 0} messages and "
        f"{totals['tokens'] or 0} tokens ({report.token_counter}) in the latest checkpoints, "
        f"{human_bytes(totals['bytes'])} stored"
        + (f", {human_bytes(totals['blob_bytes'])} in offloaded blobs" if totals["blob_bytes"] else "")
        + ("" if totals["database_bytes"] is None else f"; database {human_bytes(totals['database_bytes'])}")
    )
    print(f"bytes: {report.bytes_meaning}.")
