"""The archive (issue 6): pruned messages written to a LangGraph BaseStore exactly once, in order, and
read back with the live checkpoint as the full transcript, also across a process restart."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.base import Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.summary import SUMMARY_ID, is_summary_message
from checkpointers.archive import (
    ITEM_KIND,
    StoreArchive,
    archive_namespace,
    aread_transcript,
    merge_transcript,
    read_transcript,
)
from checkpointers.saver import ReducingCheckpointSaver
from tests.convo import BUILDERS, Spec, ids

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

FORMATS = list(BUILDERS)
NS = ("memories", "t1")


def summarize(pruned: list[Any]) -> str:
    return f"{len(pruned)} messages"


def conversation(fmt: str, turns: int) -> list[Any]:
    spec: Spec = [("system", "s")]
    for t in range(turns):
        spec += [("human", f"h{t}"), ("call", f"c{t}", [f"k{t}"])]
        spec += [("tool", f"t{t}", f"k{t}"), ("ai", f"a{t}")]
    return BUILDERS[fmt](spec)


# -- the hook on its own -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
async def test_pruned_messages_are_archived_in_order_summaries_skipped(fmt: str) -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=summarize, inject_summary=True, on_prune=[archive]
    ))
    msgs = conversation(fmt, 3)
    first = reducer.reduce(msgs, namespace=NS)
    second = await reducer.areduce(first.surviving, conversation(fmt, 5)[13:], namespace=NS)
    assert ids(second.pruned)[0] == SUMMARY_ID  # the replaced summary goes to the hooks too ...
    archived = archive.messages(NS)
    # ... but the archive keeps conversation messages only
    assert ids(archived) == ["h0", "c0", "t0", "a0", "h1", "c1", "t1", "a1", "h2", "c2", "t2", "a2",
                             "h3", "c3", "t3", "a3"]
    # the messages come back as they went in: dicts as dicts, LangChain objects as the same classes
    originals = {read_message(m).id: m for m in conversation(fmt, 5)}
    assert archived == [originals[i] for i in ids(archived)]
    assert all(type(a) is type(originals[read_message(a).id]) for a in archived)
    assert archive.stats.written == 16 and archive.stats.failed == 0
    item = store.get(NS, "h0")
    assert item is not None and item.value["kind"] == ITEM_KIND and item.value["message_id"] == "h0"


def test_each_message_is_archived_once_and_keeps_its_place() -> None:
    store = InMemoryStore()
    msgs = conversation("openai_dict", 3)
    StoreArchive(store)(msgs[1:5], NS)
    # a restarted process re-prunes a history it loaded: known ids are skipped, not moved
    again = StoreArchive(store)
    again([*msgs[1:9], {"role": "user", "content": "no id"}], NS)
    again([{"role": "user", "content": "no id"}], NS)
    assert ids(again.messages(NS)) == ["h0", "c0", "t0", "a0", "h1", "c1", "t1", "a1", None]
    assert (again.stats.written, again.stats.already_archived) == (5, 5)
    assert len(store.search(NS, limit=100)) == 9


def test_namespaces() -> None:
    assert archive_namespace(("memories", "a.b%c")) == ("memories", "a%2Eb%25c")
    assert archive_namespace("user-1") == ("user-1",)
    assert archive_namespace(["users", 42]) == ("users", "42")
    with pytest.raises(ValueError, match="needs a namespace"):
        archive_namespace(None)
    with pytest.raises(ValueError, match="no thread_id"):
        archive_namespace(("memories", None))


def test_a_hook_without_namespace_is_logged_and_the_reduction_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    archive = StoreArchive(InMemoryStore())
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    result = reducer.reduce(conversation("openai_dict", 3))
    assert ids(result.surviving) == ["s", "h2", "c2", "t2", "a2"]
    assert "StoreArchive needs a namespace" in caplog.text


class FailingStore(InMemoryStore):
    """A real InMemoryStore whose writes fail, as a database that went away."""

    def batch(self, ops: Any) -> list[Result]:
        raise ConnectionError("store down")

    async def abatch(self, ops: Any) -> list[Result]:
        raise ConnectionError("store down")


async def test_a_failing_store_is_retried_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    archive = StoreArchive(FailingStore(), retries=1)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    result = await reducer.areduce(conversation("openai_dict", 3), namespace=NS)
    assert ids(result.surviving) == ["s", "h2", "c2", "t2", "a2"]
    assert archive.stats.failed == 8 and archive.stats.written == 0
    assert "failed after 2 attempts" in caplog.text and "ConnectionError: store down" in caplog.text


# -- background delivery -------------------------------------------------------------------------


class GatedStore(InMemoryStore):
    """A real InMemoryStore whose writes wait for a gate, as a slow database."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def batch(self, ops: Any) -> list[Result]:
        self.entered.set()
        self.gate.wait(10)
        return super().batch(ops)


