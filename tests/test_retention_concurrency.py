"""Retention while several runs and processes share a thread: what keep_last deletes never takes
what a run still writing needs, writes left by a deleted checkpoint do not pile up, and the
bound holds whichever process serves each turn.

Every backend that stores channel values apart from the checkpoint (InMemorySaver, PostgreSQL
sync and async, Cosmos DB sync and async) runs the two-runs scenario; SQLite stores each
checkpoint whole and runs the rest.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import (
    StoredCheckpoint,
    StoredWrites,
    ThreadState,
    checkpoint_time,
    plan_retention,
    sweep,
)
from tests.scenario_graph import aopen_saver, build_graph, open_saver, run_turns, thread_config

BLOB_SAVERS = ("memory", "postgres", "apostgres", "cosmos", "acosmos")


class Profiled(TypedDict):
    messages: list[Any]
    run: str
    profile: dict[str, str]


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=4, max_messages=8)


def two_step_graph(saver: Any, gate: Any) -> Any:
    """agent (writes ``profile``) -> gate (run A waits there) -> END: a run between two steps."""

    def agent(state: Profiled) -> dict[str, Any]:
        run = state["run"]
        return {"profile": {"by": run}, "messages": [*state["messages"], AIMessage(f"{run} agent")]}

    builder = StateGraph(Profiled).add_node("agent", agent).add_node("gate", gate)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=saver)


def _input(run: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question of run {run}")], "run": run}


@contextmanager
def _sync_pair(kind: str, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """Two savers on one store, each with its own connection (as two worker processes have)."""
    if kind == "memory":
        with open_saver("memory") as inner:
            yield inner, inner
        return
    if kind == "postgres":
        url = request.getfixturevalue("postgres_server").new_database("two_runs")
        with open_saver("postgres", pg_url=url) as one, open_saver("postgres", pg_url=url) as two:
            yield one, two
        return
    from checkpointers.cosmosdb import CosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    with server.client() as c1, server.client() as c2:
        one, two = CosmosDBSaver(database, "c", client=c1), CosmosDBSaver(database, "c", client=c2)
        one.setup()
        yield one, two


@asynccontextmanager
async def _async_pair(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Any]]:
    if kind == "apostgres":
        url = request.getfixturevalue("postgres_server").new_database("two_aruns")
        async with aopen_saver("apostgres", pg_url=url) as one, aopen_saver("apostgres", pg_url=url) as two:
            yield one, two
        return
    from checkpointers.cosmosdb import AsyncCosmosDBSaver

    server, database = request.getfixturevalue("cosmos_server"), request.getfixturevalue("cosmos_database")
    async with server.async_client() as c1, server.async_client() as c2:
        one, two = AsyncCosmosDBSaver(database, "c", client=c1), AsyncCosmosDBSaver(database, "c", client=c2)
        await one.asetup()
        yield one, two


def _while_waiting(
    waiting: Any, run: str, other: Any, config: RunnableConfig, entered: threading.Event,
    release: threading.Event,
) -> None:
    """Run ``run`` on ``waiting`` in a thread until it signals ``entered`` (it then waits for
    ``release``), run B's whole turn on ``other`` meanwhile, then let ``run`` finish."""
    failures: list[BaseException] = []

    def target() -> None:
        try:
            waiting.invoke(_input(run), config, durability="sync")
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    worker = threading.Thread(target=target)
    worker.start()
    assert entered.wait(120), failures
    other.invoke(_input("B"), config, durability="sync")
    release.set()
    worker.join(120)
    assert failures == [] and not worker.is_alive()


def _wrap(inner: Any) -> ReducingCheckpointSaver:
    return ReducingCheckpointSaver(inner, reducer(), keep_last=1, retention_every=1)


