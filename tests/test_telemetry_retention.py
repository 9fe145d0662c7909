"""OpenTelemetry spans of the saver's reductions and of retention passes (keep_last, prune, sweep,
compact), read with the SDK's in-memory exporter, on real SQLite files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate_reducer import MessageReducer, telemetry
from checkpointers import ReducingCheckpointSaver
from checkpointers.compact import compact_store
from checkpointers.retention import prune, sweep
from tests.otel_support import Otel, otel_fixture  # noqa: F401  (the otel fixture)
from tests.scenario_graph import arun_turns, build_graph, run_turns


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_the_savers_reductions_and_keep_last_are_spans_of_the_thread(tmp_path: Path, otel: Otel) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "s.sqlite")) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=1)
        with otel.tracer.start_as_current_span("request") as parent:
            run_turns(build_graph(saver), 6, thread_id="t-1")
        deleted = saver.retention_stats
    reduces = otel.spans(telemetry.REDUCE_SPAN)
    assert reduces and {attributes(s)["agentstate.entry"] for s in reduces} == {"saver"}
    assert {attributes(s)["agentstate.thread"] for s in reduces} == {"t-1"}
    assert all(attributes(s)["agentstate.messages.after"] <= 8 for s in reduces)
    kept = otel.spans(telemetry.RETENTION_SPAN)
    assert kept and {attributes(s)["agentstate.entry"] for s in kept} == {"keep_last"}
    assert {attributes(s)["gen_ai.conversation.id"] for s in kept} == {"t-1"}
    assert deleted is not None
    total = sum(attributes(s)["agentstate.checkpoints_deleted"] for s in kept)
    assert total == deleted.checkpoints_deleted > 0
    # every span belongs to the request's trace
    assert {s.context.trace_id for s in (*reduces, *kept)} == {parent.get_span_context().trace_id}


async def test_async_saver_spans(tmp_path: Path, otel: Otel) -> None:
    async with aiosqlite.connect(tmp_path / "a.sqlite") as conn:
        inner = AsyncSqliteSaver(conn)
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=1)
        await arun_turns(build_graph(saver), 6, thread_id="t-async")
    assert {attributes(s)["agentstate.thread"] for s in otel.spans(telemetry.REDUCE_SPAN)} == {"t-async"}
    assert {attributes(s)["agentstate.thread"] for s in otel.spans(telemetry.RETENTION_SPAN)} == {"t-async"}


def test_sweep_prune_and_compact_report_what_they_deleted(tmp_path: Path, otel: Otel) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "b.sqlite")) as saver:
        graph = build_graph(saver)
        for thread in ("a", "b", "c"):
            run_turns(graph, 3, thread_id=thread)
        otel.exporter.clear()
        report = compact_store(saver, MessageReducer(min_messages=2, max_messages=4), thread_ids=["a"],
                               keep_last=1)
        (compacted,) = otel.spans(telemetry.RETENTION_SPAN)
        assert attributes(compacted)["agentstate.entry"] == "compact"
        assert attributes(compacted)["agentstate.checkpoints_deleted"] == report.checkpoints_deleted > 0
        prune(saver, ["b"])
        pruned = otel.spans(telemetry.RETENTION_SPAN)[-1]
        got = attributes(pruned)
        assert (got["agentstate.entry"], got["agentstate.thread"]) == ("prune", "b")
        assert got["agentstate.checkpoints_deleted"] > 0
        swept = sweep(saver, keep_last=1, vacuum=True)
        span = otel.spans(telemetry.RETENTION_SPAN)[-1]
    got = attributes(span)
    assert got["agentstate.entry"] == "sweep"
    assert got["agentstate.checkpoints_deleted"] == swept.checkpoints_deleted > 0
    assert swept.bytes_before is not None and swept.bytes_after is not None
    assert got["agentstate.bytes_freed"] == max(swept.bytes_before - swept.bytes_after, 0)
    freed = [v for k, v in otel.added().items() if k[0] == "agentstate_reducer.retention.bytes_freed"]
    assert freed == [float(got["agentstate.bytes_freed"])]
