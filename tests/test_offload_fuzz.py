"""Fuzzing blob offload where the code is newest: ``offload_store`` (``compact --offload``) on real
SQLite files and PostgreSQL databases written without offload (and mixed stores, part written with
offload on), the archive's references, and Cosmos DB's blob items.

Each example states the invariants of ``checkpointers.inplace_offload`` on the public API: every
``get_tuple``/``list`` through ``ReducingCheckpointSaver(inner, reducer, offload=...)`` reads what a
bare saver read before; the raw rows hold no large payload; the blobs stored are exactly the blobs
named; a second run and a dry run write nothing."""

from __future__ import annotations

import base64
import hashlib
import tempfile
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Interrupt

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.inplace_offload import offload_store
from tests.test_cli import dump_rows, open_saver
from tests.test_cli_compact_offload import raw_values
from tests.test_offload_retention import _named
from tests.test_offload_retention import _stored as _stored_rows

FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MIN = 1024


def _image(seed: int, size: int) -> bytes:
    raw = b"".join(hashlib.sha256(f"{seed}-{i}".encode()).digest() for i in range(size // 32 + 1))
    return raw[:size]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _reducer() -> MessageReducer:
    return MessageReducer(min_messages=20, max_messages=40)


def _message(kind: int, data: bytes, mid: str) -> Any:
    """One message of a provider shape carrying ``data``."""
    b64 = _b64(data)
    url = f"data:image/png;base64,{b64}"
    return [
        HumanMessage(id=mid, content=[{"type": "text", "text": "look"},
                                      {"type": "image", "base64": b64, "mime_type": "image/png"}]),
        HumanMessage(id=mid, content=[{"type": "image_url", "image_url": {"url": url}}]),
        {"role": "user", "id": mid, "content": [{"type": "input_image", "image_url": url}]},
        {"role": "user", "id": mid, "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": b64}}]},
        {"role": "user", "id": mid, "parts": [{"inline_data": {"mime_type": "image/png", "data": data}}]},
        {"role": "user", "id": mid, "content": [{"image": {"format": "png", "source": {"bytes": data}}}]},
        AIMessage(id=mid, content="", tool_calls=[{"id": f"c-{mid}", "name": "t", "args": {}}]),
        ToolMessage(id=mid, tool_call_id=f"c-{mid}", content="done", artifact={"png": data}),
        genai_types.Content(role="user", parts=[genai_types.Part(text=mid), genai_types.Part(
            inline_data=genai_types.Blob(mime_type="image/png", data=data))]),
    ][kind]


#: what one checkpoint's channels may hold besides messages, by name
def _extra(kind: int, data: bytes) -> Any:
    return [
        {"nested": [{"deep": {"bytes": data, "list": [_b64(data), 1, None]}}]},
        f"data:image/png;base64,{_b64(data)}",  # a string channel (PostgreSQL: inline JSONB)
        data,  # a bytes channel
        "plain text that is not binary",
        "agentstate-blob:not-a-reference",
        {"refs": ["agentstate-blob:sha256:zz", b"agentstate-blob:x"]},
    ][kind]


# an image is large (offloaded at MIN) or small (stays inline); a few images shared across threads
images = st.sampled_from([_image(i, size) for i, size in enumerate([3000, 2000, 4000, 100, 700])])
checkpoint_st = st.fixed_dictionaries({
    "ns": st.sampled_from(["", "child:1"]),
    "messages": st.lists(st.tuples(st.integers(0, 8), images), max_size=4),
    "extra": st.lists(st.tuples(st.sampled_from(["photo", "avatar", "note"]), st.integers(0, 5), images),
                      max_size=3),
    "carry": st.sets(st.sampled_from(["messages", "photo", "avatar", "note"])),
    "writes": st.lists(st.tuples(st.sampled_from(["messages", "__interrupt__", "aux"]), images), max_size=2),
})
store_st = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.lists(checkpoint_st, min_size=1, max_size=3),
                           min_size=1, max_size=3)


