"""Speed and size of ``ReducingCheckpointSaver`` over ``SqliteSaver`` (a file), against the bare saver.

1. Conversation: the deterministic tool-using agent of ``tests/scenario_graph.py`` runs N turns
   (500; 100 with ``quick``) through a compiled graph on one thread, once on a bare SqliteSaver
   and once wrapped with ``MessageReducer(min_messages=20, max_messages=40)``. Reported as
   bare / wrapped ratios: bytes of the latest checkpoint row, total database bytes (after a WAL
   checkpoint), wall time. Targets (issue 4): latest checkpoint >= 10x smaller, database >= 5x
   smaller, wall time no worse than bare (ratio >= 1).
2. Put overhead: ``put`` of a checkpoint whose 30 messages need no reduction (under
   ``max_messages``), wrapped vs bare, interleaved, median of many puts, retention off, on a
   SqliteSaver file and on an in-memory SqliteSaver (``":memory:"``). Both sides write to one
   saver, so only the wrapper differs. The wrapper's cost per put is the same on both; a file's
   bare put waits for the disk and is two to three times the in-memory one, so the same cost is
   a smaller fraction there: the in-memory row is the strict one. Target on both: < 5% of the
   bare put (``PUT_OVERHEAD_TARGET``), the reducer's validity check of every output included;
   met when the median of five runs meets it. Also reported, without a target: the file put
   with the messages channel not in new_versions.

3. Retention (``--retention``, also part of the full run): the same agent, default durability, on
   SQLite (a file) and PostgreSQL (``POSTGRES_URL``, else a throwaway local server started like the
   tests' fixture; skipped when none can be had): bare and LangGraph's ``DeltaChannel`` at 300 turns;
   the reducer, and the reducer + ``keep_last=2`` + a ``StoreArchive`` (SqliteStore / PostgresStore)
   at 300 and 1,000 turns. Stored bytes are counted two ways: row bytes (checkpoint and metadata
   bytes, write and blob bytes, plus the archive's item bytes) and, on SQLite, file bytes after a WAL
   checkpoint (checkpoint file + archive file). Per-turn wall times: medians over turns 51-100 and
   951-1,000. Targets: reducer + keep_last + archive stores >= 4x fewer row bytes than DeltaChannel
   at 300 turns; checkpoint row bytes flat (max over turns 951-1,000 within 1.1x of turns 51-100);
   median turn time over 951-1,000 within 1.2x of 51-100.

4. Offload (``--offload``, also part of the full run): the same agent, N turns (200; 60 with
   ``quick``), every 5th user message carrying a 500 kB base64 image (a LangChain
   ``{"type": "image", "base64": ..., "mime_type": "image/png"}`` block of seeded random bytes), on
   SQLite (a file) and PostgreSQL: stored bytes of the bare saver, the reducer
   (``MessageReducer(min_messages=20, max_messages=40)``, no ``keep_last``) and the reducer +
   ``BlobOffload()``, against the baseline: the reducer's run without images plus the images'
   bytes once. Again with ``keep_last=2`` (its baseline: the keep_last run without images plus the
   images once). Bytes: SQLite file bytes after a WAL checkpoint and row bytes (checkpoints,
   writes, blobs); PostgreSQL ``pg_total_relation_size`` of the checkpoint tables and the two
   blob tables. Aim: reducer + offload within 1.3x of the baseline. Also the put and ``get_tuple``
   latency of a 40-message checkpoint holding two images, reducer with and without offload,
   interleaved, median of many calls.

5. DeltaChannel threads (``--delta``, also part of the full run): four configs, each one thread run
   once to the last point and measured at 100, 300, 500 and 1,000 turns (4, 8, 12, 16 with
   ``quick``; ``--points`` chooses others), on SQLite (a file) and PostgreSQL: deepagents'
   ``create_deep_agent`` (its ``messages`` and ``files`` channels are DeltaChannels) with the
   scripted tool-calling model of ``tests/agent_script.py``, bare and through
   ``ReducingCheckpointSaver(inner, MessageReducer(min_messages=20, max_messages=40), keep_last=2)``
   with default settings (what a user gets); the tool agent above with its ``messages`` channel a
   ``DeltaChannel`` of batch ``add_messages``, bare and through the same saver. At each point:
   stored bytes (SQLite: file bytes after a WAL checkpoint; PostgreSQL: ``pg_total_relation_size``
   of the checkpoint tables after a plain ``VACUUM (ANALYZE)``, which the benchmark also runs every
   ``PG_VACUUM_EVERY`` turns in autovacuum's place), row bytes (the peak over the ``ROW_WINDOW``
   turns before the point), the messages ``get_state`` loads and the median of five ``get_state``
   calls. Targets: each reduced config flat from the second-to-last point to the last
   (stored bytes within 1.25x), and the reduced deepagents thread >= 10x below the bare one at the
   last point. A bare deepagents turn takes longer as its thread grows, so its 1,000-turn run takes
   far longer than the others (docs/benchmarks.md gives the times measured).

Every ratio is measured against a baseline run in the same process. Run:
``python benchmarks/bench_savers.py [--quick] [--retention] [--offload] [--delta [--points N,N,...]
[--backends sqlite,postgres]]``.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, also when run as a file

from langchain_core.messages import HumanMessage, ToolMessage
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

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver

MIN_MESSAGES, MAX_MESSAGES = 20, 40
CONTENT_CHARS = 200
#: the wrapper's overhead on a put that needs no reduction, as a fraction of the bare put
PUT_OVERHEAD_TARGET = 0.05


def _reducer() -> MessageReducer:
    return MessageReducer(min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES)


def _sqlite_saver(path: Path | str) -> tuple[SqliteSaver, sqlite3.Connection]:
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


def put_overhead(
    n_messages: int, puts: int, *, in_new_versions: bool, workdir: Path | None
) -> dict[str, Any]:
    """Median bare and wrapped put times; on a file in ``workdir``, or in memory when it is None."""
    # both sides write to the same SqliteSaver (threads "b" and "w"): only the wrapper differs
    bare, conn = _sqlite_saver(workdir / f"put-{in_new_versions}.db" if workdir else ":memory:")
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
        for where, in_new in ((workdir, True), (None, True), (workdir, False)):
            o = put_overhead(30, puts, in_new_versions=in_new, workdir=where)
            label = ("SqliteSaver file" if where else "in-memory SqliteSaver") + (
                "" if in_new else ", messages not in new_versions"
            )
            rows.append({
                "benchmark": f"put of 30 messages needing no reduction ({label}), median of {puts}",
                "metric": "wrapper overhead (wrapped-bare)/bare", "bare": o["bare_us"],
                "wrapped": o["wrapped_us"], "ratio": o["overhead"],
                "target": f"< {PUT_OVERHEAD_TARGET:g}" if in_new else "",
                "met": o["overhead"] < PUT_OVERHEAD_TARGET if in_new else None,
            })
    rows += first_put(quick)
    rows += retention(quick)[0]
    rows += offload(quick)
    rows += delta(quick)[0]
    return rows


# -- the first put of a run (--first-put) -----------------------------------------------------------


class _TimedSqliteSaver(SqliteSaver):
    """A SqliteSaver that keeps the CPU time of its last put (the storing, which the wrapper's own
    cost is measured without)."""

    last_put_cpu = last_get_cpu = 0.0

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        t = time.thread_time()
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        finally:
            self.last_put_cpu = time.thread_time() - t

    def get_tuple(self, config: Any) -> Any:
        t = time.thread_time()
        try:
            return super().get_tuple(config)
        finally:
            self.last_get_cpu = time.thread_time() - t


class _TimedWrapper(ReducingCheckpointSaver):
    """The wrapper, keeping its own CPU time (its call's, less the inner saver's) of each put and
    each ``get_tuple``."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        t = time.thread_time()
        saved = super().put(config, checkpoint, metadata, new_versions)
        total = time.thread_time() - t
        self.put_cpu.append(total - self._timed_inner().last_put_cpu)
        return saved

    def get_tuple(self, config: Any) -> Any:
        t = time.thread_time()
        tup = super().get_tuple(config)
        total = time.thread_time() - t
        self.get_cpu.append(total - self._timed_inner().last_get_cpu)
        return tup

    def _timed_inner(self) -> _TimedSqliteSaver:
        inner = self.inner
        assert isinstance(inner, _TimedSqliteSaver)
        return inner

    put_cpu: list[float]
    get_cpu: list[float]


