"""``agentstate-reducer``: the demo, and inspect/compact for real checkpoint stores.

    agentstate-reducer demo [--turns 300] [--plot growth.png] [--store URL]
    agentstate-reducer inspect STORE [--json]
    agentstate-reducer compact STORE [--dry-run] [--prune-old] [--max-messages 40 --min-messages 20]

STORE is ``sqlite:///path`` (or a plain file path), ``postgresql://...`` or ``cosmosdb://...``
(see ``agentstate_reducer._cli_stores``). This module imports nothing beyond the standard library
at import time: langgraph, psycopg, azure-cosmos and matplotlib are imported by the command that
needs them, and a missing one is reported as one line naming the extra to install.

``execute(argv)`` runs a command and returns its report (a dataclass) for programs and tests;
``main(argv)`` is the console script: it prints errors as one line and returns the exit code.

Secrets never reach the output: while a command runs, stdout and stderr pass through one
``Redactor`` (``_cli_stores``) made from the command line's URLs and the secret environment
variables, and so do the messages of the ``CliError`` it raises. What argparse, warnings, a
``--debug`` traceback or a driver's error text write goes through the same streams.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO, cast

from . import __version__
from ._cli_render import Progress, RedactingStream, ascii_chart, human_bytes, table, write_png_chart
from ._cli_stores import (
    CliError,
    Redactor,
    Store,
    ThreadRow,
    activate_redactor,
    active_redactor,
    iter_latest,
    one_line,
    open_store,
    require,
)
from .config import ReducerConfig
from .reducer import MessageReducer
from .tokens import heuristic_counter, resolve_token_counter

PROG = "agentstate-reducer"
COMPACT_MARKER = "compact"  # metadata {"agentstate_reducer": "compact"} on checkpoints compact writes


# --- reducer options, shared by demo and compact ------------------------------------------------


def _reducer_from(args: argparse.Namespace) -> tuple[MessageReducer, Callable[[Any], int], str]:
    """The reducer the options describe, the token counter used for reports, and its name."""
    counter: Callable[[Any], int]
    if args.token_counter == "tiktoken":
        counter = resolve_token_counter(None, encoding=args.encoding)
    else:
        counter = heuristic_counter()
    counter_name = getattr(counter, "name", args.token_counter)
    try:
        config = ReducerConfig(
            min_messages=args.min_messages,
            max_messages=args.max_messages,
            max_tokens=args.max_tokens,
            target_tokens=args.target_tokens,
            token_counter=counter,
        )
    except (ValueError, TypeError) as exc:
        message = str(exc)
        for name in ("min_messages", "max_messages", "max_tokens", "target_tokens"):
            message = message.replace(name, "--" + name.replace("_", "-"))
        raise CliError(f"bad reducer options: {message}", exit_code=2) from exc
    return MessageReducer(config=config), counter, counter_name


def _count_tokens(counter: Callable[[Any], int], messages: Any) -> int | None:
    return sum(counter(m) for m in messages) if isinstance(messages, list) else None


def _messages_of(tup: Any, key: str) -> Any:
    """The messages list of a checkpoint tuple, or None (no checkpoint, no such channel)."""
    if tup is None:
        return None
    value = (tup.checkpoint.get("channel_values") or {}).get(key)
    return value if isinstance(value, list) else None


# --- demo -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoRun:
    name: str  # "bare" or "reduced"
    saver: str  # e.g. "SqliteSaver" or "ReducingCheckpointSaver(SqliteSaver)"
    thread_id: str
    turns: int
    messages: int  # in the latest stored checkpoint
    tokens: int  # of those messages, by the report's token counter
    stored_bytes: int | None  # the thread's bytes in the store (see DemoReport.bytes_meaning)
    database_bytes: int | None  # the run's own database file; None when both runs share a store
    wall_seconds: float  # graph.invoke time only (measuring between turns is not counted)
    growth: list[int | None] = field(repr=False)  # stored_bytes after each turn
    reductions: int = 0  # puts where the wrapper pruned messages


@dataclass(frozen=True)
class DemoReport:
    store: str
    bytes_meaning: str
    reducer: str
    token_counter: str
    durability: str
    bare: DemoRun
    reduced: DemoRun
    plot: str | None = None
    kept_paths: list[str] = field(default_factory=list)


def _demo_run(
    name: str,
    store: Store,
    saver: Any,
    thread_id: str,
    graph_module: Any,
    *,
    turns: int,
    durability: str,
    counter: Callable[[Any], int],
    messages_key: str,
    separate_file: bool,
    reductions: Callable[[], int],
) -> DemoRun:
    graph = graph_module.build_demo_graph(saver)
    config = {"configurable": {"thread_id": thread_id}}
    growth: list[int | None] = []
    wall = 0.0
    with Progress(turns, f"{name:>7}") as bar:
        for turn in range(1, turns + 1):
            start = time.perf_counter()
            graph.invoke(graph_module.turn_input(turn), config, durability=durability)
            wall += time.perf_counter() - start
            growth.append(store.thread_bytes(thread_id))
            bar.update()
    latest = store.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    messages = _messages_of(latest, messages_key) or []
    database_bytes = None
    if separate_file:
        store.flush()
        database_bytes = store.database_bytes()
    inner = type(store.saver).__name__
    return DemoRun(
        name=name,
        # The wrapper's class carries its mirrored capabilities in its name ("...[prune]").
        saver=inner if saver is store.saver else f"{type(saver).__name__.split('[')[0]}({inner})",
        thread_id=thread_id,
        turns=turns,
        messages=len(messages),
        tokens=_count_tokens(counter, messages) or 0,
        stored_bytes=growth[-1] if growth else store.thread_bytes(thread_id),
        database_bytes=database_bytes,
        wall_seconds=wall,
        growth=growth,
        reductions=reductions(),
    )


def run_demo(args: argparse.Namespace) -> DemoReport:
    feature = f"{PROG} demo"
    if args.turns < 1:
        raise CliError(f"--turns must be at least 1, got {args.turns}", exit_code=2)
    if args.store and args.db_dir:
        raise CliError(
            "give --store or --db-dir, not both (--db-dir is where the default SQLite files go)", exit_code=2
        )
    if args.plot:
        require("matplotlib", extra="plot", feature=f"{feature} --plot")
    graph_module = require("agentstate_reducer._demo_graph", extra="langgraph", feature=feature)
    require("langgraph.checkpoint.sqlite", extra="langgraph", feature=feature)
    try:
        from checkpointers import ReducingCheckpointSaver
    except ImportError as exc:
        raise CliError(
            f"{feature} needs checkpointers.ReducingCheckpointSaver, which this installation "
            "does not have; reinstall agentstate-reducer"
        ) from exc
    reducer, counter, counter_name = _reducer_from(args)
    pruned_puts = 0

    def on_reduce(report: Any) -> None:
        nonlocal pruned_puts
        if report.stats is not None and report.stats.pruned_count:
            pruned_puts += 1

    tmp_dir: str | None = None
    stores: list[Store] = []
    try:
        if args.store:
            shared = open_store(args.store, create=True, feature=feature)
            stores = [shared]
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
            plan = [("bare", shared, f"demo-bare-{stamp}"), ("reduced", shared, f"demo-reduced-{stamp}")]
            separate = False
            kept = [f"{shared.label} threads demo-bare-{stamp}, demo-reduced-{stamp}"]
        else:
            if args.db_dir:
                base = Path(args.db_dir).expanduser()
                base.mkdir(parents=True, exist_ok=True)
            else:
                tmp_dir = tempfile.mkdtemp(prefix="agentstate-demo-")
                base = Path(tmp_dir)
            plan = []
            for name in ("bare", "reduced"):
                path = base / f"demo-{name}.sqlite"
                for suffix in ("", "-wal", "-shm"):  # our own demo files from an earlier run
                    Path(str(path) + suffix).unlink(missing_ok=True)
                store = open_store(f"sqlite:///{path}", create=True, feature=feature)
                # Throwaway files: WAL with synchronous=NORMAL stays consistent after a crash but
                # skips an fsync per commit, which would otherwise dominate the run on slow disks.
                # Both runs get the same setting, so the comparison is unaffected.
                store.saver.conn.execute("PRAGMA synchronous=NORMAL")
                stores.append(store)
                plan.append((name, store, f"demo-{name}"))
            separate = True
            kept = [] if tmp_dir else [f"sqlite:///{base / f'demo-{n}.sqlite'}" for n in ("bare", "reduced")]
        runs = []
        for name, store, thread_id in plan:
            saver = store.saver
            if name == "reduced":
                saver = ReducingCheckpointSaver(
                    store.saver, reducer, messages_key=args.messages_key, on_reduce=on_reduce
                )
            runs.append(
                _demo_run(
                    name,
                    store,
                    saver,
                    thread_id,
                    graph_module,
                    turns=args.turns,
                    durability=args.durability,
                    counter=counter,
                    messages_key=args.messages_key,
                    separate_file=separate,
                    reductions=lambda: pruned_puts,
                )
            )
        report = DemoReport(
            store=stores[0].label if args.store else "SQLite files (one per run)",
            bytes_meaning=stores[0].bytes_meaning,
            reducer=repr(reducer),
            token_counter=counter_name,
            durability=args.durability,
            bare=runs[0],
            reduced=runs[1],
            plot=args.plot,
            kept_paths=kept,
        )
        if args.plot:
            write_png_chart(
                args.plot,
                [(f"bare {runs[0].saver}", runs[0].growth), (f"reduced {runs[1].saver}", runs[1].growth)],
                title=f"Stored bytes of the thread per turn ({args.turns} turns)\n{report.reducer}",
            )
    finally:
        for store in stores:
            store.close()
        if tmp_dir:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    _print_demo(report)
    return report


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def _print_demo(r: DemoReport) -> None:
    b, d = r.bare, r.reduced
    print(
        f"{PROG} demo: {b.turns} turns of a scripted tool-using agent (4 messages a turn), "
        f"durability={r.durability}"
    )
    print(f"store: {r.store}; reducer: {r.reducer}; tokens: {r.token_counter}")
    print()
    headers = ["run", "saver", "turns", "messages", "tokens", "stored bytes", "database bytes", "wall time"]
    rows = [
        [
            x.name,
            x.saver,
            x.turns,
            x.messages,
            x.tokens,
            human_bytes(x.stored_bytes),
            human_bytes(x.database_bytes),
            f"{x.wall_seconds:.2f} s",
        ]
        for x in (b, d)
    ]
    rows.append(
        [
            "bare/reduced",
            "",
            "",
            _ratio(b.messages, d.messages),
            _ratio(b.tokens, d.tokens),
            _ratio(b.stored_bytes, d.stored_bytes),
            _ratio(b.database_bytes, d.database_bytes),
            _ratio(b.wall_seconds, d.wall_seconds),
        ]
    )
    print(table(headers, rows, right=[False, False, True, True, True, True, True, True]))
    print()
    if any(v is not None for v in b.growth):
        print(
            ascii_chart(
                [("bare", "*", b.growth), ("reduced", "o", d.growth)],
                title="stored bytes of the thread after each turn",
            )
        )
    else:
        print("(this store does not report per-thread bytes: no growth chart)")
    print()
    print(f"messages and tokens: the latest stored checkpoint; the reducer pruned on {d.reductions} puts.")
    print(f"bytes: {r.bytes_meaning}.")
    if r.plot:
        print(f"chart written to {r.plot}")
    for kept in r.kept_paths:
        print(f"kept: {kept}  (try: {PROG} inspect {kept.split(' ')[0]})")


# --- inspect ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadInfo:
    thread_id: str
    checkpoints: int  # all namespaces (subgraphs included)
    messages: int | None  # in the latest root checkpoint; None: no checkpoint or no list there
    tokens: int | None
    bytes: int | None  # see InspectReport.bytes_meaning


@dataclass(frozen=True)
class InspectReport:
    store: str
    messages_key: str
    token_counter: str
    bytes_meaning: str
    threads: list[ThreadInfo]
    database_bytes: int | None

    def summary(self) -> dict[str, Any]:
        def total(name: str) -> int | None:
            values = [getattr(t, name) for t in self.threads]
            known = [v for v in values if v is not None]
            return sum(known) if known or not values else None

        return {
            "threads": len(self.threads),
            "checkpoints": sum(t.checkpoints for t in self.threads),
            "messages": total("messages"),
            "tokens": total("tokens"),
            "bytes": total("bytes"),
            "database_bytes": self.database_bytes,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "messages_key": self.messages_key,
            "token_counter": self.token_counter,
            "bytes_meaning": self.bytes_meaning,
            "threads": [asdict(t) for t in self.threads],
            "summary": self.summary(),
        }


def _sorted_rows(rows: list[ThreadRow]) -> list[ThreadRow]:
    # Biggest first: the threads a user with a bloated store wants to see.
    return sorted(rows, key=lambda r: (-(r.bytes or 0), -r.checkpoints, r.thread_id))


def run_inspect(args: argparse.Namespace) -> InspectReport:
    feature = f"{PROG} inspect"
    counter = (
        resolve_token_counter(None, encoding=args.encoding)
        if args.token_counter == "tiktoken"
        else heuristic_counter()
    )
    with open_store(args.store, create=False, read_only=True, feature=feature) as store:
        rows = _sorted_rows(store.threads())
        infos = []
        with Progress(len(rows), "inspect") as bar:
            for row, (_, tup) in zip(rows, iter_latest(store, [r.thread_id for r in rows]), strict=True):
                messages = _messages_of(tup, args.messages_key)
                infos.append(
                    ThreadInfo(
                        row.thread_id,
                        row.checkpoints,
                        len(messages) if messages is not None else None,
                        _count_tokens(counter, messages),
                        row.bytes,
                    )
                )
                bar.update()
        report = InspectReport(
            store.label,
            args.messages_key,
            getattr(counter, "name", args.token_counter),
            store.bytes_meaning,
            infos,
            store.database_bytes(),
        )
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        _print_inspect(report)
    return report


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _print_inspect(r: InspectReport) -> None:
    print(f"store: {r.store}")
    if r.threads:
        rows = [[t.thread_id, t.checkpoints, t.messages, t.tokens, human_bytes(t.bytes)] for t in r.threads]
        print(table(["thread", "checkpoints", "messages", "tokens", "bytes"], rows))
    s = r.summary()
    print(
        f"{_plural(s['threads'], 'thread')}, {_plural(s['checkpoints'], 'checkpoint')}, "
        f"{s['messages'] or 0} messages and "
        f"{s['tokens'] or 0} tokens ({r.token_counter}) in the latest checkpoints, "
        f"{human_bytes(s['bytes'])} stored"
        + ("" if s["database_bytes"] is None else f"; database {human_bytes(s['database_bytes'])}")
    )
    print(f"bytes: {r.bytes_meaning}.")


# --- compact ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadCompaction:
    thread_id: str
    #: "compacted", "would compact" (dry run), "skipped" or "failed"
    action: str
    reason: str | None = None
    messages_before: int | None = None
    messages_after: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    checkpoint_id: str | None = None  # the new checkpoint ("compacted" only)


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
        return sum(1 for t in self.threads if t.action == action)


def _supports_prune(saver: Any) -> bool:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    return type(saver).prune is not BaseCheckpointSaver.prune


def _compact_thread(
    saver: Any,
    thread_id: str,
    tup: Any,
    reducer: MessageReducer,
    counter: Callable[[Any], int],
    messages_key: str,
    dry_run: bool,
) -> ThreadCompaction:
    """Write one new, reduced checkpoint on top of the thread's latest one (never edit a stored one).

    The new checkpoint is the latest with the messages channel reduced and its version bumped
    (blob savers store a channel's value only under a new version); everything else (other
    channels, versions_seen, updated_channels) is copied, so the thread resumes exactly where it
    was. Until the put commits, the old checkpoint stays the latest: an interruption leaves the
    thread as it was, and a re-run skips threads that are already within bounds.
    """
    from langgraph.checkpoint.base import copy_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    from checkpointers.reduction import reduce_checkpoint

    if tup is None:
        return ThreadCompaction(thread_id, "skipped", "no checkpoint in the root namespace")
    if tup.pending_writes:
        # Interrupted (interrupt(), an error) or running: the pending writes belong to the latest
        # checkpoint and would be lost under a new one, changing what a resume does.
        return ThreadCompaction(
            thread_id,
            "skipped",
            "pending writes (interrupted or running); compact it once the run has finished",
        )
    messages = _messages_of(tup, messages_key)
    if messages is None:
        return ThreadCompaction(thread_id, "skipped", f"no {messages_key!r} list in the latest checkpoint")
    old = tup.checkpoint
    versions = old.get("channel_versions") or {}
    new_versions = {messages_key: saver.get_next_version(versions.get(messages_key), None)}
    step = int((tup.metadata or {}).get("step", -1))
    draft = copy_checkpoint(old)
    draft["id"] = str(uuid6(clock_seq=step + 1))
    draft["ts"] = datetime.now(timezone.utc).isoformat()
    draft["channel_versions"] = {**versions, **new_versions}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": old["id"]}}
    reduced, put_report = reduce_checkpoint(reducer, config, draft, new_versions, messages_key=messages_key)
    stats = put_report.stats
    if stats is None or not stats.pruned_count:
        return ThreadCompaction(
            thread_id,
            "skipped",
            "within bounds",
            len(messages),
            len(messages),
            _count_tokens(counter, messages),
            _count_tokens(counter, messages),
        )
    after = reduced["channel_values"][messages_key]
    planned = ThreadCompaction(
        thread_id,
        "would compact",
        None,
        len(messages),
        len(after),
        _count_tokens(counter, messages),
        _count_tokens(counter, after),
    )
    if dry_run:
        return planned
    metadata = {k: v for k, v in (tup.metadata or {}).items() if k not in ("source", "step", "writes")}
    metadata.update(source="update", step=step + 1, agentstate_reducer=COMPACT_MARKER)
    metadata.setdefault("parents", {})
    saver.put(config, reduced, metadata, new_versions)
    # Read it back through the saver: what a graph will load next.
    check = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    got = _messages_of(check, messages_key)
    if check is None or check.checkpoint["id"] != reduced["id"] or got is None or len(got) != len(after):
        found = None if check is None else check.checkpoint["id"]
        return replace(
            planned,
            action="failed",
            reason=f"the latest checkpoint read back is {found}, not the new {reduced['id']} (a run wrote "
            "meanwhile, or this machine's clock is behind the writer's); the thread reads as before, "
            "re-run compact",
        )
    return replace(planned, action="compacted", checkpoint_id=reduced["id"])


def run_compact(args: argparse.Namespace) -> CompactReport:
    feature = f"{PROG} compact"
    require("langgraph.checkpoint.base", extra="langgraph", feature=feature)
    reducer, counter, _ = _reducer_from(args)
    with open_store(args.store, create=False, read_only=args.dry_run, feature=feature) as store:
        saver = store.saver
        if args.prune_old and not _supports_prune(saver):
            raise CliError(
                f"--prune-old: {type(saver).__name__} has no prune(); nothing was changed. Re-run "
                "without --prune-old (the latest checkpoints are still compacted; old ones stay)",
                exit_code=2,
            )
        rows = {r.thread_id: r for r in store.threads()}
        wanted = list(args.thread) if args.thread else sorted(rows)
        missing = [t for t in wanted if t not in rows]
        if missing:
            raise CliError(f"no such thread in {store.label}: {', '.join(map(repr, missing))}", exit_code=2)
        checkpoints_before = sum(rows[t].checkpoints for t in wanted)
        bytes_before = store.database_bytes()
        results = []
        with Progress(len(wanted), "compact") as bar:
            for thread_id, tup in iter_latest(store, wanted):
                results.append(
                    _compact_thread(saver, thread_id, tup, reducer, counter, args.messages_key, args.dry_run)
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
        after_rows = {r.thread_id: r for r in store.threads()}
        checkpoints_after = sum(after_rows[t].checkpoints for t in wanted if t in after_rows)
        if args.prune_old and not args.dry_run:
            expected_new = sum(1 for r in results if r.action == "compacted")
            deleted = checkpoints_before + expected_new - checkpoints_after
            prune_note = f"deleted {deleted} old checkpoints (keep_latest) of {len(wanted)} threads"
        store.flush()
        report = CompactReport(
            store.label,
            args.dry_run,
            repr(reducer),
            results,
            prune_note,
            checkpoints_before,
            checkpoints_after,
            bytes_before,
            store.database_bytes(),
        )
    if args.json:
        print(json.dumps({**asdict(report), "threads": [asdict(t) for t in report.threads]}, indent=2))
    else:
        _print_compact(report)
    return report


def _print_compact(r: CompactReport) -> None:
    print(f"store: {r.store}; reducer: {r.reducer}{' (dry run: nothing written)' if r.dry_run else ''}")
    changed = [t for t in r.threads if t.action != "skipped" or t.reason != "within bounds"]
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
    verb = "would compact" if r.dry_run else "compacted"
    print(
        f"{_plural(r.count('compacted') + r.count('would compact'), 'thread')} {verb}, "
        f"{sum(1 for t in r.threads if t.reason == 'within bounds')} already within bounds, "
        f"{sum(1 for t in r.threads if t.action == 'skipped' and t.reason != 'within bounds')} skipped, "
        f"{r.count('failed')} failed; checkpoints {r.checkpoints_before} -> {r.checkpoints_after}"
        + (
            ""
            if r.database_bytes_after is None
            else f"; database {human_bytes(r.database_bytes_before)} -> {human_bytes(r.database_bytes_after)}"
        )
    )
    if r.prune:
        print(f"prune: {r.prune}")
    if r.count("failed"):
        print("failed threads keep their previous latest checkpoint; re-run compact to retry them")


# --- argument parsing and the console script ----------------------------------------------------


def _reducer_options(parser: argparse.ArgumentParser, *, reduce: bool) -> None:
    group = parser.add_argument_group("reducer")
    if reduce:
        group.add_argument(
            "--max-messages",
            type=int,
            default=40,
            metavar="N",
            help="prune when the history is longer than N messages (default 40)",
        )
        group.add_argument(
            "--min-messages",
            type=int,
            default=20,
            metavar="N",
            help="keep at most N messages besides the pinned ones after pruning (default 20)",
        )
        group.add_argument(
            "--max-tokens",
            type=int,
            default=None,
            metavar="N",
            help="token mode: prune when the history costs more than N tokens (overrides the message counts)",
        )
        group.add_argument(
            "--target-tokens",
            type=int,
            default=None,
            metavar="N",
            help="token mode: keep at most N tokens after pruning (default --max-tokens)",
        )
    group.add_argument(
        "--token-counter",
        choices=("heuristic", "tiktoken"),
        default="heuristic",
        help="count tokens with the chars/4 heuristic (default) or tiktoken (the tokens extra)",
    )
    group.add_argument("--encoding", default="cl100k_base", help="tiktoken encoding (default cl100k_base)")
    group.add_argument(
        "--messages-key",
        default="messages",
        metavar="KEY",
        help="the state key holding the messages (default 'messages')",
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error"
    )
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[common],
        description="Keep LangGraph checkpoints bounded: a demo, and inspect/compact for real stores.",
        epilog="STORE: sqlite:///relative/path, sqlite:////absolute/path (or a plain path), "
        "postgresql://user:pw@host:port/db, cosmosdb://host:port/database/container "
        "(key in COSMOSDB_KEY)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,inspect,compact}")

    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="run a scripted agent bare and reduced, compare storage",
        description="Run a scripted, deterministic tool-using LangGraph agent (no API key, no "
        "network) twice, on a bare saver and through ReducingCheckpointSaver, "
        "and compare what is stored.",
    )
    demo.add_argument("--turns", type=int, default=300, help="conversation turns per run (default 300)")
    demo.add_argument(
        "--store",
        metavar="URL",
        help="a real store instead of two temporary SQLite files (both runs then use their own thread in it)",
    )
    demo.add_argument(
        "--db-dir",
        metavar="DIR",
        help="keep the two SQLite files in DIR (default: a temp "
        "dir, deleted afterwards); existing demo files are replaced",
    )
    demo.add_argument("--plot", metavar="FILE.png", help="also write the growth chart as a PNG (plot extra)")
    demo.add_argument(
        "--durability",
        choices=("exit", "async", "sync"),
        default="exit",
        help="LangGraph durability: 'exit' stores one checkpoint per turn (default, fast); "
        "'async' (LangGraph's default) stores every step, about 5x more",
    )
    _reducer_options(demo, reduce=True)
    demo.set_defaults(func=run_demo)

    inspect = sub.add_parser(
        "inspect", parents=[common], help="per thread: checkpoints, messages, tokens, bytes"
    )
    inspect.add_argument("store", metavar="STORE")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    _reducer_options(inspect, reduce=False)
    inspect.set_defaults(func=run_inspect)

    compact = sub.add_parser(
        "compact",
        parents=[common],
        help="reduce the latest checkpoint of each thread",
        description="Write a reduced copy of each thread's latest checkpoint as a new "
        "checkpoint (the old ones stay unless --prune-old). Safe to interrupt "
        "and re-run: threads already within bounds are skipped.",
    )
    compact.add_argument("store", metavar="STORE")
    compact.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    compact.add_argument(
        "--prune-old",
        action="store_true",
        help="then delete all but the latest checkpoint of each thread (savers with prune(), "
        "e.g. PostgresSaver)",
    )
    compact.add_argument("--thread", action="append", metavar="ID", help="only this thread (repeatable)")
    compact.add_argument("--json", action="store_true", help="machine-readable report")
    _reducer_options(compact, reduce=True)
    compact.set_defaults(func=run_compact)
    return parser


@contextmanager
def redacted_output(argv: Sequence[str]) -> Iterator[Redactor]:
    """Route stdout and stderr through the redactor of ``argv`` (and the environment) and make it
    the active one (``one_line`` uses it) until the block ends; inside another such block, the
    outer redactor stays."""
    outer = active_redactor()
    if outer is not None:
        yield outer
        return
    redactor = Redactor.for_command(argv, os.environ)
    restore = activate_redactor(redactor)
    out, err = sys.stdout, sys.stderr
    wrapped = [RedactingStream(out, redactor.text), RedactingStream(err, redactor.text)]
    sys.stdout, sys.stderr = (cast(TextIO, w) for w in wrapped)
    try:
        yield redactor
    finally:
        for stream in wrapped:
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
                pass
        sys.stdout, sys.stderr = out, err
        restore()


def execute(argv: Sequence[str] | None = None) -> Any:
    """Run one command and return its report; errors propagate (``CliError`` for expected ones,
    its message redacted like the output)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    with redacted_output(args_list) as redactor:
        parser = build_parser()
        args = parser.parse_args(args_list)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            raise CliError("give a command: demo, inspect or compact", exit_code=2)
        try:
            return args.func(args)
        except CliError as exc:
            exc.args = (redactor.text(str(exc)),)
            raise


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: one line per error on stderr, a non-zero exit code, no traceback
    unless ``--debug``."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    with redacted_output(args_list):
        return _main(args_list)


def _main(args_list: list[str]) -> int:
    debug = "--debug" in args_list
    try:
        execute(args_list)
    except SystemExit as exc:  # argparse: --help, --version, usage errors (already printed)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except CliError as exc:
        if debug:
            traceback.print_exc()
        message = str(exc)
        # Missing-extra lines already name the command ("agentstate-reducer demo needs ...").
        print(message if message.startswith(PROG) else f"{PROG}: error: {message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing half-written: re-run to continue", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(
            f"{PROG}: error: {type(exc).__name__}: {one_line(exc)}"
            f"{'' if debug else ' (run with --debug for the traceback)'}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
