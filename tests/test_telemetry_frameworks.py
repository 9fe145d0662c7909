"""The reduce span through every framework integration's real agent loop, with scripted models.

Each test runs a short conversation (small limits, so a reduction prunes) under the ``otel``
fixture and states: the ``agentstate_reducer.reduce`` span exists with the integration's
``agentstate.entry``, its ``agentstate.thread`` where the framework names the conversation, counts
that match what the model received, and its parent: the framework's own model-call span where
the framework emits one around our hook, else the framework's enclosing span, else the test's own
outer span (docs/observability.md, "How they appear under each framework's own tracing").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import BaseChatClient, FunctionInvocationLayer
from agent_framework.observability import ChatTelemetryLayer
from agents import Agent as SdkAgent
from agents import Runner, SQLiteSession, set_tracing_disabled
from autogen_agentchat.agents import AssistantAgent
from google.adk.runners import InMemoryRunner
from llama_index.core.agent.workflow import FunctionAgent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from agentstate_reducer import telemetry
from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from agentstate_reducer.integrations.agno import ReducingCompressionManager
from agentstate_reducer.integrations.autogen import ReducingChatCompletionContext
from agentstate_reducer.integrations.google_adk import ReducerCallback
from agentstate_reducer.integrations.llama_index import ReducingMemory
from agentstate_reducer.integrations.openai_agents import ReducingSession
from agentstate_reducer.integrations.pydantic_ai import ReduceHistory
from agentstate_reducer.integrations.smolagents import ReduceMemory
from tests import adk_script, af_script, agno_script, autogen_script, llama_index_script, smolagents_script
from tests.openai_agents_script import Reply, ScriptedAPI
from tests.otel_support import Otel, otel_fixture  # noqa: F401  (the otel fixture)

SECRET = "zebra-quartz-secret"


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def reduce_spans(otel: Otel, entry: str) -> list[ReadableSpan]:
    """The reduce spans, in the order they started, each checked to be ``entry``'s and
    internally consistent (what went plus what stayed is what came, without a summary)."""
    spans = sorted(otel.spans(telemetry.REDUCE_SPAN), key=lambda s: s.start_time or 0)
    assert spans, "no reduction pruned"
    for span in spans:
        got = attributes(span)
        assert got["agentstate.entry"] == entry
        if not got["agentstate.summary.created"]:
            kept = got["agentstate.messages.before"] - got["agentstate.pruned"]
            assert kept == got["agentstate.messages.after"]
    return spans


def parent(otel: Otel, span: ReadableSpan) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next((s for s in otel.spans() if s.context.span_id == span.parent.span_id), None)


def chain(otel: Otel, span: ReadableSpan) -> list[str]:
    """The names of ``span``'s ancestors, nearest first."""
    names = []
    found = parent(otel, span)
    while found is not None:
        names.append(found.name)
        found = parent(otel, found)
    return names


def no_text_anywhere(otel: Otel, *texts: str) -> None:
    """No attribute, event or status of any span of ours holds one of ``texts``."""
    ours = [s for s in otel.spans() if s.name.startswith("agentstate_reducer.")]
    assert ours
    for span in ours:
        events = [v for e in span.events for v in (e.attributes or {}).values()]
        values = [*attributes(span).values(), *events, span.status.description or ""]
        for text in texts:
            assert not any(text in str(v) for v in values), (span.name, text)


def assert_failed_summary(otel: Otel) -> None:
    """Every summarize span failed, with ``error.type`` and an exception event of its type only."""
    summaries = otel.spans(telemetry.SUMMARIZE_SPAN)
    assert summaries
    for span in summaries:
        got = attributes(span)
        assert span.status.status_code is StatusCode.ERROR
        assert got["error.type"] == "RuntimeError"
        assert got["agentstate.summary.outcome"] == "error"
        assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
            ("exception", {"exception.type": "RuntimeError"})
        ]
    for span in otel.spans(telemetry.REDUCE_SPAN):
        assert attributes(span)["agentstate.pruned"] == 0


def failing_summarizer(messages: Sequence[Any]) -> str:
    raise RuntimeError(f"{SECRET}: the summarizer is down over {messages[0]!r}")


# -- Google ADK: its spans are on by default; the before-model callback runs before ------------
# ``generate_content`` (schema 2, the default) or inside ``call_llm`` (schema 1)


