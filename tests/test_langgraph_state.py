"""The state-annotation form ``Annotated[list, reducer.as_langgraph_reducer()]``: add_messages
semantics (checked against langgraph's own add_messages), tolerance of removals of pruned ids,
pruning by the contract, the seed's example, and the no-langgraph dict fallback.

No ``from __future__ import annotations`` here: the seed's example defines its state class inside
a function, and LangGraph must be able to evaluate ``Annotated[list, reducer...]`` there.
"""

import copy
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from typing_extensions import Annotated, TypedDict  # noqa: UP035  (the seed README imports these)

from agentstate_reducer import MessageReducer, read_message
from agentstate_reducer.merge import REMOVE_ALL_MESSAGES as OUR_REMOVE_ALL
from agentstate_reducer.merge import _merge_dicts, _prepare, merge_messages
from tests.scenario_graph import build_graph, contract_violations, run_turns, thread_config, turn_ids


def ids(messages: list[Any]) -> list[str | None]:
    return [read_message(m).id for m in messages]


def langgraph_add_messages(existing: list[Any], update: list[Any]) -> list[Any]:
    """langgraph's add_messages on two lists. Its decorator types the result as a single message
    or a list; given lists it returns a list, which this asserts."""
    merged = add_messages(existing, update)
    assert isinstance(merged, list)
    return merged


def is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def test_remove_all_marker_is_langgraphs() -> None:
    assert OUR_REMOVE_ALL == REMOVE_ALL_MESSAGES


# -- add_messages semantics ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "kind", "content"),
    [
        pytest.param("hello", "human", "hello", id="string"),
        pytest.param(("ai", "hi there"), "ai", "hi there", id="tuple"),
        pytest.param(("user", "question"), "human", "question", id="openai-role-tuple"),
        pytest.param({"role": "user", "content": "from a dict"}, "human", "from a dict", id="openai-dict"),
        pytest.param({"type": "ai", "content": "lc dict"}, "ai", "lc dict", id="langchain-dict"),
        pytest.param(HumanMessage("single"), "human", "single", id="single-message"),
        pytest.param([HumanMessage("in a list")], "human", "in a list", id="list"),
    ],
)
def test_coercion_and_id_assignment(new: Any, kind: str, content: str) -> None:
    existing = [SystemMessage("s", id="sys")]
    merged = merge_messages(existing, new)
    assert ids(merged)[0] == "sys"
    assert len(merged) == 2
    added = merged[1]
    assert read_message(added).kind == kind
    assert added.content == content
    assert is_uuid(added.id)


def test_replace_by_id_keeps_position() -> None:
    existing = [HumanMessage("q", id="h"), AIMessage("old", id="a"), HumanMessage("q2", id="h2")]
    merged = merge_messages(existing, AIMessage("new", id="a"))
    assert ids(merged) == ["h", "a", "h2"]
    assert merged[1].content == "new"
    assert existing[1].content == "old"  # the caller's list is not changed


def test_remove_message_and_remove_all() -> None:
    existing = [HumanMessage("q", id="h"), AIMessage("a", id="a"), HumanMessage("q2", id="h2")]
    assert ids(merge_messages(existing, [RemoveMessage(id="a")])) == ["h", "h2"]
    merged = merge_messages(existing, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="f")])
    assert ids(merged) == ["f"]
    assert ids(merge_messages(existing, RemoveMessage(id=REMOVE_ALL_MESSAGES))) == []


def test_remove_of_gone_id_is_dropped_where_add_messages_raises() -> None:
    existing = [HumanMessage("q", id="h"), AIMessage("a", id="a")]
    with pytest.raises(ValueError, match="doesn't exist"):
        langgraph_add_messages(existing, [RemoveMessage(id="pruned-long-ago")])
    assert ids(merge_messages(existing, [RemoveMessage(id="pruned-long-ago")])) == ["h", "a"]
    # removing twice in one update, and removing before adding, are tolerated too
    assert ids(merge_messages(existing, [RemoveMessage(id="a"), RemoveMessage(id="a")])) == ["h"]
    assert ids(merge_messages(existing, [RemoveMessage(id="z"), AIMessage("z", id="z")])) == ["h", "a", "z"]