def _write(saver: Any, store: dict[str, list[dict[str, Any]]], wrapper: Any = None) -> None:
    """Put each thread's checkpoints (each namespace a chain), every channel a new version at each
    step (PostgreSQL: a checkpoint_blobs row per channel and step); ``wrapper`` writes some of them."""
    for thread, checkpoints in store.items():
        versions: dict[str, dict[str, Any]] = {}
        previous: dict[str, dict[str, Any]] = {}
        configs: dict[str, Any] = {}
        for step, spec in enumerate(checkpoints):
            ns = spec["ns"]
            target = wrapper if wrapper is not None and step % 2 == 0 else saver
            mine = versions.setdefault(ns, {})
            config = configs.get(ns, {"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
            values: dict[str, Any] = {"messages": [_message(kind, data, f"{thread}-{step}-{i}")
                                                   for i, (kind, data) in enumerate(spec["messages"])]}
            for name, kind, data in spec["extra"]:
                values[name] = _extra(kind, data)
            values["step"] = step
            last = previous.get(ns, {})
            # carried: the previous value and version (PostgreSQL: one checkpoint_blobs row shared)
            # (not through the wrapper: a put with offload carrying a channel PostgreSQL keeps
            # bare offloads its value anyway, a blob nothing stored names until the checkpoint goes)
            carried = {c: last[c] for c in spec["carry"] if c in last and target is saver}
            values.update(carried)
            new = {c: saver.get_next_version(mine.get(c), None) for c in values if c not in carried}
            previous[ns] = values
            mine.update(new)
            cp = empty_checkpoint()
            cp["channel_values"] = values
            cp["channel_versions"] = dict(mine)
            config = target.put(config, cp, {"source": "loop", "step": step}, new)
            configs[ns] = config
            writes: list[tuple[str, Any]] = []
            for channel, data in spec["writes"]:
                if channel == "__interrupt__":
                    writes.append((channel, [Interrupt(value={"img": _b64(data)}, id=f"i-{step}")]))
                elif channel == "messages":
                    writes.append((channel, [_message(0, data, f"w-{thread}-{step}")]))
                else:
                    writes.append((channel, {"raw": data}))
            if writes:
                target.put_writes(config, writes, f"task-{step}")


def _read(inner: Any, store: dict[str, Any], offload: BlobOffload | None) -> list[Any]:
    saver = ReducingCheckpointSaver(inner, _reducer(), offload=offload) if offload is not None else inner
    out = []
    for thread in sorted(store):
        for tup in list(saver.list({"configurable": {"thread_id": thread}})):
            got = saver.get_tuple(tup.config)
            assert got is not None
            for t in (tup, got):
                out.append((t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes))
    return out


def _large(store: dict[str, list[dict[str, Any]]]) -> set[bytes]:
    """The payloads at least MIN bytes long, raw and as base64 (what must leave the rows)."""
    out: set[bytes] = set()
    for checkpoints in store.values():
        for spec in checkpoints:
            datas = [d for _, d in spec["messages"]] + [d for _, _, d in spec["extra"]]
            datas += [d for _, d in spec["writes"]]
            for d in datas:
                if len(d) >= MIN:
                    out.add(d)
                    out.add(_b64(d).encode())
    return out


def _everything(url: str) -> Any:
    """Every row, the blob tables' included."""
    rows = dump_rows(url)
    with open_saver(url) as inner:
        conn = inner.conn
        try:
            blobs = conn.execute("SELECT digest, gen, data FROM agentstate_blobs ORDER BY digest").fetchall()
            refs = conn.execute("SELECT * FROM agentstate_blob_refs ORDER BY 1, 2, 3, 4, 5").fetchall()
        except Exception:  # no blob tables yet
            blobs = refs = None
            if not url.startswith("sqlite:///"):
                conn.rollback()
    return rows, [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in blobs or ()], \
        [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in refs or ()]


def _check_offload(url: str, store: dict[str, Any], before: list[Any], min_bytes: int = MIN) -> None:
    offload = BlobOffload(min_bytes=min_bytes)
    untouched = _everything(url)
    with open_saver(url) as inner:
        dry = offload_store(inner, BlobOffload(min_bytes=min_bytes), dry_run=True)
    assert _everything(url) == untouched  # a dry run writes nothing
    with open_saver(url) as inner:
        done = offload_store(inner, BlobOffload(min_bytes=min_bytes))
    assert (dry.rows, dry.blobs_stored, dry.blob_bytes_stored, dry.bytes_before, dry.bytes_after) == (
        done.rows, done.blobs_stored, done.blob_bytes_stored, done.bytes_before, done.bytes_after)
    raw = raw_values(url)
    assert not [d[:64] for d in _large(store) if d[:64] in raw]
    with open_saver(url) as inner:
        assert _read(inner, store, offload) == before
        assert _stored(inner) == _named(inner)
    after = _everything(url)
    with open_saver(url) as inner:
        again = offload_store(inner, BlobOffload(min_bytes=min_bytes))
    assert (again.rows, again.blobs_stored, again.bytes_before) == (0, 0, 0)
    assert _everything(url) == after  # a second run: a no-op


def _stored(inner: Any) -> set[str]:
    """The digests in the blob table (none before it exists)."""
    from checkpointers.offload.ops import HasBlobs
    from checkpointers.retention.backends import backend_for

    def has() -> Any:
        return (yield HasBlobs())

    return _stored_rows(inner) if backend_for(inner).run(has()) else set()


def _sqlite_url() -> str:
    return f"sqlite:///{Path(tempfile.mkdtemp(prefix='fuzz-offload-')) / 'store.sqlite'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def new_url(request: pytest.FixtureRequest) -> Any:
    if request.param == "sqlite":
        return _sqlite_url
    server = request.getfixturevalue("postgres_server")
    return lambda: str(server.new_database("fuzz_offload"))


@FUZZ
@given(store=store_st)
def test_offload_store_reads_back_what_a_bare_saver_read(new_url: Any, store: dict[str, Any]) -> None:
    url = new_url()
    with open_saver(url) as saver:
        saver.setup()
        _write(saver, store)
        before = _read(saver, store, None)
    _check_offload(url, store, before)


@FUZZ
@given(store=store_st, first=st.sampled_from([64, 1024, 5000]), second=st.sampled_from([64, 1024, 5000]))
def test_a_mixed_store_offloads_with_another_threshold(
    new_url: Any, store: dict[str, Any], first: int, second: int
) -> None:
    """Every other checkpoint written through a wrapper with offload at ``first`` bytes, the rest
    bare; then offload_store at ``second``: reads back what was put, blobs stored == named."""
    url = new_url()
    with open_saver(url) as saver:
        saver.setup()
        wrapper = ReducingCheckpointSaver(saver, _reducer(), offload=BlobOffload(min_bytes=first))
        _write(saver, store, wrapper)
        before = _read(saver, store, BlobOffload(min_bytes=first))
    _check_offload(url, store, before, min_bytes=second) if second <= MIN else None
    if second > MIN:  # large payloads below the threshold may stay: check the rest only
        with open_saver(url) as inner:
            offload_store(inner, BlobOffload(min_bytes=second))
            assert _read(inner, store, BlobOffload(min_bytes=second)) == before
            assert _stored(inner) == _named(inner)


# -- the archive ----------------------------------------------------------------------------------


def _archiving(inner: Any, *, background: bool = False) -> tuple[Any, Any, Any]:
    from langgraph.store.memory import InMemoryStore

    from agentstate_reducer import ReducerConfig
    from checkpointers import StoreArchive

    store = InMemoryStore()
    archive = StoreArchive(store, background=background)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    saver = ReducingCheckpointSaver(inner, reducer, offload=BlobOffload(min_bytes=MIN))
    return store, archive, saver


def _archived_bytes(store: Any, ns: tuple[str, ...]) -> dict[str, int]:
    import json

    return {i.key: len(json.dumps(i.value)) for i in store.search(ns, limit=100) if tuple(i.namespace) == ns}


def test_the_archive_stores_a_reference_to_raw_bytes_not_their_repr() -> None:
    """Bedrock ``source.bytes`` and Gemini ``inline_data.data`` as bytes: a checkpoint stores a
    reference, so must an archived copy; and it reads back as the bytes it was."""
    from langgraph.checkpoint.memory import InMemorySaver

    data = _image(1, 3000)
    store, archive, _saver = _archiving(InMemorySaver())
    ns = ("memories", "t")
    messages = [
        {"role": "user", "id": "bedrock", "content": [{"image": {"format": "png",
                                                                  "source": {"bytes": data}}}]},
        {"role": "user", "id": "gemini", "parts": [{"inline_data": {"mime_type": "image/png",
                                                                    "data": data}}]},
    ]
    archive(messages, ns)
    assert all(size < MIN for size in _archived_bytes(store, ns).values()), _archived_bytes(store, ns)
    assert archive.messages(ns) == messages  # bytes, not their str


# -- Cosmos DB ------------------------------------------------------------------------------------


@pytest.mark.cosmos
def test_cosmos_an_image_of_several_chunks_on_many_threads(cosmos_server: Any, cosmos_database: str) -> None:
    """A 5 MB image (base64: five chunk items, more than one query page of bytes) on three threads:
    stored once, read back exactly from each, kept until the last thread naming it is deleted."""
    from tests.test_cosmos_offload import checkpoint, config, message, stored_blobs, sync_saver

    huge = _image(7, 5_000_000)
    digest = hashlib.sha256(_b64(huge).encode()).hexdigest()
    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as saver:
        for thread in ("a", "b", "c"):
            saver.put(config(thread), checkpoint([message(1, huge)]), {"step": 0}, {"messages": 1})
        assert stored_blobs(cosmos_server, cosmos_database) == {digest: len(_b64(huge))}
        for thread in ("a", "b", "c"):
            tup = saver.get_tuple(config(thread))
            assert tup is not None and tup.checkpoint["channel_values"]["messages"] == [message(1, huge)]
        saver.delete_thread("a")
        saver.delete_thread("b")
        tup = saver.get_tuple(config("c"))
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == [message(1, huge)]
        saver.delete_thread("c")
    assert stored_blobs(cosmos_server, cosmos_database) == {}


@pytest.mark.cosmos
def test_cosmos_delete_thread_racing_a_put_naming_the_same_image(
    cosmos_server: Any, cosmos_database: str
) -> None:
    """Thread ``a<i>`` alone names an image; ``delete_thread(a<i>)`` runs while a put on ``b<i>``
    names the same image (two clients, two threads): ``b<i>`` always reads the image back, and the
    blobs stored are exactly those the stored checkpoints name."""
    import threading

    from tests.test_cosmos_offload import assert_blobs_follow, checkpoint, config, message, sync_saver

    with sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as deleter, \
            sync_saver(cosmos_server, cosmos_database, offload=BlobOffload(MIN)) as writer:
        for i in range(8):
            data = _image(100 + i, 3000)
            deleter.put(config(f"a{i}"), checkpoint([message(1, data)]), {"step": 0}, {"messages": 1})
            barrier = threading.Barrier(2)
            errors: list[BaseException] = []

            def delete(thread: str = f"a{i}", barrier: Any = barrier, errors: Any = errors) -> None:
                barrier.wait()
                try:
                    deleter.delete_thread(thread)
                except BaseException as exc:  # reported below
                    errors.append(exc)

            other = threading.Thread(target=delete)
            other.start()
            barrier.wait()
            writer.put(config(f"b{i}"), checkpoint([message(1, data)]), {"step": 0}, {"messages": 1})
            other.join()
            assert errors == []
            tup = writer.get_tuple(config(f"b{i}"))
            assert tup is not None and tup.checkpoint["channel_values"]["messages"] == [message(1, data)]
    assert_blobs_follow(cosmos_server, cosmos_database)


ODD_IDS = ["%", ".", "\x1f", "é☃", "", "a/b", "a.b%2E", "x" * 300, "!blob!", "r!x!y"]


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_archive_odd_ids_one_image_many_threads_then_delete_one(
    kind: str, background: bool, request: pytest.FixtureRequest
) -> None:
    """Messages with odd ids, all carrying one image, archived in threads whose ids need escaping,
    the image also in a live checkpoint; closing a background archive delivers everything; deleting
    one thread leaves the image readable in the others; the last deletion collects it."""
    from checkpointers import read_transcript

    url = _sqlite_url() if kind == "sqlite" else str(
        request.getfixturevalue("postgres_server").new_database("fuzz_archive"))
    b64 = _b64(_image(3, 3000))
    threads = ["a.b", "a%2Eb", "\x1fx", "ü"]

    def messages(thread: str) -> list[Any]:
        return [HumanMessage(id=i, content=[{"type": "text", "text": f"{thread}{i!r}"},
                                            {"type": "image", "base64": b64, "mime_type": "image/png"}])
                for i in ODD_IDS]

    with open_saver(url) as inner:
        inner.setup()
        store, archive, saver = _archiving(inner, background=background)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages("live")[:1]}
        cp["channel_versions"] = {"messages": 1}
        live = {"configurable": {"thread_id": "live", "checkpoint_ns": ""}}
        saver.put(live, cp, {"source": "loop", "step": 0}, {"messages": 1})
        for thread in threads:
            archive(messages(thread), ("memories", thread))
        archive.close()
        for thread in threads:
            got = archive.messages(("memories", thread))
            want = [m for m in messages(thread) if m.id] + [m for m in messages(thread) if not m.id]
            assert sorted(got, key=repr) == sorted(want, key=repr)
        assert len(_stored(inner)) == 1
        saver.delete_thread(threads[0])
        for thread in threads[1:]:
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            assert len(read_transcript(store, saver, config)) == len(ODD_IDS)
        for thread in threads[1:]:
            saver.delete_thread(thread)
        tup = saver.get_tuple(live)
        assert tup is not None and tup.checkpoint["channel_values"] == cp["channel_values"]
        assert len(_stored(inner)) == 1
        saver.delete_thread("live")
        assert _stored(inner) == set()


@pytest.mark.postgres
def test_archive_bound_to_postgres_archives_a_message_whose_id_holds_nul(
    postgres_server: Any,
) -> None:
    """Bound to a PostgresSaver, each item's reference row is keyed by the message id, and
    PostgreSQL's text refuses NUL: the key is escaped, so such a message archives (and the rest of
    its batch with it) as it does unbound."""
    url = str(postgres_server.new_database("fuzz_archive_nul"))
    b64 = _b64(_image(3, 3000))
    with open_saver(url) as inner:
        inner.setup()
        _store, archive, _saver = _archiving(inner)
        messages = [HumanMessage(id=i, content=[{"type": "image", "base64": b64, "mime_type": "image/png"}])
                    for i in ("a\x00b", "ok")]
        archive(messages, ("memories", "t"))
        assert [m.id for m in archive.messages(("memories", "t"))] == ["a\x00b", "ok"]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_offload_runs_at_once_read_back_the_same(kind: str, request: pytest.FixtureRequest) -> None:
    """Two ``offload_store`` runs on one store at the same time (two connections, two threads):
    the store reads back what it read before, and the blobs stored are exactly the blobs named."""
    import threading

    url = _sqlite_url() if kind == "sqlite" else str(
        request.getfixturevalue("postgres_server").new_database("fuzz_offload_twice"))
    shared = [(0, _image(0, 3000)), (4, _image(2, 4000))]
    spec = {"ns": "", "messages": shared, "extra": [("photo", 0, _image(1, 2000))], "carry": {"photo"},
            "writes": [("messages", _image(0, 3000))]}
    store = {t: [spec, {**spec, "ns": "child:1"}, spec] for t in ("a", "b", "c", "d")}
    with open_saver(url) as saver:
        saver.setup()
        _write(saver, store)
        before = _read(saver, store, None)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        try:
            with open_saver(url) as inner:
                barrier.wait()
                offload_store(inner, BlobOffload(min_bytes=MIN))
        except BaseException as exc:  # reported below
            errors.append(exc)

    runs = [threading.Thread(target=run) for _ in range(2)]
    for r in runs:
        r.start()
    for r in runs:
        r.join()
    assert errors == []
    raw = raw_values(url)
    assert not [d[:64] for d in _large(store) if d[:64] in raw]
    with open_saver(url) as inner:
        assert _read(inner, store, BlobOffload(min_bytes=MIN)) == before
        assert _stored(inner) == _named(inner) != set()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_offload_store_while_a_live_writer_prunes_the_checkpoints_it_walks(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """A writer with offload and ``keep_last=1`` puts on the thread ``offload_store`` is walking
    (from ``on_thread`` on), so retention deletes checkpoints the run has listed: whatever the
    interleaving, no error, the newest checkpoint reads back, blobs stored == blobs named."""
    import threading

    url = _sqlite_url() if kind == "sqlite" else str(
        request.getfixturevalue("postgres_server").new_database("fuzz_offload_live"))
    shared = _image(5, 3000)
    with open_saver(url) as saver:
        saver.setup()
        config: Any = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
        version = None
        for step in range(40):
            version = saver.get_next_version(version, None)
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": [_message(0, _image(step, 3000), f"m{step}"),
                                                 _message(0, shared, "shared")]}
            cp["channel_versions"] = {"messages": version}
            config = saver.put(config, cp, {"source": "loop", "step": step}, {"messages": version})
    errors: list[BaseException] = []
    walking = threading.Event()

    def offload() -> None:
        try:
            with open_saver(url) as inner:
                offload_store(inner, BlobOffload(min_bytes=MIN), on_thread=lambda _: walking.set())
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            walking.set()

    def live() -> None:
        try:
            with open_saver(url) as inner:
                saver = ReducingCheckpointSaver(inner, _reducer(), offload=BlobOffload(min_bytes=MIN),
                                                keep_last=1, retention_every=1)
                walking.wait()
                for step in range(40, 43):
                    tup = saver.get_tuple({"configurable": {"thread_id": "a", "checkpoint_ns": ""}})
                    assert tup is not None
                    new = saver.get_next_version(tup.checkpoint["channel_versions"]["messages"], None)
                    cp = empty_checkpoint()
                    cp["channel_values"] = {"messages": [_message(0, shared, "shared")]}
                    cp["channel_versions"] = {"messages": new}
                    saver.put(tup.config, cp, {"source": "loop", "step": step}, {"messages": new})
        except BaseException as exc:  # reported below
            errors.append(exc)

    runs = [threading.Thread(target=offload), threading.Thread(target=live)]
    for r in runs:
        r.start()
    for r in runs:
        r.join()
    assert errors == []
    with open_saver(url) as inner:
        saver = ReducingCheckpointSaver(inner, _reducer(), offload=BlobOffload(min_bytes=MIN))
        tup = saver.get_tuple({"configurable": {"thread_id": "a", "checkpoint_ns": ""}})
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == [_message(0, shared, "shared")]
        assert _stored(inner) == _named(inner) != set()


