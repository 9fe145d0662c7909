"""Retention on threads whose graph uses LangGraph's ``DeltaChannel``: ``keep_last``, ``prune``,
``sweep`` and ``compact`` keep every checkpoint they leave rebuilding exactly the values it rebuilt
before (compared with the thread as it was, or with a twin thread that was never pruned), and the
thread goes on. Two delta channels with different snapshot cadences, plus one never written; a
small ``snapshot_frequency`` (snapshots inside the run) and a large one (none at all).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer, ReducerConfig
from checkpointers import ReducingCheckpointSaver
from checkpointers.compact import compact_store
from checkpointers.retention import (
    StoredCheckpoint,
    ThreadState,
    aprune,
    asweep,
    plan_retention,
    prune,
    sweep,
)
from tests.scenario_graph import aopen_saver, open_saver

SYNC = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC = ["memory", "aiosqlite", pytest.param("apostgres", marks=pytest.mark.postgres)]
#: (messages snapshot_frequency, notes snapshot_frequency, notes written every N turns):
#: "aligned" snapshots both channels in the same checkpoint every 2 turns; "staggered" never
#: does (notes then sit unchanged between snapshots); "large-k" never snapshots at all
ALIGNED, STAGGERED, LARGE_K = (6, 2, 1), (4, 2, 2), (1000, 1000, 2)
#: spare nothing for recency: these tests write a thread and trim it within seconds
NO_GRACE = timedelta(0)
#: the wrapper's messages_key in the tests of retention alone: a channel the graphs never write, so
#: the wrapper reduces nothing and a bare twin rebuilds the same values
#: (test_reduced_and_trimmed_thread_matches_a_reduced_twin has reduction and retention at work)
UNREDUCED = "files"
CADENCES = [pytest.param(ALIGNED, id="aligned"), pytest.param(STAGGERED, id="staggered"),
            pytest.param(LARGE_K, id="large-k")]
#: savers that store a value per (channel, version): a checkpoint reads the snapshot of an
#: unchanged channel, which makes points holding every value of the staggered cadence (SQLite's
#: rows hold only the channels snapshotted there)
BLOB_SAVERS = {"memory", "postgres", "apostgres", "cosmos"}


def trims(kind: str, cadence: tuple[int, int, int]) -> bool:
    """Whether a keep_latest prune of a 9-turn thread deletes anything (docs/savers.md)."""
    return cadence == ALIGNED or (cadence == STAGGERED and kind in BLOB_SAVERS)

# -- the graph -------------------------------------------------------------------------------------


def _add(state: Any, writes: Sequence[Any]) -> Any:
    for update in writes:
        merged = add_messages(state, update)
        assert isinstance(merged, list)
        state = merged
    return state


def _extend(state: Any, writes: Sequence[Any]) -> Any:
    out = list(state)
    for update in writes:
        out.extend(update)
    return out


@functools.cache
def delta_state(k_messages: int, k_notes: int) -> Any:
    """``messages`` and ``notes`` are DeltaChannels snapshotting at
    their own cadence; ``files`` is one that is never written."""
    typed_dict: Any = TypedDict  # the functional form: the cadences are arguments
    return typed_dict(
        "DeltaState",
        {
            "messages": Annotated[list, DeltaChannel(_add, snapshot_frequency=k_messages)],
            "notes": Annotated[list, DeltaChannel(_extend, snapshot_frequency=k_notes)],
            "files": Annotated[list, DeltaChannel(_extend, snapshot_frequency=k_notes)],
        },
        total=False,
    )


def _turn(state: Any) -> int:
    """The turn of the latest question (``h<turn>``)."""
    return int(next(m.id for m in reversed(state["messages"]) if m.type == "human")[1:])


def build(saver: Any, cadence: tuple[int, int, int] = ALIGNED) -> Any:
    """START -> think -> answer -> END: three checkpoints and three messages per turn; notes every
    ``cadence[2]`` turns."""
    every = cadence[2]

    def think(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"thinking {_turn(state)}", id=f"ai{_turn(state)}-think")]}

    def answer(state: Any) -> dict[str, Any]:
        n = _turn(state)
        out: dict[str, Any] = {"messages": [AIMessage(f"answer {n}", id=f"ai{n}-answer")]}
        if n % every == 0:
            out["notes"] = [f"n{n}"]
        return out

    builder = StateGraph(delta_state(*cadence[:2]))
    builder.add_node("think", think)
    builder.add_node("answer", answer)
    builder.add_edge(START, "think")
    builder.add_edge("think", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def turn_input(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}


def run(graph: Any, thread_id: str, turns: range) -> None:
    for turn in turns:
        graph.invoke(turn_input(turn), config(thread_id))


async def arun(graph: Any, thread_id: str, turns: range) -> None:
    for turn in turns:
        await graph.ainvoke(turn_input(turn), config(thread_id))


def expected(turns: int, cadence: tuple[int, int, int] = ALIGNED) -> tuple[Any, ...]:
    messages = tuple(i for t in range(turns) for i in (f"h{t}", f"ai{t}-think", f"ai{t}-answer"))
    return messages, tuple(f"n{t}" for t in range(0, turns, cadence[2])), ()


def values(snapshot: Any) -> tuple[Any, ...]:
    v = snapshot.values
    return (tuple(m.id for m in v.get("messages", ())), tuple(v.get("notes", ())), tuple(v.get("files", ())))


def rebuilt(graph: Any, thread_id: str) -> dict[str, tuple[int, tuple[Any, ...]]]:
    """Checkpoint id -> (step, the values LangGraph rebuilds there), for every stored checkpoint."""
    return {
        s.config["configurable"]["checkpoint_id"]: (s.metadata["step"], values(s))
        for s in graph.get_state_history(config(thread_id))
    }


async def arebuilt(graph: Any, thread_id: str) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {
        s.config["configurable"]["checkpoint_id"]: (s.metadata["step"], values(s))
        async for s in graph.aget_state_history(config(thread_id))
    }


def assert_unchanged(before: dict[str, Any], after: dict[str, Any], *, trimmed: bool) -> None:
    """Every checkpoint left rebuilds what it rebuilt before; the latest is left; ``trimmed``:
    something went."""
    assert after, "retention left no checkpoint"
    assert max(after) == max(before)
    changed = {i: (before.get(i), v) for i, v in after.items() if before.get(i) != v}
    assert changed == {}
    assert (len(after) < len(before)) is trimmed, (len(before), len(after))


def assert_like_twin(pruned: dict[str, Any], twin: dict[str, Any]) -> None:
    """Each checkpoint of a pruned thread rebuilds what the checkpoint of the same step of a twin
    thread (same turns, never pruned) rebuilds."""
    by_step = dict(twin.values())
    assert len(by_step) == len(twin)  # one branch: a step names one checkpoint
    assert {step: v for step, v in pruned.values()} == {step: by_step[step] for step, _ in pruned.values()}
    assert len(pruned) < len(twin)


@pytest.fixture
def sync_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def open_(kind: str, name: str = "delta") -> Any:
        pg_url = None
        if kind == "postgres":  # a database per test: sweep and compact read every thread
            pg_url = request.getfixturevalue("postgres_server").new_database(name)
        return open_saver(kind, path=tmp_path / f"{name}.db", pg_url=pg_url)

    return open_


@pytest.fixture
def async_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def open_(kind: str, name: str = "adelta") -> Any:
        pg_url = None
        if kind == "apostgres":
            pg_url = request.getfixturevalue("postgres_server").new_database(name)
        return aopen_saver(kind, path=tmp_path / f"{name}.db", pg_url=pg_url)

    return open_


# -- the rule, on the plan -------------------------------------------------------------------------


def chain(*unseeded: str, ns: str = "") -> tuple[StoredCheckpoint, ...]:
    """Checkpoints r00, r01, ... each the parent of the next; ``unseeded[i]``: the channels r<i>
    rebuilds from its ancestors ("" none: it holds every value)."""
    return tuple(
        StoredCheckpoint(ns, f"r{i:02d}", parent=f"r{i - 1:02d}" if i else None, delta=True,
                         unseeded=frozenset(u.split()))
        for i, u in enumerate(unseeded)
    )


def kept(thread: ThreadState, keep_last: int = 1) -> list[str]:
    plan = plan_retention(thread, keep_last=keep_last, now=datetime(2000, 1, 1, tzinfo=timezone.utc))
    return sorted(plan.kept[""])


def test_plan_keeps_the_ancestors_back_to_one_holding_every_delta_value() -> None:
    # r02 holds every value: what is older goes
    thread = ThreadState("t", chain("", "m", "", "m", "m n", "m"))
    assert kept(thread) == ["r02", "r03", "r04", "r05"]
    assert kept(thread, keep_last=2) == ["r02", "r03", "r04", "r05"]


def test_plan_goes_on_past_an_ancestor_that_holds_one_channel_while_it_rebuilds_another() -> None:
    # r03 holds messages but rebuilds notes: it is a checkpoint of the thread too, so its own
    # chain stays, back to r01 (holds both)
    thread = ThreadState("t", chain("m n", "", "n", "n", "m n", "m"))
    assert kept(thread) == ["r01", "r02", "r03", "r04", "r05"]


def test_plan_without_any_full_point_keeps_the_whole_chain_and_a_full_latest_keeps_none() -> None:
    assert kept(ThreadState("t", chain("m", "m", "m"))) == ["r00", "r01", "r02"]
    assert kept(ThreadState("t", chain("m", "m", ""))) == ["r02"]


def test_plan_walks_each_namespace_by_its_own_parent_links_and_stops_on_a_loop() -> None:
    looped = StoredCheckpoint("", "r00", parent="r02", delta=True, unseeded=frozenset({"m"}))
    thread = ThreadState("t", (looped, *chain("m", "m", "m")[1:], *chain("", "m", "m", ns="other")))
    plan = plan_retention(thread, keep_last=1, now=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert sorted(plan.kept[""]) == ["r00", "r01", "r02"]
    assert sorted(plan.kept["other"]) == ["r00", "r01", "r02"]


def test_plan_on_a_blob_saver_keeps_the_checkpoint_that_stored_a_snapshot_a_kept_one_reads() -> None:
    """r02 reads the snapshot r01 stored (same messages version): r01 stays with it, since blob
    offload records the snapshot's references under r01; r00 goes."""
    r00 = StoredCheckpoint("", "r00", delta=True, versions={"messages": "1"})
    r01 = StoredCheckpoint("", "r01", parent="r00", delta=True, versions={"messages": "2"})
    r02 = StoredCheckpoint("", "r02", parent="r01", delta=True, versions={"messages": "2"},
                           held=frozenset({("messages", "2")}))
    blobs = frozenset({("", "messages", "1"), ("", "messages", "2")})
    plan = plan_retention(ThreadState("t", (r00, r01, r02), blobs=blobs), keep_last=1,
                          now=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert sorted(plan.kept[""]) == ["r01", "r02"]
    assert plan.blobs == {("", "messages"): ("1",)}


def test_plan_keeps_a_checkpoint_superseded_as_the_latest_a_moment_ago() -> None:
    """A run that read a checkpoint while it was the latest may not have stored its first
    checkpoint yet: each stays while the one that superseded it is younger than SUPERSEDED_GRACE
    (at most branch_grace)."""
    from langgraph.checkpoint.base.id import uuid6

    from checkpointers.retention import SUPERSEDED_GRACE

    ids = sorted(str(uuid6(clock_seq=i)) for i in range(3))
    stored = tuple(StoredCheckpoint("", i, parent=p, delta=True, loop=True, due=False)
                   for i, p in zip(ids, [None, *ids], strict=False))
    made = datetime.now(timezone.utc)
    for now, kept_ids in ((made, ids), (made + SUPERSEDED_GRACE * 2, ids[2:])):
        plan = plan_retention(ThreadState("t", stored), keep_last=1, now=now)
        assert sorted(plan.kept[""]) == kept_ids
    plan = plan_retention(ThreadState("t", stored), keep_last=1, now=made, branch_grace=NO_GRACE)
    assert sorted(plan.kept[""]) == ids[2:]


def test_plan_keeps_a_run_s_recent_checkpoint_on_a_row_saver_of_a_delta_thread() -> None:
    """A run may still extend a recent checkpoint; on a DeltaChannel thread its next checkpoint is
    rebuilt through it, so row savers (``blobs`` None) keep it too."""
    now = datetime.now(timezone.utc)
    from langgraph.checkpoint.base.id import uuid6

    ids = sorted(str(uuid6(clock_seq=i)) for i in range(3))
    stored = (
        StoredCheckpoint("", ids[0], delta=True),
        StoredCheckpoint("", ids[1], parent=ids[0], delta=True),  # a second run's branch point
        StoredCheckpoint("", ids[2], parent=ids[0], delta=True, loop=False),
    )
    plan = plan_retention(ThreadState("t", stored), keep_last=1, now=now, branch_grace=timedelta(hours=1))
    assert ids[1] in plan.kept[""]
    plain = tuple(StoredCheckpoint(c.ns, c.id, parent=c.parent) for c in stored)
    assert ids[1] not in plan_retention(ThreadState("t", plain), keep_last=1, now=now).kept[""]


# -- every entry point, on real savers -------------------------------------------------------------


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", SYNC)
def test_prune_keep_latest_leaves_every_checkpoint_rebuilding_the_same(
    kind: str, cadence: tuple[int, int, int], sync_saver: Any
) -> None:
    with sync_saver(kind) as saver:
        graph = build(saver, cadence)
        run(graph, "t", range(9))
        run(graph, "other", range(2))
        before, other = rebuilt(graph, "t"), rebuilt(graph, "other")
        prune(saver, ["t"], strategy="keep_latest", branch_grace=NO_GRACE)
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=trims(kind, cadence))
        if cadence == ALIGNED:  # back to the last checkpoint holding both values: 2 turns at most
            assert len(after) <= 7
        assert rebuilt(graph, "other") == other
        run(graph, "t", range(9, 12))  # the thread goes on
        assert values(graph.get_state(config("t"))) == expected(12, cadence)
        prune(saver, ["t"], strategy="delete")
        assert rebuilt(graph, "t") == {}