def test_updates_after_remove_all_are_merged() -> None:
    existing = [HumanMessage("q", id="h")]
    update = [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("x", id="x"), HumanMessage("y", id="y"),
              RemoveMessage(id="x"), RemoveMessage(id="h"), HumanMessage("Y", id="y")]
    # add_messages returns the tail verbatim: RemoveMessages and a duplicate id would stay in the state
    verbatim = langgraph_add_messages(copy.deepcopy(existing), copy.deepcopy(update))
    assert ids(verbatim) == ["x", "y", "x", "h", "y"]
    merged = merge_messages(existing, update)
    assert ids(merged) == ["y"]
    assert merged[0].content == "Y"
    assert all(not isinstance(m, RemoveMessage) for m in merged)


# Random valid updates: merge_messages must equal add_messages exactly (ids, order, contents).
_IDS = [f"m{i}" for i in range(6)]


@st.composite
def _valid_update(draw: Any) -> tuple[list[Any], list[Any]]:
    existing_ids = draw(st.lists(st.sampled_from(_IDS), unique=True, max_size=5))
    existing = [HumanMessage(f"e-{i}", id=i) if n % 2 else AIMessage(f"e-{i}", id=i)
                for n, i in enumerate(existing_ids)]
    present = set(existing_ids)
    update: list[Any] = []
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["add", "remove", "remove_all"] if present else ["add", "remove_all"]))
        if op == "add":
            mid = draw(st.sampled_from(_IDS))
            update.append(AIMessage(f"u-{mid}-{len(update)}", id=mid))
            present.add(mid)
        elif op == "remove":
            update.append(RemoveMessage(id=draw(st.sampled_from(sorted(present)))))
        else:
            update.append(RemoveMessage(id=REMOVE_ALL_MESSAGES))
            present = set()
    return existing, update


def add_messages_reference(existing: list[Any], update: list[Any]) -> list[Any]:
    """langgraph's add_messages, except that the updates after the last REMOVE_ALL_MESSAGES are
    merged onto [] (add_messages returns them verbatim: duplicate ids and RemoveMessages stay)."""
    existing, update = copy.deepcopy(existing), copy.deepcopy(update)
    cut = [i for i, m in enumerate(update) if m.id == REMOVE_ALL_MESSAGES]
    if cut:
        existing, update = [], update[cut[-1] + 1 :]
    return langgraph_add_messages(existing, update)


@settings(max_examples=150, deadline=None)
@given(_valid_update())
def test_merge_equals_add_messages_on_valid_updates(case: tuple[list[Any], list[Any]]) -> None:
    existing, update = case
    expected = add_messages_reference(existing, update)
    got = merge_messages(existing, update)
    assert [(m.id, m.content, type(m)) for m in got] == [(m.id, m.content, type(m)) for m in expected]


# -- merge, then prune ---------------------------------------------------------------------------


def test_state_reducer_merges_then_prunes() -> None:
    reducer = MessageReducer(min_messages=2, max_messages=4)
    fn = reducer.as_langgraph_reducer()
    existing = [SystemMessage("s", id="sys"), HumanMessage("1", id="h1"), AIMessage("1", id="a1"),
                HumanMessage("2", id="h2")]
    out = fn(existing, [AIMessage("2", id="a2"), RemoveMessage(id="gone")])
    assert ids(out) == ["sys", "h2", "a2"]
    # a later RemoveMessage of the pruned h1 is a no-op, not a ValueError
    assert ids(fn(out, RemoveMessage(id="h1"))) == ["sys", "h2", "a2"]