# -- the depth limit ------------------------------------------------------------------------------


def _nested(depth: int, leaf: Any) -> Any:
    value: Any = {"img": leaf}
    for _ in range(depth):
        value = {"k": value}
    return value


def test_an_image_at_the_depth_limit_reads_back_not_as_a_reference() -> None:
    """``Offloader`` descends up to depth 48 of each channel value and write, and reads walk each
    of them from the same root: an image exactly 48 levels down must read back as the image, not
    as ``"agentstate-blob:sha256:..."``."""
    from langgraph.checkpoint.memory import InMemorySaver

    b64 = _b64(_image(1, 3000))
    saver = ReducingCheckpointSaver(InMemorySaver(), _reducer(), offload=BlobOffload(min_bytes=MIN))
    cp = empty_checkpoint()
    cp["channel_values"] = {"deep": _nested(48, b64)}
    cp["channel_versions"] = {"deep": 1}
    config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"deep": 1})
    saver.put_writes(config, [("deep", _nested(48, b64))], "task")
    tup = saver.get_tuple(config)
    assert tup is not None
    assert tup.pending_writes is not None and tup.pending_writes[0][2] == _nested(48, b64)
    assert tup.checkpoint["channel_values"]["deep"] == _nested(48, b64)


@pytest.mark.parametrize("depth", [0, 30, 47, 49, 60])
def test_an_image_off_the_depth_limit_round_trips(depth: int) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    b64 = _b64(_image(1, 3000))
    saver = ReducingCheckpointSaver(InMemorySaver(), _reducer(), offload=BlobOffload(min_bytes=MIN))
    cp = empty_checkpoint()
    cp["channel_values"] = {"deep": _nested(depth, b64)}
    cp["channel_versions"] = {"deep": 1}
    config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"deep": 1})
    saver.put_writes(config, [("deep", _nested(depth, b64))], "task")
    tup = saver.get_tuple(config)
    assert tup is not None and tup.pending_writes is not None
    assert tup.pending_writes[0][2] == _nested(depth, b64)
    assert tup.checkpoint["channel_values"]["deep"] == _nested(depth, b64)