@pytest.mark.parametrize("kind", SYNC)
def test_a_wrapper_s_keep_last_matches_a_twin_that_was_never_pruned(kind: str, sync_saver: Any) -> None:
    with sync_saver(kind) as inner, sync_saver(kind, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=2,
                                        messages_key=UNREDUCED, retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver), build(twin_inner)
        run(graph, "t", range(12))
        run(twin, "t", range(12))
        pruned = rebuilt(graph, "t")
        assert_like_twin(pruned, rebuilt(twin, "t"))
        assert len(pruned) <= 2 + 8  # keep_last, and back to a checkpoint holding both: 2 turns
        stats = saver.retention_stats
        assert stats is not None and stats.checkpoints_deleted > 0 and stats.failures == 0
        assert values(graph.get_state(config("t"))) == expected(12)
        # LangGraph's capability on the wrapper, on every saver (PostgresSaver's own refuses these threads)
        saver.prune(["t"], strategy="keep_latest")
        assert_unchanged(pruned, rebuilt(graph, "t"), trimmed=len(pruned) > 7)
        run(graph, "t", range(12, 14))
        assert values(graph.get_state(config("t"))) == expected(14)


@pytest.mark.parametrize("kind", SYNC)
def test_reduced_and_trimmed_thread_matches_a_reduced_twin(kind: str, sync_saver: Any) -> None:
    """The wrapper reduces the DeltaChannel messages (a snapshot at each put) and keep_last trims:
    every checkpoint left rebuilds what the same step of a twin, reduced and never trimmed,
    rebuilds, and the thread goes on like the twin."""
    with sync_saver(kind) as inner, sync_saver(kind, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=2,
                                        retention_every=1, branch_grace=NO_GRACE)
        twin_saver = ReducingCheckpointSaver(twin_inner, MessageReducer(min_messages=4, max_messages=8))
        graph, twin = build(saver), build(twin_saver)
        run(graph, "t", range(12))
        run(twin, "t", range(12))
        pruned, reference = rebuilt(graph, "t"), rebuilt(twin, "t")
        assert_like_twin(pruned, reference)
        latest = values(graph.get_state(config("t")))
        assert latest == values(twin.get_state(config("t")))
        assert len(latest[0]) <= 8 < len(expected(12)[0])
        stats = saver.retention_stats
        assert stats is not None and stats.checkpoints_deleted > 0 and stats.failures == 0
        run(graph, "t", range(12, 14))
        run(twin, "t", range(12, 14))
        assert values(graph.get_state(config("t"))) == values(twin.get_state(config("t")))