def _adk_run(otel: Otel, *, sync: bool, turns: int = 3, summarizer: Any = None) -> Any:
    model = adk_script.ScriptedLlm()
    callback = ReducerCallback(min_messages=4, max_messages=8, summarizer=summarizer)
    runner = InMemoryRunner(agent=adk_script.agent(model, before_model_callback=callback), app_name="app")
    asks = [adk_script.user(adk_script.question(i)) for i in range(turns)]

    async def main() -> None:
        for ask in asks:
            async for _ in runner.run_async(user_id="u", session_id="s1", new_message=ask):
                pass

    asyncio.run(runner.session_service.create_session(app_name="app", user_id="u", session_id="s1"))
    with otel.tracer.start_as_current_span("outer"):
        if sync:  # Runner.run drives the async run in a thread of its own
            for ask in asks:
                for _ in runner.run(user_id="u", session_id="s1", new_message=ask):
                    pass
        else:
            asyncio.run(main())
    return model


@pytest.mark.parametrize("sync", [False, True], ids=["run_async", "run"])
def test_google_adk_reduce_span_is_under_invoke_agent_beside_generate_content(otel: Otel, sync: bool) -> None:
    model = _adk_run(otel, sync=sync)
    spans = reduce_spans(otel, "google_adk")
    # a turn is 3 model calls; from turn 2 on the first call of a turn holds 9 contents: pruned to 3
    assert [len(r) for r in model.requests] == [1, 3, 5, 7, 3, 5, 7, 3, 5]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 3), (9, 3)]  # fmt: skip
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"s1"}
    for span in spans:  # not under generate_content, which ADK opens after the callbacks
        assert chain(otel, span) == ["invoke_agent assistant", "invoke_workflow assistant", "outer"]


def test_google_adk_legacy_schema_puts_the_reduce_span_in_call_llm(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN", "1")
    _adk_run(otel, sync=False)
    spans = reduce_spans(otel, "google_adk")
    assert len(spans) == 2
    for span in spans:
        assert chain(otel, span)[:2] == ["call_llm", "invoke_agent assistant"]


def test_google_adk_failing_summarizer_records_its_type_and_the_model_gets_everything(otel: Otel) -> None:
    model = _adk_run(otel, sync=False, summarizer=failing_summarizer)
    assert [len(r) for r in model.requests] == [1, 3, 5, 7, 9, 11, 13, 15, 17]  # nothing lost
    assert_failed_summary(otel)
    spans = reduce_spans(otel, "google_adk")
    # a reduction per call from the fifth on (9 contents > 8), each keeping all: what the model got
    assert [attributes(s)["agentstate.messages.after"] for s in spans] == [len(r) for r in model.requests[4:]]
    no_text_anywhere(otel, SECRET, "q0 please", "lorem ipsum")


# -- Pydantic AI: its ``chat`` span (``Agent.instrument = True``) wraps the history processor ----


def _pydantic_agent(summarizer: Any = None) -> tuple[Any, list[int]]:
    received: list[int] = []

    def model(messages: list[Any], info: Any) -> ModelResponse:
        received.append(len(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(received)}")])


    capability = ReduceHistory(min_messages=4, max_messages=8, summarizer=summarizer)
    agent = Agent(FunctionModel(model), system_prompt="You are brief.", capabilities=[capability])
    agent.instrument = True
    return agent, received


@pytest.mark.parametrize("sync", [True, False], ids=["run_sync", "run"])
def test_pydantic_ai_reduce_span_is_a_child_of_the_chat_span(otel: Otel, sync: bool) -> None:
    agent, received = _pydantic_agent()
    history: list[Any] = []
    with otel.tracer.start_as_current_span("outer"):
        for n in range(6):
            prompt = f"question {n}"
            if sync:
                result = agent.run_sync(prompt, message_history=history, conversation_id="conv-1")
            else:
                result = asyncio.run(agent.run(prompt, message_history=history, conversation_id="conv-1"))
            history = result.all_messages()
    spans = reduce_spans(otel, "pydantic_ai")
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"conv-1"}
    for span in spans:
        assert chain(otel, span) == ["chat function:model:", "invoke_agent agent", "outer"]
    # the fifth call's history is 9 messages (the system prompt's request split off and pinned):
    # 4 stay, and Pydantic AI merges the pinned request with the next one: the model gets 3
    assert received == [1, 3, 5, 7, 3, 5]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 4)]  # fmt: skip


# -- Microsoft Agent Framework: its ``chat`` span (on by default) is opened by the telemetry layer
# around ``BaseChatClient.get_response``, which runs the compaction strategy before the provider
# call. Provider clients stack the layers in this order.


