"""The reduce span through LangGraph: ``ReducerMiddleware`` in a real ``create_agent`` agent, the
``ReducingCheckpointSaver`` under one, and the state annotation in a ``StateGraph``, sync and async.

LangChain and LangGraph emit no OpenTelemetry span of their own (LangSmith traces them with its own
client), so the reduce span is a child of the caller's span, here the test's outer one.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from checkpointers import ReducingCheckpointSaver
from tests.agent_script import ScriptedModel, add, lookup, turns
from tests.otel_support import Otel, otel_fixture  # noqa: F401  (the otel fixture)
from tests.test_telemetry_frameworks import (
    SECRET,
    assert_failed_summary,
    attributes,
    chain,
    failing_summarizer,
    no_text_anywhere,
    reduce_spans,
)

SYSTEM = "You are a terse assistant."


class NamedModel(ScriptedModel):
    """The scripted model under a model name, as provider chat models carry one."""

    model_name: str = "scripted-1"


def _run(agent: Any, n: int, *, thread: str, sync: bool) -> None:
    config = {"configurable": {"thread_id": thread}}

    async def arun() -> None:
        for t in turns(n):
            await agent.ainvoke(t, config)

    if sync:
        for t in turns(n):
            agent.invoke(t, config)
    else:
        asyncio.run(arun())


@pytest.mark.parametrize("mode", ["state", "request"])
@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
def test_middleware_reduce_span_names_middleware_the_thread_and_the_model(
    otel: Otel, mode: Any, sync: bool
) -> None:
    model = NamedModel(steps=1)
    middleware = ReducerMiddleware(MessageReducer(min_messages=4, max_messages=8), mode=mode)
    agent = create_agent(model, [lookup, add], system_prompt=SYSTEM, checkpointer=InMemorySaver(),
                         middleware=[middleware])
    with otel.tracer.start_as_current_span("outer"):
        _run(agent, 3, thread="t-mw", sync=sync)
    spans = reduce_spans(otel, "middleware")
    # a turn is 4 messages; the third turn's question makes 9: the newest turn start is kept alone
    # (the planner cuts at a user turn), and the model gets it after the system prompt
    assert [len(c) for c in model.calls] == [2, 4, 6, 8, 2, 4]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 1)]  # fmt: skip
    for span in spans:
        got = attributes(span)
        assert got["agentstate.thread"] == "t-mw"
        # request mode sees the call's model; state mode runs before it, in a node of its own
        assert got.get("gen_ai.request.model") == ("scripted-1" if mode == "request" else None)
        assert chain(otel, span) == ["outer"]


def test_middleware_failing_summarizer_records_its_type_and_the_model_gets_everything(otel: Otel) -> None:
    model = ScriptedModel(steps=1)
    config = ReducerConfig(min_messages=4, max_messages=8, summarize_fn=failing_summarizer)
    reducer = MessageReducer(config=config)
    agent = create_agent(model, [lookup, add], system_prompt=SYSTEM, checkpointer=InMemorySaver(),
                         middleware=[ReducerMiddleware(reducer)])
    with otel.tracer.start_as_current_span("outer"):
        _run(agent, 3, thread="t-fail", sync=True)
    assert [len(c) for c in model.calls] == [2, 4, 6, 8, 10, 12]  # nothing lost
    assert_failed_summary(otel)
    no_text_anywhere(otel, SECRET, "q0 ", "lorem ipsum")


@pytest.mark.parametrize("sync", [True, False], ids=["put", "aput"])
def test_saver_reduce_span_names_saver_and_the_thread(otel: Otel, sync: bool) -> None:
    model = ScriptedModel(steps=1)
    saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=4, max_messages=8))
    agent = create_agent(model, [lookup, add], system_prompt=SYSTEM, checkpointer=saver)
    with otel.tracer.start_as_current_span("outer"):
        _run(agent, 3, thread="t-saver", sync=sync)
    spans = reduce_spans(otel, "saver")
    # the saver bounds what is stored, not what the running graph holds: the third turn's puts
    # store 2, 3, 4, then 5 of its 9 to 12 messages, and the model still saw all of them
    assert [len(c) for c in model.calls] == [2, 4, 6, 8, 10, 12]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 2), (10, 3), (11, 4), (12, 5)]  # fmt: skip
    stored = agent.get_state({"configurable": {"thread_id": "t-saver"}}).values["messages"]
    assert len(stored) == 5
    for span in spans:
        assert attributes(span)["agentstate.thread"] == "t-saver"
        assert chain(otel, span)[-1] == "outer"


class _State(TypedDict):
    messages: Annotated[list, MessageReducer(min_messages=4, max_messages=8).as_langgraph_reducer()]
    turns: Annotated[int, operator.add]


def _answer(state: _State) -> dict[str, Any]:
    n = state["turns"]
    return {"messages": [AIMessage(content=f"answer {n}", id=f"a{n}")], "turns": 1}


def _question(n: int) -> Any:
    return {"messages": [HumanMessage(content=f"q{n}", id=f"u{n}")], "turns": 0}


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
def test_state_annotation_reduce_span_names_state(otel: Otel, sync: bool) -> None:
    graph = StateGraph(_State)
    graph.add_node("answer", _answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    app = graph.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t-state"}}

    async def arun() -> list[Any]:
        out: Any = None
        for n in range(6):
            out = await app.ainvoke(_question(n), config)
        return list(out["messages"])

    with otel.tracer.start_as_current_span("outer"):
        if sync:
            for n in range(6):
                out = app.invoke(_question(n), config)
            final = list(out["messages"])
        else:
            final = asyncio.run(arun())
    spans = reduce_spans(otel, "state")
    assert [m.id for m in final] == ["u0", "u3", "a3", "u4", "a4", "u5", "a5"]
    assert [(attributes(s)["agentstate.messages.before"], attributes(s)["agentstate.messages.after"])
            for s in spans] == [(9, 4)]  # fmt: skip
    for span in spans:
        assert "agentstate.thread" not in attributes(span)  # a state reducer is not told the thread
        assert chain(otel, span)[-1] == "outer"