def test_background_never_blocks_and_drops_only_when_told(caplog: pytest.LogCaptureFixture) -> None:
    msgs = conversation("openai_dict", 4)
    store = GatedStore()
    with StoreArchive(store, background=True, max_pending=1, when_full="drop") as archive:
        archive(msgs[1:3], NS)  # taken by the worker, which waits at the gate
        assert store.entered.wait(10)
        archive(msgs[3:5], NS)  # queued (the queue holds one batch)
        archive(msgs[5:9], NS)  # queue full: dropped, counted, logged; the caller did not wait
        assert archive.stats.dropped == 4 and "dropped 4 pruned messages" in caplog.text
        store.gate.set()
        assert archive.flush(timeout=10)
    assert ids(archive.messages(NS)) == ["h0", "c0", "t0", "a0"]
    assert archive.stats.written == 4 and archive.stats.pending_batches == 0


def test_background_inline_when_full_loses_nothing_and_keeps_order() -> None:
    msgs = conversation("openai_dict", 4)
    store = GatedStore()
    archive = StoreArchive(store, background=True, max_pending=1)
    archive(msgs[1:3], NS)
    assert store.entered.wait(10)
    archive(msgs[3:5], NS)
    writer = threading.Thread(target=archive, args=(msgs[5:9], NS))  # full: written by the caller
    writer.start()
    store.gate.set()
    writer.join(10)
    assert archive.flush(timeout=10)
    archive.close()
    # stamps are taken when a batch is handed over, so inline delivery cannot jump the queue
    assert ids(archive.messages(NS)) == ["h0", "c0", "t0", "a0", "h1", "c1", "t1", "a1"]
    assert archive.stats.dropped == 0 and archive.stats.written == 8


def test_constructor_errors() -> None:
    with pytest.raises(TypeError, match="BaseStore"):
        StoreArchive({})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="when_full"):
        StoreArchive(InMemoryStore(), when_full="block")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_pending"):
        StoreArchive(InMemoryStore(), max_pending=0)


# -- merging -------------------------------------------------------------------------------------


def test_merge_skips_live_duplicates_and_places_the_archive_after_the_head() -> None:
    archived = conversation("openai_dict", 2)[1:5]
    summary = {"role": "user", "content": "sum", "id": SUMMARY_ID, "agentstate_summary": {"count": 4}}
    live = [conversation("openai_dict", 2)[0], summary, *conversation("openai_dict", 2)[4:]]  # a0 twice
    assert ids(merge_transcript(archived, live)) == ["s", "h0", "c0", "t0", "a0", "h1", "c1", "t1", "a1"]
    with_summary = merge_transcript(archived, live, include_summary=True)
    assert ids(with_summary) == ["s", "h0", "c0", "t0", "a0", SUMMARY_ID, "h1", "c1", "t1", "a1"]
    no_system = live[1:]
    assert ids(merge_transcript(archived, no_system, preserve_first=False))[:2] == ["h0", "c0"]


# -- 200 turns through a real saver, with a process restart --------------------------------------


class Chat(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def _chat_graph(saver: Any) -> Any:
    def chat(state: Chat) -> dict[str, Any]:
        human = state["messages"][-1]
        return {"messages": [AIMessage(f"re: {human.content}", id=f"a{str(human.id)[1:]}")]}

    b = StateGraph(Chat)
    b.add_node("chat", chat)
    b.add_edge(START, "chat")
    return b.compile(checkpointer=saver)


def _reducer(archive: StoreArchive) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(
        min_messages=6, max_messages=12, summarize_fn=summarize, inject_summary=True, on_prune=[archive]
    ))


@contextmanager
def _sync_backend(kind: str, where: str) -> Iterator[tuple[Any, Any]]:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(where, check_same_thread=False)
        store_conn = sqlite3.connect(where, check_same_thread=False, isolation_level=None)
        try:
            saver, store = SqliteSaver(conn), SqliteStore(store_conn)
            saver.setup()
            store.setup()
            yield saver, store
        finally:
            conn.close()
            store_conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(where) as pg_saver, PostgresStore.from_conn_string(where) as pg_store:
        pg_saver.setup()
        pg_store.setup()
        yield pg_saver, pg_store


@asynccontextmanager
async def _async_backend(kind: str, where: str) -> AsyncIterator[tuple[Any, Any]]:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        async with AsyncSqliteSaver.from_conn_string(where) as saver, \
                AsyncSqliteStore.from_conn_string(where) as store:
            await saver.setup()
            await store.setup()
            yield saver, store
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresSaver.from_conn_string(where) as saver, \
            AsyncPostgresStore.from_conn_string(where) as store:
        await saver.setup()
        await store.setup()
        yield saver, store


def _turn(t: int, first: bool) -> dict[str, Any]:
    msgs: list[Any] = [SystemMessage("be brief", id="sys")] if first else []
    return {"messages": [*msgs, HumanMessage(f"question {t}", id=f"h{t}")]}


