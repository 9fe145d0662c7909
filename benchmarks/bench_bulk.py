"""Each reader by columns (``agentstate_reducer._columns.bulk``) against its readable reference.

A path that reads a whole list by columns is kept only where it is at least 1.3x faster than the
reference that reads one message at a time, on the same input: 10k LangChain messages (the
conversation of ``bench_tokens``) and the same history as OpenAI-format dicts. Every time is the
median of interleaved runs in this process (CPU time, after a ``gc.collect()``); the table
reports ratios (reference time / bulk time).

* ``read_plain``: ``read_plain`` (then ``read_message`` of what it leaves) vs ``read_message``
  and ``tool_call_payloads`` of each message;
* warm check: ``map(eq, snaps, map(apply_view, fast_views(msgs), msgs))`` (dicts, compared
  whole: ``map(eq, snaps, msgs)``) vs ``unchanged`` of each message;
* warm lookup (LangChain messages): ``_columns.warm.lookup`` (the whole warm cache check by
  columns) vs ``_lookup_each``, over a cache holding every message;
* cold count: ``TokenCounter.count_messages`` without a cache (everything above at work) vs
  ``count_uncached`` of each message;
* heuristic counts: ``_heuristic_counts`` of the readings vs the rules of each reading;
* ``pinned_indices``: vs the indices whose ``read_message(m).kind`` is pinned;
* ``read_structure``: the planner's columns (kinds, call ids, answered ids, leads) vs
  ``read_message`` of each message;
* plan by table: ``_columns.table.plan_by_table`` (no memo: the window read each time) vs the reference
  ``planner.plan``, count mode, keeping half the history;
* ``json_text``: json's C encoder made once vs ``JSONEncoder.encode``, on tool-call arguments.

Snapshots are taken one message at a time (``snapshots`` is the plain map): by columns they
gained 1.0-1.25x, short of 1.3x, so they have no row.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from operator import eq
from typing import Any

from agentstate_reducer._columns import warm
from agentstate_reducer._columns.bulk import fast_views, pinned_indices, read_plain
from agentstate_reducer._columns.structure import read_structure
from agentstate_reducer._columns.table import plan_by_table
from agentstate_reducer._columns.warm import _heuristic_counts
from agentstate_reducer.messages import PINNED_KINDS, read_message, snapshots, tool_call_payloads, unchanged
from agentstate_reducer.messages.fields import apply_view
from agentstate_reducer.messages.jsontext import _JSON, json_text
from agentstate_reducer.planner import plan
from agentstate_reducer.tokens.cache import heuristic_counter
from agentstate_reducer.tokens.rules import MESSAGE_OVERHEAD, heuristic_text_tokens, plain_texts
from benchmarks.bench_tokens import conversation

TARGET = 1.3


def _timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def _read_each(msgs: list[Any]) -> list[Any]:
    out = []
    for m in msgs:
        info = read_message(m)
        out.append((info, tool_call_payloads(m) if info.call_ids else None))
    return out


def _read_bulk(msgs: list[Any]) -> list[Any]:
    read, _calls_read = read_plain(msgs, with_calls=True)
    return [info if info is not None else read_message(m) for info, m in zip(read, msgs, strict=True)]


def _pinned_each(msgs: list[Any]) -> list[int]:
    return [i for i, m in enumerate(msgs) if read_message(m).kind in PINNED_KINDS]


def _counts_each(infos: list[Any]) -> list[int]:
    return [MESSAGE_OVERHEAD + sum(map(heuristic_text_tokens, plain_texts(i))) for i in infos]


def pairs(msgs: list[Any]) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """``{path: (reference, bulk)}`` on ``msgs``."""
    snaps = snapshots(msgs)
    counter = heuristic_counter()
    cold = heuristic_counter(cache_size=0)
    for _ in range(3):  # cached from the second sight on
        counter.count_messages(msgs)
    read, _ = read_plain(msgs)
    plain = [i for i in read if i is not None]  # the readings the heuristic counts by columns
    args = [c[2] for m in msgs for c in _calls(m)]
    args_values = [a for m in msgs for a in _call_args(m)]
    assert args and args_values
    half: dict[str, Any] = {
        "trigger_cost": len(msgs),
        "budget": len(msgs) // 2,
        "preserve_first": True,
        "start_on_human": True,
    }
    assert plan_by_table(msgs, None, **half)[0] == plan(msgs, _one, count_mode=True, **half)
    by_columns = {
        "warm check": (
            lambda: [unchanged(s, m) for s, m in zip(snaps, msgs, strict=True)],
            lambda: list(map(eq, snaps, map(apply_view, fast_views(msgs) or (), msgs))),
        ),
        "warm lookup": (lambda: counter._lookup_each(msgs), lambda: warm.lookup(counter, msgs)),
    }
    if fast_views(msgs) is None:  # dicts: each compared whole with its snapshot
        by_columns = {"warm check": (by_columns["warm check"][0], lambda: list(map(eq, snaps, msgs)))}
    else:
        checked = warm.lookup(counter, msgs)
        assert checked is not None and not checked[2]  # every message answered by the cache
    return {
        "read_plain": (lambda: _read_each(msgs), lambda: _read_bulk(msgs)),
        **by_columns,
        "cold count": (
            lambda: [cold.count_uncached(m) for m in msgs],
            lambda: cold.count_messages(msgs),
        ),
        "heuristic counts": (lambda: _counts_each(plain), lambda: _heuristic_counts(plain, False)),
        "pinned_indices": (lambda: _pinned_each(msgs), lambda: pinned_indices(msgs)),
        "read_structure": (lambda: list(map(read_message, msgs)), lambda: read_structure(msgs)),
        "plan by table, keep half": (
            lambda: plan(msgs, _one, count_mode=True, **half),
            lambda: plan_by_table(msgs, None, **half)[0],
        ),
        "json_text": (
            lambda: [_JSON.encode(a) for a in args_values],
            lambda: [json_text(a) for a in args_values],
        ),
    }


def _one(i: int) -> int:
    return 1


def _calls(m: Any) -> list[tuple[str, str, str]]:
    return tool_call_payloads(m) if read_message(m).call_ids else []


def _call_args(m: Any) -> list[Any]:
    calls = m.get("tool_calls") if isinstance(m, dict) else getattr(m, "tool_calls", None)
    out = []
    for c in calls or ():
        fn = c.get("function")
        out.append((fn or c).get("arguments", c.get("args")))
    return [a if not isinstance(a, str) else {"text": a} for a in out]


def run(quick: bool = False, repeat: int = 15) -> list[dict[str, Any]]:
    from langchain_core.messages import convert_to_openai_messages

    n = 10_000
    lc = conversation(n)
    shapes = {
        "LangChain": lc,
        "OpenAI dicts": [{**m, "id": f"m{i}"} for i, m in enumerate(convert_to_openai_messages(lc))],
    }
    rows: list[dict[str, Any]] = []
    repeat = 3 if quick else repeat
    for shape, msgs in shapes.items():
        for path, (reference, bulk) in pairs(msgs).items():
            ref_t: list[float] = []
            bulk_t: list[float] = []
            for _ in range(repeat):
                ref_t.append(_timed(reference))
                bulk_t.append(_timed(bulk))
            ref_s, bulk_s = statistics.median(ref_t), statistics.median(bulk_t)
            ratio = ref_s / bulk_s
            rows.append(
                {
                    "benchmark": f"{n} {shape}, {path}: reference vs bulk",
                    "metric": f"reference {ref_s * 1e3:.2f} ms, bulk {bulk_s * 1e3:.2f} ms",
                    "ratio": round(ratio, 2),
                    "target": f">= {TARGET}x",
                    "met": ratio >= TARGET,
                }
            )
    return rows


if __name__ == "__main__":
    import sys

    reps = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 15
    for row in run(quick="--quick" in sys.argv, repeat=reps):
        print(f"{row['benchmark']:<60} {row['ratio']:>6}x  {row['metric']}")
