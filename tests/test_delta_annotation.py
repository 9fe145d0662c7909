"""``MessageReducer.as_delta_reducer()``: the state annotation for LangGraph's ``DeltaChannel``.

LangGraph replays a DeltaChannel's stored writes through the reducer on every load, in batches of
its choosing: the reducer must be deterministic and batching-invariant,
``r(r(s, xs), ys) == r(s, xs + ys)``, and must not summarize or archive while replaying.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from agentstate_reducer import MessageReducer, ReducerConfig, read_message

MAX = 8


def shape(messages: list[Any]) -> list[tuple[str, str | None, Any]]:
    return [(read_message(m).kind, read_message(m).id, getattr(m, "content", None)) for m in messages]


# -- writes: whole tool groups, edits and removals of ids that may be pruned, resets, bare text ---

_IDS = [f"m{i}" for i in range(30)]


@st.composite
def a_write(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["human", "human", "ai", "tools", "edit", "remove", "text", "reset"]))
    mid = draw(st.sampled_from(_IDS))
    if kind == "human":
        return [HumanMessage(f"q {mid}", id=mid)]
    if kind == "ai":
        return AIMessage(f"a {mid}", id=mid)  # a single message, not in a list
    if kind == "tools":
        n = draw(st.integers(1, 3))
        calls = [{"name": "lookup", "args": {}, "id": f"{mid}-c{j}", "type": "tool_call"} for j in range(n)]
        return [AIMessage("", id=mid, tool_calls=calls),
                *(ToolMessage(f"r{j}", tool_call_id=f"{mid}-c{j}", id=f"{mid}-t{j}") for j in range(n))]
    if kind == "edit":
        return [HumanMessage(f"edited {mid}", id=mid)]
    if kind == "remove":
        return [RemoveMessage(id=mid)]
    if kind == "text":
        return draw(st.sampled_from(["plain text", ("user", "a pair")]))  # no id: one is derived
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh start", id="fresh")]


REDUCERS = {
    "count": MessageReducer(min_messages=3, max_messages=MAX),
    "tokens": MessageReducer(
        config=ReducerConfig(max_tokens=60, target_tokens=30, token_counter=lambda m: 10)
    ),
    "no first": MessageReducer(config=ReducerConfig(min_messages=2, max_messages=5, preserve_first=False)),
}


@pytest.mark.parametrize("name", list(REDUCERS))
@settings(max_examples=150, deadline=None)
@given(writes=st.lists(a_write(), max_size=40), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_batching_invariant(name: str, writes: list[Any], cuts: list[int]) -> None:
    reduce_writes = REDUCERS[name].as_delta_reducer()
    whole = reduce_writes([], writes)
    state: list[Any] = []
    start = 0
    for cut in [*sorted({min(c, len(writes)) for c in cuts}), len(writes)]:
        state = reduce_writes(state, writes[start:cut])
        start = cut
    assert shape(state) == shape(whole)
    # deterministic: a fresh reducer built the same way gives the same list (ids included)
    assert shape(MessageReducer(config=REDUCERS[name].config).as_delta_reducer()([], writes)) == shape(whole)


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(a_write(), max_size=40))
def test_bounded_after_every_write(writes: list[Any]) -> None:
    reducer = REDUCERS["count"]
    reduce_writes = reducer.as_delta_reducer()
    state: list[Any] = []
    for write in writes:
        state = reduce_writes(state, [write])
        # a fixed point of the reducer: within its bound, nothing left to prune
        assert shape(reducer.reduce(state).surviving) == shape(state)
        # the first message is pinned with the results of its calls (up to 3 here)
        assert len(state) <= MAX + 3
        assert len({read_message(m).id for m in state}) == len(state)


def test_the_input_is_not_mutated() -> None:
    reduce_writes = REDUCERS["count"].as_delta_reducer()
    state = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(MAX)]
    before = list(state)
    writes = [[HumanMessage("new", id="new")], "bare"]
    out = reduce_writes(state, writes)
    assert state == before and writes == [[HumanMessage("new", id="new")], "bare"]
    assert len(out) <= MAX and read_message(out[-1]).id not in (None, "")


def test_a_reducer_that_would_summarize_or_archive_is_refused() -> None:
    config = ReducerConfig(min_messages=2, max_messages=4, summarize_fn=lambda ms: "s",
                           on_prune=[lambda pruned, ns: None])
    with pytest.raises(ValueError, match=r"without summarize_fn, on_prune: LangGraph replays"):
        MessageReducer(config=config).as_delta_reducer()


def test_writes_must_be_a_batch() -> None:
    with pytest.raises(TypeError, match=r"takes \(state, \[write, ...\]\)"):
        REDUCERS["count"].as_delta_reducer()([], "hello")


# -- in a graph: the value a load replays is the value the run had ---------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    conn = sqlite3.connect(tmp_path / "annotation.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def test_a_graph_reads_back_the_bounded_list_it_ran_with(saver: Any) -> None:
    reducer = MessageReducer(min_messages=3, max_messages=MAX)
    State = TypedDict(  # noqa: UP013  (a class body's annotations would be strings here)
        "State", {"messages": Annotated[list, DeltaChannel(reducer.as_delta_reducer(), snapshot_frequency=4)]}
    )

    def agent(state: Any) -> dict[str, Any]:
        last = read_message(state["messages"][-1])
        return {"messages": [AIMessage(f"answer to {last.id}", id=f"a-{last.id}")]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(15):
        # a bare string has no id: the one derived for it is the same on every replay
        out = graph.invoke({"messages": [f"question {turn}"]}, config)
        loaded = graph.get_state(config).values["messages"]
        assert shape(loaded) == shape(out["messages"])
        assert len(loaded) <= MAX
    history = list(graph.get_state_history(config))
    assert all(len(s.values.get("messages", [])) <= MAX for s in history)