def first_put_run(n: int, runs: int, workdir: Path) -> dict[str, Any]:
    """The wrapper's CPU on the first two puts of a run on a thread holding ``n`` reduced messages,
    with the stored list known again (``StoredOutputs``) and without (the reducer's memo alone),
    alternating; median over ``runs`` threads each.

    The run is one turn of the scenario graph on a SqliteSaver file; the thread is seeded with
    ``update_state`` through the wrapper (``n`` messages, kept whole: ``min_messages=n``,
    ``max_messages=2 * n``, so the run's first put needs no pruning). The first put (source
    ``input``) receives the stored list read back plus the human message; the second (the model's
    answer appended) is a memo hit on the first's own objects."""
    from checkpointers.reduction import StoredOutputs

    inner = _TimedSqliteSaver(sqlite3.connect(workdir / f"first-put-{n}.db", check_same_thread=False))
    inner.setup()
    sides: dict[str, Any] = {}
    for side in ("known", "today"):
        saver = _TimedWrapper(inner, MessageReducer(min_messages=n, max_messages=2 * n))
        saver.put_cpu, saver.get_cpu = [], []
        if side == "today":
            saver._stored = StoredOutputs(max_bytes=0)  # keeps nothing: the reducer's memo alone
        sides[side] = (saver, build_graph(saver, content_chars=CONTENT_CHARS))
    seed = _history(n)
    cpu: dict[str, list[float]] = {k: [] for k in ("known", "today", "hit", "known_load", "today_load")}
    for i in range(2 * runs):
        side = ("known", "today")[i % 2]
        saver, graph = sides[side]
        thread = f"{side}-{i}"
        graph.update_state(thread_config(thread), {"messages": seed})
        saver.put_cpu.clear()
        saver.get_cpu.clear()
        run_turns(graph, 1, thread_id=thread, start=10**6 + i, with_system=False,
                  content_chars=CONTENT_CHARS)
        cpu[side].append(saver.put_cpu[0])
        cpu[f"{side}_load"].append(saver.get_cpu[0] + saver.put_cpu[0])  # the run's load, then its put
        if side == "known":
            cpu["hit"].append(saver.put_cpu[1])
    inner.conn.close()
    return {k: statistics.median(v) for k, v in cpu.items()}


