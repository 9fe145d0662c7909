"""OpenTelemetry spans and metrics of the core reducer, read with the SDK's in-memory exporters."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from agentstate_reducer import MessageReducer, ReducerConfig, telemetry
from tests.otel_support import Otel, otel_fixture  # noqa: F401  (the otel fixture)

ROOT = Path(__file__).resolve().parent.parent
SECRET = "the-secret-word-in-a-message"


def history(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "sys", "id": "sys"}]
    for n in range(turns):
        out += [
            {"role": "user", "content": f"{SECRET} question {n}", "id": f"u{n}"},
            {"role": "assistant", "content": f"answer {n}", "id": f"a{n}"},
        ]
    return out


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_pruning_reduction_is_one_span_under_the_current_one(otel: Otel) -> None:
    reducer = MessageReducer(min_messages=4, max_messages=8)
    with otel.tracer.start_as_current_span("model call") as parent:
        result = reducer.reduce(history(6))
    (span,) = otel.spans(telemetry.REDUCE_SPAN)
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert attributes(span) == {
        "agentstate.entry": "reduce",
        "agentstate.mode": "count",
        "agentstate.messages.before": 13,
        "agentstate.messages.after": 5,
        "agentstate.pruned": 8,
        "agentstate.repaired": False,
        "agentstate.summary.created": False,
        "agentstate.summary.covered": 0,
    }
    assert len(result.surviving) == 5


def test_a_reduction_that_changes_nothing_emits_nothing(otel: Otel) -> None:
    MessageReducer(min_messages=4, max_messages=20).reduce(history(6))
    MessageReducer().reduce(history(6))
    assert otel.spans() == []
    assert otel.added() == {}


def test_a_repair_is_reported_as_one(otel: Otel) -> None:
    orphan = {"role": "tool", "tool_call_id": "gone", "content": "late", "id": "t"}
    MessageReducer().reduce([*history(2), orphan])
    (span,) = otel.spans(telemetry.REDUCE_SPAN)
    assert attributes(span)["agentstate.repaired"] is True
    assert attributes(span)["agentstate.pruned"] == 1
    assert otel.added()[
        ("agentstate_reducer.reductions",
         (("agentstate.entry", "reduce"), ("agentstate.mode", "count"), ("agentstate.outcome", "repaired")))
    ] == 1  # fmt: skip


def test_token_mode_reports_tokens_in_the_counters_unit(otel: Otel) -> None:
    config = ReducerConfig(max_tokens=60, target_tokens=30, token_counter=lambda m: 10)
    reducer = MessageReducer(config=config)
    result = reducer.reduce(history(6))
    (span,) = otel.spans(telemetry.REDUCE_SPAN)
    got = attributes(span)
    assert got["agentstate.mode"] == "tokens"
    assert got["agentstate.tokens.before"] == 130
    assert got["agentstate.tokens.after"] == result.stats.tokens_after == 10 * len(result.surviving)
    removed = otel.added()[
        ("agentstate_reducer.tokens.removed",
         (("agentstate.entry", "reduce"), ("agentstate.mode", "tokens"), ("agentstate.outcome", "pruned")))
    ]  # fmt: skip
    assert removed == 130 - got["agentstate.tokens.after"]


def test_the_summarizer_is_a_child_span_and_the_summary_is_described(otel: Otel) -> None:
    config = ReducerConfig(min_messages=4, max_messages=8, summarize_fn=lambda ms: f"{len(ms)} things",
                           inject_summary=True)
    with telemetry.entry("saver", thread="t-1", model="gpt-test"):
        MessageReducer(config=config).reduce(history(6))
    (reduce_span,) = otel.spans(telemetry.REDUCE_SPAN)
    (summary_span,) = otel.spans(telemetry.SUMMARIZE_SPAN)
    assert summary_span.parent is not None
    assert summary_span.parent.span_id == reduce_span.context.span_id
    assert attributes(summary_span) == {"agentstate.summary.messages": 8, "agentstate.summary.outcome": "ok"}
    got = attributes(reduce_span)
    assert (got["agentstate.entry"], got["agentstate.thread"], got["gen_ai.conversation.id"]) == (
        "saver", "t-1", "t-1")
    assert got["gen_ai.request.model"] == "gpt-test"
    assert (got["agentstate.summary.created"], got["agentstate.summary.covered"]) == (True, 8)
    durations = [k for k in otel.added() if k[0] == "agentstate_reducer.summarizer.duration"]
    assert durations == [("agentstate_reducer.summarizer.duration",
                          (("agentstate.entry", "saver"), ("agentstate.outcome", "ok")))]


def failing(messages: list[Any]) -> str:
    raise RuntimeError(f"provider said no to {messages[0]['content']}")


def _no_text_anywhere(otel: Otel) -> None:
    for span in otel.spans():
        events = [v for e in span.events for v in (e.attributes or {}).values()]
        values = [*attributes(span).values(), *events]
        assert not any(SECRET in str(v) for v in values), span.name
        assert SECRET not in (span.status.description or "")


def test_a_failing_summarizer_records_its_error_type_and_loses_nothing(otel: Otel) -> None:
    config = ReducerConfig(min_messages=4, max_messages=8, summarize_fn=failing, inject_summary=True)
    messages = history(6)
    result = MessageReducer(config=config).reduce(messages)
    assert result.surviving == messages  # policy "keep": nothing pruned
    (summary_span,) = otel.spans(telemetry.SUMMARIZE_SPAN)
    assert summary_span.status.status_code is StatusCode.ERROR
    assert attributes(summary_span)["error.type"] == "RuntimeError"
    assert attributes(summary_span)["agentstate.summary.outcome"] == "error"
    assert [e.name for e in summary_span.events] == ["exception"]
    (reduce_span,) = otel.spans(telemetry.REDUCE_SPAN)
    got = attributes(reduce_span)
    assert got["agentstate.pruned"] == 0
    assert (got["agentstate.messages.after"], got["agentstate.summary.created"]) == (13, False)
    _no_text_anywhere(otel)
    assert ("agentstate_reducer.reductions", (("agentstate.entry", "reduce"), ("agentstate.mode", "count"),
                                              ("agentstate.outcome", "summary_error"))) in otel.added()


async def test_async_reductions_report_the_same(otel: Otel) -> None:
    async def summarize(messages: list[Any]) -> str:
        return "summary"

    config = ReducerConfig(min_messages=4, max_messages=8, asummarize_fn=summarize, inject_summary=True)
    reducer = MessageReducer(config=config)

    async def one(thread: str) -> None:
        with telemetry.entry("middleware", thread=thread):
            await asyncio.sleep(0)  # the two tasks interleave: each keeps its own entry
            await reducer.areduce(history(6), namespace=("memories", "ignored"))

    await asyncio.gather(one("a"), one("b"))
    spans = otel.spans(telemetry.REDUCE_SPAN)
    assert sorted(attributes(s)["agentstate.thread"] for s in spans) == ["a", "b"]
    assert {attributes(s)["agentstate.entry"] for s in spans} == {"middleware"}
    summaries = otel.spans(telemetry.SUMMARIZE_SPAN)
    assert {s.parent.span_id for s in summaries if s.parent} == {s.context.span_id for s in spans}


def test_the_hooks_namespace_names_the_thread_and_threads_keep_their_entries(otel: Otel) -> None:
    reducer = MessageReducer(min_messages=4, max_messages=8)
    reducer.reduce(history(6), namespace=("memories", "from-namespace"))

    def worker(name: str) -> None:
        with telemetry.entry(name, thread=name):
            reducer.reduce(history(6))

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sorted((attributes(s)["agentstate.entry"], attributes(s)["agentstate.thread"])
                 for s in otel.spans(telemetry.REDUCE_SPAN))
    assert got == [("reduce", "from-namespace"), *((f"w{i}", f"w{i}") for i in range(4))]


def test_retention_span_reports_what_a_pass_deleted(otel: Otel) -> None:
    with telemetry.retention_span("compact") as stats:
        stats.update(checkpoints_deleted=3, writes_deleted=2, blobs_deleted=1, bytes_freed=4096)
    (span,) = otel.spans(telemetry.RETENTION_SPAN)
    assert attributes(span) == {
        "agentstate.entry": "compact", "agentstate.checkpoints_deleted": 3, "agentstate.writes_deleted": 2,
        "agentstate.blobs_deleted": 1, "agentstate.bytes_freed": 4096,
    }
    assert otel.added() == {
        ("agentstate_reducer.retention.bytes_freed", (("agentstate.entry", "compact"),)): 4096.0
    }


_WITHOUT_OTEL = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
from agentstate_reducer import MessageReducer, ReducerConfig
msgs = [{"role": "user", "content": str(i), "id": str(i)} for i in range(12)]
config = ReducerConfig(min_messages=2, max_messages=4, summarize_fn=lambda m: "s", inject_summary=True)
print(len(MessageReducer(config=config).reduce(msgs).surviving))
"""

_IMPORT_ONLY = """
import sys, agentstate_reducer
from agentstate_reducer import MessageReducer
MessageReducer(min_messages=2, max_messages=20).reduce([{"role": "user", "content": "x"}])
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_without_the_api_a_reduction_works_and_importing_loads_nothing() -> None:
    out = subprocess.run([sys.executable, "-c", _WITHOUT_OTEL], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "4"  # the pinned first message, the summary, the newest 2
    out = subprocess.run([sys.executable, "-c", _IMPORT_ONLY], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("error", [ValueError, KeyError])
def test_an_error_inside_the_reduction_marks_the_span_with_its_type_only(
    otel: Otel, error: type[Exception]
) -> None:
    def hook(pruned: list[Any], namespace: Any) -> None:
        raise error(SECRET)

    # a failing hook is logged and the reduction goes on: the span is not an error
    MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[hook])).reduce(history(6))
    (span,) = otel.spans(telemetry.REDUCE_SPAN)
    assert span.status.status_code is StatusCode.UNSET
    _no_text_anywhere(otel)