@pytest.mark.parametrize("kind", SYNC)
def test_sweep_trims_a_delta_thread_and_its_dry_run_says_so(kind: str, sync_saver: Any) -> None:
    with sync_saver(kind) as saver:
        graph = build(saver)
        run(graph, "t", range(9))
        before = rebuilt(graph, "t")
        dry = sweep(saver, keep_last=1, dry_run=True, branch_grace=NO_GRACE)
        assert dry.skipped == {} and dry.threads_trimmed == ["t"]
        assert rebuilt(graph, "t") == before
        report = sweep(saver, keep_last=1, branch_grace=NO_GRACE)
        assert report.skipped == {} and report.threads_trimmed == ["t"]
        assert report.checkpoints_deleted == dry.checkpoints_deleted == len(before) - len(rebuilt(graph, "t"))
        assert_unchanged(before, rebuilt(graph, "t"), trimmed=True)
        run(graph, "t", range(9, 10))
        assert values(graph.get_state(config("t"))) == expected(10)


@pytest.mark.parametrize("kind", SYNC)
def test_compact_store_keep_last_trims_a_delta_thread(kind: str, sync_saver: Any) -> None:
    with sync_saver(kind) as saver:
        graph = build(saver)
        run(graph, "t", range(9))
        before = rebuilt(graph, "t")
        # retention alone (no reducer): compacting a delta thread as well is
        # tests/test_delta_compact_thread.py's
        dry = compact_store(saver, None, keep_last=1, dry_run=True, branch_grace=NO_GRACE)
        report = compact_store(saver, None, keep_last=1, branch_grace=NO_GRACE)
        assert report.kept_whole == {} and report.threads_trimmed == ["t"]
        assert report.checkpoints_deleted == dry.checkpoints_deleted > 0
        assert_unchanged(before, rebuilt(graph, "t"), trimmed=True)
        run(graph, "t", range(9, 10))
        assert values(graph.get_state(config("t"))) == expected(10)


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", ASYNC)
async def test_async_keep_last_aprune_and_asweep(
    kind: str, cadence: tuple[int, int, int], async_saver: Any
) -> None:
    async with async_saver(kind) as inner, async_saver(kind, "atwin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=2,
                                        messages_key=UNREDUCED, retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver, cadence), build(twin_inner, cadence)
        await arun(graph, "t", range(9))
        await arun(twin, "t", range(9))
        twin_states = await arebuilt(twin, "t")
        pruned = await arebuilt(graph, "t")
        if trims(kind, cadence):
            assert_like_twin(pruned, twin_states)
        else:
            assert sorted(v for _, v in pruned.values()) == sorted(v for _, v in twin_states.values())
        await aprune(twin_inner, ["t"], branch_grace=NO_GRACE)  # the bare saver: retention's own
        assert_unchanged(twin_states, await arebuilt(twin, "t"), trimmed=trims(kind, cadence))
        await saver.aprune(["t"])
        assert (await asweep(saver, keep_last=1, branch_grace=NO_GRACE)).skipped == {}
        assert_like_twin(await arebuilt(graph, "t"), twin_states) if trims(kind, cadence) else None
        await arun(graph, "t", range(9, 11))
        assert values(await graph.aget_state(config("t"))) == expected(11, cadence)


