"""The archive stores the reference, not the bytes again: a ``StoreArchive`` among the reducer's
hooks of a ``ReducingCheckpointSaver`` with offload writes archived messages holding blob references
(read from the raw store items), names each blob by a reference row of its own, so retention keeps a
blob an archived message names after every checkpoint naming it is gone, restores the messages on
every read, and lets the blob go when the thread is deleted: the blobs stored are then exactly those
the checkpoints, writes and archived messages name."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import MessageReducer, ReducerConfig
from checkpointers import (
    BlobOffload,
    CorruptBlobError,
    MissingBlobError,
    ReducingCheckpointSaver,
    StoreArchive,
    aread_transcript,
    read_transcript,
)
from checkpointers.archive import ITEM_KIND
from checkpointers.offload.memory import memory_blobs
from checkpointers.offload.transform import PREFIX, references
from tests.scenario_graph import (
    aopen_saver,
    arun_turns,
    build_graph,
    open_saver,
    run_turns,
    system_message,
    thread_config,
    turn_ids,
)
from tests.test_offload_retention import _named, _stored

KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
IMAGE = base64.b64encode(random.Random(27).randbytes(6_000)).decode()
DIGEST = hashlib.sha256(IMAGE.encode()).hexdigest()
TURNS = 6  # the image (turn 0) is pruned after two turns: max 8, four messages a turn


def image_message(text: str = "h0") -> HumanMessage:
    block = {"type": "image", "base64": IMAGE, "mime_type": "image/png"}
    return HumanMessage(content=[{"type": "text", "text": text}, block], id="h0")


def offloading_saver(inner: Any, archive: StoreArchive, **options: Any) -> ReducingCheckpointSaver:
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    return ReducingCheckpointSaver(inner, reducer, offload=BlobOffload(min_bytes=1024), **options)


def archive_items(store: BaseStore, thread_id: str) -> list[Any]:
    ns = ("memories", thread_id)
    items = store.search(ns, limit=1000)
    return [i for i in items if tuple(i.namespace) == ns and i.value["kind"] == ITEM_KIND]


def archive_named(store: BaseStore) -> set[str]:
    """The digests the raw archived items name."""
    items = store.search(("memories",), limit=10_000)
    return {d for i in items for d in references(i.value["message"])}


def expected_ids() -> list[str]:
    return ["sys"] + [i for turn in range(TURNS) for i in turn_ids(turn)]


def image_of(messages: list[Any]) -> Any:
    (found,) = [m for m in messages if m.id == "h0"]
    return found


def run_image_thread(graph: Any, thread_id: str) -> None:
    graph.invoke({"messages": [system_message(), image_message()]}, thread_config(thread_id))
    run_turns(graph, TURNS - 1, thread_id=thread_id, start=1)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_archive_names_the_blob_retention_keeps_it_delete_thread_collects_it(
    kind: str, background: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    store = InMemoryStore()
    with StoreArchive(store, background=background) as archive, \
            open_saver(kind, path=tmp_path / "ckpt.db", pg_url=pg_url) as inner:
        saver = offloading_saver(inner, archive, keep_last=1, retention_every=1)
        graph = build_graph(saver)
        for thread_id in ("a", "b"):
            run_image_thread(graph, thread_id)
        archive.flush()

        assert DIGEST not in _named(inner)  # no checkpoint or write names the image any more
        assert DIGEST in _stored(inner)  # the archived messages do
        assert _stored(inner) == _named(inner) | archive_named(store)
        for thread_id in ("a", "b"):
            (raw,) = [i for i in archive_items(store, thread_id) if i.key == "h0"]
            stored = json.dumps(raw.value)
            assert IMAGE[:64] not in stored and f"{PREFIX}sha256:{DIGEST}:s:{len(IMAGE)}" in stored
            assert raw.value["blobs"] == [DIGEST]
            transcript = read_transcript(store, saver, thread_config(thread_id))
            assert [m.id for m in transcript] == expected_ids()
            assert image_of(transcript) == image_message()
            assert image_of(archive.messages(("memories", thread_id))) == image_message()

        saver.delete_thread("a")
        assert archive_items(store, "a") == []
        assert DIGEST in _stored(inner)  # thread b's archive still names it
        assert _stored(inner) == _named(inner) | archive_named(store)
        saver.delete_thread("b")
        assert _stored(inner) == set() == _named(inner) | archive_named(store)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
async def test_async_archive_on_async_sqlite(background: bool, tmp_path: Path) -> None:
    """``acall`` (the graph's ``aput``) or the worker writes references, ``aread_transcript`` and
    ``amessages`` restore them, ``adelete_thread`` (``aforget``) collects the blob."""
    path = tmp_path / "ckpt.db"
    store = InMemoryStore()
    archive = StoreArchive(store, background=background)

    def stored() -> set[str]:
        with sqlite3.connect(path) as conn:
            return {r[0] for r in conn.execute("SELECT digest FROM agentstate_blobs")}

    async with aopen_saver("aiosqlite", path=path) as inner:
        saver = offloading_saver(inner, archive, keep_last=1, retention_every=1)
        graph = build_graph(saver)
        await graph.ainvoke({"messages": [system_message(), image_message()]}, thread_config("a"))
        await arun_turns(graph, TURNS - 1, thread_id="a", start=1)
        await archive.aflush()
        named = {d async for t in inner.alist(None)
                 for d in references([t.checkpoint["channel_values"], t.pending_writes])}
        assert DIGEST not in named and stored() == named | archive_named(store) != set()
        (raw,) = [i for i in archive_items(store, "a") if i.key == "h0"]
        assert IMAGE[:64] not in json.dumps(raw.value)
        transcript = await aread_transcript(store, saver, thread_config("a"))
        assert [m.id for m in transcript] == expected_ids()
        assert image_of(transcript) == image_message()
        assert image_of(await archive.amessages(("memories", "a"))) == image_message()
        await saver.adelete_thread("a")
        assert archive_items(store, "a") == [] and stored() == set()
        await archive.aclose()


async def test_waiting_for_the_worker_on_the_loop_it_needs_is_refused(tmp_path: Path) -> None:
    """A background archive bound to an async saver stores its references on the saver's event
    loop: ``flush()`` there would wait for itself, so it raises and ``aflush()`` waits."""
    store = InMemoryStore()
    archive = StoreArchive(store, background=True)
    async with aopen_saver("aiosqlite", path=tmp_path / "ckpt.db") as inner:
        offloading_saver(inner, archive)
        await archive.acall([image_message()], ("memories", "t"))  # queued: the worker needs the loop
        with pytest.raises(RuntimeError, match=r"await archive\.aflush\(\)"):
            archive.flush()
        with pytest.raises(RuntimeError, match=r"await archive\.aclose\(\)"):
            archive.close()
        assert await archive.aflush() is True
        assert image_of(await archive.amessages(("memories", "t"))) == image_message()
        await archive.aclose()


def test_a_blob_store_given_as_offload_store_holds_the_archives_references() -> None:
    blob_store, store = InMemoryStore(), InMemoryStore()
    archive = StoreArchive(store)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    inner = InMemorySaver()
    saver = ReducingCheckpointSaver(inner, reducer, offload=BlobOffload(min_bytes=1024, store=blob_store),
                                    keep_last=1, retention_every=1)
    run_image_thread(build_graph(saver), "a")
    assert DIGEST not in _named(inner)  # retention deleted every checkpoint naming the image
    assert [i.key for i in blob_store.search(("agentstate_blobs",))] == [DIGEST]  # the archive names it
    (raw,) = [i for i in archive_items(store, "a") if i.key == "h0"]
    assert IMAGE[:64] not in json.dumps(raw.value)
    assert image_of(read_transcript(store, saver, thread_config("a"))) == image_message()
    saver.delete_thread("a")
    assert archive_items(store, "a") == [] and blob_store.search(("agentstate_blobs",)) == []


def test_each_message_is_archived_once_with_one_reference_row() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    inner = InMemorySaver()
    offloading_saver(inner, archive)
    ns = ("memories", "t")
    archive([image_message()], ns)
    first = store.get(ns, "h0")
    archive([image_message("changed")], ns)  # pruned again (a retried put): the first item stays
    assert store.get(ns, "h0") == first and archive.stats.written == 1
    assert archive.stats.already_archived == 1
    blobs = memory_blobs(inner, create=False)
    assert blobs is not None and list(blobs.blobs) == [DIGEST]
    assert [set(d) for d in blobs.refs.values()] == [{DIGEST}]
    assert archive.forget(ns) == 1 and blobs.blobs == {} and blobs.refs == {}


def test_a_missing_or_corrupt_blob_is_a_clear_error() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    inner = InMemorySaver()
    saver = offloading_saver(inner, archive)
    ns = ("memories", "t")
    archive([image_message()], ns)
    blobs = memory_blobs(inner, create=False)
    assert blobs is not None
    blobs.blobs[DIGEST] = b"not the image"
    with pytest.raises(CorruptBlobError, match=rf"archived message 'h0' .* sha256:{DIGEST}") as corrupt:
        archive.messages(ns)
    assert corrupt.value.checkpoint_id == "h0" and corrupt.value.digest == DIGEST
    del blobs.blobs[DIGEST]
    with pytest.raises(MissingBlobError, match=rf"archived message 'h0' .* sha256:{DIGEST}.*not in"):
        read_transcript(store, saver, thread_config("t"))


def test_references_need_the_saver_to_be_read() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    inner = InMemorySaver()
    offloading_saver(inner, archive)
    archive([image_message()], ("memories", "t"))
    with pytest.raises(ValueError, match=r"hold blob references .* read_transcript"):
        read_transcript(store, inner, thread_config("t"))  # the bare saver has no blobs to read
    again = StoreArchive(store)  # another process's archive: unbound until a saver binds it
    with pytest.raises(ValueError, match="hold blob references"):
        again.messages(("memories", "t"))
    offloading_saver(inner, again)
    assert again.messages(("memories", "t")) == [image_message()]


def test_an_unbound_archive_forgetting_references_keeps_their_blobs(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    inner = InMemorySaver()
    offloading_saver(inner, archive)
    archive([image_message()], ("memories", "t"))
    with caplog.at_level("WARNING", logger="agentstate_reducer.checkpointers"):
        assert StoreArchive(store).forget(("memories", "t")) == 1
    assert "named offloaded blobs" in caplog.text
    blobs = memory_blobs(inner, create=False)
    assert blobs is not None and list(blobs.blobs) == [DIGEST]  # kept, never lost


def test_an_archive_is_bound_to_one_blob_storage() -> None:
    archive = StoreArchive(InMemoryStore())
    inner = InMemorySaver()
    saver = offloading_saver(inner, archive)
    offloading_saver(inner, archive)  # the same saver's blobs again: fine
    assert archive.blob_runner is saver.blob_runner
    other = StoreArchive(InMemoryStore())
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[other, archive]))
    with pytest.raises(ValueError, match="already stores references to the InMemorySaver's blobs"):
        ReducingCheckpointSaver(InMemorySaver(), reducer, offload=BlobOffload(min_bytes=1024))
    assert other.blob_runner is None  # checked before anything was bound


def test_without_offload_the_archive_stores_messages_whole() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    saver = ReducingCheckpointSaver(InMemorySaver(), reducer)
    graph = build_graph(saver)
    run_image_thread(graph, "a")
    (raw,) = [i for i in archive_items(store, "a") if i.key == "h0"]
    assert IMAGE in json.dumps(raw.value) and "blobs" not in raw.value
    assert archive.blob_runner is None
    assert image_of(read_transcript(store, saver, thread_config("a"))) == image_message()


@pytest.mark.parametrize("shape", ["langchain", "dict"])
def test_tool_results_follow_tool_min_bytes(shape: str) -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    ReducingCheckpointSaver(InMemorySaver(), reducer, offload=BlobOffload(tool_min_bytes=2_000))
    output = "row " * 1_000
    tool: Any = (ToolMessage(output, tool_call_id="c1", id="t1") if shape == "langchain"
                 else {"role": "tool", "content": output, "tool_call_id": "c1", "id": "t1"})
    archive([tool], ("memories", "t"))
    raw = store.get(("memories", "t"), "t1")
    assert raw is not None and output not in json.dumps(raw.value) and len(raw.value["blobs"]) == 1
    assert archive.messages(("memories", "t")) == [tool]