def _af_client() -> Any:
    class TracedClient(FunctionInvocationLayer[Any], ChatTelemetryLayer[Any], BaseChatClient[Any]):
        """The scripted client in a provider client's layer order."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.requests: list[Any] = []
            self.summaries = 0

        _inner_get_response = af_script.ScriptClient._inner_get_response

    return TracedClient()


@pytest.mark.parametrize("failing", [False, True], ids=["prunes", "failing-summarizer"])
def test_agent_framework_reduce_span_is_a_child_of_the_chat_span(otel: Otel, failing: bool) -> None:
    client = _af_client()
    summarizer = failing_summarizer if failing else None
    agent = af_script.make_agent(client, compaction_strategy=ReducerCompactionStrategy(
        min_messages=4, max_messages=8, summarizer=summarizer))

    async def main() -> None:
        session = agent.create_session()
        for i in range(3):
            await agent.run(af_script.question(i), session=session)

    with otel.tracer.start_as_current_span("outer"):
        asyncio.run(main())
    spans = reduce_spans(otel, "agent_framework")
    sizes = [len(r.messages) for r in client.requests]
    for span in spans:
        # the strategy gets the messages only, no session: no thread to report
        assert "agentstate.thread" not in attributes(span)
        names = chain(otel, span)
        assert names[0] == "chat unknown"  # "chat <model id>": the scripted client has none
        assert names[1].startswith("invoke_agent ") and names[2:] == ["outer"], names
    if failing:
        assert sizes == [1, 3, 5, 7, 9, 11, 13, 15, 17]  # nothing lost
        assert [attributes(s)["agentstate.messages.after"] for s in spans] == sizes[4:]
        assert_failed_summary(otel)
        no_text_anywhere(otel, SECRET, "q0 please", "r" * 50)
    else:
        assert sizes == [1, 3, 5, 7, 3, 5, 7, 3, 5]
        assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
                for s in spans] == [(9, 3), (9, 3)]  # fmt: skip


# -- AutoGen: ``invoke_agent`` spans (autogen-core, on with a tracer provider), no model-call span


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
def test_autogen_reduce_span_is_a_child_of_invoke_agent(otel: Otel, stream: bool) -> None:
    client = autogen_script.ScriptedClient([r for i in range(3) for r in autogen_script.turn_responses(i)])
    context = ReducingChatCompletionContext(min_messages=4, max_messages=8, thread_id="t-autogen")
    tools: list[Any] = [autogen_script.lookup, autogen_script.add]
    agent = AssistantAgent("helper", client, tools=tools, system_message="You are brief.",
                           model_context=context, max_tool_iterations=3)

    async def main() -> None:
        for i in range(3):
            if stream:
                async for _ in agent.run_stream(task=autogen_script.question(i)):
                    pass
            else:
                await agent.run(task=autogen_script.question(i))

    with otel.tracer.start_as_current_span("outer"):
        asyncio.run(main())
    spans = reduce_spans(otel, "autogen")
    # the requests carry the system message besides the conversation the reducer bounds
    assert [len(r) for r in client.requests] == [2, 4, 6, 8, 4, 6, 8, 4, 6]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 3), (9, 3)]  # fmt: skip
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"t-autogen"}
    for span in spans:
        assert chain(otel, span) == ["invoke_agent helper", "outer"]


# -- LlamaIndex, smolagents, Agno, the OpenAI Agents SDK: no OpenTelemetry span of their own (their
# tracing is their own instrumentation, or an add-on instrumentor): the reduce span is a child of
# whatever span is current, here the test's outer span


@pytest.mark.parametrize("streaming", [True, False], ids=["astream_chat", "achat"])
def test_llama_index_reduce_span_is_a_child_of_the_callers_span(otel: Otel, streaming: bool) -> None:
    llm = llama_index_script.ScriptedLLM(llama_index_script.script(3))
    memory = ReducingMemory.from_defaults(min_messages=4, max_messages=8, session_id="user-1")
    agent = FunctionAgent(tools=llama_index_script.TOOLS, llm=llm, system_prompt="You are brief.",
                          streaming=streaming)

    async def main() -> None:
        for i in range(3):
            await agent.run(llama_index_script.question(i), memory=memory)

    with otel.tracer.start_as_current_span("outer"):
        asyncio.run(main())
    spans = reduce_spans(otel, "llama_index")
    # a turn stores 7 messages; storing turn 1 (14 > 8) keeps 2, storing turn 2 (9) keeps 2; turn
    # 2's first request is the system prompt, the 2 kept and the new question
    assert [len(r) for r in llm.requests] == [2, 4, 7, 9, 11, 14, 4, 6, 9]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(14, 2), (9, 2)]  # fmt: skip
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"user-1"}
    for span in spans:
        assert chain(otel, span) == ["outer"]


@pytest.mark.parametrize("failing", [False, True], ids=["prunes", "failing-summarizer"])
def test_smolagents_reduce_span_is_a_child_of_the_callers_span(otel: Otel, failing: bool) -> None:
    model = smolagents_script.ScriptedModel()
    reduce = ReduceMemory(min_messages=4, max_messages=8, summarizer=failing_summarizer if failing else None)
    agent = smolagents_script.tool_agent(model, step_callbacks=[reduce], name="researcher")
    with otel.tracer.start_as_current_span("outer"):
        answers = smolagents_script.converse(agent, 3)
    assert answers == ["a0", "a1", "a2"]
    spans = reduce_spans(otel, "smolagents")
    counts = [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
              for s in spans]
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"researcher"}
    for span in spans:
        assert chain(otel, span) == ["outer"]
    if failing:
        assert_failed_summary(otel)
        assert len(agent.memory.steps) == 3 * 4  # nothing pruned
        assert [len(r) for r in model.requests] == [2, 4, 6, 9, 11, 13, 16, 18, 20]
        assert counts == [(6, 6), (7, 7), (8, 8), (10, 10), (11, 11), (12, 12)]
        no_text_anywhere(otel, SECRET, "q0 please")
    else:
        # counted in memory steps; each reduction shortens the next request
        assert [len(r) for r in model.requests] == [2, 4, 6, 9, 5, 7, 10, 5, 7]
        assert counts == [(6, 3), (7, 3)]


@pytest.mark.parametrize("sync", [True, False], ids=["run", "arun"])
def test_agno_reduce_span_is_a_child_of_the_callers_span(otel: Otel, sync: bool) -> None:
    model = agno_script.ScriptedModel()
    manager = ReducingCompressionManager(min_messages=4, max_messages=8)
    bot = agno_script.agent(model, compression_manager=manager)

    async def arun() -> None:
        for i in range(3):
            await bot.arun(agno_script.question(i), session_id="s-agno")

    with otel.tracer.start_as_current_span("outer"):
        if sync:
            for i in range(3):
                bot.run(agno_script.question(i), session_id="s-agno")
        else:
            asyncio.run(arun())
    spans = reduce_spans(otel, "agno")
    # turn 2's first request, 15 messages with the system message, goes out as the 3 kept and the
    # live question
    assert [len(r) for r in model.requests] == [2, 4, 7, 9, 11, 14, 4, 6, 9]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(15, 3)]  # fmt: skip
    # Agno does not tell a compression manager the session id: the conversation is named by the id
    # of its first question, which Agno copies into every later run's history
    first_question = next(m for m in model.requests[0] if m.role == "user")
    assert {attributes(s)["agentstate.thread"] for s in spans} == {first_question.id}
    for span in spans:
        assert chain(otel, span) == ["outer"]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_openai_agents_reduce_span_is_a_child_of_the_callers_span(
    otel: Otel, api: Any, tmp_path: Path
) -> None:
    set_tracing_disabled(True)
    scripted = ScriptedAPI()
    agent = SdkAgent(name="assistant", instructions="Answer.", model=scripted.model(api))
    session = ReducingSession(SQLiteSession("s-openai", str(tmp_path / "sessions.db")),
                              min_messages=4, max_messages=8)

    async def main() -> None:
        for i in range(6):
            scripted.extend([Reply(text=f"answer {i}")])
            await Runner.run(agent, f"question {i}", session=session)

    with otel.tracer.start_as_current_span("outer"):
        asyncio.run(main())
    spans = reduce_spans(otel, "openai_agents")
    # the runner stores the fifth question (9 items > 8): 3 stay, then the answer; the sixth run
    # sends those 4 and its question (and the system message on Chat Completions)
    sizes = [len(r.get("input", r.get("messages", []))) for r in scripted.requests]
    assert sizes == ([1, 3, 5, 7, 9, 5] if api == "responses" else [2, 4, 6, 8, 10, 6])
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 3)]  # fmt: skip
    assert {attributes(s)["agentstate.thread"] for s in spans} == {"s-openai"}
    for span in spans:
        assert chain(otel, span) == ["outer"]