# -- Cosmos DB -------------------------------------------------------------------------------------


@contextmanager
def cosmos_saver(request: pytest.FixtureRequest, container: str = "c") -> Iterator[Any]:
    from checkpointers.cosmosdb import CosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    with server.client() as client:
        saver = CosmosDBSaver(database, container, client=client)
        saver.setup()
        yield saver


@asynccontextmanager
async def acosmos_saver(request: pytest.FixtureRequest, container: str = "c") -> AsyncIterator[Any]:
    from checkpointers.cosmosdb import AsyncCosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    async with server.async_client() as client:
        saver = AsyncCosmosDBSaver(database, container, client=client)
        await saver.asetup()
        yield saver


@pytest.mark.cosmos
def test_cosmos_prune_sweep_and_keep_last(request: pytest.FixtureRequest) -> None:
    with cosmos_saver(request) as inner, cosmos_saver(request, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=2,
                                        messages_key=UNREDUCED, retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver), build(twin_inner)
        run(graph, "t", range(9))
        run(twin, "t", range(9))
        assert_like_twin(rebuilt(graph, "t"), rebuilt(twin, "t"))
        before = rebuilt(twin, "t")
        prune(twin_inner, ["t"], strategy="keep_latest", branch_grace=NO_GRACE)
        assert_unchanged(before, rebuilt(twin, "t"), trimmed=True)
        run(twin, "t", range(9, 10))
        before = rebuilt(twin, "t")
        assert sweep(twin_inner, keep_last=1, branch_grace=NO_GRACE).skipped == {}
        assert_unchanged(before, rebuilt(twin, "t"), trimmed=True)
        run(graph, "t", range(9, 11))
        assert values(graph.get_state(config("t"))) == expected(11)


