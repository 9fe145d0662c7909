"""ReducingCheckpointSaver on graphs whose messages channel is a LangGraph ``DeltaChannel``.

Each put that updates the channel stores a ``_DeltaSnapshot`` of the reduced value (docs/savers.md,
"DeltaChannel threads"), so a fresh load (``get_state``, which rebuilds the channel from storage)
reads the reduced list, with every channel reducer a user may have: a batch ``add_messages``,
LangGraph's ``_messages_delta_reducer`` and deepagents' own. The scenario graph and the expected ids
are ``tests/test_saver_scenarios.py``'s: the same reducer gives the same stored lists.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from deepagents._messages_reducer import _messages_delta_reducer as deepagents_reducer
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer as langgraph_reducer
from langgraph.graph.message import add_messages
from langgraph.types import Command

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from checkpointers import PutReduction, ReducingCheckpointSaver
from tests.scenario_graph import (
    ASYNC_SAVERS,
    SYNC_SAVERS,
    aopen_saver,
    arun_turns,
    build_graph,
    contract_violations,
    human_message,
    open_saver,
    run_turns,
    saver_params,
    system_message,
    thread_config,
    turn_ids,
)

MAX = 16

SYNC = saver_params(SYNC_SAVERS)
ASYNC = saver_params(ASYNC_SAVERS)


def batch_add_messages(state: list[Any], writes: list[Any]) -> list[Any]:
    """A user's ``DeltaChannel(batch add_messages)``: raises on the removal of an unknown id."""
    for update in writes:
        merged = add_messages(state, update)
        assert isinstance(merged, list)
        state = merged
    return state


CHANNEL_REDUCERS = [
    pytest.param(batch_add_messages, id="batch-add_messages"),
    pytest.param(langgraph_reducer, id="langgraph-delta-reducer"),
    pytest.param(deepagents_reducer, id="deepagents-reducer"),
]


def delta_state(channel_reducer: Callable[..., Any], snapshot_frequency: int = 50) -> Any:
    DeltaState = TypedDict(  # noqa: UP013  (a class body's annotations would be strings here)
        "DeltaState",
        {"messages": Annotated[list, DeltaChannel(channel_reducer, snapshot_frequency=snapshot_frequency)]},
        total=False,
    )
    return DeltaState


def reducer(**kwargs: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=8, max_messages=MAX, **kwargs))


def expected_after(turn: int) -> list[str]:
    """Stored ids after ``turn`` (tests/test_saver_scenarios.py's module docstring)."""
    first = 0 if turn < 3 else (turn - 1 if turn % 2 else turn - 2)
    return ["sys", *(i for t in range(first, turn + 1) for i in turn_ids(t))]


def all_ids(last_turn: int) -> list[str]:
    return ["sys", *(i for t in range(last_turn + 1) for i in turn_ids(t))]


def ids(messages: Any) -> list[str | None]:
    return [read_message(m).id for m in messages]


