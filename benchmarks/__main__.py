"""``python -m benchmarks [--quick] [--runs N] [--only NAME ...]``: every benchmark module, one table.

Each selected module runs ``--runs`` times (default 1) in this process, one run after another.
With more than one run, the rows of the runs are matched by their ``benchmark`` and ``metric``
text (a row whose text changes between runs is matched by its place among the rows of the same
``benchmark``), every numeric field is reported as the median of the runs, ``ratio_range`` gives
the lowest and highest ratio, and ``met`` is judged on the median ratio: against ``target`` when
it reads ``>= X``, ``> X``, ``<= X``, ``< X`` or ``X`` (equal), optionally followed by ``x``; else
``met`` is the median of the runs' ``met`` (met in more than half of them). Text fields come from
the median run (the run whose ratio is the median; without numeric ratios, the middle run). A
target is met when the median of five runs meets it: ``--runs 5``.

A module that is missing, cannot be imported (a dependency is not installed) or fails is reported
on one line and the others still run. The exit code is 1 when a module failed, else 0; missed
targets (``met`` False, or "MISSED" in ``target``) are listed at the end but do not fail the run:
timings on a shared machine are information, not a test (tests never assert on speed).
"""

from __future__ import annotations

import argparse
import importlib
import operator
import os
import platform
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# Run as `python -m benchmarks` from the repository root; the modules import the installed package.
MODULES = (
    "bench_core",
    "bench_tokens",
    "bench_bulk",
    "bench_savers",
    "bench_cosmos",
    "bench_middleware",
    "bench_frameworks",
    "bench_cost",
    "bench_calibration",
    "bench_telemetry",
)
COLUMNS = ("module", "benchmark", "metric", "ratio", "target", "met")

_TARGET = re.compile(r"\s*(>=|<=|>|<|==)?\s*(-?\d+(?:\.\d+)?)\s*x?\s*")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
}


def machine() -> str:
    """One line naming the machine, for the README's benchmark table."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{when}; {cpu}, {os.cpu_count()} CPUs; Python {platform.python_version()} "
        f"on {platform.system()} {platform.release()}"
    )


def fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def to_row(module: str, result: dict[str, Any]) -> list[str]:
    """The table's fixed columns, then every other field as ``key=value`` in a details column."""
    fields = dict(result)
    name = fields.pop("benchmark", fields.pop("name", ""))
    row = [module, fmt(name)] + [fmt(fields.pop(c, None)) for c in COLUMNS[2:]]
    row.append(" ".join(f"{k}={fmt(v)}" for k, v in fields.items()))
    return row


