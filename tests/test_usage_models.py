"""The scripted models report usage where each framework's own providers do, and the framework
records it: what the calibration tests and the integrations rely on.

Each test runs a few turns through the framework's real agent loop, with no reducer, a model
reporting the provider's count of each request (``tests.usage_models``, bytes/3 + 4 per
message), and checks the figure in the framework's own usage record, and, where it is there,
in the history the integration's hook reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent as OAgent
from agents import ModelResponse as ModelResponse_
from agents import RunHooks, Runner, SQLiteSession, function_tool, set_tracing_disabled
from autogen_agentchat.agents import AssistantAgent
from google.adk.runners import InMemoryRunner
from llama_index.core.agent.workflow import AgentOutput, FunctionAgent
from llama_index.core.memory import Memory
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from smolagents.memory import ActionStep

from agentstate_reducer.tokens import heuristic_counter
from tests.adk_script import agent as adk_agent
from tests.adk_script import question as adk_question
from tests.adk_script import user as adk_user
from tests.af_script import make_agent as af_make_agent
from tests.af_script import question as af_question
from tests.agno_script import agent as agno_agent
from tests.agno_script import question as agno_question
from tests.autogen_script import SYSTEM_PROMPT as AG_SYSTEM
from tests.autogen_script import add as ag_add
from tests.autogen_script import lookup as ag_lookup
from tests.autogen_script import question as ag_question
from tests.autogen_script import turn_responses
from tests.llama_index_script import SYSTEM_PROMPT as LI_SYSTEM
from tests.llama_index_script import TOOLS as LI_TOOLS
from tests.llama_index_script import question as li_question
from tests.llama_index_script import script as li_script
from tests.openai_agents_script import APIS, Api, Reply
from tests.smolagents_script import converse, tool_agent
from tests.test_integration_pydantic_ai import openai_dicts as pydantic_openai_dicts
from tests.usage_agent_framework import UsageClient as AFUsageClient
from tests.usage_agno import UsageModel as AgnoUsageModel
from tests.usage_autogen import UsageClient
from tests.usage_google_adk import UsageLlm
from tests.usage_llama_index import UsageLLM
from tests.usage_models import FIGURES, PER_MESSAGE, Reporter, message_tokens, provider_tokens
from tests.usage_openai_agents import UsageAPI
from tests.usage_pydantic_ai import reporting_model
from tests.usage_smolagents import UsageModel as SmolUsageModel


def test_the_provider_counts_unlike_the_reducers_heuristic() -> None:
    message = {"role": "user", "content": "What is the weather in city 7 today? " * 20}
    ours = heuristic_counter()(message)
    theirs = message_tokens(message)
    assert theirs == -(-len(message["content"]) // 3) + PER_MESSAGE
    assert 1.25 < theirs / ours < 1.4  # about 4/3 of characters/4
    assert provider_tokens([message, message], overhead=100) == 2 * theirs + 100


def test_reporter_records_the_truth_and_reports_the_figure() -> None:
    request = [{"role": "user", "content": "abcdef"}]
    true = message_tokens(request[0])
    reports = {f: Reporter(figure=f).report(request) for f in FIGURES}
    assert reports == {"true": true, "missing": None, "zero": 0, "negative": -true, "absurd": 10**9}
    reporter = Reporter(overhead=50)
    reporter.report(request)
    reporter.report(request * 3)
    assert reporter.counts == [50 + true, 50 + 3 * true]
    assert reporter.after_first() == [50 + 3 * true] and reporter.over(50 + true) == [50 + 3 * true]


# -- Pydantic AI: ModelResponse.usage, in the history the capability reads ------------------------


def _pydantic_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"})])


def test_pydantic_ai_usage_is_on_the_histories_responses() -> None:
    reporter, seen = Reporter(), []

    def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        seen.append([m.usage.input_tokens for m in messages if isinstance(m, ModelResponse)])
        return messages

    model = reporting_model(_pydantic_answer, reporter, pydantic_openai_dicts)
    agent = Agent(model, system_prompt="Be brief.", capabilities=[ProcessHistory(process)])

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"{q}: found"

    history: list[ModelMessage] = []
    for turn in range(3):
        result = agent.run_sync(f"question {turn}", message_history=history)
        history = result.all_messages()
    responses = [m.usage.input_tokens for m in history if isinstance(m, ModelResponse)]
    assert responses == reporter.counts and len(responses) == 6
    assert seen[-1] == reporter.counts[:-1]  # the processor of the last call saw every earlier one


def test_pydantic_ai_missing_usage_is_unmeasured() -> None:
    model = reporting_model(_pydantic_answer, Reporter(figure="missing"), pydantic_openai_dicts)
    result = Agent(model).run_sync("question")
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    assert response.usage.input_tokens == 0 and response.usage.unmeasured_requests == 1


# -- Google ADK: LlmResponse.usage_metadata, on the session's events a before-model hook reads ----


def test_google_adk_usage_is_on_the_sessions_events() -> None:
    reporter, seen = Reporter(), []

    async def before(*, callback_context: Any, llm_request: Any) -> None:
        events = callback_context.session.events
        seen.append([e.usage_metadata.prompt_token_count for e in events if e.usage_metadata])

    model = UsageLlm().use(reporter)
    runner = InMemoryRunner(agent=adk_agent(model, before_model_callback=before), app_name="app")

    async def converse() -> list[Any]:
        await runner.session_service.create_session(app_name="app", user_id="u", session_id="s")
        for turn in range(3):
            message = adk_user(adk_question(turn))
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
                pass
        session = await runner.session_service.get_session(app_name="app", user_id="u", session_id="s")
        assert session is not None
        return [e.usage_metadata.prompt_token_count for e in session.events if e.usage_metadata]

    assert asyncio.run(converse()) == reporter.counts and len(reporter.counts) == 9
    assert seen[-1] == reporter.counts[:-1]  # the hook of the last call saw every earlier figure


# -- the frameworks whose usage is beside the history, not in it -----------------------------------


@pytest.mark.parametrize("api", APIS)
def test_openai_agents_usage_is_on_model_responses_not_session_items(api: Api) -> None:
    set_tracing_disabled(True)
    reporter, seen = Reporter(), []

    class Hooks(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse_) -> None:
            seen.append(response.usage.input_tokens)

    scripted = UsageAPI(reporter=reporter)

    @function_tool
    def lookup(q: str) -> str:
        """Look q up."""
        return f"{q}: found"

    agent = OAgent(name="a", instructions="Be brief.", model=scripted.model(api), tools=[lookup])
    session = SQLiteSession("s")

    async def converse() -> list[int]:
        raw: list[int] = []
        for turn in range(2):
            scripted.extend([Reply(calls=((f"c{turn}", "lookup", {"q": "x"}),)), Reply(text="done")])
            result = await Runner.run(agent, f"question {turn}", session=session, hooks=Hooks())
            raw += [r.usage.input_tokens for r in result.raw_responses]
        return raw

    assert asyncio.run(converse()) == seen == reporter.counts and len(seen) == 4
    items = asyncio.run(session.get_items())
    assert not any("usage" in item for item in items)
    session.close()


def test_autogen_usage_is_on_the_runs_events_not_in_the_model_context() -> None:
    reporter = Reporter()
    client = UsageClient([r for turn in range(2) for r in turn_responses(turn)], reporter)
    agent = AssistantAgent("helper", client, tools=[ag_lookup, ag_add], system_message=AG_SYSTEM,
                           max_tool_iterations=3)  # fmt: skip

    async def converse() -> list[int]:
        figures: list[int] = []
        for turn in range(2):
            result = await agent.run(task=ag_question(turn))
            figures += [m.models_usage.prompt_tokens for m in result.messages if m.models_usage]
        return figures

    assert asyncio.run(converse()) == reporter.counts and len(reporter.counts) == 6
    assert client.actual_usage().prompt_tokens == sum(reporter.counts)
    context = asyncio.run(agent.model_context.get_messages())
    assert all(not hasattr(m, "usage") and not hasattr(m, "models_usage") for m in context)


def test_agent_framework_usage_is_on_the_response_not_the_stored_messages() -> None:
    reporter = Reporter()
    agent = af_make_agent(AFUsageClient(reporter=reporter))
    session = agent.create_session()

    async def converse() -> list[int]:
        figures = []
        for turn in range(2):
            response = await agent.run(af_question(turn), session=session)
            assert response.usage_details is not None
            figure = response.usage_details.get("input_token_count")
            assert isinstance(figure, int)
            figures.append(figure)
        return figures

    # the function loop adds up the usage of a run's model calls
    assert asyncio.run(converse()) == [sum(reporter.counts[:3]), sum(reporter.counts[3:])]
    stored = session.state["in_memory"]["messages"]
    assert not any(c.type == "usage" for m in stored for c in m.contents)


def test_llama_index_usage_is_on_the_agents_output_not_in_memory() -> None:
    reporter = Reporter()
    llm = UsageLLM(li_script(2), reporter=reporter)
    agent = FunctionAgent(tools=LI_TOOLS, llm=llm, system_prompt=LI_SYSTEM)
    memory = Memory.from_defaults(session_id="s", token_limit=100_000)

    async def converse() -> list[int]:
        figures = []
        for turn in range(2):
            handler = agent.run(li_question(turn), memory=memory)
            async for event in handler.stream_events():
                if isinstance(event, AgentOutput):
                    assert isinstance(event.raw, dict)
                    figures.append(event.raw["usage"]["prompt_tokens"])
            await handler
        return figures

    assert asyncio.run(converse()) == reporter.counts and len(reporter.counts) == 6
    stored = asyncio.run(memory.aget_all())
    assert not any("prompt_tokens" in m.additional_kwargs for m in stored)


# -- the frameworks whose usage is in the history the integration bounds --------------------------


def test_smolagents_usage_is_on_the_memorys_steps_and_step_callbacks_see_it() -> None:
    reporter, seen = Reporter(), []
    model = SmolUsageModel(reporter=reporter)
    agent = tool_agent(model, step_callbacks=[lambda step, agent=None: seen.append(step)])
    converse(agent, 2)
    actions = [s for s in agent.memory.steps if isinstance(s, ActionStep) and s.token_usage]
    steps = [s.token_usage.input_tokens for s in actions]
    assert steps == reporter.counts == [s.token_usage.input_tokens for s in seen] and len(steps) == 6


def test_agno_usage_is_on_the_assistant_messages_the_compression_manager_gets() -> None:
    reporter = Reporter()
    model = AgnoUsageModel(reporter=reporter)
    agent = agno_agent(model)
    for turn in range(2):
        agent.run(agno_question(turn), session_id="s")
    session = agent.get_session("s")
    assert session is not None
    stored = [m.metrics.input_tokens for m in session.get_messages() if m.role == "assistant"]
    assert stored == reporter.counts and len(stored) == 6
    # the history Agno copies into a request keeps the figures: the list the manager gets
    sent = [m.metrics.input_tokens for m in model.requests[-1] if m.role == "assistant"]
    assert sent == reporter.counts[:-1]
