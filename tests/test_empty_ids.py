"""An empty call id is an id: a call named ``""`` and its result naming ``""`` pair like any
others, in every shape, and ``MessageReducer()`` leaves a history that can be sent as it is.

The property test builds valid histories from a spec whose call ids come from a small pool holding
``""`` and ids reused across steps and turns, judges them valid from the spec itself (not through
the adapter under test), and checks that an untriggered reducer, fresh or warm, on the column path
and on the reference path, returns every message and prunes none.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Send

from agentstate_reducer import MessageInfo, MessageReducer, ReducerConfig, read_message
from checkpointers.saver import ReducingCheckpointSaver
from tests.convo import MULTI_RESULT_FORMATS, PROPERTY_BUILDERS, SHAPES, Spec, ids
from tests.paths import column_path
from tests.provider_rules import request_errors
from tests.test_properties import violations

#: ``MessageReducer()``'s own configuration (no trigger), and limits no test history reaches
UNTRIGGERED = [
    MessageReducer().config,
    ReducerConfig(min_messages=0, max_messages=None, preserve_first=False),
    ReducerConfig(min_messages=500, max_messages=1000),
    ReducerConfig(max_tokens=10_000_000, token_counter=lambda m: 7),
]


@pytest.mark.parametrize("on", [True, False], ids=["columns", "reference"])
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_a_call_and_its_result_with_empty_ids_pair(fmt: str, on: bool) -> None:
    spec: Spec = [
        ("human", "h1"),
        ("call", "c1", [""]),
        ("tool", "t1", ""),
        ("ai", "a1"),
        ("human", "h2"),
        ("call", "c2", [""]),
        ("tool", "t2", ""),
    ]
    with column_path(on):
        for cfg in UNTRIGGERED:
            out = MessageReducer(config=cfg).reduce(SHAPES[fmt](spec))
            assert ids(out.surviving) == ["h1", "c1", "t1", "a1", "h2", "c2", "t2"]
            assert out.pruned == [] and not out.stats.repaired
        # a trigger prunes the older group whole and keeps the newer one with its result
        cut = MessageReducer(config=ReducerConfig(min_messages=3, max_messages=5, preserve_first=False))
        assert ids(cut.reduce(SHAPES[fmt](spec)).surviving) == ["h2", "c2", "t2"]


@pytest.mark.parametrize("fmt", ["langchain_object", "openai_dict", "anthropic_dict", "responses_items"])
def test_an_empty_id_is_still_checked_like_any_id(fmt: str) -> None:
    """Pairing ``""`` does not make it a wildcard: a second result for it, or a result naming
    ``""`` after a call named otherwise, is pruned as for any id."""
    second = [("human", "h1"), ("call", "c1", [""]), ("tool", "t1", ""), ("tool", "t2", ""), ("ai", "a1")]
    out = MessageReducer().reduce(SHAPES[fmt](second))
    assert ids(out.surviving) == ["h1", "c1", "t1", "a1"] and ids(out.pruned) == ["t2"]
    orphan = [("human", "h1"), ("call", "c1", ["x"]), ("tool", "t1", "x"), ("tool", "t2", ""), ("ai", "a1")]
    out = MessageReducer().reduce(SHAPES[fmt](orphan))
    assert ids(out.surviving) == ["h1", "c1", "t1", "a1"] and ids(out.pruned) == ["t2"]


def test_the_langgraph_send_react_interrupt_state_keeps_the_result() -> None:
    """LangGraph's own ``test_send_react_interrupt`` shape: a call whose id is ``""`` sent to a
    tool node with ``Send``, interrupted before the tool and resumed; the saver of a
    ``MessageReducer()`` stores the call with its result, a history that can be sent."""
    ai_message = AIMessage(
        "", id="ai1", tool_calls=[ToolCall(name="foo", args={"hi": [1, 2, 3]}, id="", type="tool_call")]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": ai_message}

    def route(state: MessagesState) -> list[Send] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage):
            return [Send(call["name"], call) for call in last.tool_calls]
        return None

    def foo(call: ToolCall) -> dict[str, Any]:
        return {"messages": ToolMessage(str(call["args"]), tool_call_id=call["id"], id="tool1")}

    builder = StateGraph(MessagesState)
    builder.add_node(agent)
    tool_node: Any = foo  # a Send node: its input is the call, not the graph's state
    builder.add_node("foo", tool_node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer())
    graph = builder.compile(checkpointer=saver, interrupt_before=["foo"])
    config: RunnableConfig = {"configurable": {"thread_id": "1"}}
    graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    assert [m.id for m in graph.get_state(config).values["messages"]] == ["h1", "ai1"]  # pending call
    graph.invoke(None, config)
    stored = graph.get_state(config).values["messages"]
    assert [m.id for m in stored] == ["h1", "ai1", "tool1"]
    payload: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "", "function": {"name": "foo"}}]},
        {"role": "tool", "content": stored[2].content, "tool_call_id": stored[2].tool_call_id},
    ]
    assert request_errors(payload) == []


# --- the property: a history that can be sent is returned as it is ---

#: call ids: the empty one, ids servers reuse in every turn, and a few more
POOL = ["", "call_0", "call_1", "x"]


@st.composite
def valid_specs(draw: st.DrawFn, multi: bool) -> Spec:
    """A history that can be sent: every call answered before the next user or AI message (the
    newest may be pending), each call once, ids drawn from ``POOL`` (so reused across steps and
    turns), distinct within one call step."""
    spec: Spec = []
    n = 0

    def mid(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    def calls() -> list[str]:
        return draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True))

    if draw(st.booleans()):
        spec.append(("system", mid("s")))
    if draw(st.booleans()):  # a history starting with a call and its results
        made = calls()
        spec.append(("call", mid("c"), made))
        spec += [("tool", mid("t"), c) for c in draw(st.permutations(made))]
    for _ in range(draw(st.integers(0, 5))):
        spec.append(("human", mid("h")))
        for _ in range(draw(st.integers(0, 3))):
            step = draw(st.sampled_from(["ai", "call", "unknown", "system"] + (["multi"] if multi else [])))
            if step == "call":
                made = calls()
                spec.append(("call", mid("c"), made))
                spec += [("tool", mid("t"), c) for c in draw(st.permutations(made))]
            elif step == "multi":  # two AI messages with calls, one result message answering both
                first, second = draw(st.lists(st.sampled_from(POOL), min_size=2, max_size=2, unique=True))
                spec += [("call", mid("c"), [first]), ("call", mid("c"), [second])]
                spec.append(("tool", mid("t"), draw(st.permutations([first, second]))))
            else:
                spec.append((step, mid(step[0])))
    if draw(st.booleans()):  # a pending call at the end, answered in part or not at all
        made = calls()
        spec.append(("call", mid("p"), made))
        spec += [("tool", mid("t"), c) for c in made[: draw(st.integers(0, len(made) - 1))]]
    return spec


def spec_infos(spec: Spec) -> list[MessageInfo]:
    """What the spec says each message is, read from the spec, not from a built message."""
    out: list[MessageInfo] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            out.append(MessageInfo("ai", None, mid, None, tuple(dict.fromkeys(rest[0]))))
        elif kind == "tool":
            answers = tuple(rest[0]) if isinstance(rest[0], list) else (rest[0],)
            out.append(MessageInfo("tool", None, mid, None, (), answers))
        else:
            out.append(MessageInfo(kind, None, mid, None))
    return out


@st.composite
def shaped_valid(draw: st.DrawFn) -> tuple[str, Spec]:
    fmt = draw(st.sampled_from(list(PROPERTY_BUILDERS)))
    return fmt, draw(valid_specs(multi=fmt in MULTI_RESULT_FORMATS))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convo=shaped_valid(), cfg=st.sampled_from(UNTRIGGERED), data=st.data())
def test_an_untriggered_reducer_returns_a_sendable_history_unchanged(
    convo: tuple[str, Spec], cfg: ReducerConfig, data: st.DataObject
) -> None:
    fmt, spec = convo
    assert violations(spec_infos(spec)) == []  # the generator makes histories that can be sent
    build = PROPERTY_BUILDERS[fmt]
    msgs = build(spec)
    # a warm reducer gets a prefix that can be sent, then the rest appended to its output
    cuts = [k for k in range(len(spec) + 1) if violations(spec_infos(spec[:k])) == []]
    cut = data.draw(st.sampled_from(cuts))
    head, tail = build(spec[:cut]), build(spec[cut:])
    for on in (True, False):
        with column_path(on):
            out = MessageReducer(config=cfg).reduce(msgs)
            assert [id(m) for m in out.surviving] == [id(m) for m in msgs], ids(out.pruned)
            assert not out.stats.repaired
            warm = MessageReducer(config=cfg)  # the memo of the last output checks only what is new
            first = warm.reduce(head)
            assert [id(m) for m in first.surviving] == [id(m) for m in head], ids(first.pruned)
            again = warm.reduce(first.surviving, tail)
            assert [id(m) for m in again.surviving] == [id(m) for m in head + tail], ids(again.pruned)
    assert violations([read_message(m) for m in msgs]) == []
