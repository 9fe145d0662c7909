"""ReducingCheckpointSaver under compiled LangGraph graphs, on real savers.

The graph is ``scenario_graph``'s deterministic tool-using agent. With
``MessageReducer(min_messages=8, max_messages=16)`` and 4 messages per turn (h, ai calling a tool,
tool result, final answer), the stored list after turn t is: sys + turns 0..t while that is at
most 16 messages; then it is cut back to sys + the 2 newest whole turns (9) whenever a put sees
more than 16, so after an odd turn t >= 3 it holds turns t-1, t, after an even one t-2 .. t.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.graph.message import add_messages
from langgraph.types import Command

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from checkpointers import PutReduction, ReducingCheckpointSaver
from checkpointers.reduction import SummaryMemo
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


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=8, max_messages=MAX)


def expected_after(turn: int, start: int = 0) -> list[str]:
    """Stored ids after ``turn`` of a thread whose first turn was ``start`` (module docstring)."""
    n = turn - start
    first = 0 if n < 3 else (n - 1 if n % 2 else n - 2)
    return ["sys", *(i for t in range(start + first, turn + 1) for i in turn_ids(t))]


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


def assert_every_checkpoint_obeys_the_contract(saver: Any, thread: str) -> int:
    """All namespaces of the thread (subgraphs too); returns how many checkpoints hold messages."""
    checked = 0
    for tup in saver.list(thread_config(thread)):
        msgs = tup.checkpoint["channel_values"].get("messages")
        if msgs:
            problems = contract_violations(msgs, max_len=MAX)
            assert problems == [], (tup.config["configurable"], tup.metadata, problems)
            checked += 1
    return checked


# -- many turns ------------------------------------------------------------------------------------


def test_many_turns_every_persisted_checkpoint_obeys_the_contract(inner: Any) -> None:
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(inner, reducer(), on_reduce=reports.append)
    graph = build_graph(saver)
    thread = new_thread("many")
    lengths: list[tuple[int, int]] = []

    def check(turn: int, out: dict[str, Any]) -> None:
        stored = graph.get_state(thread_config(thread)).values["messages"]
        assert ids(stored) == expected_after(turn), turn
        lengths.append((len(out["messages"]), len(stored)))

    run_turns(graph, 12, thread_id=thread, after_turn=check)
    # input + 4 steps a turn; the very first input checkpoint has no messages yet
    assert assert_every_checkpoint_obeys_the_contract(saver, thread) == 12 * 5 - 1
    # in-run state vs persisted: the invoke output is the run's full list, the next run starts reduced
    assert lengths[3] == (17, 9)
    assert lengths[4] == (13, 13)
    pruned = [r.stats.pruned_count for r in reports if r.stats and r.stats.pruned_count and r.new_version]
    assert pruned == [8] * 5  # turns 3, 5, 7, 9, 11 each prune 2 whole turns


def test_step_that_leaves_messages_unchanged_stays_bounded(inner: Any) -> None:
    """The last step of each turn writes only ``turns``: on SqliteSaver that checkpoint stores the
    run's live, full list unless the wrapper reduces unchanged versions too."""
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, bookkeeping=True)
    thread = new_thread("bookkeeping")
    out = run_turns(graph, 8, thread_id=thread)
    assert out["turns"] == 8
    state = graph.get_state(thread_config(thread))
    assert state.metadata is not None and state.metadata["source"] == "loop"
    assert ids(state.values["messages"]) == expected_after(7)
    assert assert_every_checkpoint_obeys_the_contract(saver, thread) == 8 * 6 - 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_larger_tool_groups(kind: str, tmp_path: Path) -> None:
    """Two tool rounds of three parallel calls each: groups are kept or dropped whole."""
    with open_saver(kind, path=tmp_path / "groups.db") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=10, max_messages=20))
        graph = build_graph(saver, tool_rounds=2, calls_per_round=3)
        run_turns(graph, 5, thread_id="groups")
        stored = graph.get_state(thread_config("groups")).values["messages"]
        # 10 messages a turn: whenever a put sees more than 20 it keeps the newest whole turn
        assert ids(stored) == ["sys", *turn_ids(4, tool_rounds=2, calls_per_round=3)]
        for tup in saver.list(thread_config("groups")):
            msgs = tup.checkpoint["channel_values"].get("messages")
            if msgs:
                assert contract_violations(msgs, max_len=20) == []