def _cleanup_graph(merge: Any) -> Any:
    """Answers each question; from the second on, also removes the first answer ``a-q0``."""

    class State(TypedDict):
        messages: Annotated[list, merge]

    def chat(state: Any) -> dict[str, Any]:  # Any: a TypedDict here would be its input schema
        question = state["messages"][-1].id
        update: list[Any] = [AIMessage(f"answer to {question}", id=f"a-{question}")]
        if question != "q0":
            update.append(RemoveMessage(id="a-q0"))
        return {"messages": update}

    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    return builder.compile(checkpointer=InMemorySaver())


def test_removal_of_pruned_id_inside_a_graph() -> None:
    """A node removing an id the state reducer already pruned: add_messages would raise."""
    graph = _cleanup_graph(MessageReducer(min_messages=2, max_messages=4).as_langgraph_reducer())
    cfg = thread_config("removal")
    out = graph.invoke({"messages": [SystemMessage("s", id="sys"), HumanMessage("q0", id="q0")]}, cfg)
    assert ids(out["messages"]) == ["sys", "q0", "a-q0"]
    out = graph.invoke({"messages": [HumanMessage("q1", id="q1")]}, cfg)
    assert ids(out["messages"]) == ["sys", "q0", "q1", "a-q1"]
    out = graph.invoke({"messages": [HumanMessage("q2", id="q2")]}, cfg)  # q2 arrives: 5 > 4, pruned
    assert ids(out["messages"]) == ["sys", "q2", "a-q2"]
    out = graph.invoke({"messages": [HumanMessage("q3", id="q3")]}, cfg)
    assert ids(out["messages"]) == ["sys", "q3", "a-q3"]

    # the same graph on add_messages never prunes, so a-q0 is there to remove; once a trimming
    # step outside the reducer has dropped it, add_messages raises
    plain = _cleanup_graph(add_messages)
    plain.invoke({"messages": [SystemMessage("s", id="sys"), HumanMessage("q0", id="q0")]}, cfg)
    plain.update_state(cfg, {"messages": [RemoveMessage(id="a-q0")]})
    with pytest.raises(ValueError, match="doesn't exist"):
        plain.invoke({"messages": [HumanMessage("q1", id="q1")]}, cfg)


def test_seed_langgraph_example_bounds_in_run_and_persisted_state() -> None:
    """The seed's README example, verbatim, in a tool-using graph: the state never exceeds 20."""
    reducer = MessageReducer(min_messages=10, max_messages=20)

    class MyState(TypedDict):
        messages: Annotated[list, reducer.as_langgraph_reducer()]

    saver = InMemorySaver()
    graph = build_graph(saver, state_schema=MyState)
    lengths: list[int] = []
    out = run_turns(graph, 15, thread_id="seed", after_turn=lambda t, o: lengths.append(len(o["messages"])))
    assert max(lengths) <= 20
    expected = ["sys", *turn_ids(12), *turn_ids(13), *turn_ids(14)]
    assert ids(out["messages"]) == expected
    assert ids(graph.get_state(thread_config("seed")).values["messages"]) == expected
    for tup in saver.list(thread_config("seed")):
        msgs = tup.checkpoint["channel_values"].get("messages")
        if msgs:
            assert contract_violations(msgs, max_len=20) == [], tup.metadata


# -- without langgraph: the dict fallback ----------------------------------------------------------


def merge_dicts(existing: list[Any], new: list[Any]) -> list[Any]:
    return _merge_dicts(*_prepare(existing, new))


def test_fallback_coerces_and_assigns_ids_in_copies() -> None:
    mine = {"role": "assistant", "content": "no id"}
    out = merge_dicts([{"role": "system", "content": "s", "id": "sys"}],
                      ["hi", ("assistant", "tuple"), mine, HumanMessage("lc object")])
    assert [m["role"] if isinstance(m, dict) else m.type for m in out] == [
        "system", "user", "assistant", "assistant", "human"]
    assert [m["content"] if isinstance(m, dict) else m.content for m in out] == [
        "s", "hi", "tuple", "no id", "lc object"]
    assert all(is_uuid(read_message(m).id) for m in out[1:])
    assert "id" not in mine  # the caller's dict is not changed
    assert all(isinstance(m, dict) for m in out[:4])  # dicts stay dicts