@pytest.mark.cosmos
async def test_async_cosmos_keep_last_and_aprune(request: pytest.FixtureRequest) -> None:
    async with acosmos_saver(request) as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8), keep_last=2,
                                        messages_key=UNREDUCED, retention_every=1, branch_grace=NO_GRACE)
        graph = build(saver)
        await arun(graph, "t", range(9))
        before = await arebuilt(graph, "t")
        assert len(before) < 27
        await aprune(inner, ["t"], branch_grace=NO_GRACE)
        assert_unchanged(before, await arebuilt(graph, "t"), trimmed=len(before) > 6)
        await arun(graph, "t", range(9, 11))
        assert values(await graph.aget_state(config("t"))) == expected(11)


# -- the CLI, offload and the archive --------------------------------------------------------------


def test_cli_compact_keep_last_on_a_delta_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI trims such a thread by the same rules and the default grace: its checkpoints are
    seconds old here, and of those superseded less than SUPERSEDED_GRACE ago only the newest
    SUPERSEDED_KEEP stay, so the thread is trimmed."""
    import checkpointers.cli.main as cli

    path = tmp_path / "cli.db"
    with open_saver("sqlite", path=path) as saver:
        graph = build(saver)
        run(graph, "t", range(9))
        before = rebuilt(graph, "t")
    assert cli.main(["compact", str(path), "--keep-last", "1", "--yes"]) == 0
    assert "DeltaChannel" not in capsys.readouterr().out
    with open_saver("sqlite", path=path) as saver:
        graph = build(saver)
        assert_unchanged(before, rebuilt(graph, "t"), trimmed=True)
        run(graph, "t", range(9, 10))
        assert values(graph.get_state(config("t"))) == expected(10)


def _image(turn: int) -> str:
    import base64

    return base64.b64encode(bytes([turn]) * 3000).decode()


def contents(snapshot: Any) -> tuple[Any, ...]:
    """Every message's id and content (images included), as LangGraph rebuilds them."""
    return tuple((m.id, repr(m.content)) for m in snapshot.values.get("messages", ()))


