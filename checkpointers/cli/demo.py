"""``agentstate-reducer demo``: a scripted agent run twice, on a bare saver and through
``ReducingCheckpointSaver``, and what each stored.

By default each run gets its own temporary SQLite file (``--db-dir`` keeps them); with ``--store``
both runs write their own thread in that database, which is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .demo_cost import PolicyCost, policy_costs, prices_json
from .errors import PROG, CliError, require
from .options import TokenCounter, count_tokens, reducer_from
from .render import Progress, ascii_chart, chart_format, human_bytes, table, write_chart
from .stores import CheckpointDb, open_checkpoint_db
from .urls import in_text


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
    #: what each model call of the run was sent, in order
    calls: list[list[Any]] = field(default_factory=list, repr=False)

    def as_json(self) -> dict[str, Any]:
        return {
            "saver": self.saver,
            "thread_id": self.thread_id,
            "turns": self.turns,
            "messages": self.messages,
            "tokens": self.tokens,
            "stored_bytes": self.stored_bytes,
            "database_bytes": self.database_bytes,
            "wall_seconds": round(self.wall_seconds, 3),
            "reductions": self.reductions,
            "model_calls": len(self.calls),
            "growth": self.growth,
        }


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
    #: what to give ``inspect`` for each of ``kept_paths`` (the store's label)
    kept_stores: list[str] = field(default_factory=list)
    temporary: bool = False  # the default SQLite files, deleted after the run (--db-dir keeps them)
    #: the model calls of the run priced under each policy (``demo_cost``)
    policies: list[PolicyCost] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The run's figures, storage and cost, as ``demo --json`` prints them."""
        return {
            "turns": self.bare.turns,
            "durability": self.durability,
            "store": self.store,
            "bytes_meaning": self.bytes_meaning,
            "reducer": self.reducer,
            "token_counter": self.token_counter,
            "storage": {"bare": self.bare.as_json(), "reduced": self.reduced.as_json()},
            "prices": prices_json(),
            "policies": {p.name: p.as_json() for p in self.policies},
            "kept": self.kept_paths,
            "temporary": self.temporary,
        }


def check_plot_path(path: str) -> None:
    """``CliError`` unless a chart can be written at ``path``: checked before the run, so a typo
    never costs a whole demo. The extension names the format (png, svg or pdf)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliError(f"--plot {path!r} is a directory: give a file name such as growth.png", exit_code=2)
    try:
        chart_format(path)
    except ValueError as exc:
        raise CliError(f"--plot {exc}", exit_code=2) from None
    folder = target.parent
    if not folder.is_dir():
        raise CliError(
            f"--plot {path!r}: directory {str(folder)!r} does not exist (create it first)", exit_code=2
        )
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CliError(f"--plot {path!r}: no permission to write there", exit_code=2)


def db_dir(path: str) -> Path:
    """The ``--db-dir`` folder, created when missing; ``CliError`` saying why it cannot hold the
    demo's files (before the run, so nothing is lost)."""
    base = Path(path).expanduser()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CliError(f"--db-dir {path!r} is a file, not a folder: give a folder", exit_code=2) from None
    except OSError as exc:
        existing = next(p for p in (base.absolute(), *base.absolute().parents) if p.exists())
        why = (
            f"{str(existing)!r} is a file, not a folder"
            if not existing.is_dir()
            else f"cannot create a folder in {str(existing)!r} ({exc.strerror or exc})"
        )
        raise CliError(
            f"--db-dir {path!r}: {why}; give a folder you can write to (it is created when missing)",
            exit_code=2,
        ) from None
    if not os.access(base, os.W_OK | os.X_OK):
        raise CliError(f"--db-dir {path!r}: no permission to write in the folder", exit_code=2)
    return base


def chart_title(turns: int, reducer: str) -> str:
    """The image chart's title: each point is the thread's stored total after that turn."""
    return f"Stored bytes of the thread after each turn (running total, {turns} turns)\n{reducer}"