def test_offload_store_twice_at_the_depth_limit_is_a_no_op() -> None:
    """In place at the same depth: the second run must see the reference the first wrote, not
    escape it as a value of its own and store a reference to the reference."""
    b64 = _b64(_image(1, 3000))
    url = _sqlite_url()
    with open_saver(url) as saver:
        saver.setup()
        cp = empty_checkpoint()
        cp["channel_values"] = {"deep": _nested(48, b64)}
        cp["channel_versions"] = {"deep": 1}
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"deep": 1})
        first = offload_store(saver, BlobOffload(min_bytes=MIN))
        again = offload_store(saver, BlobOffload(min_bytes=MIN))
    assert (first.rows, first.blobs_stored) == (1, 1)
    assert (again.rows, again.blobs_stored) == (0, 0)


def test_the_archive_restores_an_image_at_the_depth_limit() -> None:
    """An archived LangChain message is stored as a ``{"type", "data"}`` body, one level above the
    message the archive offloads: an image exactly at the depth limit must come back from
    ``messages()`` as the image, not as its reference string."""
    from langgraph.checkpoint.memory import InMemorySaver

    b64 = _b64(_image(1, 3000))
    _store, archive, _saver = _archiving(InMemorySaver())
    message = HumanMessage(id="x", content="hi", additional_kwargs={"deep": _nested(47, b64)})
    archive([message], ("memories", "t"))
    assert archive.messages(("memories", "t")) == [message]
