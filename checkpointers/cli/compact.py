"""``agentstate-reducer compact``: per thread, delete it when idle (``--older-than``), write a reduced
copy of its latest checkpoint as a new checkpoint, and keep only its newest ``--keep-last``
checkpoints (``checkpointers.compact.compact_store``, on ``checkpointers.retention``).

Invariants:

* ``--dry-run`` writes and deletes nothing (SQLite is opened read-only) and reports the numbers the
  real run reports: threads deleted, compacted and trimmed, checkpoints, writes and values deleted,
  checkpoints after;
* a run that deletes (``--keep-last``, ``--older-than``, ``--prune-old``) asks for confirmation on
  a terminal, showing what it will delete, and without a terminal is refused unless ``--yes``;
* threads with pending writes or an open interrupt are left whole unless ``--force``;
* bytes before and after are real: SQLite, the file (with its WAL) after a WAL checkpoint;
  PostgreSQL, ``pg_total_relation_size`` of the checkpoint tables; Cosmos DB, the container's stored
  bytes (``checkpointers.retention.api``). SQLite is vacuumed after a run that deleted something
  (``VACUUM`` rewrites the file: it needs free disk up to the file's size); PostgreSQL only with
  ``--vacuum`` (``VACUUM (ANALYZE)``; else autovacuum reclaims the space later); after a vacuum
  the report states what the whole database's size did from before the run to after it (SQLite:
  the file; PostgreSQL: ``pg_database_size``), and promises no space back;
* ``--older-than`` is a positive age and ``--keep-last`` at least 1; anything else is refused
  before the store is opened, saying the allowed form and why;
* ``--offload`` first rewrites every stored checkpoint and pending write of the threads in place
  with their large and binary content stored once as blobs (``checkpointers.inplace_offload``), by
  ``--min-bytes``/``--tool-min-bytes`` (``BlobOffload``'s); then the run goes on as without it. A
  real run that rewrote something vacuums SQLite as a deleting run does. SQLite and PostgreSQL
  only: a Cosmos DB store is refused before it is opened;
* a second run with the same options changes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import PROG, CliError, one_line, require
from .options import reducer_from
from .render import Progress, human_bytes, human_duration, plural, table
from .stores import CheckpointDb, open_checkpoint_db
from .urls import in_text, parse_store_url

if TYPE_CHECKING:
    from checkpointers.compact import StoreCompaction, ThreadCompaction
    from checkpointers.inplace_offload import StoreOffload

_DURATION = re.compile(r"\s*(-?)\s*(\d+)\s*([smhdw])\s*\Z")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION_FORM = "a whole number > 0 and a unit, e.g. 30d, 12h, 90m (units: s, m, h, d, w)"


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` as a positive timedelta; else ``ArgumentTypeError``
    saying what is wrong (not a duration, negative, zero)."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: use {_DURATION_FORM}")
    sign, number, unit = match.groups()
    if sign:
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: --older-than AGE deletes the threads idle for longer than AGE, "
            f"so AGE is {_DURATION_FORM}; --older-than {number}{unit} deletes those idle longer than "
            f"{number} {_UNITS[unit] if int(number) != 1 else _UNITS[unit][:-1]}"
        )
    if int(number) == 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is zero: every thread would count as idle and be deleted; use {_DURATION_FORM}"
        )
    return timedelta(**{_UNITS[unit]: int(number)})


def keep_last_count(text: str) -> int:
    """``--keep-last N``: a whole number >= 1; else ``ArgumentTypeError`` saying the range and why."""
    why = (
        "--keep-last N keeps each thread's newest N checkpoints, N >= 1: a thread's latest "
        "checkpoint is the state it resumes from, so it always stays (--keep-last 1 keeps only it; "
        "--older-than deletes whole idle threads)"
    )
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: {why}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is too small: {why}")
    return value


#: The options whose value may start with "-" ("--older-than -5d"): joined to them as
#: "--older-than=-5d" before parsing, so the value's own check says what is wrong with it (argparse
#: would take "-5d" for an option and answer "expected one argument").
VALUE_OPTIONS = ("--older-than", "--keep-last", "--min-bytes", "--tool-min-bytes")


def byte_count(text: str) -> int:
    """``--min-bytes N``/``--tool-min-bytes N``: a whole number >= 1; else ``ArgumentTypeError``."""
    why = "a size in bytes, a whole number >= 1 (content of at least that many bytes is offloaded)"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: use {why}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is too small: use {why}")
    return value


def add_compact_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="report what the run would do, change nothing")
    parser.add_argument("--thread", action="append", metavar="ID", help="only this thread (repeatable)")
    parser.add_argument(
        "--keep-last", type=keep_last_count, metavar="N",
        help="then keep only each thread's newest N checkpoints (and what they need)",
    )
    parser.add_argument(
        "--older-than", type=parse_duration, metavar="AGE",
        help="delete whole threads whose newest checkpoint is older than AGE (30d, 12h, 90m)",
    )
    parser.add_argument(
        "--prune-old", action="store_true",
        help="the same as --keep-last 1 (kept for scripts written for earlier versions)",
    )
    parser.add_argument(
        "--vacuum", action="store_true",
        help="PostgreSQL: VACUUM (ANALYZE) the checkpoint tables afterwards (SQLite is vacuumed "
        "whenever the run deleted something)",
    )
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    parser.add_argument(
        "--force", action="store_true",
        help="also trim threads with pending writes or an open interrupt (they are never compacted)",
    )
    parser.add_argument(
        "--offload", action="store_true",
        help="first store each image, file and other large binary content of every stored checkpoint "
        "and pending write once, as a blob, and keep a reference in their place (SQLite, PostgreSQL); "
        "open the store with ReducingCheckpointSaver(..., offload=BlobOffload(...)) afterwards",
    )
    parser.add_argument(
        "--min-bytes", type=byte_count, metavar="N",
        help="with --offload: offload binary content of at least N bytes (default 4096)",
    )
    parser.add_argument(
        "--tool-min-bytes", type=byte_count, metavar="N",
        help="with --offload: also offload any text of at least N bytes inside a tool result",
    )
    parser.add_argument(
        "--graph", metavar="MODULE:ATTR",
        help="with --keep-last: the graph whose threads the store holds, as in langgraph.json "
        "(./agent.py:graph or my_pkg.agent:graph; a compiled graph or a StateGraph); its "
        "DeltaChannels (deepagents' messages and files) get a snapshot where a thread is cut, so "
        "the checkpoints before it can go",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable report")


@dataclass(frozen=True)
class CompactReport:
    store: str
    dry_run: bool
    reducer: str
    threads: list[ThreadCompaction]
    #: what --prune-old/--keep-last/--older-than deleted (or would delete); None without them
    prune: str | None
    checkpoints_before: int
    checkpoints_after: int
    database_bytes_before: int | None
    #: None in a dry run: bytes after are measured, never guessed
    database_bytes_after: int | None
    keep_last: int | None = None
    #: --older-than in words ("30 days"), and in seconds; None without it
    older_than: str | None = None
    older_than_seconds: int | None = None
    threads_deleted: list[str] = field(default_factory=list)
    threads_trimmed: list[str] = field(default_factory=list)
    checkpoints_written: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    blobs_deleted: int = 0
    #: thread -> why its checkpoints were left as they are
    kept_whole: dict[str, str] = field(default_factory=dict)
    vacuumed: bool = False
    bytes_meaning: str = ""
    #: the whole database before the run and after its vacuum (PostgreSQL: pg_database_size; SQLite:
    #: the file and its -wal); None when not vacuumed
    vacuum_bytes_before: int | None = None
    vacuum_bytes_after: int | None = None
    store_kind: str = ""  # "sqlite", "postgres" or "cosmosdb"
    #: what --offload did (or would do); None without it
    offload: StoreOffload | None = None
    #: a run that compacted without deleting: what that means for the store's size; else None
    note: str | None = None
    #: --graph: the delta channels snapshotted where threads were cut, and the checkpoints stored
    #: again with them (0 in a dry run)
    snapshot_channels: list[str] = field(default_factory=list)
    snapshots_written: int = 0

    def count(self, action: str) -> int:
        return sum(1 for thread in self.threads if thread.action == action)


_BYTES_MEANING = {
    "sqlite": "SQLite file bytes (with its -wal file, after a WAL checkpoint)",
    "postgres": "pg_total_relation_size of the checkpoint tables (and the blob tables, with offload)",
    "cosmosdb": "Cosmos DB stored bytes: the container's documentsSize where the service reports it, "
    "else the JSON bytes of all its items",
}


def _store_bytes(db: CheckpointDb) -> int | None:
    if db.kind == "cosmosdb":
        from checkpointers.retention import backend_for

        return backend_for(db.saver).size()
    db.flush()
    return db.database_bytes()


def _confirm(db: CheckpointDb, plan: StoreCompaction) -> None:
    """Ask on the terminal before deleting what ``plan`` (a dry run) says."""
    what = (
        f"{plural(plan.checkpoints_deleted, 'checkpoint')} ({plural(plan.writes_deleted, 'pending write')}, "
        f"{plural(plan.blobs_deleted, 'stored value')}) of {plural(len(plan.threads_trimmed), 'thread')}"
    )
    if plan.threads_deleted:
        what += f", and {plural(len(plan.threads_deleted), 'whole thread')}"
    print(f"{PROG} compact will delete {what} in {in_text(db.label)}.", file=sys.stderr)
    try:
        answer = input("Delete them? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError("nothing was changed (not confirmed)", exit_code=1)


def run_compact(args: argparse.Namespace) -> CompactReport:
    feature = f"{PROG} compact"
    require("langgraph.checkpoint.base", extra="langgraph", feature=feature)
    from checkpointers.compact import compact_store
    from checkpointers.retention import supports_retention

    keep_last = args.keep_last
    if args.prune_old:
        if keep_last is not None and keep_last != 1:
            raise CliError(
                f"--prune-old means --keep-last 1; it cannot be combined with --keep-last {keep_last}",
                exit_code=2,
            )
        keep_last = 1
    deletes = keep_last is not None or args.older_than is not None
    if deletes and not args.dry_run and not args.yes and not sys.stdin.isatty():
        raise CliError(
            "compact with --keep-last, --older-than or --prune-old deletes checkpoints: pass --yes to "
            "confirm (there is no terminal to ask on); --dry-run shows what it would delete",
            exit_code=2,
        )
    reducer, counter, _ = reducer_from(args)
    offload = _offload_from(args)
    channels = None
    if args.graph is not None:
        if keep_last is None:
            raise CliError(
                "--graph only applies with --keep-last or --prune-old (its delta channels get a "
                "snapshot where a thread is cut); nothing was changed", exit_code=2,
            )
        channels = graph_channels(args.graph)
    with open_checkpoint_db(args.store, create=False, read_only=args.dry_run, feature=feature) as db:
        saver = db.saver
        if (deletes or args.vacuum) and not supports_retention(type(saver)):
            raise CliError(
                f"{type(saver).__name__} has no retention support; nothing was changed", exit_code=2
            )
        rows = {row.thread_id: row for row in db.threads()}
        wanted = list(args.thread) if args.thread else sorted(rows)
        missing = [thread_id for thread_id in wanted if thread_id not in rows]
        if missing:
            names = ", ".join(map(repr, missing))
            raise CliError(f"no such thread in {in_text(db.label)}: {names}", exit_code=2)
        checkpoints_before = sum(rows[thread_id].checkpoints for thread_id in wanted)
        bytes_before = _store_bytes(db)
        whole_before = None if db.kind == "cosmosdb" else db.whole_database_bytes()

        offloaded = None
        if offload is not None:
            from checkpointers.inplace_offload import offload_store
            from checkpointers.offload import BlobError

            try:
                with Progress(len(wanted), "offload") as bar:
                    offloaded = offload_store(
                        saver, offload, thread_ids=wanted, dry_run=args.dry_run,
                        messages_key=args.messages_key, on_thread=lambda _: bar.update(),
                    )
            except BlobError as exc:
                written = ("nothing was written" if args.dry_run else "the checkpoints before it are "
                           "offloaded (each in its own transaction), nothing of this one was written")
                raise CliError(f"compact --offload stopped: {exc}; {written}", exit_code=1) from exc

        def run(dry_run: bool) -> StoreCompaction:
            with Progress(len(wanted), "compact") as bar:
                return compact_store(
                    saver, reducer, thread_ids=wanted, keep_last=keep_last, older_than=args.older_than,
                    dry_run=dry_run, force=args.force, messages_key=args.messages_key, count_tokens=counter,
                    on_thread=lambda _: bar.update(), offload=offload,
                    # --offload over every thread has just recorded every reference
                    record_references=offload is None or bool(args.thread), delta_channels=channels,
                )

        if deletes and not args.dry_run and not args.yes:
            plan = run(dry_run=True)
            if plan.checkpoints_deleted or plan.blobs_deleted or plan.threads_deleted:
                _confirm(db, plan)
        done = run(args.dry_run)
        deleted_any = bool(done.checkpoints_deleted or done.blobs_deleted or done.threads_deleted)
        vacuumed = False
        whole_after = None
        deleted_any = deleted_any or bool(offloaded is not None and offloaded.rows)
        vacuum = (db.kind == "sqlite" and deleted_any) or (args.vacuum and db.kind != "cosmosdb")
        if vacuum and not args.dry_run:
            from checkpointers.retention import backend_for

            backend_for(saver).vacuum()
            vacuumed = True
            db.flush()
            whole_after = db.whole_database_bytes()
        if args.dry_run:
            checkpoints_after = checkpoints_before + done.checkpoints_written - done.checkpoints_deleted
            bytes_after = None
        else:
            rows_after = {row.thread_id: row for row in db.threads()}
            checkpoints_after = sum(rows_after[t].checkpoints for t in wanted if t in rows_after)
            bytes_after = _store_bytes(db)
        prune_note = None
        if deletes:
            verb = "would delete" if args.dry_run else "deleted"
            what = []
            if keep_last is not None:
                what.append(
                    f"{plural(len(done.threads_trimmed), 'thread')} trimmed to the newest "
                    f"{plural(keep_last, 'checkpoint')}"
                )
            if args.older_than is not None:
                what.append(
                    f"{plural(len(done.threads_deleted), 'whole thread')} idle longer than "
                    f"{human_duration(args.older_than)}"
                )
            prune_note = (
                f"{verb} {plural(done.checkpoints_deleted, 'checkpoint')} "
                f"({plural(done.writes_deleted, 'pending write')}, "
                f"{plural(done.blobs_deleted, 'stored value')}): {'; '.join(what)}"
            )
            if channels is not None:
                prune_note += "; " + _snapshot_words(channels, done, args.dry_run)
            named = done.references_recorded
            if named:
                prune_note += (
                    f"; {'would first record' if args.dry_run else 'first recorded'} the blob references "
                    f"of {plural(named, 'checkpoint')} written without offload, so their "
                    "blobs are kept"
                )
        report = CompactReport(
            db.label, args.dry_run, repr(reducer), done.threads, prune_note, checkpoints_before,
            checkpoints_after, bytes_before, bytes_after,
            keep_last=keep_last,
            older_than=None if args.older_than is None else human_duration(args.older_than),
            older_than_seconds=None if args.older_than is None else int(args.older_than.total_seconds()),
            threads_deleted=done.threads_deleted, threads_trimmed=done.threads_trimmed,
            checkpoints_written=done.checkpoints_written, checkpoints_deleted=done.checkpoints_deleted,
            writes_deleted=done.writes_deleted, blobs_deleted=done.blobs_deleted,
            kept_whole=done.kept_whole, vacuumed=vacuumed, bytes_meaning=_BYTES_MEANING.get(db.kind, ""),
            vacuum_bytes_before=whole_before if vacuumed else None, vacuum_bytes_after=whole_after,
            store_kind=db.kind, offload=offloaded, snapshot_channels=done.snapshot_channels,
            snapshots_written=done.snapshots_written,
            note=None if deletes else _nothing_deleted_note(done.checkpoints_written, args.dry_run),
        )
    if args.json:
        as_json = {**asdict(report), "threads": [asdict(t) for t in report.threads]}
        if offloaded is not None:
            as_json["offload"] = {**asdict(offloaded), "rows": offloaded.rows,
                                  "bytes_before": offloaded.bytes_before,
                                  "bytes_after": offloaded.bytes_after}
        print(json.dumps(as_json, indent=2))
    else:
        _print_compact(report)
    return report


def _print_compact(report: CompactReport) -> None:
    dry = " (dry run: nothing written)" if report.dry_run else ""
    print(f"store: {report.store}; reducer: {report.reducer}{dry}")
    changed = [t for t in report.threads if t.action != "skipped" or t.reason != "within bounds"]
    if changed:
        rows: list[list[Any]] = [
            [t.thread_id, t.action, t.messages_before, t.messages_after, t.tokens_before, t.tokens_after,
             t.reason or ""]
            for t in changed
        ]
        print(
            table(
                ["thread", "action", "messages", "after", "tokens", "after", "note"],
                rows,
                right=[False, False, True, True, True, True, False],
            )
        )
    verb = "would compact" if report.dry_run else "compacted"
    within = sum(1 for t in report.threads if t.reason == "within bounds")
    skipped = sum(1 for t in report.threads if t.action == "skipped" and t.reason != "within bounds")
    after = "" if report.database_bytes_after is None else f" -> {human_bytes(report.database_bytes_after)}"
    print(
        f"{plural(report.count('compacted') + report.count('would compact'), 'thread')} {verb}, "
        f"{within} already within bounds, {skipped} skipped, {report.count('failed')} failed; "
        f"checkpoints {report.checkpoints_before} -> {report.checkpoints_after}"
        + ("" if report.database_bytes_before is None else
           f"; {'checkpoint tables' if report.store_kind == 'postgres' else 'database'} "
           f"{human_bytes(report.database_bytes_before)}{after}")
    )
    if report.offload is not None:
        for line in offload_lines(report):
            print(line)
    if report.prune:
        print(f"prune: {report.prune}")
    if report.note:
        print(f"note: {report.note}")
    for thread_id, why in sorted(report.kept_whole.items()):
        print(f"kept whole: {thread_id}: {why}")
    if report.vacuumed:
        print(f"vacuumed: {vacuum_outcome(report)}")
    if report.count("failed"):
        print("failed threads keep their previous latest checkpoint; re-run compact to retry them")


def graph_channels(spec: str) -> Mapping[str, Any]:
    """The ``channels`` of the graph ``--graph`` names: ``path/to/file.py:attr`` (loaded as
    ``langgraph.json`` loads a graph) or ``package.module:attr`` (imported with the working
    directory on ``sys.path``, as ``python -m`` does); ``attr`` may be dotted. ``CliError`` saying
    what is wrong, before the store is opened."""
    form = "MODULE:ATTR, e.g. ./agent.py:graph or my_pkg.agent:graph"
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise CliError(f"--graph {spec!r} is not {form}; nothing was changed", exit_code=2)
    try:
        if where.endswith(".py") or os.sep in where or "/" in where:
            path = Path(where).resolve()
            if not path.is_file():
                raise CliError(f"--graph {spec!r}: no such file {str(path)!r}; nothing was changed",
                               exit_code=2)
            # the file's own directory first, as `python file.py` has it: its sibling imports work
            sys.path.insert(0, str(path.parent))
            loaded = importlib.util.spec_from_file_location(path.stem, path)
            assert loaded is not None and loaded.loader is not None
            module = importlib.util.module_from_spec(loaded)
            sys.modules.setdefault(path.stem, module)
            loaded.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except CliError:
        raise
    except Exception as exc:
        raise CliError(
            f"--graph {spec!r}: importing {where!r} failed ({type(exc).__name__}: {one_line(exc)}); "
            "nothing was changed", exit_code=2,
        ) from exc
    graph: Any = module
    for name in attr.split("."):
        if not hasattr(graph, name):
            raise CliError(f"--graph {spec!r}: {where!r} has no attribute {attr!r}; nothing was changed",
                           exit_code=2)
        graph = getattr(graph, name)
    channels = getattr(graph, "channels", None)
    if not isinstance(channels, Mapping):
        raise CliError(
            f"--graph {spec!r} is a {type(graph).__name__}, not a graph: name a compiled graph "
            "(builder.compile(), create_deep_agent(...)) or a StateGraph, whose .channels are "
            "used; nothing was changed", exit_code=2,
        )
    return channels


def _snapshot_words(channels: Mapping[str, Any], done: StoreCompaction, dry_run: bool) -> str:
    """What ``--graph`` did at the cut, in words."""
    if done.snapshot_channels:
        names = ", ".join(done.snapshot_channels)
        if dry_run:
            return f"would store a snapshot of the delta channels ({names}) where each thread is cut"
        return (f"stored a snapshot of the delta channels ({names}) at "
                f"{plural(done.snapshots_written, 'checkpoint')} where threads were cut")
    from langgraph.channels.delta import DeltaChannel

    if not any(isinstance(c, DeltaChannel) for c in channels.values()):
        return "--graph has no DeltaChannel: nothing to snapshot"
    return ("--graph's delta channels were not used: the store holds offloaded blobs, so each kept "
            "checkpoint keeps the ancestors its delta channels are rebuilt from")


def _nothing_deleted_note(written: int, dry_run: bool) -> str | None:
    """Compacting adds a checkpoint per thread and keeps the older ones: without ``--keep-last`` or
    ``--older-than`` the store grows. Said in the report, since a user running ``compact`` expects
    a smaller store; None when nothing was (or would be) written."""
    if not written:
        return None
    wrote, deleted = ("would write", "would delete") if dry_run else ("wrote", "deleted")
    return (
        f"{wrote} {plural(written, 'reduced checkpoint')} and {deleted} nothing: the older checkpoints "
        "stay, so the store grows and frees no space. The next run of each thread loads the reduced "
        "state; to free the space, run compact again with --keep-last 1 (each thread keeps only its "
        "reduced latest checkpoint) or --keep-last N"
    )


def vacuum_outcome(report: CompactReport) -> str:
    """What the vacuum did to the database's size, as measured before the run and after it."""
    before, after = report.vacuum_bytes_before, report.vacuum_bytes_after
    if report.store_kind == "postgres":
        what = "VACUUM (ANALYZE) of the checkpoint tables; the database (pg_database_size)"
    else:
        what = "VACUUM; the database file (with its -wal)"
    if before is None or after is None:
        return f"{what} was not measured"
    change = f"{what} went {human_bytes(before)} -> {human_bytes(after)}"
    if after < before:
        return f"{change}: {human_bytes(before - after)} returned to the file system"
    if report.store_kind == "postgres":
        return (
            f"{change}: the freed pages stay with the tables, reused by the checkpoints written "
            "next (VACUUM FULL would return them, locking the tables while it rewrites them)"
        )
    return f"{change}: nothing returned"


