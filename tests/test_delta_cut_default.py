"""The channel a ``ReducingCheckpointSaver`` reduces is one retention cuts with a snapshot without
being told (its ``delta_channels`` default): a DeltaChannel messages thread written before the
wrapper (or by a put it could not rebuild) loses its ancestors to ``prune``, and every checkpoint
left rebuilds what a twin never pruned rebuilds (the wrapper's own puts store the reduced value as
a snapshot: the checkpoints it writes never need it). Another DeltaChannel the wrapper
is not told of (deepagents' ``files``) keeps the ancestors it is rebuilt through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from tests.scenario_graph import open_saver
from tests.test_delta_cut import LARGE_K, config, turn_input
from tests.test_delta_cut import build as build_three
from tests.test_delta_cut import rebuilt as rebuilt_three
from tests.test_delta_retention import NO_GRACE, assert_like_twin, assert_unchanged

SYNC = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
_MESSAGES: Any = _messages_delta_reducer


class MessagesState(TypedDict, total=False):
    messages: Annotated[list, DeltaChannel(_MESSAGES, snapshot_frequency=1000)]


def build(saver: Any) -> Any:
    def answer(state: Any) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer {n}", id=f"ai{n}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def rebuilt(graph: Any, thread_id: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {s.config["configurable"]["checkpoint_id"]:
            (s.metadata["step"], tuple(m.id for m in s.values.get("messages", ())))
            for s in graph.get_state_history(config(thread_id))}


def ids(turns: int) -> tuple[str, ...]:
    return tuple(i for t in range(turns) for i in (f"h{t}", f"ai{2 * t + 1}"))


@pytest.fixture
def open_(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def opener(kind: str, name: str) -> Any:
        pg_url = None
        if kind == "postgres":
            pg_url = request.getfixturevalue("postgres_server").new_database(name)
        return open_saver(kind, path=tmp_path / f"{name}.db", pg_url=pg_url)

    return opener


def wrap(inner: Any, **kwargs: Any) -> ReducingCheckpointSaver:
    return ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99),
                                   branch_grace=NO_GRACE, **kwargs)


@pytest.mark.parametrize("kind", SYNC)
def test_the_wrapper_cuts_its_messages_channel_without_being_told(kind: str, open_: Any) -> None:
    with open_(kind, "a") as inner, open_(kind, "twin") as twin_saver:
        bare, twin = build(inner), build(twin_saver)
        for turn in range(5):  # written before the wrapper: no checkpoint holds the value
            bare.invoke(turn_input(turn), config("t"))
            twin.invoke(turn_input(turn), config("t"))
        saver = wrap(inner)
        assert list(saver.delta_channels) == ["messages"]
        graph = build(saver)
        before = rebuilt(graph, "t")
        saver.prune(["t"])
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        assert_like_twin(after, rebuilt(twin, "t"))
        for turn in range(5, 7):  # the thread goes on, through the wrapper
            graph.invoke(turn_input(turn), config("t"))
            twin.invoke(turn_input(turn), config("t"))
        assert rebuilt(graph, "t")[max(rebuilt(graph, "t"))][1] == ids(7)
        assert_like_twin(rebuilt(graph, "t"), rebuilt(twin, "t"))


def test_another_delta_channel_not_told_of_keeps_its_ancestors(open_: Any) -> None:
    """``notes`` and ``files`` never snapshot and the wrapper is not told of them: each checkpoint
    kept keeps the ancestors they are rebuilt through (LangGraph's first safe way)."""
    with open_("sqlite", "a") as inner:
        saver = wrap(inner)
        graph = build_three(saver, LARGE_K)
        for turn in range(4):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt_three(graph, "t")
        saver.prune(["t"])
        after = rebuilt_three(graph, "t")
        assert after == {i: v for i, v in before.items() if i in after}
        assert len(after) > 1


def test_with_offload_the_default_is_off_too(open_: Any) -> None:
    with open_("sqlite", "a") as inner:
        assert wrap(inner, offload=BlobOffload(min_bytes=16)).delta_channels == {}