async def _run(
    kind: str, mode: str, where: str, thread: str, turns: range
) -> tuple[list[Any], StoreArchive, list[Any]]:
    """One "process": fresh saver, store, archive and reducer objects on the same database.
    Returns the transcript, the archive, and the archived messages."""
    cfg = {"configurable": {"thread_id": thread}}
    ns = ("memories", thread)
    if mode == "sync":
        with _sync_backend(kind, where) as (inner, store):
            archive = StoreArchive(store)
            graph = _chat_graph(ReducingCheckpointSaver(inner, _reducer(archive)))
            for t in turns:
                graph.invoke(_turn(t, t == 0), cfg)
            live = inner.get_tuple(cfg).checkpoint["channel_values"]["messages"]
            assert [is_summary_message(m) for m in live].count(True) == 1 and is_summary_message(live[1])
            return read_transcript(store, inner, cfg), archive, archive.messages(ns)
    async with _async_backend(kind, where) as (inner, store):
        archive = StoreArchive(store)
        graph = _chat_graph(ReducingCheckpointSaver(inner, _reducer(archive)))
        for t in turns:
            await graph.ainvoke(_turn(t, t == 0), cfg)
        live = (await inner.aget_tuple(cfg)).checkpoint["channel_values"]["messages"]
        assert [is_summary_message(m) for m in live].count(True) == 1 and is_summary_message(live[1])
        return await aread_transcript(store, inner, cfg), archive, await archive.amessages(ns)


def _backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "threads.sqlite")
    return str(request.getfixturevalue("pg_url"))


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("sqlite", "sync"),
        ("sqlite", "async"),
        pytest.param("postgres", "sync", marks=pytest.mark.postgres),
        pytest.param("postgres", "async", marks=pytest.mark.postgres),
    ],
)
async def test_200_turns_archive_plus_checkpoint_is_the_full_transcript_across_a_restart(
    kind: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = _backend(kind, request, tmp_path)
    thread = f"thread.{mode}/1"  # "." must be escaped in store namespaces
    expected = ["sys"] + [i for t in range(200) for i in (f"h{t}", f"a{t}")]

    before, first, _ = await _run(kind, mode, where, thread, range(0, 100))
    assert ids(before) == expected[: 1 + 200]
    after, second, archived = await _run(kind, mode, where, thread, range(100, 200))  # "restarted"
    assert ids(after) == expected
    assert all(isinstance(m, BaseMessage) and not is_summary_message(m) for m in after)
    assert [m.content for m in after[1:5]] == ["question 0", "re: question 0", "question 1", "re: question 1"]
    # the archive holds the pruned prefix, each message once (the wrapper's summary memo hands each
    # pruned message to the hooks once; the archive's own exactly-once check is tested above)
    assert ids(archived) == expected[1 : 1 + len(archived)] and len(archived) >= 380
    assert first.stats.written + second.stats.written == len(archived)
    assert first.stats.failed == second.stats.failed == 0


async def test_memory_namespace_from_the_config_and_async_hook() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    store = InMemoryStore()
    archive = StoreArchive(store)
    inner = InMemorySaver()
    graph = _chat_graph(ReducingCheckpointSaver(inner, _reducer(archive)))
    cfg = {"configurable": {"thread_id": "t", "memory_namespace": ("users", "ada")}}
    for t in range(20):
        await graph.ainvoke(_turn(t, t == 0), cfg)
    assert ids(archive.messages(("users", "ada")))[:4] == ["h0", "a0", "h1", "a1"]
    transcript = await aread_transcript(store, inner, cfg)
    assert ids(transcript) == ["sys"] + [i for t in range(20) for i in (f"h{t}", f"a{t}")]
    assert store.search(("memories",), limit=10) == []


class _Batches(InMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[list[Op]] = []

    def batch(self, ops: Any) -> list[Result]:
        ops = list(ops)
        self.ops.append(ops)
        return super().batch(ops)


def test_one_read_and_one_write_per_pruned_batch() -> None:
    store = _Batches()
    StoreArchive(store)(conversation("openai_dict", 2)[1:9], NS)
    assert [(type(ops[0]).__name__, len(ops)) for ops in store.ops] == [("GetOp", 8), ("PutOp", 8)]
    assert all(isinstance(op, PutOp) and op.index is False for op in store.ops[1])  # never embedded


def test_async_wrapper_needs_no_event_loop_tricks() -> None:
    # acall on a sync-only store (SqliteStore's abatch raises NotImplementedError) falls back to a thread
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    archive = StoreArchive(store)
    asyncio.run(archive.acall(conversation("openai_dict", 1)[1:5], NS))
    assert ids(asyncio.run(archive.amessages(NS))) == ["h0", "c0", "t0", "a0"]
    conn.close()
