"""``agentstate-reducer``: the demo, and inspect/compact for real checkpoint stores.

    agentstate-reducer demo [--turns 300] [--plot growth.png] [--store URL] [--json]
    agentstate-reducer inspect STORE [--json]
    agentstate-reducer compact STORE [--thread T] [--keep-last N] [--older-than 30d] [--vacuum]
                                     [--dry-run] [--yes] [--force] [--max-messages 40 --min-messages 20]
                                     [--offload [--min-bytes 4096] [--tool-min-bytes N]]

STORE is ``sqlite:///path`` (or a plain file path), ``postgresql://...`` (or libpq's keyword
form, ``host=... dbname=...``) or ``cosmosdb://...`` (see ``urls``). The CLI imports nothing
beyond the standard library and the core at import time: langgraph, psycopg, azure-cosmos and
matplotlib are imported by the command that needs them, and a missing one is reported as one line
naming the extra to install.

``execute(argv)`` runs a command and returns its report (a dataclass) for programs and tests;
``main(argv)`` is the console script: it prints errors as one line and returns the exit code.

Secrets never reach the output: while a command runs, stdout and stderr pass through one
``Redactor`` (``redact``) made from the command line's URLs and the secret environment variables,
and so do the messages of the ``CliError`` it raises. What argparse, warnings, a ``--debug``
traceback or a driver's error text write goes through the same streams.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, cast

from agentstate_reducer import __version__

from .compact import VALUE_OPTIONS, add_compact_options, run_compact
from .demo import run_demo
from .errors import PROG, CliError, one_line
from .inspect import run_inspect
from .options import add_reducer_options
from .redact import RedactingStream, Redactor, activate_redactor, active_redactor

STORE_FORMS = (
    "STORE: sqlite:///relative/path, sqlite:////absolute/path (or a plain path), "
    "postgresql://user@host:port/db (password in PGPASSWORD) or libpq's 'host=... dbname=... user=...', "
    "cosmosdb://host:port/database/container (key in COSMOSDB_KEY)"
)
STORE_HELP = "the checkpoint store: a SQLite file, a PostgreSQL or a Cosmos DB URL (forms below)"


def build_parser() -> argparse.ArgumentParser:
    """The command line. Each subcommand parser is also set as its ``parser`` default, so an
    unknown option is reported with that subcommand's usage (``execute``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error"
    )
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[common],
        description="Keep LangGraph checkpoints bounded: a demo, and inspect/compact for real stores.",
        epilog=STORE_FORMS,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{demo,inspect,compact}")

    demo = commands.add_parser(
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
    demo.add_argument(
        "--plot",
        metavar="FILE",
        help="also write the growth chart to FILE: .png, .svg or .pdf, by the extension (plot extra)",
    )
    demo.add_argument(
        "--durability",
        choices=("exit", "async", "sync"),
        default="exit",
        help="LangGraph durability: 'exit' stores one checkpoint per turn (default, fast); "
        "'async' (LangGraph's default) stores every step, about 5x more",
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="print the run's figures (storage, and the model calls' tokens and cost per policy) as "
        "one JSON object, nothing else on stdout",
    )
    add_reducer_options(demo, reduce=True)
    demo.set_defaults(parser=demo, func=run_demo)

    inspect_parser = commands.add_parser(
        "inspect",
        parents=[common],
        help="per thread: checkpoints, messages, tokens, bytes",
        description="Per thread of STORE: its checkpoints, the messages and tokens of its latest "
        "checkpoint, and the bytes stored. Reads only (SQLite is opened read-only).",
        epilog=STORE_FORMS,
    )
    inspect_parser.add_argument("store", metavar="STORE", help=STORE_HELP)
    inspect_parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_reducer_options(inspect_parser, reduce=False)
    inspect_parser.set_defaults(parser=inspect_parser, func=run_inspect)

    compact_parser = commands.add_parser(
        "compact",
        parents=[common],
        help="reduce the latest checkpoint of each thread; delete old checkpoints and idle threads",
        description="Per thread of STORE: delete it whole when idle (--older-than), write a reduced "
        "copy of its latest checkpoint as a new checkpoint, and keep only its newest --keep-last "
        "checkpoints. Deleting runs ask for confirmation (--yes without a terminal); --dry-run "
        "reports the numbers the run would report. Safe to interrupt and re-run.",
        epilog=STORE_FORMS,
    )
    compact_parser.add_argument("store", metavar="STORE", help=STORE_HELP)
    add_compact_options(compact_parser)
    add_reducer_options(compact_parser, reduce=True)
    compact_parser.set_defaults(parser=compact_parser, func=run_compact)
    return parser


@contextmanager
def redacted_output(argv: Sequence[str]) -> Iterator[Redactor]:
    """Route stdout and stderr through the redactor of ``argv`` (and the environment) and make it
    the active one (``one_line`` uses it) until the block ends; inside another such block, the
    outer redactor stays. A block that ends while the reader of either stream has gone raises
    ``BrokenPipeError``."""
    outer = active_redactor()
    if outer is not None:
        yield outer
        return
    redactor = Redactor.for_command(argv, os.environ)
    restore = activate_redactor(redactor)
    out, err = sys.stdout, sys.stderr
    wrapped = [RedactingStream(out, redactor.text), RedactingStream(err, redactor.text)]
    sys.stdout, sys.stderr = (cast(TextIO, w) for w in wrapped)
    reader_gone = False
    try:
        yield redactor
    finally:
        for stream in wrapped:
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
                pass
            reader_gone = reader_gone or stream.reader_gone
        sys.stdout, sys.stderr = out, err
        restore()
    if reader_gone:  # seen, and swallowed, by a writer such as argparse's: said here (``main``)
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def execute(argv: Sequence[str] | None = None) -> Any:
    """Run one command and return its report; errors propagate (``CliError`` for expected ones,
    its message redacted like the output)."""
    args_list = _join_dash_values(list(sys.argv[1:] if argv is None else argv))
    with redacted_output(args_list) as redactor:
        parser = build_parser()
        args, unknown = parser.parse_known_args(args_list)
        if unknown:  # shown with the usage of the subcommand they were given to
            getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            raise CliError("give a command: demo, inspect or compact", exit_code=2)
        try:
            return args.func(args)
        except CliError as exc:
            exc.args = (redactor.text(str(exc)),)
            raise


#: The exit status when the reader of the output went away (``inspect ... | head``): what a shell
#: reports for a process that SIGPIPE ended, as for the other tools of a pipeline.
EXIT_READER_GONE = 128 + int(getattr(signal, "SIGPIPE", 13))


def _join_dash_values(args: list[str]) -> list[str]:
    """``--older-than -5d`` as ``--older-than=-5d`` (``compact.VALUE_OPTIONS``), up to a ``--``."""
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out += [arg, *rest]
            break
        following = next(rest, None) if arg in VALUE_OPTIONS else None
        if following is not None and following.startswith("-") and following[1:2].isdigit():
            out.append(f"{arg}={following}")
        else:
            out += [arg] if following is None else [arg, following]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: one line per error on stderr, a non-zero exit code, no traceback
    unless ``--debug``. When the reader of stdout (or stderr) goes away (``... | head``), it
    stops writing and exits quietly with ``EXIT_READER_GONE``; the work is not cut short by it:
    progress lines are dropped, and the report is printed after the work."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        with redacted_output(args_list), warnings.catch_warnings():
            warnings.showwarning = _warning_line
            code = _run_and_report(args_list)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # a closed pipe shows here at the latest, not in Python's exit handler
    except BrokenPipeError:
        _discard_output()
        return EXIT_READER_GONE
    return code


def _discard_output() -> None:
    """Point stdout and stderr at the null device, so what is still buffered for the reader that
    went away is dropped at exit instead of failing there ("Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):  # not a file (a test's capture): nothing to drop
                pass
    finally:
        os.close(devnull)


def _reader_gone() -> bool:
    """Whether the reader of the command's stdout or stderr went away (not a network peer)."""
    return any(getattr(stream, "reader_gone", False) for stream in (sys.stdout, sys.stderr))


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as one line on stderr, like the errors (not Python's file:line and source line)."""
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _run_and_report(args_list: list[str]) -> int:
    """Run the command of ``args_list``, printing each error as one line; the exit code."""
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
        if isinstance(exc, BrokenPipeError) and _reader_gone():
            raise  # nobody reads: nothing more to say (main)
        if debug:
            traceback.print_exc()
        # a LookupError of ours (a missing or corrupt blob) ends with what to do: never cut it
        ours = isinstance(exc, LookupError) and type(exc).__module__.startswith("checkpointers.")
        limit = 1000 if ours else 300
        print(
            f"{PROG}: error: {type(exc).__name__}: {one_line(exc, limit)}"
            f"{'' if debug else ' (run with --debug for the traceback)'}",
            file=sys.stderr,
        )
        return 1
    return 0