@pytest.mark.parametrize("kind", SYNC)
def test_offload_and_the_archive_on_a_delta_thread_lose_no_image(kind: str, sync_saver: Any) -> None:
    from langgraph.store.memory import InMemoryStore

    from checkpointers import BlobOffload, StoreArchive

    archive = StoreArchive(InMemoryStore())
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    with sync_saver(kind) as inner, sync_saver(kind, "twin") as twin_inner:
        saver = ReducingCheckpointSaver(inner, reducer, offload=BlobOffload(min_bytes=1024), keep_last=2,
                                        messages_key=UNREDUCED,
                                        retention_every=1, branch_grace=NO_GRACE)
        graph, twin = build(saver), build(twin_inner)
        for turn in range(9):
            block = {"type": "image", "base64": _image(turn), "mime_type": "image/png"}
            question = HumanMessage([{"type": "text", "text": f"q{turn}"}, block], id=f"h{turn}")
            message = {"messages": [question]}
            graph.invoke(message, config("t"))
            twin.invoke(message, config("t"))
        by_step = {s.metadata["step"]: contents(s) for s in twin.get_state_history(config("t"))}
        kept = {s.metadata["step"]: contents(s) for s in graph.get_state_history(config("t"))}
        assert len(kept) < len(by_step)
        assert kept == {step: by_step[step] for step in kept}
        saver.prune(["t"])
        after = {s.metadata["step"]: contents(s) for s in graph.get_state_history(config("t"))}
        assert after.items() <= kept.items()
        graph.invoke(turn_input(9), config("t"))
        assert values(graph.get_state(config("t"))) == expected(10)


