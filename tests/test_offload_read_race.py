"""A reader racing retention never raises: with offload on, a read takes the checkpoint's rows, then
its blobs, in two steps. Another connection's retention (``keep_last`` after its puts, ``sweep``,
``compact_store``) deleting that checkpoint and collecting its blobs between the two steps must
leave the reader with the thread's newest state (``get_state``), or running from it (``invoke``),
never with ``MissingBlobError``.

The interleaving is forced, not timed: the reader's inner saver is a subclass of LangGraph's saver
whose ``get_tuple``/``aget_tuple`` runs a hook once its rows are read (the one seam between the two
steps), and the hook runs the other connection's turn and retention to completion. SQLite and
PostgreSQL, sync and async, blobs in the database or in a ``BaseStore``; Cosmos DB in
tests/test_cosmos_offload_reads.py."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, MissingBlobError, ReducingCheckpointSaver
from checkpointers.compact import compact_store
from checkpointers.retention import asweep, sweep
from tests.scenario_graph import thread_config

MIN = 256
REDUCER = MessageReducer(min_messages=200, max_messages=400)


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    image: str  # a new image each turn: the old one's blob goes with the old checkpoints


def image(turn: int, thread: str) -> str:
    """Distinct per turn and thread (a PostgreSQL database is shared by this module's tests)."""
    return base64.b64encode(f"{thread}/{turn}".encode() * 400).decode()


def answer(state: State) -> dict[str, Any]:
    human = state["messages"][-1]
    return {"messages": [AIMessage(id=f"a{str(human.id)[1:]}", content=f"seen {len(state['image'])}")]}


def build(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def turn(n: int, config: Any) -> dict[str, Any]:
    return {"messages": [HumanMessage(id=f"h{n}", content=f"turn {n}")],
            "image": image(n, config["configurable"]["thread_id"])}


def ids(state: Any) -> list[str]:
    return [m.id for m in state.values["messages"]]


def hooked(base: Any) -> Any:
    """``base`` (a LangGraph saver class) whose row reads run ``hook`` once, right after them."""

    class RowsThenHook(base):
        hook: Callable[[Any], Any] | None = None
        seen: list[Any]

        def get_tuple(self, config: Any) -> Any:
            tup = super().get_tuple(config)
            hook, self.hook = self.hook, None
            if hook is not None:
                self.seen = [tup]
                hook(tup)
            return tup

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            listed = [*super().list(config, **kwargs)]
            hook, self.hook = self.hook, None
            if hook is not None:
                self.seen = listed
                hook(listed)
            yield from listed

        async def aget_tuple(self, config: Any) -> Any:
            tup = await super().aget_tuple(config)
            hook, self.hook = self.hook, None
            if hook is not None:
                self.seen = [tup]
                await hook(tup)
            return tup

    return RowsThenHook


def wrap(inner: Any, **kwargs: Any) -> ReducingCheckpointSaver:
    return ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(min_bytes=MIN), **kwargs)


@contextmanager
def savers(kind: str, tmp_path: Path, pg_url: str | None) -> Iterator[tuple[Any, Any]]:
    """(the reader's hooked inner saver, the other connection's inner saver), set up."""
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver as Base

        target = str(tmp_path / "race.sqlite")
    else:
        from langgraph.checkpoint.postgres import PostgresSaver as Base  # type: ignore[assignment]

        assert pg_url is not None
        target = pg_url
    with hooked(Base).from_conn_string(target) as reader, Base.from_conn_string(target) as writer:
        writer.setup()
        yield reader, writer


@asynccontextmanager
async def asavers(kind: str, tmp_path: Path, pg_url: str | None) -> AsyncIterator[tuple[Any, Any]]:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as Base

        target = str(tmp_path / "race.sqlite")
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as Base  # type: ignore[assignment]

        assert pg_url is not None
        target = pg_url
    async with hooked(Base).from_conn_string(target) as reader, Base.from_conn_string(target) as writer:
        await writer.setup()
        yield reader, writer


RETENTION = ["keep_last", "sweep", "compact_store"]
ASYNC_RETENTION = ["keep_last", "asweep"]


def other_connection(writer_inner: Any, how: str, config: Any) -> Callable[[int], None]:
    """A turn of the other connection, then its retention trimming the thread to one checkpoint."""
    keep = {"keep_last": 1, "retention_every": 1} if how == "keep_last" else {}
    writer = wrap(writer_inner, **keep)
    graph = build(writer)

    def run(n: int) -> None:
        graph.invoke(turn(n, config), config)
        if how == "sweep":
            sweep(writer, keep_last=1)
        elif how == "compact_store":
            compact_store(writer, None, keep_last=1)

    return run


def aother_connection(writer_inner: Any, how: str, config: Any) -> Callable[[int], Awaitable[None]]:
    keep = {"keep_last": 1, "retention_every": 1} if how == "keep_last" else {}
    writer = wrap(writer_inner, **keep)
    graph = build(writer)

    async def run(n: int) -> None:
        await graph.ainvoke(turn(n, config), config)
        if how == "asweep":
            await asweep(writer, keep_last=1)

    return run


def backend_params() -> list[Any]:
    return ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=backend_params())
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def config(request: pytest.FixtureRequest) -> Any:
    return thread_config(request.node.name)


def url_for(kind: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("pg_url")) if kind == "postgres" else None


