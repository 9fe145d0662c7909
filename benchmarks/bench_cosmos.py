"""CosmosDBSaver latency and round trips against the local Cosmos DB protocol server, with and without
the reducer.

The server is ``tests/cosmos_server/launcher.js`` (``@vercel/cosmosdb-server`` with keep-alive,
started here on a free port and stopped by its PID) or, with ``COSMOSDB_ENDPOINT`` /
``COSMOSDB_KEY``, a real account or the emulator. Reported, bare saver vs wrapped (the same
saver with ``reducer=MessageReducer(min_messages=20, max_messages=40)``), each the median of many
interleaved operations:

1. ``put`` of a checkpoint whose messages need no reduction (30 messages): the reducer's overhead.
2. ``put`` of a checkpoint of 200 messages, messages in new_versions: wrapped stores 40.
3. ``get_tuple`` of the latest checkpoint of a thread after N turns of a tool-using agent (100;
   30 with ``quick``) run through ``graph.invoke``: wrapped reads the reduced history.
4. The same conversations' wall time and the bytes of all items of each thread.
5. Requests per operation (``raw_response_hook``): put with one changed channel (target <= 2),
   get_tuple of the latest checkpoint (<= 2), list(limit=10) (<= 3).
6. The endpoint itself, through the SDK without a saver: point read and upsert latency. On the
   local server these stay at a few ms only because its launcher keeps connections alive (a new
   TLS connection per request costs tens of ms).

Ratios are bare / wrapped for times and sizes (> 1: wrapped is faster or smaller). On the local
server latencies are mostly Python (SDK, serialization) and Node; on real Cosmos DB the network
round trip dominates, so the request counts matter most. Run:
``python benchmarks/bench_cosmos.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, also when run as a file

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base.id import uuid6

from agentstate_reducer import MessageReducer
from checkpointers.cosmosdb import CosmosDBSaver

MIN_MESSAGES, MAX_MESSAGES = 20, 40
CONTENT_CHARS = 200
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@contextmanager
def cosmos_endpoint() -> Iterator[tuple[str, str]]:
    """``(endpoint, key)``: COSMOSDB_ENDPOINT if set, else the local server for the duration."""
    endpoint = os.environ.get("COSMOSDB_ENDPOINT", "").strip()
    if endpoint:
        yield endpoint, os.environ.get("COSMOSDB_KEY") or EMULATOR_KEY
        return
    from tests import cosmos_service  # starts tests/cosmos_server/launcher.js

    with tempfile.TemporaryDirectory(prefix="bench-cosmos-") as tmp:
        proc, port = cosmos_service._start_local_server(Path(tmp) / "server.log")
        try:
            yield f"https://127.0.0.1:{port}", cosmos_service.EMULATOR_KEY
        finally:
            cosmos_service._stop(proc)


def _messages(n: int) -> list[Any]:
    """``n`` messages: a system prompt, then turns of human / AI tool call / tool result / answer."""
    msgs: list[Any] = [SystemMessage("s" * CONTENT_CHARS, id="sys")]
    t = 0
    while len(msgs) < n:
        call = {"name": "lookup", "args": {"q": f"q{t}"}, "id": f"c{t}", "type": "tool_call"}
        msgs += [
            HumanMessage("h" * CONTENT_CHARS, id=f"h{t}"),
            AIMessage("a" * CONTENT_CHARS, id=f"a{t}", tool_calls=[call]),
            ToolMessage("r" * CONTENT_CHARS, tool_call_id=f"c{t}", id=f"t{t}"),
            AIMessage("f" * CONTENT_CHARS, id=f"f{t}"),
        ]
        t += 1
    return msgs[:n]


def _checkpoint(
    saver: Any, messages: list[Any], parent_versions: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    new = {"messages": saver.get_next_version(parent_versions.get("messages"), None)}
    versions = {**parent_versions, **new}
    checkpoint = {
        "v": 4,
        "id": str(uuid6()),
        "ts": datetime.now(timezone.utc).isoformat(),
        "channel_values": {"messages": messages, "turn": 1, "config": {"model": "m", "temperature": 0}},
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }
    return checkpoint, new


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def put_latency(savers: dict[str, Any], n_messages: int, puts: int) -> dict[str, float]:
    """Median put latency per saver (interleaved, alternating order), one thread per saver."""
    msgs = _messages(n_messages)
    state: dict[str, tuple[dict[str, Any], str | None]] = {}
    for name, saver in savers.items():
        v = saver.get_next_version(None, None)
        state[name] = ({"messages": v, "turn": v, "config": v}, None)
    times: dict[str, list[float]] = {name: [] for name in savers}
    thread = f"put-{n_messages}-{uuid.uuid4().hex[:6]}"
    names = list(savers)
    for i in range(puts):
        for name in names if i % 2 else reversed(names):
            saver = savers[name]
            versions, parent = state[name]
            checkpoint, new = _checkpoint(saver, msgs, versions)
            config = {
                "configurable": {
                    "thread_id": f"{thread}-{name}",
                    "checkpoint_ns": "",
                    "checkpoint_id": parent,
                }
            }
            t = time.perf_counter()
            saver.put(config, checkpoint, {"source": "loop", "step": i}, new)
            times[name].append(time.perf_counter() - t)
            state[name] = ({**versions, **new}, checkpoint["id"])
    return {name: _median_ms(ts) for name, ts in times.items()}


def conversation(saver: Any, turns: int, thread: str) -> dict[str, Any]:
    from tests.scenario_graph import build_graph, run_turns, thread_config

    graph = build_graph(saver, content_chars=CONTENT_CHARS)
    start = time.perf_counter()
    run_turns(graph, turns, thread_id=thread, content_chars=CONTENT_CHARS)
    wall = time.perf_counter() - start
    config = thread_config(thread)
    gets = []
    for _ in range(50):
        t = time.perf_counter()
        latest = saver.get_tuple(config)
        gets.append(time.perf_counter() - t)
    return {
        "wall_s": wall,
        "get_ms": _median_ms(gets),
        "messages": len(latest.checkpoint["channel_values"]["messages"]),
    }


def thread_bytes(container: Any, thread: str) -> int:
    rows = container.query_items(
        "SELECT * FROM c WHERE c.thread_id = @t",
        parameters=[{"name": "@t", "value": thread}],
        enable_cross_partition_query=True,
    )
    system = {"_rid", "_self", "_etag", "_attachments", "_ts"}
    return sum(len(json.dumps({k: v for k, v in r.items() if k not in system})) for r in rows)


def point_operations(client: Any, database: str, n: int) -> dict[str, float]:
    """Mean ms per point read and per upsert of small items, one container, one partition."""
    from azure.cosmos import PartitionKey

    container = client.get_database_client(database).create_container(
        id="point-operations", partition_key=PartitionKey(path="/pk")
    )
    container.upsert_item({"id": "a", "pk": "p1", "payload": "x" * 1000})
    container.read_item("a", partition_key="p1")  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        container.read_item("a", partition_key="p1")
    read_ms = (time.perf_counter() - start) * 1000 / n
    start = time.perf_counter()
    for i in range(n):
        container.upsert_item({"id": f"w-{i}", "pk": "p1"})
    upsert_ms = (time.perf_counter() - start) * 1000 / n
    return {"point read": read_ms, "upsert": upsert_ms}


def round_trips(endpoint: str, key: str, database: str) -> dict[str, int]:
    """Requests per operation after warm-up, counted with the SDK's raw_response_hook (the SDK's
    own account reads, ``GET /``, are not operations)."""
    seen: list[str] = []

    def hook(response: Any) -> None:
        if urlsplit(response.http_request.url).path.strip("/"):
            seen.append(response.http_request.method)

    with CosmosDBSaver.from_conn_info(
        endpoint=endpoint,
        credential=key,
        database_name=database,
        container_name="round-trips",
        client_kwargs={"raw_response_hook": hook},
    ) as saver:
        saver.setup()
        v = saver.get_next_version(None, None)
        versions: dict[str, Any] = {"messages": v, "turn": v, "config": v}
        new: dict[str, Any] = dict(versions)  # the first put writes every channel
        parent = None
        counts = []
        for i in range(12):
            checkpoint, _ = _checkpoint(saver, _messages(10 + i), versions)
            checkpoint["channel_versions"] = {**versions, **new}
            config: RunnableConfig = {
                "configurable": {"thread_id": "rt", "checkpoint_ns": "", "checkpoint_id": parent}
            }
            seen.clear()
            stored = saver.put(config, checkpoint, {"step": i}, new)
            counts.append(len(seen))
            saver.put_writes(stored, [("messages", [f"w{i}"])], "task")
            versions, parent = dict(checkpoint["channel_versions"]), checkpoint["id"]
            new = {"messages": saver.get_next_version(versions["messages"], None)}  # one changed channel
        seen.clear()
        saver.get_tuple({"configurable": {"thread_id": "rt"}})
        get = len(seen)
        seen.clear()
        listed = list(saver.list({"configurable": {"thread_id": "rt"}}, limit=10))
        assert len(listed) == 10
        return {
            "put (one changed channel)": max(counts[1:]),
            "get_tuple (latest)": get,
            "list(limit=10)": len(seen),
        }


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per metric: ``bare``, ``wrapped``, ``ratio`` (bare / wrapped), ``target``, ``met``."""
    warnings.filterwarnings("ignore", message=r"Unverified HTTPS request")
    turns = 30 if quick else 100
    puts = 60 if quick else 300
    rows: list[dict[str, Any]] = []
    database = f"bench-{uuid.uuid4().hex[:8]}"
    with cosmos_endpoint() as (endpoint, key):
        from azure.cosmos import CosmosClient

        from checkpointers.cosmosdb.sync import _close_client

        client = CosmosClient(endpoint, key)
        try:
            bare = CosmosDBSaver(database, "bench", client=client)
            wrapped = CosmosDBSaver(
                database,
                "bench",
                client=client,
                reducer=MessageReducer(min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES),
            )
            bare.setup()
            for n, label in (
                (30, "30 messages, no reduction needed"),
                (200, "200 messages, wrapped stores 40"),
            ):
                put_latency({"bare": bare, "wrapped": wrapped}, n, 5)  # warm-up
                ms = put_latency({"bare": bare, "wrapped": wrapped}, n, puts)
                rows.append(
                    {
                        "benchmark": f"put latency, {label}, median of {puts}",
                        "metric": "ms (bare/wrapped)",
                        "bare": ms["bare"],
                        "wrapped": ms["wrapped"],
                        "ratio": ms["bare"] / ms["wrapped"],
                        "target": "",
                        "met": None,
                    }
                )
            conv = {
                name: conversation(saver, turns, f"conv-{name}")
                for name, saver in (("bare", bare), ("wrapped", wrapped))
            }
            container = client.get_database_client(database).get_container_client("bench")
            size = {name: thread_bytes(container, f"conv-{name}") for name in conv}
            name = f"{turns}-turn tool conversation via graph.invoke"
            for metric, b, w in (
                ("get_tuple(latest) ms, median of 50", conv["bare"]["get_ms"], conv["wrapped"]["get_ms"]),
                ("wall time s", conv["bare"]["wall_s"], conv["wrapped"]["wall_s"]),
                ("bytes of all the thread's items", size["bare"], size["wrapped"]),
                ("messages in the latest checkpoint", conv["bare"]["messages"], conv["wrapped"]["messages"]),
            ):
                rows.append(
                    {
                        "benchmark": name,
                        "metric": metric,
                        "bare": b,
                        "wrapped": w,
                        "ratio": b / w,
                        "target": "",
                        "met": None,
                    }
                )
            operations = 100 if quick else 500
            for op, mean_ms in point_operations(client, database, operations).items():
                rows.append(
                    {
                        "benchmark": f"endpoint {op} through the SDK, mean of {operations}",
                        "metric": "ms per operation",
                        "bare": mean_ms,
                        "wrapped": None,
                        "ratio": None,
                        "target": "",
                        "met": None,
                    }
                )
            for op, n in round_trips(endpoint, key, database).items():
                limit = 3 if op.startswith("list") else 2
                rows.append(
                    {
                        "benchmark": f"requests per operation: {op}",
                        "metric": "requests",
                        "bare": n,
                        "wrapped": None,
                        "ratio": None,
                        "target": f"<= {limit}",
                        "met": n <= limit,
                    }
                )
        finally:
            try:
                client.delete_database(database)
            finally:
                _close_client(client)
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "" if value is None else str(value)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 turns and fewer puts")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    cols = ["benchmark", "metric", "bare", "wrapped", "ratio", "target", "met"]
    cells = [[_fmt(r[c]) for c in cols] for r in run(args.quick)]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