def new_thread(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"  # the PostgreSQL database is shared by this module


@pytest.fixture(params=SYNC)
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    with open_saver(request.param, path=tmp_path / "cp.db", pg_url=pg_url) as saver:
        yield saver


@pytest.fixture(params=ASYNC)
async def ainner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "apostgres" else None
    async with aopen_saver(request.param, path=tmp_path / "acp.db", pg_url=pg_url) as saver:
        yield saver


class Archive:
    """An ``on_prune`` hook recording every pruned id, in order."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.ids.extend(ids(pruned))


def assert_each_message_once(stored: list[str | None], archive: Archive, last_turn: int) -> None:
    """Every message of the thread is stored or was pruned, exactly once."""
    assert sorted(map(str, stored + archive.ids)) == sorted(all_ids(last_turn))


@pytest.mark.parametrize("channel_reducer", CHANNEL_REDUCERS)
def test_a_fresh_load_reads_the_reduced_list_turn_after_turn(inner: Any, channel_reducer: Any) -> None:
    archive = Archive()
    saver = ReducingCheckpointSaver(inner, reducer(on_prune=[archive]))
    graph = build_graph(saver, state_schema=delta_state(channel_reducer))
    thread = new_thread("turns")
    runs: list[int] = []

    def check(turn: int, out: dict[str, Any]) -> None:
        runs.append(len(out["messages"]))
        assert ids(graph.get_state(thread_config(thread)).values["messages"]) == expected_after(turn), turn

    run_turns(graph, 12, thread_id=thread, after_turn=check)
    # the run works on the list it loaded plus its own messages: at most MAX + one turn
    assert max(runs) == MAX + 1
    assert_each_message_once(ids(graph.get_state(thread_config(thread)).values["messages"]), archive, 11)
    # every checkpoint of the thread loads, bounded and sendable (time travel reads these)
    history = list(graph.get_state_history(thread_config(thread)))
    assert len(history) == 12 * 5
    for snap in history:
        msgs = snap.values.get("messages", [])
        assert contract_violations(msgs, max_len=MAX + 4) == [] if msgs else True


async def test_async_savers_reduce_a_delta_channel_too(ainner: Any) -> None:
    archive = Archive()
    saver = ReducingCheckpointSaver(ainner, reducer(on_prune=[archive]))
    graph = build_graph(saver, state_schema=delta_state(deepagents_reducer))
    thread = new_thread("async")
    for turn in range(9):
        await arun_turns(graph, 1, thread_id=thread, start=turn, with_system=turn == 0)
        state = await graph.aget_state(thread_config(thread))
        assert ids(state.values["messages"]) == expected_after(turn), turn
    assert_each_message_once(ids(state.values["messages"]), archive, 8)


def test_the_newest_checkpoint_holds_a_snapshot_of_the_reduced_value(inner: Any) -> None:
    """What retention relies on: everything before the newest checkpoint can go."""
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, state_schema=delta_state(langgraph_reducer, snapshot_frequency=1000))
    thread = new_thread("snapshot")
    run_turns(graph, 7, thread_id=thread)
    stored = saver.get_tuple(thread_config(thread))
    assert stored is not None
    value = stored.checkpoint["channel_values"]["messages"]
    assert isinstance(value, _DeltaSnapshot)
    assert ids(value.value) == expected_after(6)


def test_on_reduce_reports_each_put(inner: Any) -> None:
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(inner, reducer(), on_reduce=reports.append)
    graph = build_graph(saver, state_schema=delta_state(batch_add_messages))
    run_turns(graph, 4, thread_id=new_thread("reports"))
    pruned = [r.stats.pruned_count for r in reports if r.stats is not None and r.stats.pruned_count]
    assert pruned == [8]  # turn 3 prunes turns 0 and 1
    # the input checkpoint has no messages yet; a step that writes none keeps the stored value
    assert {r.skipped for r in reports} <= {None, "absent", "delta channel unchanged"}


def test_a_failing_summarizer_loses_nothing(inner: Any) -> None:
    def summarize(messages: list[Any]) -> str:
        raise RuntimeError("summarizer down")

    saver = ReducingCheckpointSaver(inner, reducer(summarize_fn=summarize, inject_summary=True))
    graph = build_graph(saver, state_schema=delta_state(deepagents_reducer))
    thread = new_thread("summary")
    run_turns(graph, 6, thread_id=thread)
    # on_summary_error="keep": nothing is pruned while the summarizer fails
    assert ids(graph.get_state(thread_config(thread)).values["messages"]) == all_ids(5)


def test_a_running_summary_covers_each_pruned_message_once(inner: Any) -> None:
    summarized: list[list[str | None]] = []

    def summarize(messages: list[Any]) -> str:
        summarized.append(ids(messages))
        return f"summary of {len(messages)}"

    saver = ReducingCheckpointSaver(inner, reducer(summarize_fn=summarize, inject_summary=True))
    graph = build_graph(saver, state_schema=delta_state(langgraph_reducer))
    thread = new_thread("summary")
    run_turns(graph, 10, thread_id=thread)
    flat = [i for batch in summarized for i in batch if not str(i).startswith("agentstate")]
    assert len(flat) == len(set(flat))  # no message summarized twice
    stored = graph.get_state(thread_config(thread)).values["messages"]
    assert len(stored) <= MAX + 1
    conversation = {str(i) for i in ids(stored)} | set(map(str, flat))
    assert set(all_ids(9)) <= conversation


# -- writes that name pruned messages ---------------------------------------------------------------


def _editing_graph(saver: Any, channel_reducer: Any) -> Any:
    """One run grows the list past the trigger (the saver prunes its head at a put), then removes
    and edits messages the stored value no longer holds but the live run does."""

    def this_run(state: Any) -> tuple[str, int]:
        """The run's human message id and how many messages the run added after it."""
        msgs = state["messages"]
        last = max(i for i, m in enumerate(msgs) if read_message(m).kind == "human")
        return str(read_message(msgs[last]).id), len(msgs) - last

    def grow(state: Any) -> dict[str, Any]:
        human, n = this_run(state)
        return {"messages": [AIMessage(f"step {n}", id=f"m{n}" if human == "h" else f"{human}-{n}")]}

    def route(state: Any) -> str:
        _, n = this_run(state)
        return "grow" if n < 24 else ("edit" if n == 24 else "__end__")

    def edit(state: Any) -> dict[str, Any]:
        if this_run(state)[0] != "h":
            return {"messages": []}
        return {"messages": [RemoveMessage(id="m2"), AIMessage("edited", id="m3")]}

    builder = StateGraph(delta_state(channel_reducer))
    builder.add_node("grow", grow)
    builder.add_node("edit", edit)
    builder.add_edge(START, "grow")
    builder.add_conditional_edges("grow", route, ["grow", "edit"])
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("channel_reducer", CHANNEL_REDUCERS)
def test_writes_naming_pruned_messages_do_not_break_a_load(inner: Any, channel_reducer: Any) -> None:
    saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8))
    graph = _editing_graph(saver, channel_reducer)
    config = thread_config(new_thread("edits"))
    out = graph.invoke({"messages": [HumanMessage("go", id="h")]}, config)
    assert "m2" not in ids(out["messages"])  # the live run removed it from its full list
    stored = ids(graph.get_state(config).values["messages"])
    # m2 was pruned before: its removal is a no-op; the edit of pruned m3 is appended (as
    # add_messages does for an id it does not hold) and pruned with the next reduction or kept
    assert stored[0] == "h" and "m2" not in stored and len(stored) <= 8 + 1
    assert stored.count("m3") <= 1
    for snap in graph.get_state_history(config):  # every checkpoint loads, bounded
        loaded = ids(snap.values.get("messages", []))
        assert len(loaded) <= 8 + 1 and len(set(loaded)) == len(loaded)
    graph.invoke({"messages": [HumanMessage("again", id="h2")]}, config)
    assert ids(graph.get_state(config).values["messages"])[0] == "h"