@pytest.mark.parametrize("how", RETENTION)
def test_get_state_racing_retention_returns_the_newest_state(
    kind: str, how: str, config: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with savers(kind, tmp_path, url_for(kind, request)) as (reader_inner, writer_inner):
        other = other_connection(writer_inner, how, config)
        other(1)
        reader_inner.hook = lambda _rows: other(2)
        reader = build(wrap(reader_inner))
        state = reader.get_state(config)
        gone = reader_inner.seen[0]
        # the race happened: the checkpoint whose rows were read is gone
        assert wrap(writer_inner).get_tuple(gone.config) is None
        assert ids(state) == ["h1", "a1", "h2", "a2"]
        assert state.values["image"] == image(2, config["configurable"]["thread_id"])
        assert state.values == build(wrap(writer_inner)).get_state(config).values


@pytest.mark.parametrize("how", RETENTION)
def test_invoke_racing_retention_runs_from_the_newest_state(
    kind: str, how: str, config: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with savers(kind, tmp_path, url_for(kind, request)) as (reader_inner, writer_inner):
        other = other_connection(writer_inner, how, config)
        other(1)
        reader_inner.hook = lambda _rows: other(2)
        result = build(wrap(reader_inner)).invoke(turn(3, config), config)
        assert [m.id for m in result["messages"]] == ["h1", "a1", "h2", "a2", "h3", "a3"]
        assert result["image"] == image(3, config["configurable"]["thread_id"])


@pytest.mark.parametrize("how", ASYNC_RETENTION)
async def test_aget_state_racing_retention_returns_the_newest_state(
    kind: str, how: str, config: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with asavers(kind, tmp_path, url_for(kind, request)) as (reader_inner, writer_inner):
        other = aother_connection(writer_inner, how, config)
        await other(1)

        async def hook(_rows: Any) -> None:
            await other(2)

        reader_inner.hook = hook
        reader = build(wrap(reader_inner))
        state = await reader.aget_state(config)
        gone = reader_inner.seen[0]
        assert await wrap(writer_inner).aget_tuple(gone.config) is None
        assert ids(state) == ["h1", "a1", "h2", "a2"]
        assert state.values["image"] == image(2, config["configurable"]["thread_id"])
        result = await reader.ainvoke(turn(3, config), config)
        assert [m.id for m in result["messages"]] == ["h1", "a1", "h2", "a2", "h3", "a3"]


def test_history_racing_retention_leaves_out_what_went(
    kind: str, config: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``get_state_history`` lists the rows, then reads each one's blobs: a checkpoint deleted in
    between is left out (it is no longer stored), never an error. Here retention keeps only the
    other connection's newest checkpoint, which the listing did not see: every listed one went."""
    with savers(kind, tmp_path, url_for(kind, request)) as (reader_inner, writer_inner):
        other = other_connection(writer_inner, "keep_last", config)
        other(1)
        reader_inner.hook = lambda _rows: other(2)
        history = list(build(wrap(reader_inner)).get_state_history(config))
        assert len(reader_inner.seen) == 1  # what keep_last=1 left of turn 1
        assert all(wrap(writer_inner).get_tuple(t.config) is None for t in reader_inner.seen)
        assert history == []
        assert [ids(h) for h in build(wrap(reader_inner)).get_state_history(config)] == [
            ["h1", "a1", "h2", "a2"]]


def test_a_pinned_checkpoint_deleted_mid_read_reads_as_gone(config: Any, tmp_path: Path) -> None:
    """A read of one checkpoint by id that loses the race reads what is stored now: nothing."""
    with savers("sqlite", tmp_path, None) as (reader_inner, writer_inner):
        other = other_connection(writer_inner, "keep_last", config)
        other(1)
        pinned = wrap(writer_inner).get_tuple(config)
        assert pinned is not None
        reader_inner.hook = lambda _rows: other(2)
        assert wrap(reader_inner).get_tuple(pinned.config) is None


def test_a_blob_missing_for_good_still_raises(config: Any, tmp_path: Path) -> None:
    """Reading the rows again is no cover for a blob deleted by hand: the same checkpoint names it
    on the second read, so ``MissingBlobError`` is raised, naming it."""
    import sqlite3

    with savers("sqlite", tmp_path, None) as (reader_inner, writer_inner):
        other_connection(writer_inner, "keep_last", config)(1)
        with sqlite3.connect(tmp_path / "race.sqlite") as conn:
            conn.execute("DELETE FROM agentstate_blobs")
        with pytest.raises(MissingBlobError) as caught:
            build(wrap(reader_inner)).get_state(config)
        assert caught.value.thread_id == config["configurable"]["thread_id"]


def test_blobs_in_a_store_racing_retention(config: Any, tmp_path: Path) -> None:
    """``BlobOffload(store=...)``: retention drops the rows and collects the blobs in the store
    after its transaction; a reader between its row read and its blob read still gets the newest
    state."""
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    offload = BlobOffload(min_bytes=MIN, store=store)
    with savers("sqlite", tmp_path, None) as (reader_inner, writer_inner):
        writing = build(ReducingCheckpointSaver(writer_inner, REDUCER, offload=offload, keep_last=1,
                                                retention_every=1))
        writing.invoke(turn(1, config), config)
        reader_inner.hook = lambda _rows: writing.invoke(turn(2, config), config)
        state = build(ReducingCheckpointSaver(reader_inner, REDUCER, offload=offload)).get_state(config)
        assert writer_inner.get_tuple(reader_inner.seen[0].config) is None
        assert ids(state) == ["h1", "a1", "h2", "a2"]
        assert state.values["image"] == image(2, config["configurable"]["thread_id"])