# -- two runs on one thread ------------------------------------------------------------------------


class Racing(TypedDict, total=False):
    messages: Annotated[list, DeltaChannel(_add, snapshot_frequency=2)]
    run: str


def _racing_graph(saver: Any, gate: Any) -> Any:
    """agent -> gate (run A waits there) -> END."""

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"{state['run']} agent", id=f"{state['run']}-agent")]}

    builder = StateGraph(Racing).add_node("agent", agent).add_node("gate", gate)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=saver)


def _race_input(run_id: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question of {run_id}", id=f"{run_id}-q")], "run": run_id}


def _well_formed(ids: tuple[str, ...]) -> bool:
    """What a checkpoint of the racing thread can hold: nothing (its first checkpoint), or turns
    (question, agent, done), each whole or cut short, from the first seed turn on; a cut chain
    rebuilds a list that does not start there."""
    if not ids:
        return True
    if ids[0] != "s0-q":
        return False
    turns: list[list[str]] = []
    for i in ids:
        if i.endswith("-q"):
            turns.append([])
        turns[-1].append(i)
    return all(t == [f"{t[0][:-2]}-{p}" for p in ("q", "agent", "done")][: len(t)] for t in turns)


@contextmanager
def _pair(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two savers on one store, each with its own connection (as two worker processes have)."""
    if kind == "memory":
        with open_saver("memory") as inner:
            yield inner, inner
    elif kind in ("sqlite", "postgres"):
        url = request.getfixturevalue("postgres_server").new_database("race") if kind == "postgres" else None
        path = tmp_path / "race.db"
        with open_saver(kind, path=path, pg_url=url) as one, open_saver(kind, path=path, pg_url=url) as two:
            yield one, two
    else:
        from checkpointers.cosmosdb import CosmosDBSaver

        server = request.getfixturevalue("cosmos_server")
        database = request.getfixturevalue("cosmos_database")
        with server.client() as c1, server.client() as c2:
            one, two = CosmosDBSaver(database, "c", client=c1), CosmosDBSaver(database, "c", client=c2)
            one.setup()
            yield one, two


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
             pytest.param("cosmos", marks=pytest.mark.cosmos)]
)
def test_a_run_between_two_steps_keeps_its_delta_values_while_another_run_prunes(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Run A stored its agent step and waits before its next one; run B, on the same thread through
    another saver, finishes whole turns with keep_last=1 and retention at every put. A's last
    checkpoint, the thread's latest, rebuilds exactly what A's run returned, and every checkpoint
    left rebuilds a whole history."""
    import threading

    entered, release = threading.Event(), threading.Event()

    def gate(state: Any) -> dict[str, Any]:
        if state["run"] == "A":
            entered.set()
            assert release.wait(120), "the test never released run A"
        return {"messages": [AIMessage(f"{state['run']} done", id=f"{state['run']}-done")]}

    thread = config("race")
    with _pair(kind, request, tmp_path) as (one, two):
        reducer = MessageReducer(min_messages=50, max_messages=99)
        wrap = functools.partial(ReducingCheckpointSaver, reducer=reducer, keep_last=1, retention_every=1)
        graph_a, graph_b = _racing_graph(wrap(one), gate), _racing_graph(wrap(two), gate)
        for seed in range(3):
            graph_b.invoke(_race_input(f"s{seed}"), thread)
        returned: list[Any] = []
        worker = threading.Thread(target=lambda: returned.append(graph_a.invoke(_race_input("A"), thread)))
        worker.start()
        assert entered.wait(120)
        for other in range(3):
            graph_b.invoke(_race_input(f"b{other}"), thread)
        release.set()
        worker.join(120)
        assert not worker.is_alive() and len(returned) == 1
        history = list(graph_b.get_state_history(thread))
        ids = [tuple(m.id for m in s.values["messages"]) for s in history]
        assert ids[0] == tuple(m.id for m in returned[0]["messages"])
        assert [i for i in ids if not _well_formed(i)] == []
        graph_b.invoke(_race_input("c"), thread)
        after = tuple(m.id for m in graph_b.get_state(thread).values["messages"])
        assert _well_formed(after) and after[-6:] == ("A-q", "A-agent", "A-done", "c-q", "c-agent", "c-done")