def test_summarizer_sees_each_pruned_batch_once(inner: Any) -> None:
    """A turn's last step re-puts the run's full list (bookkeeping node): the SummaryMemo keeps the
    summarizer from summarizing the same pruned messages again (without it: once per put)."""
    calls: list[list[str | None]] = []

    def summarize(pruned: list[Any]) -> str:
        calls.append(ids(pruned))
        return f"summary of {len(pruned)} messages"

    config = ReducerConfig(min_messages=8, max_messages=MAX, summarize_fn=summarize, inject_summary=True)
    saver = ReducingCheckpointSaver(inner, MessageReducer(config=config), summary_memo=SummaryMemo())
    graph = build_graph(saver, bookkeeping=True)
    thread = new_thread("summary")
    run_turns(graph, 8, thread_id=thread)
    assert calls == [
        [*turn_ids(0), *turn_ids(1)],
        ["agentstate-summary", *turn_ids(2), *turn_ids(3)],
        ["agentstate-summary", *turn_ids(4), *turn_ids(5)],
    ]
    stored = graph.get_state(thread_config(thread)).values["messages"]
    assert ids(stored) == ["sys", "agentstate-summary", *turn_ids(6), *turn_ids(7)]
    assert stored[1].content.endswith("summary of 9 messages")
    assert assert_every_checkpoint_obeys_the_contract(saver, thread) == 8 * 6 - 1


# -- interrupt and resume --------------------------------------------------------------------------


def test_interrupt_and_resume_on_the_reduced_state(inner: Any) -> None:
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver, approve_tools=True)
    thread = new_thread("approve")
    config = thread_config(thread)
    for turn in range(6):
        msgs: list[Any] = [human_message(turn)] if turn else [system_message(), human_message(turn)]
        paused = graph.invoke({"messages": msgs}, config)
        [intr] = paused["__interrupt__"]
        assert intr.value == {"approve": [f"c{turn}-0-0"]}
        pending = graph.get_state(config)
        assert pending.next == ("tools",)
        # the interrupted checkpoint is stored reduced; it ends with the pending call
        stored = ids(pending.values["messages"])
        assert stored == [*expected_after(turn - 1), f"h{turn}", f"ai{turn}-0"] if turn else [
            "sys", "h0", "ai0-0"]
        if turn == 3:
            # 13 + 2 = 15 messages, not reduced; after the resume the turn ends at 17 -> 9
            assert len(stored) == 15
        done = graph.invoke(Command(resume=True), config)
        assert ids(done["messages"])[-2:] == [f"t{turn}-0-0", f"ai{turn}-final"]
        assert ids(graph.get_state(config).values["messages"]) == expected_after(turn)
    assert assert_every_checkpoint_obeys_the_contract(saver, thread) > 0


def test_resume_after_the_pending_state_was_reduced(tmp_path: Path) -> None:
    """The interrupt lands right after a reduction: the tools node re-runs on the reduced list."""
    with open_saver("sqlite", path=tmp_path / "resume.db") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=2, max_messages=6))
        graph = build_graph(saver, approve_tools=True)
        config = thread_config("resume")
        graph.invoke({"messages": [system_message(), human_message(0)]}, config)
        graph.invoke(Command(resume=True), config)  # sys h0 ai0-0 t0 ai0-final
        graph.invoke({"messages": [human_message(1)]}, config)
        # 7 messages > 6 at the interrupt: stored as sys + the live turn
        assert ids(graph.get_state(config).values["messages"]) == ["sys", "h1", "ai1-0"]
        done = graph.invoke(Command(resume=False), config)  # denied: the node re-ran on the reduced list
        assert ids(done["messages"]) == ["sys", "h1", "ai1-0", "t1-0-0", "ai1-final"]
        assert done["messages"][3].content == "denied"


# -- subgraphs -------------------------------------------------------------------------------------


def test_subgraph_checkpoints_are_reduced(inner: Any) -> None:
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(inner, reducer(), on_reduce=reports.append)
    graph = build_graph(saver, as_subgraph=True)
    thread = new_thread("sub")
    run_turns(graph, 8, thread_id=thread)
    assert ids(graph.get_state(thread_config(thread)).values["messages"]) == expected_after(7)
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(thread_config(thread))}
    sub = {ns for ns in namespaces if ns.startswith("agent_loop:")}
    assert "" in namespaces and len(sub) == 8  # one subgraph namespace per run
    assert assert_every_checkpoint_obeys_the_contract(saver, thread) > 8
    sub_pruned = [r for r in reports if r.checkpoint_ns.startswith("agent_loop:") and r.stats
                  and r.stats.pruned_count and r.new_version]
    assert len(sub_pruned) == 3  # turns 3, 5, 7, as in the root
    assert all(r.stats is not None and r.stats.messages_after == 9 for r in sub_pruned)


# -- history and forks -----------------------------------------------------------------------------


