"""Blob offload on the Cosmos DB savers, on the local Cosmos DB server (``tests/cosmos_service.py``):
``CosmosDBSaver(offload=...)``/``AsyncCosmosDBSaver(offload=...)`` and a ``ReducingCheckpointSaver``
with ``offload=`` around them round-trip images exactly, store each image once as items of the
container, and retention, ``prune`` and ``delete_thread`` delete a blob exactly when nothing names it
any more, also with concurrent writers."""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.store.memory import InMemoryStore

import checkpointers.cli.main as cli
from agentstate_reducer import MessageReducer
from checkpointers import (
    BlobOffload,
    MissingBlobError,
    ReducingCheckpointSaver,
    StoreArchive,
    read_transcript,
)
from checkpointers.cosmosdb import CosmosDBSaver
from checkpointers.cosmosdb._blobs import BlobWork, owner_key
from checkpointers.cosmosdb._ops import DeleteIf, Missing, Query, Read, explaining_missing
from checkpointers.offload.ops import Collect, DropRefs, LoadBlobs, Owner, SaveBlobs
from checkpointers.offload.transform import references
from tests.cosmos_service import CosmosServer
from tests.scenario_graph import build_graph, thread_config
from tests.test_cli import cosmos_url
from tests.test_cli_offload import seed
from tests.test_cosmos_retention import async_saver, sync_saver
from tests.test_offload_archive import (
    DIGEST,
    archive_items,
    archive_named,
    expected_ids,
    image_message,
    image_of,
    offloading_saver,
    run_image_thread,
)

pytestmark = [pytest.mark.cosmos, pytest.mark.slow]

MIN = 256
REDUCER = MessageReducer(min_messages=200, max_messages=400)


