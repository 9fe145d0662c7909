"""Retention that writes a fresh snapshot where it cuts a DeltaChannel thread (LangGraph's second
safe way), given the graph's channels: every checkpoint left rebuilds exactly what it rebuilt
before (or what a twin thread that was never pruned rebuilds at the same step), the ancestors the
snapshot stands in for go, and the thread goes on. Delta channels snapshotting at different times,
deepagents' ``files`` reducer among them; a kill between the snapshot and the deletion loses
nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from deepagents.middleware.filesystem import _file_data_delta_reducer
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import (
    StoredCheckpoint,
    ThreadState,
    aprune,
    asweep,
    backend_for,
    plan_retention,
    prune,
    sweep,
)
from checkpointers.retention.flows import snapshot_flow
from tests.scenario_graph import aopen_saver, open_saver
from tests.test_delta_retention import NO_GRACE, assert_like_twin, assert_unchanged

#: the batch reducers, typed as DeltaChannel takes them
_MESSAGES: Any = _messages_delta_reducer
_FILES: Any = _file_data_delta_reducer

SYNC = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC = ["memory", "aiosqlite", pytest.param("apostgres", marks=pytest.mark.postgres)]
NOW = datetime(2000, 1, 1, tzinfo=timezone.utc)

# -- the rule, on the plan -------------------------------------------------------------------------


def chain(*unseeded: str) -> tuple[StoredCheckpoint, ...]:
    return tuple(
        StoredCheckpoint("", f"r{i:02d}", parent=f"r{i - 1:02d}" if i else None, delta=True,
                         unseeded=frozenset(u.split()))
        for i, u in enumerate(unseeded)
    )


def test_plan_cuts_where_every_rebuilt_channel_can_be_snapshotted() -> None:
    thread = ThreadState("t", chain("", "m", "m n", "m n", "m n"))
    plan = plan_retention(thread, keep_last=2, now=NOW, rebuildable={"m", "n"})
    assert sorted(plan.kept[""]) == ["r03", "r04"]
    assert plan.snapshots == {"": {"r03": frozenset({"m", "n"})}}  # the oldest kept: r04's parent stays


def test_plan_keeps_ancestors_for_a_channel_it_cannot_rebuild_and_cuts_past_them() -> None:
    """r04 rebuilds ``f`` (not rebuildable) and ``m``: its ancestors stay back to r02, which
    rebuilds ``m`` only: the snapshot goes there."""
    thread = ThreadState("t", chain("", "m", "m", "m f", "m f"))
    plan = plan_retention(thread, keep_last=1, now=NOW, rebuildable={"m"})
    assert sorted(plan.kept[""]) == ["r02", "r03", "r04"]
    assert plan.snapshots == {"": {"r02": frozenset({"m"})}}
    assert plan_retention(thread, keep_last=1, now=NOW).snapshots == {}  # none without rebuildable


# -- the graph: three delta channels with their own cadences ----------------------------------------


def _extend(state: Any, writes: Sequence[Any]) -> Any:
    out = list(state or [])
    for update in writes:
        out.extend(update)
    return out


@functools.cache
def cut_state(k_messages: int, k_notes: int) -> Any:
    """``messages`` (LangGraph's messages delta reducer), ``notes`` (a list) and ``files``
    (deepagents' reducer: a path written, or deleted with None), each a DeltaChannel with its own
    ``snapshot_frequency`` (``files``: 50, deepagents' own)."""
    typed_dict: Any = TypedDict
    return typed_dict("CutState", {
        "messages": Annotated[list, DeltaChannel(_MESSAGES, snapshot_frequency=k_messages)],
        "notes": Annotated[list, DeltaChannel(_extend, snapshot_frequency=k_notes)],
        "files": Annotated[dict, DeltaChannel(_FILES, snapshot_frequency=50)],
    }, total=False)


#: (messages, notes) snapshot_frequency: "staggered" never snapshots both in one checkpoint,
#: "large-k" never snapshots at all
STAGGERED, LARGE_K = (4, 3), (1000, 1000)
CADENCES = [pytest.param(STAGGERED, id="staggered"), pytest.param(LARGE_K, id="large-k")]


def _turn(state: Any) -> int:
    return int(next(m.id for m in reversed(state["messages"]) if m.type == "human")[1:])


def _file(n: int) -> dict[str, Any]:
    return {"content": [f"line {n}"], "created_at": "2026-01-01", "modified_at": "2026-01-01"}


def build(saver: Any, cadence: tuple[int, int]) -> Any:
    """START -> think -> answer -> END; ``answer`` adds a note every other turn and writes
    ``/t<n>.md`` each turn, deleting the file of two turns before."""

    def think(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"thinking {_turn(state)}", id=f"ai{_turn(state)}-think")]}

    def answer(state: Any) -> dict[str, Any]:
        n = _turn(state)
        files: dict[str, Any] = {f"/t{n}.md": _file(n)}
        if n >= 2:
            files[f"/t{n - 2}.md"] = None
        out: dict[str, Any] = {"messages": [AIMessage(f"answer {n}", id=f"ai{n}-answer")], "files": files}
        if n % 2 == 0:
            out["notes"] = [f"n{n}"]
        return out

    builder = StateGraph(cut_state(*cadence))
    builder.add_node("think", think)
    builder.add_node("answer", answer)
    builder.add_edge(START, "think")
    builder.add_edge("think", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def turn_input(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}


def values(snapshot: Any) -> tuple[Any, ...]:
    v = snapshot.values
    files = v.get("files") or {}
    return (tuple(m.id for m in v.get("messages", ())), tuple(v.get("notes", ())),
            tuple(sorted((path, tuple(f["content"])) for path, f in files.items())))


def expected(turns: int) -> tuple[Any, ...]:
    messages = tuple(i for t in range(turns) for i in (f"h{t}", f"ai{t}-think", f"ai{t}-answer"))
    files = tuple(sorted((f"/t{t}.md", (f"line {t}",)) for t in range(max(turns - 2, 0), turns)))
    return messages, tuple(f"n{t}" for t in range(0, turns, 2)), files


def rebuilt(graph: Any, thread_id: str) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {s.config["configurable"]["checkpoint_id"]: (s.metadata["step"], values(s))
            for s in graph.get_state_history(config(thread_id))}


async def arebuilt(graph: Any, thread_id: str) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {s.config["configurable"]["checkpoint_id"]: (s.metadata["step"], values(s))
            async for s in graph.aget_state_history(config(thread_id))}


@pytest.fixture
def saver_of(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def open_(kind: str, name: str = "cut", *, aio: bool = False) -> Any:
        pg_url = None
        if kind in ("postgres", "apostgres"):
            pg_url = request.getfixturevalue("postgres_server").new_database(name)
        opener = aopen_saver if aio else open_saver
        return opener(kind, path=tmp_path / f"{name}.db", pg_url=pg_url)

    return open_


# -- prune and sweep with the graph's channels -------------------------------------------------------


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", SYNC)
def test_prune_with_the_graph_s_channels_cuts_at_the_kept_checkpoint(
    kind: str, cadence: tuple[int, int], saver_of: Any
) -> None:
    with saver_of(kind) as saver:
        graph = build(saver, cadence)
        for turn in range(9):
            graph.invoke(turn_input(turn), config("t"))
        graph.invoke(turn_input(0), config("other"))
        before, other = rebuilt(graph, "t"), rebuilt(graph, "other")
        prune(saver, ["t"], branch_grace=NO_GRACE, delta_channels=graph.channels)
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1  # the latest, holding every value
        assert rebuilt(graph, "other") == other
        for turn in range(9, 12):  # the thread goes on
            graph.invoke(turn_input(turn), config("t"))
        assert values(graph.get_state(config("t"))) == expected(12)


@pytest.mark.parametrize("kind", SYNC)
def test_sweep_with_the_graph_s_channels_keeps_two_and_time_travel_works(kind: str, saver_of: Any) -> None:
    with saver_of(kind) as saver:
        graph = build(saver, LARGE_K)
        for turn in range(6):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        report = sweep(saver, keep_last=2, branch_grace=NO_GRACE, delta_channels=graph.channels)
        assert report.threads_trimmed == ["t"]
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 2
        # resume from the older kept checkpoint (a fork): it rebuilds its values and goes on
        older = min(after)
        fork = {"configurable": {"thread_id": "t", "checkpoint_id": older}}
        graph.invoke(None, fork)
        assert values(graph.get_state(config("t")))[0][:len(after[older][1][0])] == after[older][1][0]


def test_a_kill_between_the_snapshot_and_the_deletion_loses_nothing(saver_of: Any) -> None:
    """The snapshots are stored (committed) and nothing deleted yet, as a process killed there
    leaves the thread: every checkpoint rebuilds what it did; the next retention deletes."""
    with saver_of("sqlite") as saver:
        graph = build(saver, LARGE_K)
        for turn in range(6):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        written = backend_for(saver).snapshots(
            snapshot_flow("t", 1, graph.channels, branch_grace=NO_GRACE)
        )
        assert written == 1
        assert rebuilt(graph, "t") == before
        prune(saver, ["t"], branch_grace=NO_GRACE)  # without the channels: the snapshot is the cut
        assert_unchanged(before, rebuilt(graph, "t"), trimmed=True)
        assert len(rebuilt(graph, "t")) == 1


def test_without_the_graph_s_channels_nothing_is_snapshotted(saver_of: Any) -> None:
    with saver_of("sqlite") as saver:
        graph = build(saver, LARGE_K)
        for turn in range(4):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        prune(saver, ["t"], branch_grace=NO_GRACE)
        assert rebuilt(graph, "t") == before  # no checkpoint holds every value: all stay


def test_bad_delta_channels_raise_before_anything_is_written(saver_of: Any) -> None:
    with saver_of("sqlite") as saver:
        graph = build(saver, LARGE_K)
        graph.invoke(turn_input(0), config("t"))
        before = rebuilt(graph, "t")
        with pytest.raises(TypeError, match="delta_channels must be a mapping of channel name"):
            prune(saver, ["t"], delta_channels=["messages"])  # type: ignore[arg-type]
        assert rebuilt(graph, "t") == before


# -- async -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ASYNC)
async def test_aprune_and_asweep_with_the_graph_s_channels(kind: str, saver_of: Any) -> None:
    async with saver_of(kind, aio=True) as saver:
        graph = build(saver, STAGGERED)
        for turn in range(7):
            await graph.ainvoke(turn_input(turn), config("t"))
        before = await arebuilt(graph, "t")
        await aprune(saver, ["t"], branch_grace=NO_GRACE, delta_channels=graph.channels)
        after = await arebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        for turn in range(7, 10):
            await graph.ainvoke(turn_input(turn), config("t"))
        before = await arebuilt(graph, "t")
        await asweep(saver, keep_last=2, branch_grace=NO_GRACE, delta_channels=graph.channels)
        assert_unchanged(before, await arebuilt(graph, "t"), trimmed=True)
        assert values(await graph.aget_state(config("t"))) == expected(10)


# -- the wrapper's keep_last -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SYNC)
def test_the_wrapper_s_keep_last_cuts_with_the_graph_s_channels(kind: str, saver_of: Any) -> None:
    """The wrapper reduces ``messages`` (bounds above what the test writes) and trims with
    keep_last=1 at every put: each checkpoint left rebuilds what a twin never pruned rebuilds at
    its step, and the thread stays short although ``notes`` and ``files`` never snapshot."""
    with saver_of(kind) as inner, saver_of(kind, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99), keep_last=1,
                                        retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver, LARGE_K), build(twin_inner, LARGE_K)
        saver.delta_channels = graph.channels
        assert set(saver.delta_channels) == {"messages", "notes", "files"}
        counts = []
        for turn in range(8):
            graph.invoke(turn_input(turn), config("t"))
            twin.invoke(turn_input(turn), config("t"))
            counts.append(len(rebuilt(graph, "t")))
        assert_like_twin(rebuilt(graph, "t"), rebuilt(twin, "t"))
        assert max(counts) <= 3
        assert values(graph.get_state(config("t"))) == expected(8)


# -- Cosmos DB -------------------------------------------------------------------------------------


@pytest.mark.cosmos
def test_cosmos_prune_and_sweep_with_the_graph_s_channels(request: pytest.FixtureRequest) -> None:
    from tests.test_delta_retention import cosmos_saver

    with cosmos_saver(request) as saver:
        graph = build(saver, STAGGERED)
        for turn in range(7):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        prune(saver, ["t"], branch_grace=NO_GRACE, delta_channels=graph.channels)
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        for turn in range(7, 10):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        sweep(saver, keep_last=2, branch_grace=NO_GRACE, delta_channels=graph.channels)
        assert_unchanged(before, rebuilt(graph, "t"), trimmed=True)
        assert values(graph.get_state(config("t"))) == expected(10)


@pytest.mark.cosmos
async def test_async_cosmos_keep_last_with_the_graph_s_channels(request: pytest.FixtureRequest) -> None:
    from tests.test_delta_retention import acosmos_saver

    async with acosmos_saver(request) as inner, acosmos_saver(request, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99), keep_last=1,
                                        retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver, LARGE_K), build(twin_inner, LARGE_K)
        saver.delta_channels = graph.channels
        for turn in range(6):
            await graph.ainvoke(turn_input(turn), config("t"))
            await twin.ainvoke(turn_input(turn), config("t"))
        assert_like_twin(await arebuilt(graph, "t"), await arebuilt(twin, "t"))
        assert len(await arebuilt(graph, "t")) <= 3
        before = await arebuilt(graph, "t")
        await aprune(inner, ["t"], branch_grace=NO_GRACE, delta_channels=graph.channels)
        after = await arebuilt(graph, "t")
        assert after.items() <= before.items() and max(after) == max(before)
        assert values(await graph.aget_state(config("t"))) == expected(6)


def test_with_blob_offload_the_wrapper_keeps_ancestors_instead(saver_of: Any) -> None:
    """Values read back from an offloading saver hold references owned by the checkpoints a cut
    deletes: the wrapper takes no channels then, and keeps every ancestor (LangGraph's first
    safe way); every checkpoint left rebuilds what a twin rebuilds."""
    from checkpointers import BlobOffload

    with saver_of("sqlite") as inner, saver_of("sqlite", "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99), keep_last=1,
                                        retention_every=1, branch_grace=NO_GRACE,
                                        offload=BlobOffload(min_bytes=16))
        graph, twin = build(saver, LARGE_K), build(twin_inner, LARGE_K)
        saver.delta_channels = graph.channels
        assert saver.delta_channels == {}
        for turn in range(5):
            graph.invoke(turn_input(turn), config("t"))
            twin.invoke(turn_input(turn), config("t"))
        pruned, full = rebuilt(graph, "t"), rebuilt(twin, "t")
        by_step = dict(full.values())
        assert dict(pruned.values()) == {step: by_step[step] for step, _ in pruned.values()}
        assert values(graph.get_state(config("t"))) == expected(5)


def test_the_wrapper_s_prune_uses_its_delta_channels(saver_of: Any) -> None:
    with saver_of("sqlite") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99),
                                        branch_grace=NO_GRACE)
        graph = build(saver, LARGE_K)
        for turn in range(5):
            graph.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        saver.delta_channels = graph.channels
        saver.prune(["t"])
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        graph.invoke(turn_input(5), config("t"))
        assert values(graph.get_state(config("t"))) == expected(6)
