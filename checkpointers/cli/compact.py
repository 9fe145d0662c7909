"""``agentstate-reducer compact``: a reduced copy of each thread's latest checkpoint, written as a
new checkpoint (``checkpointers.compact.compact_thread``); ``--prune-old`` then deletes the older
ones where the saver can. ``--dry-run`` writes nothing and opens SQLite read-only."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .errors import PROG, CliError, require
from .options import reducer_from
from .render import Progress, human_bytes, plural, table
from .stores import open_checkpoint_db

if TYPE_CHECKING:
    from checkpointers.compact import ThreadCompaction


@dataclass(frozen=True)
class CompactReport:
    store: str
    dry_run: bool
    reducer: str
    threads: list[ThreadCompaction]
    prune: str | None  # what --prune-old did (or would do); None without the option
    checkpoints_before: int
    checkpoints_after: int
    database_bytes_before: int | None
    database_bytes_after: int | None

    def count(self, action: str) -> int:
        return sum(1 for thread in self.threads if thread.action == action)


def run_compact(args: argparse.Namespace) -> CompactReport:
    feature = f"{PROG} compact"
    require("langgraph.checkpoint.base", extra="langgraph", feature=feature)
    from checkpointers.compact import compact_thread, supports_prune

    reducer, counter, _ = reducer_from(args)
    with open_checkpoint_db(args.store, create=False, read_only=args.dry_run, feature=feature) as db:
        saver = db.saver
        if args.prune_old and not supports_prune(saver):
            raise CliError(
                f"--prune-old: {type(saver).__name__} has no prune(); nothing was changed. Re-run "
                "without --prune-old (the latest checkpoints are still compacted; old ones stay)",
                exit_code=2,
            )
        rows = {row.thread_id: row for row in db.threads()}
        wanted = list(args.thread) if args.thread else sorted(rows)
        missing = [thread_id for thread_id in wanted if thread_id not in rows]
        if missing:
            raise CliError(f"no such thread in {db.label}: {', '.join(map(repr, missing))}", exit_code=2)
        checkpoints_before = sum(rows[thread_id].checkpoints for thread_id in wanted)
        bytes_before = db.database_bytes()
        results = []
        with Progress(len(wanted), "compact") as bar:
            for thread_id in wanted:
                results.append(
                    compact_thread(
                        saver,
                        thread_id,
                        reducer,
                        messages_key=args.messages_key,
                        dry_run=args.dry_run,
                        count_tokens=counter,
                    )
                )
                bar.update()
        prune_note = None
        if args.prune_old:
            old = checkpoints_before - len(wanted)
            if args.dry_run:
                prune_note = (
                    f"would delete up to {old} old checkpoints (keep_latest) of {len(wanted)} threads"
                )
            else:
                saver.prune(wanted, strategy="keep_latest")
        rows_after = {row.thread_id: row for row in db.threads()}
        checkpoints_after = sum(rows_after[t].checkpoints for t in wanted if t in rows_after)
        if args.prune_old and not args.dry_run:
            expected_new = sum(1 for result in results if result.action == "compacted")
            deleted = checkpoints_before + expected_new - checkpoints_after
            prune_note = f"deleted {deleted} old checkpoints (keep_latest) of {len(wanted)} threads"
        db.flush()
        report = CompactReport(
            db.label,
            args.dry_run,
            repr(reducer),
            results,
            prune_note,
            checkpoints_before,
            checkpoints_after,
            bytes_before,
            db.database_bytes(),
        )
    if args.json:
        print(json.dumps({**asdict(report), "threads": [asdict(t) for t in report.threads]}, indent=2))
    else:
        _print_compact(report)
    return report


def _print_compact(report: CompactReport) -> None:
    dry = " (dry run: nothing written)" if report.dry_run else ""
    print(f"store: {report.store}; reducer: {report.reducer}{dry}")
    changed = [t for t in report.threads if t.action != "skipped" or t.reason != "within bounds"]
    if changed:
        rows = [
            [
                t.thread_id,
                t.action,
                t.messages_before,
                t.messages_after,
                t.tokens_before,
                t.tokens_after,
                t.reason or "",
            ]
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
    print(
        f"{plural(report.count('compacted') + report.count('would compact'), 'thread')} {verb}, "
        f"{within} already within bounds, {skipped} skipped, {report.count('failed')} failed; "
        f"checkpoints {report.checkpoints_before} -> {report.checkpoints_after}"
        + (
            ""
            if report.database_bytes_after is None
            else f"; database {human_bytes(report.database_bytes_before)} -> "
            f"{human_bytes(report.database_bytes_after)}"
        )
    )
    if report.prune:
        print(f"prune: {report.prune}")
    if report.count("failed"):
        print("failed threads keep their previous latest checkpoint; re-run compact to retry them")