def _offload_from(args: argparse.Namespace) -> Any:
    """The ``BlobOffload`` of ``--offload`` (None without it); ``CliError`` for a size option without
    ``--offload`` or a store it cannot offload, before the store is opened."""
    if not args.offload:
        given = [o for o, v in (("--min-bytes", args.min_bytes), ("--tool-min-bytes", args.tool_min_bytes))
                 if v is not None]
        if given:
            raise CliError(f"{' and '.join(given)} only applies with --offload; nothing was changed",
                           exit_code=2)
        return None
    if parse_store_url(args.store).kind == "cosmosdb":
        raise CliError(
            "compact --offload rewrites SQLite and PostgreSQL stores in place; a Cosmos DB store keeps a "
            "checkpoint in chunked items that it cannot rewrite yet. Nothing was changed: new "
            "checkpoints are offloaded with CosmosDBSaver(..., offload=BlobOffload(...))",
            exit_code=2,
        )
    from checkpointers import BlobOffload

    try:
        return BlobOffload(4096 if args.min_bytes is None else args.min_bytes,
                           tool_min_bytes=args.tool_min_bytes)
    except (TypeError, ValueError) as exc:
        raise CliError(f"bad offload options: {exc}", exit_code=2) from exc


def offload_lines(report: CompactReport) -> list[str]:
    """What ``--offload`` did, in words: rows rewritten, blobs stored, and the space it frees."""
    done = report.offload
    assert done is not None
    threads = [t for t in done.threads if t.rows]
    verb = "would rewrite" if report.dry_run else "rewrote"
    lines = [
        f"offload: {verb} {plural(done.rows, 'stored row')} of "
        f"{plural(sum(t.checkpoints for t in threads), 'checkpoint')} "
        f"({plural(sum(t.writes for t in threads), 'pending write')}) in {plural(len(threads), 'thread')}, "
        f"{human_bytes(done.bytes_before)} -> {human_bytes(done.bytes_after)}; "
        f"{plural(done.blobs_stored, 'new blob')} ({human_bytes(done.blob_bytes_stored)}) "
        f"{'would be ' if report.dry_run else ''}stored once "
        f"(min bytes {done.min_bytes}"
        + ("" if done.tool_min_bytes is None else f", tool min bytes {done.tool_min_bytes}") + ")"
    ]
    for t in threads:
        lines.append(
            f"offload: {t.thread_id}: {plural(t.rows, 'row')}, {human_bytes(t.bytes_before)} -> "
            f"{human_bytes(t.bytes_after)}, {plural(t.blobs, 'blob')} ({human_bytes(t.blob_bytes)})"
        )
    if not done.rows:
        return lines
    if report.store_kind == "sqlite":
        lines.append(
            "offload: the real run vacuums the file to return the space (VACUUM needs free disk up to "
            "the file's size)" if report.dry_run else "offload: the file was vacuumed (below)"
        )
    elif not report.vacuumed:
        lines.append("offload: the freed space is reused by PostgreSQL after autovacuum; --vacuum runs "
                     "VACUUM (ANALYZE) now")
    lines.append(
        "offload: read the store through ReducingCheckpointSaver(saver, reducer, offload=BlobOffload("
        f"min_bytes={done.min_bytes})) from now on: a saver without offload reads the references, "
        "not the content"
    )
    return lines