def test_fallback_replace_remove_and_remove_all() -> None:
    existing = [{"role": "user", "content": "q", "id": "h"}, {"role": "assistant", "content": "a", "id": "a"}]
    out = merge_dicts(existing, [{"role": "assistant", "content": "A", "id": "a"}])
    assert [(m["id"], m["content"]) for m in out] == [("h", "q"), ("a", "A")]
    assert ids(merge_dicts(existing, [{"type": "remove", "id": "h"}])) == ["a"]
    assert ids(merge_dicts(existing, [{"type": "remove", "id": "pruned"}])) == ["h", "a"]
    # removed, then re-sent in the same update: it stays, at its position, with the new content
    out = merge_dicts(existing, [{"type": "remove", "id": "h"}, {"role": "user", "content": "Q", "id": "h"}])
    assert [(m["id"], m["content"]) for m in out] == [("h", "Q"), ("a", "a")]
    out = merge_dicts(existing, [{"type": "remove", "id": REMOVE_ALL_MESSAGES},
                                 {"role": "user", "content": "new", "id": "n"}])
    assert ids(out) == ["n"]


@settings(max_examples=100, deadline=None)
@given(_valid_update())
def test_fallback_matches_add_messages_ids(case: tuple[list[Any], list[Any]]) -> None:
    """On dicts, the fallback keeps the same ids in the same order as add_messages."""
    existing, update = case
    as_dict = [{"type": m.type, "content": m.content, "id": m.id} for m in existing]
    update_dicts = [{"type": m.type, "content": m.content, "id": m.id} for m in update]
    expected = add_messages_reference(existing, update)
    got = merge_dicts(as_dict, update_dicts)
    assert [(m["id"], m["content"]) for m in got] == [(m.id, m.content) for m in expected]


def test_merge_messages_uses_the_fallback_without_langgraph(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.graph.message", None)  # import now raises ImportError
    existing = [{"role": "user", "content": "q", "id": "h"}]
    out = merge_messages(existing, [{"role": "tool", "content": "r", "tool_call_id": "c", "id": "t"},
                                    {"type": "remove", "id": "h"}])
    assert out == [{"role": "tool", "content": "r", "tool_call_id": "c", "id": "t"}]


def test_fallback_state_reducer_prunes_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.graph.message", None)
    fn = MessageReducer(min_messages=2, max_messages=4).as_langgraph_reducer()
    history = [{"role": "system", "content": "s", "id": "sys"}]
    for i in range(3):
        history = fn(history, [{"role": "user", "content": f"q{i}", "id": f"h{i}"},
                               {"role": "assistant", "content": "", "id": f"a{i}",
                                "tool_calls": [{"id": f"c{i}", "type": "function",
                                                "function": {"name": "f", "arguments": "{}"}}]}])
        history = fn(history, {"role": "tool", "content": "r", "tool_call_id": f"c{i}", "id": f"t{i}"})
    assert ids(history) == ["sys", "h2", "a2", "t2"]
    assert all(isinstance(m, dict) for m in history)


def test_tool_message_keeps_its_pair_through_the_state_reducer() -> None:
    fn = MessageReducer(min_messages=1, max_messages=3).as_langgraph_reducer()
    call = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1", "type": "tool_call"}])
    out = fn([SystemMessage("s", id="sys"), HumanMessage("q", id="h1"), call],
             ToolMessage("r", tool_call_id="c1", id="t1"))
    assert ids(out) == ["sys", "h1", "a1", "t1"]  # the live turn is never cut