def first_put(quick: bool, runs: int = 5) -> list[dict[str, Any]]:
    """Rows of ``first_put_run`` at 1,000 and 10,000 stored messages (100 and 1,000 with
    ``quick``): the first put known again against today's, and against a memo hit."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-savers-") as tmp:
        for n in (100, 1000) if quick else (1000, 10000):
            m = first_put_run(n, runs, Path(tmp))
            name = (f"first put of a run, {n:,} stored messages + 1, SqliteSaver file, wrapper CPU "
                    f"(µs, put less the inner put), median of {runs}")
            rows.append({"benchmark": name, "metric": "today / known again", "bare": m["today"] * 1e6,
                         "wrapped": m["known"] * 1e6, "ratio": m["today"] / m["known"],
                         "target": "", "met": None})
            rows.append({"benchmark": name, "metric": "known again / memo hit (the run's next put)",
                         "bare": m["hit"] * 1e6, "wrapped": m["known"] * 1e6,
                         "ratio": m["known"] / m["hit"], "target": "", "met": None})
            rows.append({"benchmark": name, "metric": "the run's load + first put: today / known again",
                         "bare": m["today_load"] * 1e6, "wrapped": m["known_load"] * 1e6,
                         "ratio": m["today_load"] / m["known_load"], "target": "", "met": None})
    return rows


# -- 3. retention ---------------------------------------------------------------------------------

VARIANTS = ("bare", "delta", "reducer", "keep_last")


def _delta_add_messages(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    from langgraph.graph.message import add_messages

    for update in writes:
        merged = add_messages(state, update)
        assert isinstance(merged, list)  # typed as a message or a list: given a list, a list
        state = merged
    return state


def _delta_state() -> Any:
    from typing import Annotated, TypedDict

    from langgraph.channels import DeltaChannel

    DeltaState = TypedDict(  # noqa: UP013  (a class body's annotations would be strings here)
        "DeltaState",
        {"messages": Annotated[list, DeltaChannel(_delta_add_messages)], "turns": int},
        total=False,
    )
    return DeltaState


class _Store:
    """One backend of the retention benchmark: a checkpoint saver, a store and byte counters."""

    def __init__(self, kind: str, workdir: Path, name: str, pg_base: str | None) -> None:
        self.kind = kind
        self.closers: list[Any] = []
        self.saver: SqliteSaver | PostgresSaver
        if kind == "sqlite":
            from langgraph.store.sqlite import SqliteStore

            self.path = workdir / f"{name}.db"
            self.saver, self.conn = _sqlite_saver(self.path)
            self.store_path = workdir / f"{name}-archive.db"
            self.store_conn = sqlite3.connect(self.store_path, check_same_thread=False, isolation_level=None)
            self.store: Any = SqliteStore(self.store_conn)
            self.store.setup()
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row

            assert pg_base is not None
            with psycopg.connect(pg_base, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS bench_{name}")
                admin.execute(f"CREATE DATABASE bench_{name}")
            from urllib.parse import urlsplit, urlunsplit

            url = urlunsplit(urlsplit(pg_base)._replace(path=f"/bench_{name}"))
            # one connection each: the archive writes from the saver's put while LangGraph's background
            # writer uses the saver's connection
            self.pg = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            self.store_pg = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            self.saver = PostgresSaver(self.pg)
            self.saver.setup()
            self.store = PostgresStore(self.store_pg)
            self.store.setup()

    def checkpoint_row_bytes(self) -> int:
        if self.kind == "sqlite":
            row = self.conn.execute(
                "SELECT (SELECT COALESCE(SUM(length(checkpoint) + length(metadata)), 0) FROM checkpoints)"
                " + (SELECT COALESCE(SUM(length(value)), 0) FROM writes)"
            ).fetchone()
            return int(row[0])
        row = self.pg.execute(
            "SELECT (SELECT COALESCE(SUM(octet_length(checkpoint::text) + octet_length(metadata::text)), 0)"
            " FROM checkpoints) + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_blobs)"
            " + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_writes) AS n"
        ).fetchone()
        assert row is not None
        return int(row["n"])

    def archive_row_bytes(self) -> int:
        if self.kind == "sqlite":
            row = self.store_conn.execute("SELECT COALESCE(SUM(length(value)), 0) FROM store").fetchone()
            return int(row[0])
        row = self.pg.execute("SELECT COALESCE(SUM(octet_length(value::text)), 0) AS n FROM store").fetchone()
        assert row is not None
        return int(row["n"])

    def file_bytes(self) -> int | None:
        """SQLite: checkpoint file + archive file after WAL checkpoints; PostgreSQL: relation sizes."""
        if self.kind == "sqlite":
            return _db_bytes(self.conn, self.path) + _db_bytes(self.store_conn, self.store_path)
        row = self.pg.execute(
            "SELECT pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs')"
            " + pg_total_relation_size('checkpoint_writes') + pg_total_relation_size('store') AS n"
        ).fetchone()
        assert row is not None
        return int(row["n"])

    def close(self) -> None:
        if self.kind == "sqlite":
            self.conn.close()
            self.store_conn.close()
        else:
            self.pg.close()
            self.store_pg.close()


def retention_run(kind: str, variant: str, turns: int, workdir: Path, pg_base: str | None) -> dict[str, Any]:
    """One thread of ``turns`` turns on ``kind`` with ``variant``; bytes and per-turn times."""
    from agentstate_reducer import ReducerConfig
    from checkpointers import StoreArchive, read_transcript

    backend = _Store(kind, workdir, f"{variant}_{turns}", pg_base)
    archive: StoreArchive | None = None
    checkpointer: Any = backend.saver
    state_schema = None
    if variant == "delta":
        state_schema = _delta_state()
    elif variant == "reducer":
        checkpointer = ReducingCheckpointSaver(backend.saver, _reducer())
    elif variant == "keep_last":
        archive = StoreArchive(backend.store)
        reducer = MessageReducer(config=ReducerConfig(min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES,
                                                      on_prune=[archive]))
        checkpointer = ReducingCheckpointSaver(backend.saver, reducer, keep_last=2)
    graph = build_graph(checkpointer, content_chars=CONTENT_CHARS, state_schema=state_schema)
    times: list[float] = []
    rows: list[int] = []
    last = time.perf_counter()

    def after(turn: int, _out: Any) -> None:
        nonlocal last
        now = time.perf_counter()
        times.append(now - last)
        if variant in ("reducer", "keep_last") and (turn < 100 or turn >= turns - 50):
            rows.append(backend.checkpoint_row_bytes())  # flatness windows only: counting is slow
        last = time.perf_counter()

    run_turns(graph, turns, thread_id="bench", content_chars=CONTENT_CHARS, after_turn=after)
    out: dict[str, Any] = {
        "kind": kind, "variant": variant, "turns": turns,
        "checkpoint_rows": backend.checkpoint_row_bytes(),
        "archive_rows": backend.archive_row_bytes() if archive is not None else 0,
        "file_bytes": backend.file_bytes(),
        "turn_ms_51_100": statistics.median(times[50:100]) * 1e3,
        "turn_ms_last_50": statistics.median(times[-50:]) * 1e3,
    }
    if rows:
        out["rows_max_51_100"] = max(rows[50:100])
        out["rows_max_last_50"] = max(rows[-50:])
    if archive is not None:
        transcript = read_transcript(backend.store, checkpointer, thread_config("bench"))
        out["transcript_turns"] = sum(1 for m in transcript if getattr(m, "type", "") == "human")
    backend.close()
    return out


def _pg_base() -> tuple[str | None, Any]:
    """(server URL, cluster to stop) from POSTGRES_URL, else a throwaway local cluster; (None, None)
    when neither works."""
    url = os.environ.get("POSTGRES_URL", "").strip()
    if url:
        return url, None
    try:
        from tests.pg_service import _find_bin_dir, _LocalCluster

        bin_dir = _find_bin_dir()
        if bin_dir is None:
            return None, None
        cluster = _LocalCluster(bin_dir)
        cluster.start()
        return cluster.base_url + "/postgres", cluster
    except Exception as exc:  # a benchmark without PostgreSQL still reports SQLite
        print(f"PostgreSQL unavailable, its retention rows are skipped: {type(exc).__name__}")
        return None, None


def retention(quick: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(summary rows in the table's format, one detail row per run)."""
    short, long = (60, 150) if quick else (300, 1000)
    plan = [("bare", short), ("delta", short), ("reducer", short), ("keep_last", short),
            ("reducer", long), ("keep_last", long)]
    pg_base, cluster = _pg_base()
    kinds = ["sqlite"] + (["postgres"] if pg_base else [])
    details: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp:
            for kind in kinds:
                runs = {}
                for variant, turns in plan:
                    r = retention_run(kind, variant, turns, Path(tmp), pg_base)
                    details.append(r)
                    print("  ".join(f"{k}={_fmt(v)}" for k, v in r.items()), file=sys.stderr, flush=True)
                    runs[(variant, turns)] = r
                delta, kept = runs[("delta", short)], runs[("keep_last", short)]
                ratio = delta["checkpoint_rows"] / (kept["checkpoint_rows"] + kept["archive_rows"])
                rows.append({"benchmark": f"retention, {kind}, {short} turns",
                             "metric": "row bytes DeltaChannel / (reducer+keep_last=2 + archive)",
                             "bare": delta["checkpoint_rows"],
                             "wrapped": kept["checkpoint_rows"] + kept["archive_rows"],
                             "ratio": ratio, "target": ">= 4", "met": ratio >= 4})
                long_run = runs[("keep_last", long)]
                flat = long_run["rows_max_last_50"] / long_run["rows_max_51_100"]
                rows.append({"benchmark": f"retention, {kind}, keep_last=2, {long} turns",
                             "metric": "checkpoint row bytes: max(last 50 turns) / max(turns 51-100)",
                             "bare": long_run["rows_max_51_100"], "wrapped": long_run["rows_max_last_50"],
                             "ratio": flat, "target": "<= 1.1", "met": flat <= 1.1})
                slow = long_run["turn_ms_last_50"] / long_run["turn_ms_51_100"]
                rows.append({"benchmark": f"retention, {kind}, keep_last=2, {long} turns",
                             "metric": "median turn ms: last 50 / turns 51-100",
                             "bare": long_run["turn_ms_51_100"], "wrapped": long_run["turn_ms_last_50"],
                             "ratio": slow, "target": "<= 1.2", "met": slow <= 1.2})
    finally:
        if cluster is not None:
            cluster.stop()
    return rows, details