def _demo_run(
    name: str,
    db: CheckpointDb,
    saver: Any,
    thread_id: str,
    graph_module: Any,
    *,
    turns: int,
    durability: str,
    counter: TokenCounter,
    messages_key: str,
    separate_file: bool,
    reductions: Callable[[], int],
) -> DemoRun:
    from checkpointers.compact import checkpoint_messages

    calls: list[list[Any]] = []
    # One object per message id: every turn reads the history back from the store as new
    # objects, and the demo's ids name one unchanging message each, so the cost model compares
    # and counts each message once (identity) instead of field by field at every call.
    canonical: dict[str, Any] = {}

    def sent(messages: list[Any]) -> None:
        calls.append([canonical.setdefault(m.id, m) if m.id else m for m in messages])

    graph = graph_module.build_demo_graph(saver, on_model_call=sent)
    config = {"configurable": {"thread_id": thread_id}}
    growth: list[int | None] = []
    wall = 0.0
    with Progress(turns, f"{name:>7}") as bar:
        for turn in range(1, turns + 1):
            start = time.perf_counter()
            graph.invoke(graph_module.turn_input(turn), config, durability=durability)
            wall += time.perf_counter() - start
            growth.append(db.thread_bytes(thread_id))
            bar.update()
    latest = db.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    messages = checkpoint_messages(latest, messages_key) or []
    database_bytes = None
    if separate_file:
        db.flush()
        database_bytes = db.database_bytes()
    inner = type(db.saver).__name__
    return DemoRun(
        name=name,
        # The wrapper's class carries its mirrored capabilities in its name ("...[prune]").
        saver=inner if saver is db.saver else f"{type(saver).__name__.split('[')[0]}({inner})",
        thread_id=thread_id,
        turns=turns,
        messages=len(messages),
        tokens=count_tokens(counter, messages) or 0,
        stored_bytes=growth[-1] if growth else db.thread_bytes(thread_id),
        database_bytes=database_bytes,
        wall_seconds=wall,
        growth=growth,
        reductions=reductions(),
        calls=calls,
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
        check_plot_path(args.plot)
        require("matplotlib", extra="plot", feature=f"{feature} --plot")
    graph_module = require("checkpointers.cli.demo_graph", extra="langgraph", feature=feature)
    require("langgraph.checkpoint.sqlite", extra="langgraph", feature=feature)
    from checkpointers.saver import ReducingCheckpointSaver

    reducer, counter, counter_name = reducer_from(args)
    pruned_puts = 0

    def on_reduce(report: Any) -> None:
        nonlocal pruned_puts
        if report.stats is not None and report.stats.pruned_count:
            pruned_puts += 1

    tmp_dir: str | None = None
    dbs: list[CheckpointDb] = []
    try:
        if args.store:
            shared = open_checkpoint_db(args.store, create=True, feature=feature)
            dbs = [shared]
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
            runs_to_make = [
                ("bare", shared, f"demo-bare-{stamp}"),
                ("reduced", shared, f"demo-reduced-{stamp}"),
            ]
            separate = False
            kept = [f"{in_text(shared.label)} threads demo-bare-{stamp}, demo-reduced-{stamp}"]
            kept_stores = [shared.label]
        else:
            if args.db_dir:
                base = db_dir(args.db_dir)
            else:
                tmp_dir = tempfile.mkdtemp(prefix="agentstate-demo-")
                base = Path(tmp_dir)
            runs_to_make = []
            for name in ("bare", "reduced"):
                path = base / f"demo-{name}.sqlite"
                for suffix in ("", "-wal", "-shm"):  # our own demo files from an earlier run
                    Path(str(path) + suffix).unlink(missing_ok=True)
                db = open_checkpoint_db(f"sqlite:///{path}", create=True, feature=feature)
                # Throwaway files: WAL with synchronous=NORMAL stays consistent after a crash but
                # skips an fsync per commit, which would otherwise dominate the run on slow disks.
                # Both runs get the same setting, so the comparison is unaffected.
                db.saver.conn.execute("PRAGMA synchronous=NORMAL")
                dbs.append(db)
                runs_to_make.append((name, db, f"demo-{name}"))
            separate = True
            kept = [] if tmp_dir else [f"sqlite:///{base / f'demo-{n}.sqlite'}" for n in ("bare", "reduced")]
            kept_stores = kept
        runs = []
        for name, db, thread_id in runs_to_make:
            saver = db.saver
            if name == "reduced":
                saver = ReducingCheckpointSaver(
                    db.saver, reducer, messages_key=args.messages_key, on_reduce=on_reduce
                )
            runs.append(
                _demo_run(
                    name,
                    db,
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
            store=dbs[0].label if args.store else "SQLite files (one per run)",
            bytes_meaning=dbs[0].bytes_meaning,
            reducer=repr(reducer),
            token_counter=counter_name,
            durability=args.durability,
            bare=runs[0],
            reduced=runs[1],
            plot=args.plot,
            kept_paths=kept,
            kept_stores=kept_stores,
            temporary=tmp_dir is not None,
            policies=policy_costs(
                runs[0].calls,
                runs[1].calls,
                reducer,
                counter,
                bare_bytes=runs[0].stored_bytes,
                reduced_bytes=runs[1].stored_bytes,
            ),
        )
    finally:
        for db in dbs:
            db.close()
        if tmp_dir:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    if getattr(args, "json", False):
        print(json.dumps(report.as_json(), indent=2))
    else:
        _print_demo(report)
    if args.plot:
        # After the results are printed: a chart that cannot be written loses nothing else.
        try:
            write_chart(
                args.plot,
                [(f"bare {runs[0].saver}", runs[0].growth), (f"reduced {runs[1].saver}", runs[1].growth)],
                title=chart_title(args.turns, report.reducer),
            )
        except OSError as exc:
            raise CliError(
                f"the results above are complete, but the chart could not be written to "
                f"{args.plot!r}: {exc.strerror or exc}"
            ) from exc
        # --json: stdout holds the JSON object alone
        out = sys.stderr if getattr(args, "json", False) else sys.stdout
        print(f"chart written to {args.plot}", file=out)
    return report


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def _print_demo(report: DemoReport) -> None:
    bare, reduced = report.bare, report.reduced
    print(
        f"{PROG} demo: {bare.turns} turns of a scripted tool-using agent (4 messages a turn), "
        f"durability={report.durability}"
    )
    print(f"store: {report.store}; reducer: {report.reducer}; tokens: {report.token_counter}")
    print()
    headers = ["run", "saver", "turns", "messages", "tokens", "stored bytes", "database bytes", "wall time"]
    rows = [
        [
            run.name,
            run.saver,
            run.turns,
            run.messages,
            run.tokens,
            human_bytes(run.stored_bytes),
            human_bytes(run.database_bytes),
            f"{run.wall_seconds:.2f} s",
        ]
        for run in (bare, reduced)
    ]
    rows.append(
        [
            "bare/reduced",
            "",
            "",
            _ratio(bare.messages, reduced.messages),
            _ratio(bare.tokens, reduced.tokens),
            _ratio(bare.stored_bytes, reduced.stored_bytes),
            _ratio(bare.database_bytes, reduced.database_bytes),
            _ratio(bare.wall_seconds, reduced.wall_seconds),
        ]
    )
    print(table(headers, rows, right=[False, False, True, True, True, True, True, True]))
    print()
    if report.policies:
        _print_costs(report.policies)
        print()
    if any(v is not None for v in bare.growth):
        print(
            ascii_chart(
                [("bare", "*", bare.growth), ("reduced", "o", reduced.growth)],
                title="stored bytes of the thread after each turn",
            )
        )
    else:
        print("(this store does not report per-thread bytes: no growth chart)")
    print()
    print(
        f"messages and tokens: the latest stored checkpoint; the reducer pruned on {reduced.reductions} puts."
    )
    print(f"bytes: {report.bytes_meaning}.")
    for kept, store in zip(report.kept_paths, report.kept_stores, strict=True):
        print(f"kept: {kept}  (try: {PROG} inspect {shlex.quote(store)})")
    if report.temporary:
        print("the two SQLite files were temporary and are deleted; --db-dir DIR keeps them for inspect")


def _money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def _print_costs(policies: list[PolicyCost]) -> None:
    """The model calls of the run under each policy: tokens sent, the share a prompt cache can
    serve and the input cost at the example prices, per provider."""
    from agentstate_reducer.cost import EXAMPLE_PRICES

    none = policies[0]
    none_cost = none.reports["anthropic"].cost
    oa, an = EXAMPLE_PRICES["openai"], EXAMPLE_PRICES["anthropic"]
    print(
        f"what the model was sent over the run ({none.calls} calls), input cost at example prices "
        f"of {an.taken} ({an.model}, {oa.model}; see docs/cost.md):"
    )
    headers = ["policy", "stored bytes", "tokens sent", "cached (Anthropic)", "Anthropic",
               "cached (OpenAI)", "OpenAI", "Anthropic / none"]
    rows = []
    for p in policies:
        a, o = p.reports["anthropic"], p.reports["openai"]
        rows.append(
            [
                p.name,
                human_bytes(p.stored_bytes),
                f"{p.input_tokens:,}",
                f"{a.cache_share:.0%}",
                _money(a.cost),
                f"{o.cache_share:.0%}",
                _money(o.cost),
                "" if p is none else f"{a.cost / none_cost:.2f}x" if none_cost else "-",
            ]
        )
    print(table(headers, rows, right=[False, *([True] * 7)]))
    for p in policies:
        print(f"  {p.name}: {p.description}")
