"""Agent frameworks' own history handling against ours, on the same scripted conversation.

Per framework (``benchmarks/frameworks/<name>.py``), the framework's real agent loop with a
scripted model: ``TURNS`` turns (``QUICK_TURNS`` with ``--quick``), each a question, a tool call,
two parallel tool calls, then an answer; one row per policy: no handling, each built-in handling,
and ours (the integration with ``max_messages=40, min_messages=20`` and a summarizer). Figures,
from what the model received at every call (``benchmarks/frameworks/_score.py``): invalid
requests (OpenAI's or Anthropic's rules), conversation messages and tokens per request (mean,
max), the share of requests that extend the previous one (prompt-cache prefix), summarizer calls.
No timings: these are counts.

CrewAI cannot share an environment with google-adk 2.x: when ``crewai`` is not importable here,
its module runs in the interpreter named by ``AGENTSTATE_CREWAI_PYTHON`` (default
``.venv-crewai/bin/python``, the environment ``scripts/test.sh`` makes).
``python -m benchmarks.bench_frameworks [--quick] [--markdown]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package, also when run as a file

#: framework module -> the package it needs
FRAMEWORKS: dict[str, str] = {
    "crewai": "crewai",
    "pydantic_ai": "pydantic_ai",
    "google_adk": "google.adk",
    "autogen": "autogen_agentchat",
    "agent_framework": "agent_framework",
    "smolagents": "smolagents",
    "agno": "agno",
    "llama_index": "llama_index.core",
}


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        return False


def _elsewhere(name: str, quick: bool) -> list[dict[str, Any]]:
    default = ROOT / f".venv-{name}" / "bin" / "python"
    python = os.environ.get(f"AGENTSTATE_{name.upper()}_PYTHON", str(default))
    if not Path(python).exists():
        raise RuntimeError(
            f"{name} is not installed here and {python} does not exist: run scripts/test.sh once, or set "
            f"AGENTSTATE_{name.upper()}_PYTHON to an interpreter that has it"
        )
    args = [python, "-m", f"benchmarks.frameworks.{name}", *(["--quick"] if quick else [])]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-2000:]}")
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def measure(quick: bool = False, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for name, package in FRAMEWORKS.items():
        if only and name not in only:
            continue
        if _installed(package):
            module = importlib.import_module(f"benchmarks.frameworks.{name}")
            results += module.measure(quick)
        else:
            results += _elsewhere(name, quick)
    return results


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: invalid requests (target 0 for ours), the rest as details."""
    rows = []
    for r in measure(quick):
        rows.append(
            {
                "benchmark": f"{r['framework']}/{r['policy']}",
                "metric": "invalid requests",
                "ratio": r["invalid"],
                "target": "0" if r["ours"] else "",
                "met": r["invalid"] == 0 if r["ours"] else None,
                **{k: v for k, v in r.items() if k not in ("framework", "policy", "ours", "invalid")},
            }
        )
    return rows


def markdown(results: list[dict[str, Any]]) -> str:
    head = (
        "| framework | policy | calls | invalid | msgs mean / max | tokens mean / max | prefix share "
        "| summarizer calls | lost turns |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r['framework']} | {r['policy']} | {r['calls']} | {r['invalid']} "
        f"| {r['msgs_mean']} / {r['msgs_max']} "
        f"| {r['tokens_mean']} / {r['tokens_max']} | {r['prefix_share']} | {r['summarizer_calls']} "
        f"| {r['lost_turns']} |"
        for r in results
    ]
    return "\n".join([head, *lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", action="append", default=[], choices=sorted(FRAMEWORKS))
    args = parser.parse_args(argv)
    results = measure(args.quick, tuple(args.only))
    if args.markdown:
        print(markdown(results))
    else:
        for r in results:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