# -- 4. offload -----------------------------------------------------------------------------------

IMAGE_EVERY = 5
IMAGE_B64_CHARS = 500_000
OFFLOAD_TARGET = 1.3


def _image_b64(turn: int) -> str:
    """500 kB of base64 text of random bytes, seeded by ``turn``: the same image in every run."""
    raw = random.Random(turn).randbytes(IMAGE_B64_CHARS * 3 // 4)
    return base64.b64encode(raw).decode("ascii")


def _image_turn_input(turn: int, images: bool) -> dict[str, Any]:
    human = human_message(turn, CONTENT_CHARS)
    if images and turn % IMAGE_EVERY == 0:
        human = HumanMessage(
            [{"type": "text", "text": human.content},
             {"type": "image", "base64": _image_b64(turn), "mime_type": "image/png"}],
            id=human.id,
        )
    msgs: list[Any] = [human] if turn else [system_message(CONTENT_CHARS), human]
    return {"messages": msgs}


def _blob_bytes(backend: _Store) -> tuple[int, int]:
    """(row bytes of the blob tables, 0 when they do not exist; relation bytes on PostgreSQL)."""
    if backend.kind == "sqlite":
        names = {r[0] for r in backend.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "agentstate_blobs" not in names:
            return 0, 0
        row = backend.conn.execute(
            "SELECT (SELECT COALESCE(SUM(length(data) + length(digest) + 16), 0) FROM agentstate_blobs)"
            " + (SELECT COALESCE(SUM(length(thread_id) + length(checkpoint_ns) + length(checkpoint_id)"
            " + length(task_id) + length(digest)), 0) FROM agentstate_blob_refs)"
        ).fetchone()
        return int(row[0]), 0
    found = backend.pg.execute("SELECT to_regclass('agentstate_blobs') IS NOT NULL AS t").fetchone()
    assert found is not None
    if not found["t"]:
        return 0, 0
    row = backend.pg.execute(
        "SELECT (SELECT COALESCE(SUM(octet_length(data)), 0) FROM agentstate_blobs)"
        " + (SELECT COALESCE(SUM(octet_length(digest) + octet_length(thread_id) + octet_length(checkpoint_id)"
        " + octet_length(task_id)), 0) FROM agentstate_blob_refs) AS n,"
        " pg_total_relation_size('agentstate_blobs') + pg_total_relation_size('agentstate_blob_refs') AS r"
    ).fetchone()
    assert row is not None
    return int(row["n"]), int(row["r"])


def offload_run(kind: str, variant: str, turns: int, images: bool, workdir: Path,
                pg_base: str | None) -> dict[str, Any]:
    """One thread of ``turns`` image turns on ``kind``; ``variant`` bare, reducer, offload,
    keep_last or keep_last_offload. Stored bytes: file (SQLite) or relation (PostgreSQL) and rows."""
    from checkpointers import BlobOffload

    backend = _Store(kind, workdir, f"off_{variant}_{turns}_{int(images)}", pg_base)
    checkpointer: Any = backend.saver
    blobs = BlobOffload() if variant.endswith("offload") else None
    if variant != "bare":
        checkpointer = ReducingCheckpointSaver(backend.saver, _reducer(), offload=blobs,
                                               keep_last=2 if variant.startswith("keep_last") else None)
    graph = build_graph(checkpointer, content_chars=CONTENT_CHARS)
    start = time.perf_counter()
    for turn in range(turns):
        graph.invoke(_image_turn_input(turn, images), thread_config("bench"))
    wall = time.perf_counter() - start
    blob_rows, blob_rel = _blob_bytes(backend)
    out = {"kind": kind, "variant": variant, "turns": turns, "images": images,
           "rows": backend.checkpoint_row_bytes() + blob_rows, "blob_rows": blob_rows,
           "stored": (_db_bytes(backend.conn, backend.path) if kind == "sqlite"
                      else _pg_relation_bytes(backend) + blob_rel),
           "wall_s": wall}
    backend.close()
    return out


def _pg_relation_bytes(backend: _Store) -> int:
    row = backend.pg.execute(
        "SELECT pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs')"
        " + pg_total_relation_size('checkpoint_writes') + pg_total_relation_size('checkpoint_migrations')"
        " AS n"
    ).fetchone()
    assert row is not None
    return int(row["n"])


def offload_latency(kind: str, calls: int, workdir: Path, pg_base: str | None) -> dict[str, float]:
    """Median put and get_tuple microseconds of a 40-message checkpoint with two images, through
    the reducer with and without offload on one saver (threads "p" and "o"), interleaved."""
    from checkpointers import BlobOffload

    backend = _Store(kind, workdir, f"off_latency_{calls}", pg_base)
    plain = ReducingCheckpointSaver(backend.saver, _reducer())
    offloaded = ReducingCheckpointSaver(backend.saver, _reducer(), offload=BlobOffload())
    msgs = _history(MAX_MESSAGES)
    for turn in (0, 1):  # the humans of two turns carry an image: what the window holds at most
        i = next(k for k, m in enumerate(msgs) if getattr(m, "id", "") == f"h{turn}")
        image = _image_turn_input(IMAGE_EVERY * turn, True)["messages"][-1]
        msgs[i] = image.model_copy(update={"id": f"h{turn}"})
    times: dict[str, list[float]] = {k: [] for k in ("put_plain", "put_offload", "get_plain", "get_offload")}

    def one(saver: Any, thread: str, name: str) -> None:
        version = saver.get_next_version(None, None)
        checkpoint = {
            "v": 4, "id": str(uuid6()), "ts": datetime.now(timezone.utc).isoformat(),
            "channel_values": {"messages": msgs}, "channel_versions": {"messages": version},
            "versions_seen": {}, "updated_channels": None,
        }
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        t = time.perf_counter()
        saved = saver.put(config, checkpoint, {"source": "loop", "step": 1}, {"messages": version})
        t1 = time.perf_counter()
        got = saver.get_tuple(saved)
        t2 = time.perf_counter()
        assert got is not None
        times[f"put_{name}"].append(t1 - t)
        times[f"get_{name}"].append(t2 - t1)

    for i in range(calls):
        pair = [(plain, "p", "plain"), (offloaded, "o", "offload")]
        for saver, thread, name in pair if i % 2 else reversed(pair):
            one(saver, thread, name)
    backend.close()
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


def offload(quick: bool, repeats: int = 1) -> list[dict[str, Any]]:
    """The offload section's rows (module docstring, 4.) on SQLite and, when it can be had, PostgreSQL;
    the latency rows are the median of ``repeats`` runs of ``offload_latency`` (each ratio taken
    within its run), with the lowest and highest ratio."""
    turns = 60 if quick else 200
    calls = 40 if quick else 200
    images_once = sum(IMAGE_B64_CHARS for t in range(turns) if t % IMAGE_EVERY == 0)
    pg_base, cluster = _pg_base()
    kinds = ["sqlite"] + (["postgres"] if pg_base else [])
    rows: list[dict[str, Any]] = []
    name = f"offload, {turns} turns, a 500 kB base64 image every {IMAGE_EVERY}th user message"
    try:
        with tempfile.TemporaryDirectory(prefix="bench-offload-") as tmp:
            for kind in kinds:
                runs: dict[tuple[str, bool], dict[str, Any]] = {}
                for variant, images in (("reducer", False), ("bare", True), ("reducer", True),
                                        ("offload", True), ("keep_last", False), ("keep_last", True),
                                        ("keep_last_offload", True)):
                    r = offload_run(kind, variant, turns, images, Path(tmp), pg_base)
                    print("  ".join(f"{k}={_fmt(v)}" for k, v in r.items()), file=sys.stderr, flush=True)
                    runs[(variant, images)] = r
                what = "file bytes after a WAL checkpoint" if kind == "sqlite" else "pg_total_relation_size"
                for measure, key in ((what, "stored"), ("row bytes", "rows")):
                    for base_variant, variants in (("reducer", ("bare", "reducer", "offload")),
                                                   ("keep_last", ("keep_last", "keep_last_offload"))):
                        baseline = runs[(base_variant, False)][key] + images_once
                        for variant in variants:
                            value = runs[(variant, True)][key]
                            ratio = value / baseline
                            aimed = variant.endswith("offload")
                            rows.append({
                                "benchmark": f"{name}, {kind}",
                                "metric": f"{measure}: {variant} / ({base_variant} without images + images)",
                                "bare": baseline, "wrapped": value, "ratio": ratio,
                                "target": f"<= {OFFLOAD_TARGET:g}" if aimed else "",
                                "met": ratio <= OFFLOAD_TARGET if aimed else None,
                            })
                lats = [offload_latency(kind, calls, Path(tmp), pg_base) for _ in range(repeats)]
                for op in ("put", "get"):
                    ratios = [lat[f"{op}_offload"] / lat[f"{op}_plain"] for lat in lats]
                    rows.append({
                        "benchmark": f"{'put' if op == 'put' else 'get_tuple'} of 40 messages, two images,"
                                     f" {kind}, median of {calls} calls, median of {repeats} runs",
                        "metric": "reducer + offload / reducer (latency)",
                        "bare": statistics.median(lat[f"{op}_plain"] for lat in lats),
                        "wrapped": statistics.median(lat[f"{op}_offload"] for lat in lats),
                        "ratio": statistics.median(ratios),
                        "ratio_range": f"{min(ratios):.2f}-{max(ratios):.2f}", "target": "", "met": None,
                    })
    finally:
        if cluster is not None:
            cluster.stop()
    return rows


# -- 5. DeltaChannel threads ------------------------------------------------------------------------

#: the turns at which a DeltaChannel run is measured (one run per config, measured as it goes)
DELTA_POINTS = (100, 300, 500, 1000)
DELTA_QUICK_POINTS = (4, 8, 12, 16)
#: how many ``get_state`` calls a point's time is the median of
GET_STATE_CALLS = 5
DELTA_FLAT_TARGET = 1.25
#: a point's row bytes are the thread's peak over this many turns before it (fewer when the previous
#: point is closer): a ``keep_last`` thread holds between ``keep_last`` and a dozen checkpoints
#: depending on where the point falls in its retention cycle (every ``retention_every`` steps)
#: and its reduction cycle, so one sample per point reads a phase, not a trend
ROW_WINDOW = 50
#: PostgreSQL: a plain ``VACUUM (ANALYZE)`` of the checkpoint tables every this many turns and at
#: each point, standing in for autovacuum: it visits a table about once a minute (its naptime),
#: which is a few turns of a real agent but hundreds of this benchmark's
PG_VACUUM_EVERY = 10
DELTA_BELOW_TARGET = 10.0
DELTA_VARIANTS = ("deepagents", "deepagents_keep_last", "delta_graph", "delta_graph_keep_last")


def _delta_graph(variant: str, saver: Any) -> tuple[Any, Any]:
    """(the compiled graph of ``variant`` over ``saver``, a function of the turn index giving its input)."""
    checkpointer: Any = saver
    if variant.endswith("_keep_last"):  # default settings: what a user gets
        checkpointer = ReducingCheckpointSaver(saver, _reducer(), keep_last=2)
    if variant.startswith("deepagents"):
        from deepagents import create_deep_agent

        from tests.agent_script import TOOLS, ScriptedModel, turns

        agent = create_deep_agent(model=ScriptedModel(), tools=TOOLS,
                                  system_prompt="You are a terse assistant.", checkpointer=checkpointer)
        return agent, lambda turn: next(turns(1, start=turn))
    graph = build_graph(checkpointer, content_chars=CONTENT_CHARS, state_schema=_delta_state())
    return graph, lambda turn: _image_turn_input(turn, images=False)


def delta_run(kind: str, variant: str, points: Sequence[int], workdir: Path,
              pg_base: str | None, *, tag: str = "") -> list[dict[str, Any]]:
    """One thread of ``variant`` on ``kind``, run to ``points[-1]`` turns; at each point: stored bytes
    (SQLite: file bytes after a WAL checkpoint; PostgreSQL: ``pg_total_relation_size`` of the
    checkpoint tables after a plain VACUUM, which also runs every ``PG_VACUUM_EVERY`` turns), row
    bytes (the peak over the ``ROW_WINDOW`` turns before the point), the messages ``get_state``
    loads and the median of ``GET_STATE_CALLS`` ``get_state`` times. ``tag``: appended to the
    names of the SQLite file and the PostgreSQL database (``bench_delta_{variant}{tag}``)."""
    from checkpointers.retention import backend_for

    backend = _Store(kind, workdir, f"delta_{variant}{tag}", pg_base)
    graph, turn_input = _delta_graph(variant, backend.saver)
    config = thread_config("bench")
    out: list[dict[str, Any]] = []
    start = time.perf_counter()
    peak, previous = 0, 0
    for turn in range(points[-1]):
        graph.invoke(turn_input(turn), config)
        n = turn + 1
        if kind == "postgres" and (n % PG_VACUUM_EVERY == 0 or n in points):
            backend_for(backend.saver).vacuum()
        upcoming = next(p for p in points if p >= n)
        if n > max(previous, upcoming - ROW_WINDOW):
            peak = max(peak, backend.checkpoint_row_bytes())
        if n not in points:
            continue
        times = []
        for _ in range(GET_STATE_CALLS):
            t = time.perf_counter()
            state = graph.get_state(config)
            times.append(time.perf_counter() - t)
        out.append({
            "kind": kind, "variant": variant, "turns": n,
            "stored_bytes": (_db_bytes(backend.conn, backend.path) if kind == "sqlite"
                             else _pg_relation_bytes(backend)),
            "row_bytes": peak,
            "messages": len(state.values.get("messages", [])),
            "get_state_ms": statistics.median(times) * 1e3,
            "run_s": time.perf_counter() - start,
        })
        peak, previous = 0, n
        print("  ".join(f"{k}={_fmt(v)}" for k, v in out[-1].items()), file=sys.stderr, flush=True)
    backend.close()
    return out


def delta(
    quick: bool, pg_base: str | None = None, points: Sequence[int] | None = None,
    backends: Sequence[str] = ("sqlite", "postgres"),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(target rows in the table's format, one detail row per config and point): the DeltaChannel
    section (module docstring, 5.), on SQLite and, when it can be had, PostgreSQL (``pg_base``, else
    as ``retention`` finds one). ``points``: the turns to measure at (at least two, ascending),
    instead of ``DELTA_POINTS`` (``DELTA_QUICK_POINTS`` when ``quick``); ``backends``: which of the
    two to run."""
    points = tuple(points) if points is not None else DELTA_QUICK_POINTS if quick else DELTA_POINTS
    if len(points) < 2 or list(points) != sorted(set(points)) or points[0] < 1:
        raise ValueError(f"points must be two or more ascending turn counts >= 1, got {list(points)}")
    if not backends or set(backends) - {"sqlite", "postgres"}:
        raise ValueError(f"backends must name sqlite, postgres or both, got {list(backends)}")
    cluster = None
    if pg_base is None and "postgres" in backends:
        pg_base, cluster = _pg_base()
    kinds = [k for k in ("sqlite", "postgres") if k in backends and (k == "sqlite" or pg_base)]
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    mid, last = points[-2], points[-1]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
            for kind in kinds:
                runs = {v: {r["turns"]: r for r in delta_run(kind, v, points, Path(tmp), pg_base)}
                        for v in DELTA_VARIANTS}
                details += [r for v in DELTA_VARIANTS for r in runs[v].values()]
                measure = "file bytes" if kind == "sqlite" else "pg_total_relation_size after VACUUM"
                for variant in ("deepagents_keep_last", "delta_graph_keep_last"):
                    a, b = runs[variant][mid]["stored_bytes"], runs[variant][last]["stored_bytes"]
                    rows.append({"benchmark": f"DeltaChannel, {kind}, {variant}",
                                 "metric": f"{measure}: turn {last} / turn {mid}", "bare": a, "wrapped": b,
                                 "ratio": b / a, "target": f"<= {DELTA_FLAT_TARGET:g}",
                                 "met": b / a <= DELTA_FLAT_TARGET})
                bare = runs["deepagents"][last]["stored_bytes"]
                kept = runs["deepagents_keep_last"][last]["stored_bytes"]
                rows.append({"benchmark": f"DeltaChannel, {kind}, deepagents, {last} turns",
                             "metric": f"{measure}: bare / saver with keep_last=2", "bare": bare,
                             "wrapped": kept,
                             "ratio": bare / kept, "target": f">= {DELTA_BELOW_TARGET:g}",
                             "met": bare / kept >= DELTA_BELOW_TARGET})
    finally:
        if cluster is not None:
            cluster.stop()
    return rows, details


def print_delta(details: list[dict[str, Any]]) -> None:
    """The DeltaChannel table: one line per backend and config, a column pair per point."""
    points = sorted({d["turns"] for d in details})
    cols = ["backend", "config"] + [f"{n} turns: MB (rows), ms" for n in points]
    cells = []
    for kind in dict.fromkeys(d["kind"] for d in details):
        for variant in DELTA_VARIANTS:
            at = {d["turns"]: d for d in details if d["kind"] == kind and d["variant"] == variant}
            if at:
                cells.append([kind, variant] + [
                    f"{at[n]['stored_bytes'] / 1e6:.3f} ({at[n]['row_bytes'] / 1e6:.3f}), "
                    f"{at[n]['get_state_ms']:.1f}" if n in at else ""
                    for n in points])
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print(f"stored MB (SQLite: file; PostgreSQL: pg_total_relation_size after VACUUM), peak row MB "
          f"of the last {ROW_WINDOW} turns in brackets, get_state ms (median of {GET_STATE_CALLS} calls)")
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def print_details(details: list[dict[str, Any]]) -> None:
    cols = ["kind", "variant", "turns", "checkpoint_rows", "archive_rows", "file_bytes", "turn_ms_51_100",
            "turn_ms_last_50", "rows_max_51_100", "rows_max_last_50", "transcript_turns"]
    cells = [[_fmt(d.get(c)) for c in cols] for d in details]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = ["benchmark", "metric", "bare", "wrapped", "ratio", "target", "met"]
    if any("ratio_range" in r for r in rows):
        cols.insert(5, "ratio_range")
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 turns and fewer puts")
    parser.add_argument("--retention", action="store_true", help="only the retention benchmark (3.)")
    parser.add_argument("--offload", action="store_true", help="only the offload benchmark (4.)")
    parser.add_argument("--delta", action="store_true", help="only the DeltaChannel benchmark (5.)")
    parser.add_argument("--points", type=lambda s: [int(x) for x in s.split(",")], default=None,
                        help="turns to measure the DeltaChannel benchmark at, e.g. 100,300,500,1000")
    parser.add_argument("--backends", type=lambda s: s.split(","), default=["sqlite", "postgres"],
                        help="the DeltaChannel benchmark's backends: sqlite, postgres or both (default)")
    parser.add_argument("--runs", type=int, default=1, help="runs of the offload latency rows (median)")
    parser.add_argument("--first-put", action="store_true",
                        help="only the first-put benchmark (first_put: a run's first put, known again)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; times in seconds (wall) and µs (put)")
    if args.first_put:
        print_table(first_put(args.quick))
    elif args.offload:
        print_table(offload(args.quick, args.runs))
    elif args.delta:
        table, details = delta(args.quick, points=args.points, backends=args.backends)
        print_table(table)
        print()
        print_delta(details)
    elif args.retention:
        table, details = retention(args.quick)
        print_table(table)
        print()
        print_details(details)
    else:
        print_table(run(args.quick))
