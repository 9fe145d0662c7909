"""The figures of one policy's run, from what the scripted model received at every call.

A framework module turns each request into OpenAI Chat dicts (its own conversion, the one its
tests use) and calls ``score``: invalid requests by ``tests.provider_rules.request_errors``
(OpenAI's and Anthropic's documented rules), conversation messages and tokens per request (mean
and max; tokens estimated as characters / 4 of the JSON of each message, the same for every
policy), the share of requests that start with the whole previous request (what a prompt cache
serves), and the counts the module passes (summarizer calls, turns whose question was lost).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tests package, also when run as a file

from tests.provider_rules import prefix_share, request_errors

#: the scripted conversation every framework runs: turns, and the run's summary trigger/keep
TURNS = 30
QUICK_TURNS = 10
MAX_MESSAGES = 40
MIN_MESSAGES = 20


def _key(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def score(
    framework: str,
    policy: str,
    requests: Sequence[list[dict[str, Any]]],
    *,
    ours: bool,
    summarizer_calls: int = 0,
    lost_turns: int = 0,
    note: str = "",
) -> dict[str, Any]:
    """One row: ``requests`` are the payloads the model received, in order, as OpenAI Chat dicts."""
    invalid = sum(1 for r in requests if request_errors(list(r)))
    convo = [[m for m in r if m.get("role") not in ("system", "developer")] for r in requests]
    msgs = [len(r) for r in convo] or [0]
    tokens = [sum(len(_key(m)) for m in r) // 4 for r in convo] or [0]
    return {
        "framework": framework,
        "policy": policy,
        "ours": ours,
        "calls": len(requests),
        "invalid": invalid,
        "msgs_mean": round(statistics.fmean(msgs), 1),
        "msgs_max": max(msgs),
        "tokens_mean": round(statistics.fmean(tokens)),
        "tokens_max": max(tokens),
        "prefix_share": round(prefix_share([[_key(m) for m in r] for r in requests]), 2),
        "summarizer_calls": summarizer_calls,
        "lost_turns": lost_turns,
        "note": note,
    }


def main(measure: Any, argv: list[str] | None = None) -> int:
    """``python -m benchmarks.frameworks.<name> [--quick]``: the module's rows as JSON."""
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps(measure(quick="--quick" in args)))
    return 0
