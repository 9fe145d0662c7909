"""Blob offload (``BlobOffload``) on the public API: every message shape round-trips exactly
through the pure transform and through real savers; the stored checkpoint holds references for
large values and keeps small ones inline; a missing or changed blob is a precise error; bad
arguments are refused; conformance FULL with offload on."""

from __future__ import annotations

import base64
import copy
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, CorruptBlobError, MissingBlobError, ReducingCheckpointSaver
from checkpointers.offload.transform import PREFIX, Offloader, references, restore
from tests.scenario_graph import aopen_saver, build_graph, thread_config

MIN = 256
REDUCER = MessageReducer(min_messages=200, max_messages=400)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def shapes(data: bytes) -> list[Any]:
    """One message of every supported shape carrying ``data`` (raw or as base64)."""
    b64 = _b64(data)
    url = f"data:image/png;base64,{b64}"
    return [
        HumanMessage(id="lc-image", content=[{"type": "image", "base64": b64, "mime_type": "image/png"}]),
        HumanMessage(id="lc-image-url", content=[{"type": "image_url", "image_url": {"url": url}}]),
        HumanMessage(id="lc-file", content=[{"type": "file", "base64": b64, "mime_type": "application/pdf"}]),
        HumanMessage(id="lc-audio", content=[{"type": "audio", "base64": b64, "mime_type": "audio/wav"}]),
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": b64, "format": "wav"}}]},
        {"role": "user", "content": [{"type": "file", "file": {
            "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{b64}"}}]},
        {"role": "user", "content": [{"type": "input_image", "image_url": url}]},
        {"role": "user", "content": [{"type": "input_file", "filename": "a.pdf",
                                      "file_data": f"data:application/pdf;base64,{b64}"}]},
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                   "data": b64}}]},
        {"role": "user", "content": [{"type": "document", "source": {"type": "base64",
                                                                      "media_type": "application/pdf",
                                                                      "data": b64}}]},
        {"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": data}}]},
        {"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": b64}}]},
        genai_types.Content(role="user", parts=[genai_types.Part(
            inline_data=genai_types.Blob(mime_type="image/png", data=data))]),
        {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": data}}}]},
        {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": bytearray(data)}}}]},
    ]


def tool_shapes(text: str, data: bytes) -> list[Any]:
    """Tool results carrying large plain ``text`` (offloaded only with tool_min_bytes)."""
    return [
        AIMessage(id="ai", content="", tool_calls=[{"id": "c1", "name": "t", "args": {}}]),
        ToolMessage(id="tool", tool_call_id="c1", content=text, artifact={"png": data}),
        {"type": "function_call_output", "call_id": "c2", "output": text},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3", "content": text}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "c4", "content": [{"text": text}]}}]},
    ]


def _checkpoint(messages: list[Any], **channels: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": messages, **channels}
    cp["channel_versions"] = {"messages": 1, **{k: 1 for k in channels}}
    return cp


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _assert_equal_typed(got: Any, want: Any) -> None:
    assert got == want
    assert type(got) is type(want)
    if isinstance(want, dict):
        for key in want:
            _assert_equal_typed(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        for a, b in zip(got, want, strict=True):
            _assert_equal_typed(a, b)
    elif hasattr(type(want), "model_fields"):
        for name in type(want).model_fields:
            _assert_equal_typed(getattr(got, name), getattr(want, name))


payloads = st.binary(min_size=0, max_size=3 * MIN)
texts = st.text(min_size=0, max_size=600)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- the pure transform -------------------------------------------------------------------------


@FAST
@given(data=payloads, text=texts, tool=st.sampled_from([None, 64]))
def test_transform_round_trips_every_shape(data: bytes, text: str, tool: int | None) -> None:
    value = [*shapes(data), *tool_shapes(text, data), PREFIX + text, (PREFIX + text).encode()]
    before = copy.deepcopy(value)
    offloader = Offloader(MIN, tool)
    stored, blobs = offloader.offload(value, messages=True)
    assert value == before  # never mutated
    assert set(references(stored)) == set(blobs)
    _assert_equal_typed(restore(stored, blobs, lambda ref: pytest.fail(f"missing {ref}")), before)


@FAST
@given(data=st.binary(min_size=MIN, max_size=2 * MIN))
def test_large_values_are_references_small_ones_inline(data: bytes) -> None:
    offloader = Offloader(MIN, None)
    stored, _ = offloader.offload(shapes(data), messages=True)
    assert _b64(data) not in repr(stored)
    assert repr(data) not in repr(stored)
    assert len(references(stored)) >= 1
    small = data[: MIN // 4 - 1]
    stored_small, blobs_small = offloader.offload(shapes(small), messages=True)
    assert blobs_small == {} and stored_small == shapes(small)


def test_tool_results_are_offloaded_only_with_tool_min_bytes() -> None:
    text = "plain tool output " * 40
    plain, plain_blobs = Offloader(MIN, None).offload(tool_shapes(text, b""), messages=True)
    assert plain_blobs == {} and plain == tool_shapes(text, b"")
    stored, blobs = Offloader(MIN, 64).offload(tool_shapes(text, b""), messages=True)
    assert list(blobs.values()) == [text.encode()]
    assert text not in repr(stored)
    # a human message of the same text is not a tool result
    human, none = Offloader(MIN, 64).offload([HumanMessage(text)], messages=True)
    assert none == {} and human[0].content == text


# -- real savers ------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "store"])
def saver_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _open(kind: str, path: Path, tool_min_bytes: int | None = None) -> Iterator[Any]:
    if kind == "memory":
        yield ReducingCheckpointSaver(InMemorySaver(), REDUCER,
                                      offload=BlobOffload(MIN, tool_min_bytes=tool_min_bytes))
    elif kind == "store":
        yield ReducingCheckpointSaver(InMemorySaver(), REDUCER, offload=BlobOffload(
            MIN, tool_min_bytes=tool_min_bytes, store=InMemoryStore()))
    else:
        with SqliteSaver.from_conn_string(str(path)) as inner:
            inner.setup()
            yield ReducingCheckpointSaver(inner, REDUCER,
                                          offload=BlobOffload(MIN, tool_min_bytes=tool_min_bytes))


@FAST
@given(data=payloads, text=texts)
def test_saver_round_trips_every_shape(saver_kind: str, tmp_path: Path, data: bytes, text: str) -> None:
    path = tmp_path / f"{saver_kind}-{len(data)}-{len(text)}.db"
    path.unlink(missing_ok=True)
    for saver in _open(saver_kind, path, tool_min_bytes=64):
        messages = [*shapes(data), *tool_shapes(text, data), HumanMessage(PREFIX + text)]
        cp = _checkpoint(messages, extra=(PREFIX + text).encode())
        before = copy.deepcopy(cp)
        config = saver.put(_config("t"), cp, {"step": 0}, {"messages": 1, "extra": 1})
        assert cp == before
        # what the reducer keeps (it drops the orphan tool results): a bare wrapper's read
        bare = ReducingCheckpointSaver(InMemorySaver(), REDUCER)
        bare_tup = bare.get_tuple(bare.put(_config("t"), copy.deepcopy(before), {"step": 0},
                                           {"messages": 1, "extra": 1}))
        assert bare_tup is not None
        want = bare_tup.checkpoint["channel_values"]
        assert want["messages"][: len(shapes(data))] == shapes(data)
        tup = saver.get_tuple(config)
        assert tup is not None
        _assert_equal_typed(tup.checkpoint["channel_values"], want)
        _assert_equal_typed(saver.get(config)["channel_values"], want)
        (listed,) = list(saver.list(_config("t")))
        _assert_equal_typed(listed.checkpoint["channel_values"], want)
        raw = saver.inner.get_tuple(config).checkpoint["channel_values"]
        if len(data) >= MIN:
            assert _b64(data) not in repr(raw) and repr(data) not in repr(raw)
            assert references(raw)
        elif data:
            assert _b64(data) in repr(raw) or repr(data) in repr(raw)


def test_pending_writes_are_offloaded_and_restored(saver_kind: str, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4
    for saver in _open(saver_kind, tmp_path / "w.db"):
        config = saver.put(_config("t"), _checkpoint([]), {"step": 0}, {"messages": 1})
        writes = [("messages", shapes(data)), ("other", data)]
        saver.put_writes(config, writes, "task-1")
        tup = saver.get_tuple(config)
        assert [(c, v) for _, c, v in tup.pending_writes] == writes
        raw = saver.inner.get_tuple(config).pending_writes
        assert references([w[2] for w in raw]) and _b64(data) not in repr(raw)


# -- errors ------------------------------------------------------------------------------------


def _sqlite_with_blob(tmp_path: Path) -> tuple[Any, Any, Any]:
    path = tmp_path / "err.db"
    cm = SqliteSaver.from_conn_string(str(path))
    inner = cm.__enter__()
    inner.setup()
    saver = ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(MIN))
    data = bytes(range(256)) * 4
    config = saver.put(_config("thread-e"), _checkpoint(shapes(data)[:1]), {"step": 0}, {"messages": 1})
    return cm, saver, config


def test_missing_blob_names_checkpoint_thread_and_digest(tmp_path: Path) -> None:
    cm, saver, config = _sqlite_with_blob(tmp_path)
    try:
        (digest,) = [r[0] for r in saver.inner.conn.execute("SELECT digest FROM agentstate_blobs")]
        saver.inner.conn.execute("DELETE FROM agentstate_blobs")
        saver.inner.conn.commit()
        with pytest.raises(MissingBlobError) as info:
            saver.get_tuple(config)
        message = str(info.value)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        assert checkpoint_id in message and "thread-e" in message and digest in message
        assert info.value.digest == digest and info.value.checkpoint_id == checkpoint_id
        with pytest.raises(MissingBlobError):
            list(saver.list(_config("thread-e")))
    finally:
        cm.__exit__(None, None, None)


def test_changed_blob_is_corrupt(tmp_path: Path) -> None:
    cm, saver, config = _sqlite_with_blob(tmp_path)
    try:
        (digest,) = [r[0] for r in saver.inner.conn.execute("SELECT digest FROM agentstate_blobs")]
        saver.inner.conn.execute("UPDATE agentstate_blobs SET data = ?", (sqlite3.Binary(b"changed"),))
        saver.inner.conn.commit()
        with pytest.raises(CorruptBlobError) as info:
            saver.get_tuple(config)
        message = str(info.value)
        assert config["configurable"]["checkpoint_id"] in message and "thread-e" in message
        assert digest in message
    finally:
        cm.__exit__(None, None, None)


class _NoBlobSaver(BaseCheckpointSaver[Any]):
    """A saver without blob storage of its own."""


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="min_bytes"):
        BlobOffload(min_bytes=0)
    with pytest.raises(TypeError, match="min_bytes"):
        BlobOffload("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_min_bytes"):
        BlobOffload(tool_min_bytes=0)
    with pytest.raises(TypeError, match="BaseStore"):
        BlobOffload(store=object())
    with pytest.raises(TypeError, match="BlobOffload"):
        ReducingCheckpointSaver(InMemorySaver(), REDUCER, offload="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"store="):
        ReducingCheckpointSaver(_NoBlobSaver(), REDUCER, offload=BlobOffload())
    # with a store of its own, any saver offloads
    ReducingCheckpointSaver(_NoBlobSaver(), REDUCER, offload=BlobOffload(store=InMemoryStore()))


# -- async -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["aiosqlite", pytest.param("apostgres", marks=pytest.mark.postgres)])
async def test_async_round_trip(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "apostgres" else None
    data = bytes(range(256)) * 4
    async with aopen_saver(kind, path=tmp_path / "a.db", pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(MIN))
        thread = f"async-{kind}-{tmp_path.name}"
        cp = _checkpoint(shapes(data))
        before = copy.deepcopy(cp)
        config = await saver.aput(_config(thread), cp, {"step": 0}, {"messages": 1})
        await saver.aput_writes(config, [("messages", shapes(data)[:2])], "task-a")
        tup = await saver.aget_tuple(config)
        assert tup is not None and tup.pending_writes is not None
        _assert_equal_typed(tup.checkpoint["channel_values"], before["channel_values"])
        assert tup.pending_writes[0][2] == shapes(data)[:2]
        listed = [t async for t in saver.alist(_config(thread))]
        assert [t.checkpoint["channel_values"] for t in listed] == [before["channel_values"]]
        raw = await inner.aget_tuple(config)
        assert references(raw.checkpoint["channel_values"])
        assert _b64(data) not in repr(raw.checkpoint["channel_values"])


# -- conformance -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("min_bytes", [64, 1])
@pytest.mark.parametrize("kind", ["memory", "aiosqlite",
                                  pytest.param("apostgres", marks=pytest.mark.postgres)])
async def test_conformance_full_with_offload(
    kind: str, min_bytes: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """At 64 bytes the suite's small values stay inline; at 1 byte its short alphanumeric strings
    read as base64 and are offloaded, so the suite runs over references."""
    pg_url = None
    if kind == "apostgres":
        pg_url = request.getfixturevalue("postgres_server").new_database("conformance_offload")
    counter = iter(range(100))
    stored_refs: list[int] = []

    async def factory() -> AsyncIterator[ReducingCheckpointSaver]:
        async with aopen_saver(kind, path=tmp_path / f"conf-{next(counter)}.db", pg_url=pg_url) as inner:
            yield ReducingCheckpointSaver(inner, MessageReducer(min_messages=2, max_messages=4),
                                          offload=BlobOffload(min_bytes=min_bytes, tool_min_bytes=min_bytes))
            raw = [t async for t in inner.alist(None)]
            stored_refs.append(len(references([(t.checkpoint["channel_values"], t.pending_writes)
                                               for t in raw])))

    report = await validate(checkpointer_test(name=f"offload({kind}, {min_bytes})")(factory))
    report.print_report()
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    detected = {cap for cap, r in report.results.items() if r.detected}
    # copy_thread/delete_for_runs are not offered with offload on; prune is the wrapper's own
    assert detected == {"put", "put_writes", "get_tuple", "list", "delete_thread", "prune"}
    if min_bytes == 1:
        assert sum(stored_refs) > 0


# -- a real graph ------------------------------------------------------------------------------


def _image_graph(saver: Any) -> Any:
    from langgraph.graph import START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}", id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def _graph_run(saver: Any) -> tuple[Any, list[Any]]:
    graph = _image_graph(saver)
    config = {"configurable": {"thread_id": "g"}}
    for turn in range(3):
        data = bytes([turn]) * 2048
        graph.invoke({"messages": [HumanMessage(id=f"h-{turn}", content=[
            {"type": "text", "text": f"turn {turn}"},
            {"type": "image", "base64": _b64(data), "mime_type": "image/png"}])]}, config)
    history = [s.values for s in graph.get_state_history(config)]
    return graph.get_state(config).values, history


def test_graph_state_and_history_equal_a_bare_run(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "g.db")) as inner:
        inner.setup()
        offloaded = _graph_run(ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(MIN)))
        blobs = inner.conn.execute("SELECT COUNT(*) FROM agentstate_blobs").fetchone()[0]
    bare = _graph_run(InMemorySaver())
    assert offloaded == bare
    assert blobs == 3  # one per distinct image, however many checkpoints name it


@pytest.mark.postgres
async def test_postgres_stores_a_top_level_string_reference(pg_url: str) -> None:
    """AsyncPostgresSaver keeps a channel holding a plain str in its JSONB column, which refuses
    NUL: a reference must hold none."""
    image = _b64(bytes(range(256)) * 4)
    async with aopen_saver("apostgres", pg_url=pg_url) as inner:
        saver = ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(MIN))
        config = await saver.aput(_config("pg-str"), _checkpoint([], image=image), {"step": 0},
                                  {"messages": 1, "image": 1})
        tup = await saver.aget_tuple(config)
        assert tup is not None and tup.checkpoint["channel_values"]["image"] == image


# -- a failing put ------------------------------------------------------------------------------


class _FailingSqliteSaver(SqliteSaver):
    """A real SqliteSaver whose ``put`` raises while ``failing`` (a disk full, a lost connection),
    after the wrapper has stored the checkpoint's blobs."""

    failing = False

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.failing:
            raise sqlite3.OperationalError("database or disk is full")
        return super().put(config, checkpoint, metadata, new_versions)


@pytest.mark.parametrize("blobs", ["own", "store"])
def test_a_failed_put_leaves_no_checkpoint_naming_a_missing_blob(blobs: str, tmp_path: Path) -> None:
    store = InMemoryStore() if blobs == "store" else None
    conn = sqlite3.connect(str(tmp_path / "fail.db"), check_same_thread=False)
    try:
        inner = _FailingSqliteSaver(conn)
        inner.setup()
        saver = ReducingCheckpointSaver(inner, REDUCER, offload=BlobOffload(MIN, store=store))
        graph = _image_graph(saver)
        config: Any = {"configurable": {"thread_id": "f"}}

        def turn(n: int) -> None:
            graph.invoke({"messages": [HumanMessage(id=f"h-{n}", content=[
                {"type": "text", "text": f"turn {n}"},
                {"type": "image", "base64": _b64(bytes([n]) * 2048), "mime_type": "image/png"}])]}, config)

        turn(0)
        inner.failing = True
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            turn(1)
        inner.failing = False
        named = {d for t in inner.list(None) for d in references(t.checkpoint["channel_values"])}
        assert len(named) == 1
        restored = list(saver.list(config))  # every stored checkpoint reads back (raises on a missing blob)
        latest = restored[0].checkpoint["channel_values"]["messages"]
        assert [m.id for m in latest] == ["h-0", "ai-1"]  # turn 1 stored nothing the graph reads

        turn(2)
        messages = graph.get_state(config).values["messages"]
        humans: list[Any] = [m for m in messages if isinstance(m, HumanMessage)]
        images = [m.content[1]["base64"] for m in humans]
        assert images == [_b64(bytes([0]) * 2048), _b64(bytes([2]) * 2048)]
        saver.delete_thread("f")  # the failed put's rows go with the thread: no blob is kept for good
        if store is None:
            assert conn.execute("SELECT COUNT(*) FROM agentstate_blobs").fetchone()[0] == 0
        else:
            assert store.search(("agentstate_blobs",)) == []
    finally:
        conn.close()


def test_a_with_allowlist_clone_of_an_in_memory_saver_shares_its_blobs() -> None:
    """Strict msgpack makes LangGraph compile the graph with ``with_allowlist``'s clone, which shares
    the saver's dictionaries: what the clone stores, the wrapper the user holds reads back."""
    inner = InMemorySaver()
    inner.serde = JsonPlusSerializer(allowed_msgpack_modules=[("tests", "Custom")])
    saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=4, max_messages=8),
                                    offload=BlobOffload(min_bytes=1024))
    clone = saver.with_allowlist([("tests", "Other")])
    assert clone.inner is not inner
    image = base64.b64encode(bytes(range(256)) * 12).decode()
    message = HumanMessage(content=[{"type": "text", "text": "h0"},
                                    {"type": "image", "base64": image, "mime_type": "image/png"}], id="h0")
    build_graph(clone).invoke({"messages": [message]}, thread_config("t"))
    tup = saver.get_tuple(thread_config("t"))
    assert tup is not None and tup.checkpoint["channel_values"]["messages"][0] == message