@pytest.mark.parametrize("kind", BLOB_SAVERS)
async def test_a_run_between_two_steps_keeps_its_channels_when_another_run_finishes(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Run A stored its agent step (``profile`` by A) and waits before its next step; run B, on
    the same thread through another saver, finishes a whole turn with keep_last=1 and its
    retention runs at every put. A's next checkpoint, the thread's latest, still has A's profile."""
    config: RunnableConfig = {"configurable": {"thread_id": "shared"}}
    if kind in ("memory", "postgres", "cosmos"):
        entered, release = threading.Event(), threading.Event()

        def gate(state: Profiled) -> dict[str, Any]:
            if state["run"] == "A":
                entered.set()
                assert release.wait(120), "the test never released run A"
            return {"messages": [*state["messages"], AIMessage(f"{state['run']} done")]}

        with _sync_pair(kind, request) as (one, two):
            saver_a, saver_b = _wrap(one), _wrap(two)
            graph_a, graph_b = two_step_graph(saver_a, gate), two_step_graph(saver_b, gate)
            _while_waiting(graph_a, "A", graph_b, config, entered, release)
            latest = saver_b.get_tuple(config)
            stats = [saver_a.retention_stats, saver_b.retention_stats]
    else:
        aentered, arelease = asyncio.Event(), asyncio.Event()

        async def agate(state: Profiled) -> dict[str, Any]:
            if state["run"] == "A":
                aentered.set()
                await asyncio.wait_for(arelease.wait(), 120)
            return {"messages": [*state["messages"], AIMessage(f"{state['run']} done")]}

        async with _async_pair(kind, request) as (one, two):
            saver_a, saver_b = _wrap(one), _wrap(two)
            graph_a, graph_b = two_step_graph(saver_a, agate), two_step_graph(saver_b, agate)
            task = asyncio.create_task(graph_a.ainvoke(_input("A"), config, durability="sync"))
            await asyncio.wait_for(aentered.wait(), 120)
            await graph_b.ainvoke(_input("B"), config, durability="sync")
            arelease.set()
            await task
            latest = await saver_b.aget_tuple(config)
            stats = [saver_a.retention_stats, saver_b.retention_stats]
    assert latest is not None
    values = latest.checkpoint["channel_values"]
    assert values.get("profile") == {"by": "A"}, sorted(values)
    assert [m.content for m in values["messages"]][-2:] == ["A agent", "A done"]
    assert all(s is not None and s.runs > 0 and s.failures == 0 for s in stats), stats


class SlowInput(ReducingCheckpointSaver):
    """A saver whose input checkpoints wait before they are stored (a busy background writer)."""

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        if metadata.get("source") == "input":
            hold = self.__dict__["hold"]
            hold[0].set()
            assert hold[1].wait(120), "the test never released the input put"
        return super().put(config, checkpoint, metadata, new_versions)


@pytest.mark.parametrize("kind", ["memory", "postgres", "cosmos"])
def test_a_run_whose_input_checkpoint_is_on_its_way_keeps_the_channels_it_read(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Run C read the thread's finished latest checkpoint F (profile by A); before C's input
    checkpoint is stored, run B finishes a turn that writes its own profile, and its retention
    deletes F and the value only F named. C writes no profile: its last checkpoint, the thread's
    latest, still holds the one it read."""
    config: RunnableConfig = {"configurable": {"thread_id": "late-input"}}
    entered, release = threading.Event(), threading.Event()

    def agent(state: Profiled) -> dict[str, Any]:
        update: dict[str, Any] = {"messages": [*state["messages"], AIMessage(f"{state['run']} agent")]}
        if state["run"] != "C":
            update["profile"] = {"by": state["run"]}
        return update

    builder = StateGraph(Profiled).add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    with _sync_pair(kind, request) as (one, two):
        saver_b = _wrap(one)
        saver_c = SlowInput(two, reducer(), keep_last=1, retention_every=1)
        saver_c.__dict__["hold"] = (entered, release)
        graph_b: Any = builder.compile(checkpointer=saver_b)
        graph_c: Any = builder.compile(checkpointer=saver_c)
        graph_b.invoke(_input("A"), config, durability="sync")
        _while_waiting(graph_c, "C", graph_b, config, entered, release)
        latest = saver_b.get_tuple(config)
    assert latest is not None
    values = latest.checkpoint["channel_values"]
    assert [m.content for m in values["messages"]][-1] == "C agent"
    assert values.get("profile") == {"by": "A"}, sorted(values)


# -- the rule, on the plan ------------------------------------------------------------------------


def _id(minutes_ago: float, seq: int, now: datetime) -> str:
    """A uuid6 checkpoint id made ``minutes_ago`` before ``now`` (as LangGraph makes them)."""
    made = now - timedelta(minutes=minutes_ago)
    stamp = int(made.timestamp() * 1e7) + 0x01B21DD213814000
    value = ((stamp >> 12) << 80) | (0x6 << 76) | ((stamp & 0x0FFF) << 64) | (0x8 << 60) | seq
    return str(uuid.UUID(int=value))


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_checkpoint_time_reads_the_uuid6_clock() -> None:
    made = checkpoint_time(_id(30, 1, NOW))
    assert made is not None and abs((NOW - made) - timedelta(minutes=30)) < timedelta(seconds=1)
    assert checkpoint_time("not-a-uuid") is None
    assert checkpoint_time("12345678-1234-4234-8234-123456789abc") is None  # uuid4: no clock


def _chain(now: datetime, minutes_ago: float, **kw: Any) -> StoredCheckpoint:
    return StoredCheckpoint("", _id(minutes_ago, kw.pop("seq", 0), now), **kw)


def test_plan_keeps_a_checkpoint_another_run_started_from_while_its_own_run_may_continue() -> None:
    a0 = _chain(NOW, 5.0, seq=1, versions={"profile": "1"}, due=True)
    a1 = _chain(NOW, 4.0, seq=2, parent=a0.id, loop=True, versions={"profile": "2"}, due=True)
    b_in = _chain(NOW, 3.0, seq=3, parent=a1.id, versions={"profile": "2"}, due=True)
    b1 = _chain(NOW, 2.0, seq=4, parent=b_in.id, loop=True, versions={"profile": "3"}, due=True)
    b2 = _chain(NOW, 1.0, seq=5, parent=b1.id, loop=True, versions={"profile": "3"}, due=False)
    blobs = frozenset(("", "profile", v) for v in "123")
    thread = ThreadState("t", (a0, a1, b_in, b1, b2), (), blobs)
    plan = plan_retention(thread, keep_last=1, now=NOW)
    # a1 has a step due and no step of its own run after it: run A may still write its child
    assert plan.kept[""] == (b2.id, a1.id)
    assert plan.blobs == {("", "profile"): ("1",)}
    # an hour later run A is taken for abandoned: a1 goes, with the value only it names
    later = plan_retention(thread, keep_last=1, now=NOW + timedelta(hours=2))
    assert later.kept[""] == (b2.id,)
    assert later.blobs == {("", "profile"): ("1", "2")}
    # a grace of zero keeps nothing extra
    assert plan_retention(thread, keep_last=1, now=NOW, branch_grace=timedelta(0)).kept[""] == (b2.id,)


def test_plan_does_not_keep_finished_or_continued_checkpoints() -> None:
    """A run's final checkpoint (no step due) and a checkpoint its own next step continues are
    not kept for the grace: a single conversation keeps exactly keep_last."""
    ids = [_chain(NOW, 10 - i, seq=i) for i in range(6)]
    chain: list[StoredCheckpoint] = []
    for i, c in enumerate(ids):
        parent = chain[-1].id if chain else None
        final = i % 3 == 2  # three checkpoints a run: input, a step, the final one
        chain.append(StoredCheckpoint("", c.id, parent=parent, loop=i % 3 != 0, due=not final))
    thread = ThreadState("t", tuple(chain), (), frozenset())
    assert plan_retention(thread, keep_last=2, now=NOW).kept[""] == (chain[5].id, chain[4].id)


def test_a_run_in_progress_keeps_the_writes_of_its_next_checkpoint() -> None:
    """On a row saver (SQLite: ``blobs`` None) run A's checkpoint a1 goes, but the writes of its
    child (not stored yet, older than run B's newest) stay while run A may still be running."""
    a1 = _chain(NOW, 3.0, seq=1, step=4, due=True)
    a2 = _id(2.5, 2, NOW)  # on its way: its writes (one an interrupt) landed first
    b1 = _chain(NOW, 2.0, seq=3, parent=a1.id, step=5, due=True)
    b2 = _chain(NOW, 1.0, seq=4, parent=b1.id, loop=True, step=6, due=False)
    writes = (StoredWrites("", a2, 2, interrupt=True),)
    plan = plan_retention(ThreadState("t", (a1, b1, b2), writes), keep_last=1, now=NOW)
    assert plan.kept[""] == (b2.id,) and plan.orphans == {}  # SQLite needs a1 for no value
    # once run A is taken for abandoned, they go
    later = plan_retention(ThreadState("t", (a1, b1, b2), writes), keep_last=1, now=NOW + timedelta(hours=2))
    assert later.kept[""] == (b2.id,) and later.orphans == {"": (a2,)}


@pytest.mark.parametrize(
    ("value", "error"), [(-1, TypeError), (timedelta(seconds=-1), ValueError), ("1h", TypeError)]
)
def test_branch_grace_is_validated_at_construction(value: Any, error: type[Exception]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    with pytest.raises(error, match="branch_grace must be"):
        ReducingCheckpointSaver(InMemorySaver(), reducer(), keep_last=2, branch_grace=value)


# -- writes left behind by a deleted checkpoint ---------------------------------------------------


def test_plan_deletes_writes_whose_checkpoint_is_gone_and_keeps_those_on_their_way() -> None:
    roots = tuple(StoredCheckpoint("", f"r{i:02d}") for i in range(3, 6))
    thread = ThreadState("t", (
        *roots,
        StoredCheckpoint("sub:1", "s05", root="r01"),  # a call of a deleted root: dropped whole
        StoredCheckpoint("sub:2", "s09", root="r05"),  # a call of a kept root: its latest only
    ), (
        StoredWrites("", "r01", 2),  # landed after r01 was deleted
        StoredWrites("", "r04", 1),  # of a checkpoint deleted now
        StoredWrites("", "r06", 3),  # of the next checkpoint, not stored yet
        StoredWrites("sub:1", "s07", 1),  # of the dropped call
        StoredWrites("sub:2", "s08", 1),  # before the call's kept latest
        StoredWrites("sub:2", "s10", 1),  # the call's next checkpoint, on its way
        StoredWrites("sub:3", "r02", 4),  # a namespace with nothing stored, older than the kept roots
        StoredWrites("sub:4", "s99", 5),  # nothing stored, newer than the kept roots: on its way
    ))
    plan = plan_retention(thread, keep_last=1)
    assert plan.kept[""] == ("r05",)
    assert plan.orphans == {"": ("r01",), "sub:1": ("s07",), "sub:2": ("s08",), "sub:3": ("r02",)}
    assert plan.writes == 2 + 1 + 1 + 1 + 4


def _write_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0])


def _orphan_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(
            "SELECT COUNT(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id "
            "= w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
        ).fetchone()[0])


class LateWrites(ReducingCheckpointSaver):
    """A saver whose pending writes land after the next checkpoint and its retention, as a slow
    background writer's do: each ``put_writes`` is held back and stored at the next ``put``."""

    _held: list[tuple[Any, ...]]

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        self.__dict__.setdefault("_held", []).append((config, list(writes), task_id, task_path))

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        saved = super().put(config, checkpoint, metadata, new_versions)
        held, self.__dict__["_held"] = self.__dict__.get("_held", []), []
        for args in held:
            super().put_writes(*args)
        return saved


def test_writes_that_land_after_their_checkpoint_went_do_not_pile_up(tmp_path: Path) -> None:
    """Every pending write lands after retention deleted its checkpoint: with keep_last=1 the
    store holds at most the writes of the newest checkpoints, after 10 turns as after 40."""
    path = tmp_path / "late.db"
    counts: list[tuple[int, int]] = []
    with open_saver("sqlite", path=path) as inner:
        saver = LateWrites(inner, reducer(), keep_last=1, retention_every=1)
        graph = build_graph(saver)
        for turns in (10, 30):
            run_turns(graph, turns, thread_id="late", start=len(counts) * 10)
            counts.append((_write_rows(path), _orphan_rows(path)))
        stats = saver.retention_stats
    (rows_10, orphans_10), (rows_40, orphans_40) = counts
    assert rows_40 <= rows_10 and orphans_40 <= orphans_10 <= 6, counts
    assert stats is not None and stats.writes_deleted > 0 and stats.failures == 0


def test_sweep_deletes_writes_left_by_deleted_checkpoints(tmp_path: Path) -> None:
    """A write that lands on a checkpoint a sweep deleted (a slow writer) goes at the next sweep."""
    path = tmp_path / "sweep.db"
    with open_saver("sqlite", path=path) as inner:
        run_turns(build_graph(inner), 4, thread_id="s")
        oldest = list(inner.list(thread_config("s")))[-1].config
        assert sweep(inner, keep_last=1, force=True).checkpoints_deleted > 0
        inner.put_writes(oldest, [("messages", ["late"])], task_id="slow")
        assert _orphan_rows(path) == 1
        dry = sweep(inner, keep_last=1, force=True, dry_run=True)
        report = sweep(inner, keep_last=1, force=True)
    assert _orphan_rows(path) == 0
    assert dry.writes_deleted == report.writes_deleted == 1


# -- the bound across processes -------------------------------------------------------------------


class Three(TypedDict):
    messages: Annotated[list[Any], add_messages]


def three_steps(saver: Any) -> Any:
    def step(name: str) -> Any:
        return lambda state: {"messages": [AIMessage(name)]}

    builder = StateGraph(Three).add_node("a", step("a")).add_node("b", step("b")).add_node("c", step("c"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("every", [2, 5, 10])
def test_keep_last_bound_holds_when_only_each_runs_last_step_is_put(every: int) -> None:
    """``durability="exit"`` puts a run's last checkpoint only (its step moves by 5 a run here):
    retention still runs whenever a multiple of ``retention_every`` is passed."""
    with open_saver("memory") as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2, retention_every=every)
        graph = three_steps(saver)
        seen = []
        for turn in range(24):
            graph.invoke({"messages": [HumanMessage(f"q{turn}")]}, thread_config("x"), durability="exit")
            seen.append(len(list(inner.list(thread_config("x")))))
    assert max(seen) <= 2 + every, seen


def test_keep_last_bound_holds_when_each_turn_is_served_by_another_process(tmp_path: Path) -> None:
    """Three savers on one SQLite file (three worker processes), each turn served by the next one
    in turn: the thread never holds more than keep_last + retention_every root checkpoints."""
    path = tmp_path / "workers.db"
    keep, every = 2, 8
    seen = []
    with open_saver("sqlite", path=path) as a, open_saver("sqlite", path=path) as b, \
            open_saver("sqlite", path=path) as c:
        graphs = [build_graph(ReducingCheckpointSaver(s, reducer(), keep_last=keep, retention_every=every))
                  for s in (a, b, c)]
        for turn in range(30):
            run_turns(graphs[turn % 3], 1, thread_id="w", start=turn)
            seen.append(len(list(a.list(thread_config("w")))))
    assert max(seen) <= keep + every, seen