def test_time_travel_forks_from_a_reduced_checkpoint(inner: Any) -> None:
    archive = Archive()
    saver = ReducingCheckpointSaver(inner, reducer(on_prune=[archive]))
    graph = build_graph(saver, state_schema=delta_state(batch_add_messages))
    thread = new_thread("fork")
    run_turns(graph, 6, thread_id=thread)
    # the checkpoint at the end of turn 3 (the 4th input's parent): reload it and continue from it
    ends = [s for s in graph.get_state_history(thread_config(thread)) if not s.next]
    turn3 = ends[::-1][3]
    assert ids(turn3.values["messages"]) == expected_after(3)
    out = graph.invoke({"messages": [HumanMessage("fork", id="h99")]}, turn3.config)
    assert ids(out["messages"])[: len(expected_after(3))] == expected_after(3)
    assert ids(graph.get_state(thread_config(thread)).values["messages"])[-1] == "ai99-final"


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_other_durability_modes(inner: Any, durability: str) -> None:
    """``exit`` stores one checkpoint per run, its writes under an anchor parent; ``async`` puts in
    the background while the next step runs."""
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, state_schema=delta_state(batch_add_messages))
    thread = new_thread(durability)
    for turn in range(8):
        first = [system_message()] if turn == 0 else []
        turn_input = {"messages": [*first, human_message(turn)]}
        graph.invoke(turn_input, thread_config(thread), durability=durability)
        assert ids(graph.get_state(thread_config(thread)).values["messages"]) == expected_after(turn), turn


def test_interrupt_and_resume_on_the_reduced_state(inner: Any) -> None:
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, state_schema=delta_state(batch_add_messages), approve_tools=True)
    config = thread_config(new_thread("approve"))
    for turn in range(6):
        msgs: list[Any] = [human_message(turn)] if turn else [system_message(), human_message(turn)]
        paused = graph.invoke({"messages": msgs}, config)
        [intr] = paused["__interrupt__"]
        assert intr.value == {"approve": [f"c{turn}-0-0"]}
        pending = graph.get_state(config)
        assert pending.next == ("tools",)
        before = expected_after(turn - 1) if turn else ["sys"]
        assert ids(pending.values["messages"]) == [*before, f"h{turn}", f"ai{turn}-0"]
        done = graph.invoke(Command(resume=True), config)
        assert ids(done["messages"])[-2:] == [f"t{turn}-0-0", f"ai{turn}-final"]
        assert ids(graph.get_state(config).values["messages"]) == expected_after(turn)


def test_subgraph_checkpoints_are_reduced(inner: Any) -> None:
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, state_schema=delta_state(langgraph_reducer), as_subgraph=True)
    thread = new_thread("sub")
    run_turns(graph, 8, thread_id=thread)
    assert ids(graph.get_state(thread_config(thread)).values["messages"]) == expected_after(7)
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(thread_config(thread))}
    assert "" in namespaces and len([ns for ns in namespaces if ns.startswith("agent_loop:")]) == 8