def print_table(rows: list[list[str]]) -> None:
    headers = [*COLUMNS, "details"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def judge(target: Any, ratio: Any) -> bool | None:
    """``ratio`` against a target such as ``">= 3"``, ``"<= 12"``, ``"< 0.05"``, ``">= 1.3x"`` or
    ``"0"`` (equal); None when the target is not of that form or the ratio is not a number."""
    if not isinstance(target, str) or not _is_number(ratio):
        return None
    match = _TARGET.fullmatch(target)
    if match is None:
        return None
    op, threshold = match.group(1) or "==", float(match.group(2))
    return _COMPARE[op](float(ratio), threshold)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _name(row: dict[str, Any]) -> str:
    return str(row.get("benchmark", row.get("name", "")))


def _keys(rows: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per row: (its benchmark and metric text, with the occurrence number of that pair) and (its
    benchmark text with its place among the rows of that benchmark)."""
    seen_text: dict[tuple[str, str], int] = {}
    seen_name: dict[str, int] = {}
    keys: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    for row in rows:
        text = (_name(row), str(row.get("metric", "")))
        name = _name(row)
        seen_text[text] = seen_text.get(text, 0) + 1
        seen_name[name] = seen_name.get(name, 0) + 1
        keys.append(((*text, str(seen_text[text])), (name, str(seen_name[name]))))
    return keys


def match_runs(runs: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The rows of several runs of one module, grouped: one list per row of the first run that
    has a match (by benchmark and metric text, else by place among its benchmark's rows) in every
    run, then rows that did not match in every run, each group as far as it matched."""
    keyed = [_keys(rows) for rows in runs]
    by_text = [
        {k[0]: row for k, row in zip(keys, rows, strict=True)} for keys, rows in zip(keyed, runs, strict=True)
    ]
    by_name = [
        {k[1]: row for k, row in zip(keys, rows, strict=True)} for keys, rows in zip(keyed, runs, strict=True)
    ]
    groups: list[list[dict[str, Any]]] = []
    used: set[int] = set()
    for run_index, (keys, rows) in enumerate(zip(keyed, runs, strict=True)):
        for (text, name), row in zip(keys, rows, strict=True):
            if id(row) in used:
                continue
            later = by_text[run_index:]
            if all(text in table for table in later) and not any(id(t[text]) in used for t in later):
                group = [table[text] for table in later]
            elif all(name in table for table in by_name[run_index:]) and not any(
                id(t[name]) in used for t in by_name[run_index:]
            ):
                group = [table[name] for table in by_name[run_index:]]
            else:
                group = [row]
            used.update(id(r) for r in group)
            groups.append(group)
    return groups


def combine(group: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """One row from the matched rows of several runs: medians of the numeric fields, ``met``
    judged on the median ratio, text from the median run (see the module docstring)."""
    if runs == 1 and len(group) == 1:
        return dict(group[0])
    ratios: list[Any] = [r.get("ratio") for r in group]
    numeric = all(_is_number(x) for x in ratios)
    order = sorted(range(len(group)), key=lambda i: float(ratios[i])) if numeric else list(range(len(group)))
    median_run = group[order[(len(group) - 1) // 2]]
    out: dict[str, Any] = {}
    for row in group:
        for field in row:
            if field in out or field == "met":
                continue
            values: list[Any] = [r.get(field) for r in group]
            if all(_is_number(v) for v in values):
                out[field] = statistics.median(values)
            else:
                out[field] = median_run.get(field)
    if numeric and len(group) > 1:
        low, high = min(ratios), max(ratios)
        out["ratio_range"] = f"{fmt(low)}-{fmt(high)}"
    if any("met" in r for r in group):
        met = judge(out.get("target"), out.get("ratio"))
        if met is None:
            votes = [r.get("met") for r in group]
            met = None if any(v is None for v in votes) else sum(map(bool, votes)) * 2 > len(votes)
        out["met"] = met
    if len(group) < runs:
        out["runs"] = f"{len(group)} of {runs} (the row did not match in every run)"
    return out


def run_module(name: str, quick: bool, debug: bool, runs: int = 1) -> tuple[list[dict[str, Any]] | None, str]:
    """``(rows, status line)``: the module run ``runs`` times, one row per matched benchmark (see
    the module docstring); rows is None when the module is absent or a run failed."""
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"benchmarks.{name}":
            return None, f"{name}: not present (benchmarks/{name}.py does not exist yet), skipped"
        return (
            None,
            f"{name}: cannot import it: {exc} (install the dev extras: pip install -e '.[dev]'), skipped",
        )
    except ImportError as exc:
        return None, f"{name}: cannot import it: {exc}, skipped"
    run = getattr(module, "run", None)
    if not callable(run):
        return None, f"{name}: has no run(quick) function, skipped"
    start = time.perf_counter()
    results: list[list[dict[str, Any]]] = []
    for index in range(runs):
        if runs > 1:
            print(f"  {name}: run {index + 1} of {runs}", file=sys.stderr, flush=True)
        try:
            results.append(list(run(quick)))
        except Exception as exc:
            if debug:
                traceback.print_exc()
            where = f" in run {index + 1} of {runs}" if runs > 1 else ""
            return None, f"{name}: FAILED{where}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    rows = [combine(group, runs) for group in match_runs(results)]
    what = f"median of {runs} runs, " if runs > 1 else ""
    return rows, f"{name}: {len(rows)} rows ({what}{time.perf_counter() - start:.1f} s)"


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"--runs must be 1 or more, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a smoke run)")
    parser.add_argument(
        "--runs",
        type=positive,
        default=1,
        metavar="N",
        help="run each module N times and report the median of the runs per row (default 1; "
        "a target is met when the median of five runs meets it: --runs 5)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=MODULES,
        metavar="NAME",
        help=f"run only this module (repeatable): {', '.join(MODULES)}",
    )
    parser.add_argument("--debug", action="store_true", help="print the traceback of a failing module")
    args = parser.parse_args(argv)
    runs = "one run" if args.runs == 1 else f"median of {args.runs} runs"
    print(f"benchmarks{' (quick)' if args.quick else ''}, {runs}: {machine()}", flush=True)
    rows: list[list[str]] = []
    statuses: list[str] = []
    failed = False
    missed: list[str] = []
    for name in args.only or MODULES:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results, status = run_module(name, args.quick, args.debug, args.runs)
        statuses.append(status)
        failed = failed or "FAILED" in status
        for result in results or []:
            if result.get("met") is False or "MISSED" in str(result.get("target", "")):
                label = _name(result) or "?"
                if result.get("metric"):
                    label += f" ({result['metric']})"
                missed.append(f"{name}: {label}")
            rows.append(to_row(name, result))
    print()
    if rows:
        print_table(rows)
        print()
    for status in statuses:
        print(status)
    if missed:
        print(f"targets missed ({len(missed)}):")
        for item in missed:
            print(f"  {item}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
