"""The reduce span through CrewAI's real agent loop (a scripted ``BaseLLM``), in CrewAI's own
environment, which has the OpenTelemetry SDK.

CrewAI's own telemetry is anonymous usage data on a tracer provider of its own (never the global
one) and has no model-call span: the reduce span is a child of the caller's span.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from crewai.hooks import clear_all_global_hooks
from opentelemetry.trace import StatusCode

from agentstate_reducer import telemetry
from agentstate_reducer.integrations.crewai import ReducerHook
from tests.crewai.scripted import ScriptedLLM, crew_for
from tests.otel_support import Otel, otel_fixture  # noqa: F401  (the otel fixture)

TURNS = 4


@pytest.fixture(autouse=True)
def _no_global_hooks() -> Iterator[None]:
    clear_all_global_hooks()
    yield
    clear_all_global_hooks()


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _kickoff(otel: Otel, llm: ScriptedLLM, hook: ReducerHook, *, sync: bool) -> Any:
    crew, _ = crew_for(llm)

    async def run() -> Any:
        with hook.scoped():
            return await crew.akickoff()

    with otel.tracer.start_as_current_span("outer") as outer:
        if sync:
            hook.register()
            answer = crew.kickoff()
            hook.unregister()
        else:
            answer = asyncio.run(run())
    assert str(answer) == f"answered {TURNS} questions"
    return outer, crew


@pytest.mark.parametrize("sync", [True, False], ids=["kickoff", "akickoff"])
def test_crewai_reduce_span_is_a_child_of_the_callers_span(otel: Otel, sync: bool) -> None:
    llm = ScriptedLLM(model="scripted", turns=TURNS)
    outer, crew = _kickoff(otel, llm, ReducerHook(min_messages=4, max_messages=8), sync=sync)
    spans = sorted(otel.spans(telemetry.REDUCE_SPAN), key=lambda s: s.start_time or 0)
    assert spans
    # the requests hold the system message besides the bounded rest: 11, then 9, go out as 4
    assert [len(r) for r in llm.received] == [2, 4, 7, 9, 5, 7, 5, 7, 5]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(11, 4), (9, 4), (9, 4)]  # fmt: skip
    for span in spans:
        got = attributes(span)
        assert got["agentstate.entry"] == "crewai"
        assert got["agentstate.messages.before"] - got["agentstate.pruned"] == got[
            "agentstate.messages.after"]
        assert got["agentstate.thread"] == str(crew.tasks[0].id)
        assert span.parent is not None and span.parent.span_id == outer.get_span_context().span_id


def test_crewai_failing_summarizer_records_its_type_and_the_model_gets_everything(otel: Otel) -> None:
    def failing(messages: list[Any]) -> str:
        raise RuntimeError(f"down over {messages[0]['content']}")

    llm = ScriptedLLM(model="scripted", turns=TURNS)
    _kickoff(otel, llm, ReducerHook(min_messages=4, max_messages=8, summarizer=failing), sync=True)
    sizes = [len(r) for r in llm.received]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)  # every request grew: nothing lost
    summaries = otel.spans(telemetry.SUMMARIZE_SPAN)
    assert summaries
    for span in summaries:
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)["error.type"] == "RuntimeError"
        assert [dict(e.attributes or {}) for e in span.events] == [{"exception.type": "RuntimeError"}]
    for span in otel.spans():
        if span.name.startswith("agentstate_reducer."):
            events = [v for e in span.events for v in (e.attributes or {}).values()]
            values = [*attributes(span).values(), *events]
            assert not any("down over" in str(v) or "lookup" in str(v) for v in values)
    assert all(attributes(s)["agentstate.pruned"] == 0 for s in otel.spans(telemetry.REDUCE_SPAN))
