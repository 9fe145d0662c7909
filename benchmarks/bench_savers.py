"""Speed and size of ``ReducingCheckpointSaver`` over ``SqliteSaver`` (a file), against the bare saver.

1. Conversation: the deterministic tool-using agent of ``tests/scenario_graph.py`` runs N turns
   (500; 100 with ``quick``) through a compiled graph on one thread, once on a bare SqliteSaver
   and once wrapped with ``MessageReducer(min_messages=20, max_messages=40)``. Reported as
   bare / wrapped ratios: bytes of the latest checkpoint row, total database bytes (after a WAL
   checkpoint), wall time. Targets (issue 4): latest checkpoint >= 10x smaller, database >= 5x
   smaller, wall time no worse than bare (ratio >= 1).
2. Put overhead: ``put`` of a checkpoint whose 30 messages need no reduction (under
   ``max_messages``), wrapped vs bare, interleaved, median of many puts. Target: < 10% of the bare
   put. Also reported, without a target: the same with the messages channel not in new_versions.

Every ratio is measured against a baseline run in the same process. Run:
``python benchmarks/bench_savers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, also when run as a file

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from tests.scenario_graph import (
    ScriptedToolModel,
    build_graph,
    human_message,
    run_turns,
    system_message,
    thread_config,
)

MIN_MESSAGES, MAX_MESSAGES = 20, 40
CONTENT_CHARS = 200


def _reducer() -> MessageReducer:
    return MessageReducer(min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES)


def _sqlite_saver(path: Path) -> tuple[SqliteSaver, sqlite3.Connection]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def _db_bytes(conn: sqlite3.Connection, path: Path) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def conversation(turns: int, *, wrapped: bool, workdir: Path) -> dict[str, Any]:
    path = workdir / ("wrapped.db" if wrapped else "bare.db")
    saver, conn = _sqlite_saver(path)
    checkpointer: Any = ReducingCheckpointSaver(saver, _reducer()) if wrapped else saver
    graph = build_graph(checkpointer, content_chars=CONTENT_CHARS)
    start = time.perf_counter()
    run_turns(graph, turns, thread_id="bench", content_chars=CONTENT_CHARS)
    wall = time.perf_counter() - start
    latest = conn.execute(
        "SELECT length(checkpoint) + length(metadata) FROM checkpoints WHERE thread_id = 'bench' "
        "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
    ).fetchone()[0]
    stored = len(graph.get_state(thread_config("bench")).values["messages"])
    size = _db_bytes(conn, path)
    conn.close()
    return {"wall_s": wall, "latest_bytes": latest, "db_bytes": size, "latest_messages": stored}


def _history(n: int) -> list[Any]:
    """``n`` messages of whole turns (system, then human / tool call / tool / answer)."""
    model = ScriptedToolModel(content_chars=CONTENT_CHARS)
    msgs: list[Any] = [system_message(CONTENT_CHARS)]
    turn = 0
    while len(msgs) < n:
        h = human_message(turn, CONTENT_CHARS)
        call = model.next_message([h])
        tool = ToolMessage("r" * CONTENT_CHARS, tool_call_id=call.tool_calls[0]["id"], id=f"t{turn}")
        msgs += [h, call, tool, model.next_message([h, call, tool])]
        turn += 1
    return msgs[:n]


def put_overhead(n_messages: int, puts: int, *, in_new_versions: bool, workdir: Path) -> dict[str, Any]:
    # both sides write to the same SqliteSaver (threads "b" and "w"): only the wrapper differs
    bare, conn = _sqlite_saver(workdir / f"put-{in_new_versions}.db")
    wrapped = ReducingCheckpointSaver(bare, _reducer())
    msgs = _history(n_messages)
    assert n_messages <= MAX_MESSAGES  # the point: a put that needs no reduction

    def one(saver: Any, thread: str) -> float:
        version = saver.get_next_version(None, None)
        checkpoint = {
            "v": 4, "id": str(uuid6()), "ts": datetime.now(timezone.utc).isoformat(),
            "channel_values": {"messages": msgs, "other": 1},
            "channel_versions": {"messages": version, "other": version},
            "versions_seen": {}, "updated_channels": None,
        }
        new_versions = {"messages": version} if in_new_versions else {"other": version}
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        t = time.perf_counter()
        saver.put(config, checkpoint, {"source": "loop", "step": 1}, new_versions)
        return time.perf_counter() - t

    bare_times: list[float] = []
    wrapped_times: list[float] = []
    for i in range(puts):
        # interleave, alternating the order, so drift and caching hit both sides alike
        if i % 2:
            bare_times.append(one(bare, "b"))
            wrapped_times.append(one(wrapped, "w"))
        else:
            wrapped_times.append(one(wrapped, "w"))
            bare_times.append(one(bare, "b"))
    conn.close()
    b, w = statistics.median(bare_times), statistics.median(wrapped_times)
    return {"bare_us": b * 1e6, "wrapped_us": w * 1e6, "overhead": (w - b) / b}


def run(quick: bool) -> list[dict[str, Any]]:
    """Run the benchmark; one row per metric with ``bare``, ``wrapped``, ``ratio`` and ``met``."""
    turns = 100 if quick else 500
    puts = 300 if quick else 2000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-savers-") as tmp:
        workdir = Path(tmp)
        bare = conversation(turns, wrapped=False, workdir=workdir)
        wrapped = conversation(turns, wrapped=True, workdir=workdir)
        name = f"{turns}-turn conversation, SqliteSaver file, max_messages={MAX_MESSAGES}"
        for metric, key, target in (
            ("latest checkpoint bytes (bare/wrapped)", "latest_bytes", 10.0),
            ("total DB bytes (bare/wrapped)", "db_bytes", 5.0),
            ("wall time (bare/wrapped)", "wall_s", 1.0),
        ):
            ratio = bare[key] / wrapped[key]
            rows.append({"benchmark": name, "metric": metric, "bare": bare[key], "wrapped": wrapped[key],
                         "ratio": ratio, "target": f">= {target:g}", "met": ratio >= target})
        rows.append({"benchmark": name, "metric": "messages in latest checkpoint",
                     "bare": bare["latest_messages"], "wrapped": wrapped["latest_messages"],
                     "ratio": bare["latest_messages"] / wrapped["latest_messages"],
                     "target": "", "met": None})
        for in_new in (True, False):
            o = put_overhead(30, puts, in_new_versions=in_new, workdir=workdir)
            label = "in new_versions" if in_new else "not in new_versions"
            rows.append({
                "benchmark": f"put of 30 messages needing no reduction ({label}), median of {puts}",
                "metric": "wrapper overhead (wrapped-bare)/bare", "bare": o["bare_us"],
                "wrapped": o["wrapped_us"], "ratio": o["overhead"], "target": "< 0.10" if in_new else "",
                "met": o["overhead"] < 0.10 if in_new else None,
            })
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = ["benchmark", "metric", "bare", "wrapped", "ratio", "target", "met"]
    cells = [[_fmt(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 turns and fewer puts")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; times in seconds (wall) and µs (put)")
    print_table(run(args.quick))
