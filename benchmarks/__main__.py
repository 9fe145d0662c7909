"""``python -m benchmarks [--quick] [--only NAME ...]``: every benchmark module, one table of ratios.

A module that is missing, cannot be imported (a dependency is not installed) or fails is reported
on one line and the others still run. The exit code is 1 when a module failed, else 0; missed
targets (``met`` False, or "MISSED" in ``target``) are listed at the end but do not fail the run:
timings on a shared machine are information, not a test (tests never assert on speed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# Run as `python -m benchmarks` from the repository root; the modules import the installed package.
MODULES = ("bench_core", "bench_tokens", "bench_bulk", "bench_savers", "bench_cosmos", "bench_middleware")
COLUMNS = ("module", "benchmark", "metric", "ratio", "target", "met")


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


def run_module(name: str, quick: bool, debug: bool) -> tuple[list[dict[str, Any]] | None, str]:
    """``(results, status line)``; results is None when the module is absent or failed."""
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
    try:
        results = list(run(quick))
    except Exception as exc:
        if debug:
            traceback.print_exc()
        return None, f"{name}: FAILED: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return results, f"{name}: {len(results)} rows in {time.perf_counter() - start:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a smoke run)")
    parser.add_argument(
        "--only",
        action="append",
        choices=MODULES,
        metavar="NAME",
        help=f"run only this module (repeatable): {', '.join(MODULES)}",
    )
    parser.add_argument("--debug", action="store_true", help="print the traceback of a failing module")
    args = parser.parse_args(argv)
    print(f"benchmarks{' (quick)' if args.quick else ''}: {machine()}", flush=True)
    rows: list[list[str]] = []
    statuses: list[str] = []
    failed = False
    missed: list[str] = []
    for name in args.only or MODULES:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results, status = run_module(name, args.quick, args.debug)
        statuses.append(status)
        failed = failed or "FAILED" in status
        for result in results or []:
            if result.get("met") is False or "MISSED" in str(result.get("target", "")):
                missed.append(f"{name}: {result.get('benchmark', result.get('name', '?'))}")
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