def test_history_and_fork_start_from_the_reduced_history(inner: Any) -> None:
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver)
    thread = new_thread("fork")
    config = thread_config(thread)
    run_turns(graph, 6, thread_id=thread)
    history = list(graph.get_state_history(config))
    ends = [s for s in history if not s.next and s.values.get("messages")]
    assert len(ends) == 6
    end_of_turn_3 = next(s for s in ends if ids(s.values["messages"])[-1] == "ai3-final")
    assert ids(end_of_turn_3.values["messages"]) == expected_after(3)

    forked = graph.invoke({"messages": [human_message(100)]}, end_of_turn_3.config)
    assert ids(forked["messages"]) == [*expected_after(3), *turn_ids(100)]
    head = graph.get_state(config)
    assert ids(head.values["messages"]) == [*expected_after(3), *turn_ids(100)]
    assert head.parent_config is not None
    # the fork is a branch: the original end of turn 5 is still in the history, unchanged
    history = list(graph.get_state_history(config))
    assert any(ids(s.values.get("messages", [])) == expected_after(5) for s in history)

    # a replay from the checkpoint before turn 4's first agent step re-runs it on the reduced list
    before_agent = next(s for s in history if s.next == ("agent",)
                        and ids(s.values["messages"])[-1] == "h4")
    replayed = graph.invoke(None, before_agent.config)
    assert ids(replayed["messages"]) == [*expected_after(3), *turn_ids(4)]


# -- async -----------------------------------------------------------------------------------------


async def test_ainvoke_many_turns(ainner: Any) -> None:
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(ainner, reducer(), on_reduce=reports.append)
    graph = build_graph(saver)
    thread = new_thread("async")
    out = await arun_turns(graph, 9, thread_id=thread)
    assert len(out["messages"]) == 13  # the in-run list: 9 loaded + 4 (below 16, nothing pruned)
    state = await graph.aget_state(thread_config(thread))
    assert ids(state.values["messages"]) == expected_after(8)
    checked = 0
    async for tup in saver.alist(thread_config(thread)):
        msgs = tup.checkpoint["channel_values"].get("messages")
        if msgs:
            assert contract_violations(msgs, max_len=MAX) == []
            checked += 1
    assert checked == 9 * 5 - 1
    assert sum(1 for r in reports if r.stats and r.stats.pruned_count and r.new_version) == 3


async def test_parallel_threads_async(ainner: Any) -> None:
    saver = ReducingCheckpointSaver(ainner, reducer())
    graph = build_graph(saver)
    threads = [new_thread(f"par{k}") for k in range(4)]
    await asyncio.gather(*(
        arun_turns(graph, 7, thread_id=t, start=100 * k, with_system=True) for k, t in enumerate(threads)
    ))
    for k, t in enumerate(threads):
        state = await graph.aget_state(thread_config(t))
        assert ids(state.values["messages"]) == expected_after(100 * k + 6, start=100 * k)


def test_parallel_threads_sync(inner: Any) -> None:
    saver = ReducingCheckpointSaver(inner, reducer())
    graph = build_graph(saver)
    threads = [new_thread(f"par{k}") for k in range(4)]
    def run(k: int, thread: str) -> None:
        run_turns(graph, 7, thread_id=thread, start=100 * k, with_system=True)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(run, range(4), threads))
    for k, t in enumerate(threads):
        stored = graph.get_state(thread_config(t)).values["messages"]
        assert ids(stored) == expected_after(100 * k + 6, start=100 * k)


# -- DeltaChannel ----------------------------------------------------------------------------------


def _delta_add_messages(state: list[Any], writes: list[Any]) -> list[Any]:
    for update in writes:
        merged = add_messages(state, update)
        assert isinstance(merged, list)  # typed as a message or a list: given a list, a list
        state = merged
    return state


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_delta_add_messages, snapshot_frequency=3)]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_delta_channel_is_reduced_like_any_other(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """LangGraph snapshots this channel every 3 updates with the run's full list; the stored value
    is the reduced one all the same (tests/test_delta_reduction.py has the rest)."""
    with open_saver(kind, path=tmp_path / "delta.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        graph = build_graph(saver, state_schema=DeltaState)
        with caplog.at_level(logging.WARNING, logger="agentstate_reducer.checkpointers"):
            out = run_turns(graph, 6, thread_id="delta")
        assert ids(out["messages"])[-len(turn_ids(5)):] == turn_ids(5)
        assert ids(graph.get_state(thread_config("delta")).values["messages"]) == expected_after(5)
        more = run_turns(graph, 1, thread_id="delta", start=6)
        assert ids(more["messages"]) == [*expected_after(5), *turn_ids(6)]
    assert [r.getMessage() for r in caplog.records] == []