def image(n: int, size: int = 2048) -> bytes:
    """Distinct bytes per ``n``."""
    return (n.to_bytes(4, "big") * (size // 4 + 1))[:size]


def message(n: int, data: bytes) -> Any:
    b64 = base64.b64encode(data).decode()
    return HumanMessage(id=f"m{n}", content=[{"type": "image", "base64": b64, "mime_type": "image/png"}])


def checkpoint(messages: list[Any], step: int = 0) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": messages}
    cp["channel_versions"] = {"messages": step + 1}
    return cp


def meta(step: int) -> Any:
    """The metadata of a step of one run (retention's rules read ``source`` and ``step``)."""
    return {"source": "loop", "step": step}


def config(thread: str, checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def query(server: CosmosServer, database: str, sql: str, container: str = "c") -> list[dict[str, Any]]:
    """Rows of a cross-partition query, read with a client of its own."""
    with server.client() as client:
        proxy = client.get_database_client(database).get_container_client(container)
        return list(proxy.query_items(sql, enable_cross_partition_query=True))


def stored_blobs(server: CosmosServer, database: str, container: str = "c") -> dict[str, int]:
    """digest -> size of every blob stored in the container."""
    rows = query(server, database, "SELECT c.digest, c.size FROM c WHERE c.kind = 'offblob'", container)
    return {r["digest"]: r["size"] for r in rows}


def named_digests(server: CosmosServer, database: str, container: str = "c") -> set[str]:
    """The digests the stored checkpoints and writes name, read without offload (raw)."""
    with sync_saver(server, database, container) as raw:
        tuples = list(raw.list(None))
    return set(references([(t.checkpoint["channel_values"], t.pending_writes) for t in tuples]))


def assert_blobs_follow(server: CosmosServer, database: str, container: str = "c") -> None:
    """The blobs stored are exactly those the stored checkpoints and writes name."""
    assert set(stored_blobs(server, database, container)) == named_digests(server, database, container)


# -- round trips -----------------------------------------------------------------------------------


def test_round_trip_stores_each_image_once(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    # a 500 kB image (as the benchmark) and one over 1 MiB, which takes two chunk items
    big, huge = image(1, 500_000), image(2, 1_500_000)
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
        first = saver.put(config("t"), checkpoint([message(1, big)]), {"step": 0}, {"messages": 1})
        messages = [message(1, big), message(2, huge), AIMessage("seen", id="a")]
        second = saver.put(config("t"), checkpoint(messages, 1), {"step": 1}, {"messages": 2})
        writes = [("messages", [message(1, big)]), ("other", huge)]
        saver.put_writes(second, writes, "task-1")

        tup = saver.get_tuple(second)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == messages
        assert [(c, v) for _, c, v in tup.pending_writes] == writes
        assert saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"] == messages
        listed = list(saver.list(config("t")))
        assert [t.checkpoint["channel_values"]["messages"] for t in listed] == [messages, [message(1, big)]]
        assert saver.get_tuple(first).checkpoint["channel_values"]["messages"] == [message(1, big)]

    # each content once, whatever names it (base64 text is kept as the text, raw bytes as bytes);
    # the checkpoint and write items hold references only
    b64 = [len(base64.b64encode(big)), len(base64.b64encode(huge))]
    assert sorted(stored_blobs(cosmos_server, cosmos_database).values()) == sorted([*b64, len(huge)])
    raw_items = query(cosmos_server, cosmos_database,
                      "SELECT * FROM c WHERE c.kind = 'checkpoint' OR c.kind = 'write' OR c.kind = 'blob'")
    assert all(len(str(item)) < 20_000 for item in raw_items)
    chunks = query(cosmos_server, cosmos_database, "SELECT c.id, c.data FROM c WHERE c.kind = 'offchunk'")
    assert len(chunks) == 5  # 667 kB: one chunk; 1.5 MB and 2 MB: two of at most 1 MiB each
    assert all(len(c["data"]) < 1_500_000 for c in chunks)
    assert_blobs_follow(cosmos_server, cosmos_database)


async def test_async_round_trip_and_delete_thread(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    shared, own = image(1), image(2)
    async with async_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
        a = await saver.aput(config("a"), checkpoint([message(1, shared), message(2, own)]), {"step": 0},
                             {"messages": 1})
        await saver.aput_writes(a, [("messages", [message(2, own)])], "task")
        b = await saver.aput(config("b"), checkpoint([message(1, shared)]), {"step": 0}, {"messages": 1})
        tup = await saver.aget_tuple(a)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == [message(1, shared), message(2, own)]
        assert [v for _, _, v in tup.pending_writes] == [[message(2, own)]]
        assert [t.checkpoint["channel_values"]["messages"] async for t in saver.alist(config("b"))] == [
            [message(1, shared)]]
        assert len(stored_blobs(cosmos_server, cosmos_database)) == 2

        await saver.adelete_thread("a")  # the shared image stays for b
        assert_blobs_follow(cosmos_server, cosmos_database)
        assert len(stored_blobs(cosmos_server, cosmos_database)) == 1
        assert (await saver.aget_tuple(b)).checkpoint["channel_values"]["messages"] == [message(1, shared)]
        await saver.adelete_thread("b")
        assert stored_blobs(cosmos_server, cosmos_database) == {}
        assert query(cosmos_server, cosmos_database, "SELECT c.id FROM c WHERE c.kind = 'blobref'") == []


def test_blobs_in_a_store_given_to_the_saver(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    store = InMemoryStore()
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN, store=store)) as saver:
        messages = [message(1, image(1))]
        saved = saver.put(config("s"), checkpoint(messages), meta(0), {"messages": 1})
        tup = saver.get_tuple(saved)
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == messages
        assert stored_blobs(cosmos_server, cosmos_database) == {}  # in the store, not the container
        assert len(store.search(("agentstate_blobs",))) == 1
        saver.delete_thread("s")
        assert store.search(("agentstate_blobs",)) == []


# -- conformance -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_conformance_full_with_offload(
    kind: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """At 1 byte the suite's short strings read as base64 and are offloaded: it runs over references."""
    counter = iter(range(100))
    stored_refs: list[int] = []

    async def factory() -> AsyncIterator[Any]:
        container = f"off-{next(counter)}"
        offload = BlobOffload(min_bytes=1, tool_min_bytes=1)
        reducer = MessageReducer(min_messages=2, max_messages=4)
        if kind == "sync":
            with sync_saver(cosmos_server, cosmos_database, container) as saver:
                yield ReducingCheckpointSaver(saver, reducer, offload=offload)
        else:
            async with async_saver(cosmos_server, cosmos_database, container) as saver:
                yield ReducingCheckpointSaver(saver, reducer, offload=offload)
        with sync_saver(cosmos_server, cosmos_database, container) as raw:
            tuples = list(raw.list(None))
        stored = [(t.checkpoint["channel_values"], t.pending_writes) for t in tuples]
        stored_refs.append(len(references(stored)))

    report = await validate(checkpointer_test(name=f"offload {kind} cosmos")(factory))
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    detected = {cap for cap, r in report.results.items() if r.detected}
    assert detected == {"put", "put_writes", "get_tuple", "list", "delete_thread", "prune"}
    assert sum(stored_refs) > 0


# -- retention follows the blobs -------------------------------------------------------------------


def test_keep_last_and_delete_thread_keep_exactly_the_named_blobs(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    with sync_saver(cosmos_server, cosmos_database) as inner:
        saver = ReducingCheckpointSaver(inner, REDUCER, keep_last=1, retention_every=1,
                                        offload=BlobOffload(MIN))
        assert inner.offload is saver.offload  # adopted: the inner saver offloads, once
        for thread in ("x", "y"):
            saved = None
            for step in range(4):
                # each checkpoint names this step's image and the thread's first one
                messages = [message(0, image(100 + (thread == "y"))), message(step, image(step))]
                saved = saver.put(saved or config(thread), checkpoint(messages, step), meta(step),
                                  {"messages": step + 1})
                saver.put_writes(saved, [("messages", [message(50 + step, image(50 + step))])], "t")
                assert_blobs_follow(cosmos_server, cosmos_database)
            tup = saver.get_tuple(config(thread))
            assert tup is not None
            assert tup.checkpoint["channel_values"]["messages"][1] == message(3, image(3))
        # x and y share image(3); y's first image is its own
        assert len(stored_blobs(cosmos_server, cosmos_database)) == 4
        saver.delete_thread("x")
        assert_blobs_follow(cosmos_server, cosmos_database)
        assert len(stored_blobs(cosmos_server, cosmos_database)) == 3
        saver.prune(["y"], strategy="delete")
        assert stored_blobs(cosmos_server, cosmos_database) == {}


async def test_the_async_saver_own_keep_last_and_aprune_follow_the_blobs(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    async with async_saver(cosmos_server, cosmos_database, keep_last=1, retention_every=1,
                           reducer=REDUCER, offload=BlobOffload(MIN)) as saver:
        saved = None
        for step in range(4):
            messages = [message(0, image(100)), message(step, image(step))]
            saved = await saver.aput(saved or config("z"), checkpoint(messages, step), meta(step),
                                     {"messages": step + 1})
            await saver.aput_writes(saved, [("messages", [message(50 + step, image(50 + step))])], "t")
            assert_blobs_follow(cosmos_server, cosmos_database)
        assert len([t async for t in saver.alist(config("z"))]) == 1
        assert len(stored_blobs(cosmos_server, cosmos_database)) == 3  # image(100), image(3), image(53)
        await saver.aprune(["z"], strategy="delete")
        assert stored_blobs(cosmos_server, cosmos_database) == {}


def test_two_writers_and_a_deleter_sharing_an_image_lose_nothing(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    shared = image(7)
    steps = 12
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def writer(thread: str) -> None:
        try:
            with sync_saver(cosmos_server, cosmos_database) as inner:
                saver = ReducingCheckpointSaver(inner, REDUCER, keep_last=1, retention_every=1,
                                                offload=BlobOffload(MIN))
                barrier.wait()
                saved = None
                for step in range(steps):
                    own = message(step, image(1000 * step + len(thread)))
                    cp = checkpoint([message(0, shared), own], step)
                    saved = saver.put(saved or config(thread), cp, meta(step), {"messages": step + 1})
                    tup = saver.get_tuple(saved)
                    assert tup is not None
                    assert tup.checkpoint["channel_values"]["messages"] == [message(0, shared), own]
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()  # the others stop waiting

    def deleter() -> None:
        try:
            with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
                barrier.wait()
                for step in range(steps):
                    thread = f"gone-{step}"
                    saver.put(config(thread), checkpoint([message(0, shared)]), {"step": 0}, {"messages": 1})
                    saver.delete_thread(thread)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()  # the others stop waiting

    with sync_saver(cosmos_server, cosmos_database):
        pass  # the container, created once before the workers start
    workers = [threading.Thread(target=writer, args=("w1",)), threading.Thread(target=writer, args=("w2",)),
               threading.Thread(target=deleter)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
        for thread in ("w1", "w2"):
            (tup,) = list(saver.list(config(thread)))  # keep_last=1
            assert tup.checkpoint["channel_values"]["messages"][0] == message(0, shared)
        assert list(saver.list(config("gone-0"))) == []
    assert_blobs_follow(cosmos_server, cosmos_database)


# The protocol at the two moments a collection and a writer can meet, interleaved by hand: the
# operations of each are run one at a time on the real server (``_blobs`` flows, the saver's driver).


def _run(saver: Any, flow: Any) -> Any:
    return saver._run(flow)


def _step(flow: Any, saver: Any, until: type) -> tuple[Any, Any]:
    """Run a new ``flow``'s operations until one of type ``until`` has run; (its result, the flow
    paused before it gets it)."""
    result = None
    while True:
        op = flow.send(result)
        result = saver._execute(op)
        if isinstance(op, until):
            return result, flow


def _released_blob(saver: Any, data: bytes) -> str:
    """A stored blob that nothing names any more (its last owner dropped, not yet collected)."""
    digest = hashlib.sha256(data).hexdigest()
    _run(saver, BlobWork().perform(SaveBlobs(Owner("old", "", "c0"), {digest: data})))
    work = BlobWork()
    assert _run(saver, work.perform(DropRefs("old"))) == (digest,)
    _run(saver, work.release_flow())
    (head,) = query_heads(saver)
    assert head["owners"] == {}
    return digest


def query_heads(saver: Any) -> list[dict[str, Any]]:
    return _run(saver, _rows_flow("SELECT * FROM c WHERE c.kind = 'offblob'"))


def _rows_flow(sql: str) -> Any:
    return (yield Query(sql, (), None))


def test_a_writer_naming_a_blob_after_the_collection_read_it_keeps_it(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    data = image(9)
    with sync_saver(cosmos_server, cosmos_database) as saver:
        digest = _released_blob(saver, data)
        collection = explaining_missing(BlobWork().perform(Collect((digest,))))
        head, collection = _step(collection, saver, Read)  # the collection saw no owner
        assert head["owners"] == {}
        # meanwhile a writer names the blob
        _run(saver, BlobWork().perform(SaveBlobs(Owner("new", "", "c1"), {digest: data})))
        assert _finish(collection, saver, head) == (0, 0)  # its If-Match delete failed: kept
        assert _run(saver, BlobWork().perform(LoadBlobs((digest,)))) == {digest: data}


def test_a_writer_that_read_a_blob_the_collection_deletes_stores_it_again(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    data = image(10)
    with sync_saver(cosmos_server, cosmos_database) as saver:
        digest = _released_blob(saver, data)
        writer = explaining_missing(BlobWork().perform(SaveBlobs(Owner("new", "", "c1"), {digest: data})))
        head, writer = _step(writer, saver, Read)  # the writer saw the head...
        assert head is not None
        # ...whose head a collection deletes before the writer adds its name
        collection = explaining_missing(BlobWork().perform(Collect((digest,))))
        deleted, collection = _step(collection, saver, DeleteIf)
        assert deleted is True
        assert _finish(writer, saver, head) == len(data)  # stored again, as a new generation
        assert _finish(collection, saver, deleted) == (1, len(data))  # its chunks only
        assert _run(saver, BlobWork().perform(LoadBlobs((digest,)))) == {digest: data}
        (head,) = query_heads(saver)
        assert list(head["owners"]) == [owner_key(Owner("new", "", "c1"))]


def _finish(flow: Any, saver: Any, result: Any) -> Any:
    """Send ``result`` to a paused ``flow`` and run it to its end (a 404 goes back into it)."""
    error: Exception | None = None
    while True:
        try:
            op = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            result, error = saver._execute(op), None
        except Missing as exc:
            result, error = None, exc


# -- errors and arguments --------------------------------------------------------------------------


def test_a_blob_deleted_by_hand_is_a_missing_blob_error(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
        cp = checkpoint([message(1, image(1))])
        saved = saver.put(config("thread-e"), cp, {"step": 0}, {"messages": 1})
        (head,) = query(cosmos_server, cosmos_database, "SELECT * FROM c WHERE c.kind = 'offblob'")
        with cosmos_server.client() as client:
            proxy = client.get_database_client(cosmos_database).get_container_client("c")
            proxy.delete_item(head["id"], partition_key=head["pk"])
        with pytest.raises(MissingBlobError) as info:
            saver.get_tuple(saved)
        checkpoint_id = saved["configurable"]["checkpoint_id"]
        message_text = str(info.value)
        assert checkpoint_id in message_text and "thread-e" in message_text and head["digest"] in message_text
        assert info.value.digest == head["digest"] and info.value.checkpoint_id == checkpoint_id
        with pytest.raises(MissingBlobError):
            list(saver.list(config("thread-e")))


def test_offload_arguments_are_checked(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    with cosmos_server.client() as client:
        with pytest.raises(TypeError, match="BlobOffload"):
            CosmosDBSaver(cosmos_database, "c", client=client, offload="yes")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="ttl"):
            CosmosDBSaver(cosmos_database, "c", client=client, ttl=60, offload=BlobOffload())
        offload = BlobOffload(MIN)
        saver = CosmosDBSaver(cosmos_database, "c", client=client, offload=offload)
        with pytest.raises(ValueError, match="offload every checkpoint twice"):
            ReducingCheckpointSaver(saver, REDUCER, offload=BlobOffload(MIN))
        wrapped = ReducingCheckpointSaver(saver, REDUCER, offload=offload)  # the same object: fine
        assert wrapped.offload is saver.offload is offload
        with pytest.raises(NotImplementedError, match="offload"):
            saver.copy_thread("a", "b")
        with pytest.raises(NotImplementedError, match="offload"):
            saver.delete_for_runs(["r"])
        assert not hasattr(wrapped, "copy_thread") or "copy_thread" not in type(wrapped).__dict__


def test_inspect_reports_the_blob_bytes_of_a_cosmos_store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = cosmos_url(request, monkeypatch)
    seed(url, offload=True)
    report = cli.execute(["inspect", url])
    assert {t.thread_id: t.blob_bytes for t in report.threads} == {"two": 2 * 6000, "three": 3 * 6000}
    assert report.summary()["blob_bytes"] == 5 * 6000


def test_the_archive_names_blobs_on_cosmos_and_delete_thread_collects_them(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    store = InMemoryStore()
    with StoreArchive(store) as archive, sync_saver(cosmos_server, cosmos_database) as inner:
        saver = offloading_saver(inner, archive, keep_last=1, retention_every=1)
        assert inner.offload is saver.offload
        graph = build_graph(saver)
        for thread_id in ("a", "b"):
            run_image_thread(graph, thread_id)
        archive.flush()
        named = named_digests(cosmos_server, cosmos_database)
        assert DIGEST not in named  # no checkpoint or write names the image any more
        assert set(stored_blobs(cosmos_server, cosmos_database)) == named | archive_named(store) >= {DIGEST}
        transcript = read_transcript(store, saver, thread_config("a"))
        assert [m.id for m in transcript] == expected_ids()
        assert image_of(transcript) == image_message()
        saver.delete_thread("a")
        assert archive_items(store, "a") == []
        assert DIGEST in stored_blobs(cosmos_server, cosmos_database)  # thread b's archive names it
        saver.delete_thread("b")
        assert stored_blobs(cosmos_server, cosmos_database) == {}


def test_retention_through_the_wrapper_follows_blobs_in_a_store(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    blob_store = InMemoryStore()
    with sync_saver(cosmos_server, cosmos_database) as inner:
        saver = ReducingCheckpointSaver(inner, REDUCER, keep_last=1, retention_every=1,
                                        offload=BlobOffload(MIN, store=blob_store))
        saved = None
        for step in range(3):
            messages = [message(step, image(step))]
            saved = saver.put(saved or config("s"), checkpoint(messages, step), meta(step),
                              {"messages": step + 1})
            in_store = {i.key for i in blob_store.search(("agentstate_blobs",))}
            assert in_store == named_digests(cosmos_server, cosmos_database)
            assert len(in_store) == 1  # the older checkpoints and their images went
        assert stored_blobs(cosmos_server, cosmos_database) == {}
        saver.delete_thread("s")
        assert blob_store.search(("agentstate_blobs",)) == []


async def test_a_background_archive_of_the_async_saver_waits_on_its_loop(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """The worker stores its references on the async saver's event loop: ``flush()`` there would
    wait for itself, so it raises and ``aflush()`` waits; ``adelete_thread`` then collects."""
    store = InMemoryStore()
    archive = StoreArchive(store, background=True)
    async with async_saver(cosmos_server, cosmos_database) as inner:
        saver = offloading_saver(inner, archive)
        await archive.acall([image_message()], ("memories", "t"))  # queued: the worker needs the loop
        with pytest.raises(RuntimeError, match=r"await archive\.aflush\(\)"):
            archive.flush()
        assert await archive.aflush() is True
        assert image_of(await archive.amessages(("memories", "t"))) == image_message()
        assert DIGEST in stored_blobs(cosmos_server, cosmos_database)
        await saver.adelete_thread("t")
        assert stored_blobs(cosmos_server, cosmos_database) == {}
        await archive.aclose()
