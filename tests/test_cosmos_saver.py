"""CosmosDBSaver and AsyncCosmosDBSaver against a real Cosmos DB protocol server (issue 5).

Every test that can runs on both classes (the ``make`` fixture is parametrized sync/async). The
server is the local one of ``tests/cosmos_service.py`` or, with ``COSMOSDB_ENDPOINT``, a real
account or the emulator. Items are inspected through a separate plain client (``raw_items``).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import io
import logging
import math
import os
import re
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import pytest
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.cosmos import PartitionKey, exceptions
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer
from checkpointers import PutReduction, ReducingCheckpointSaver
from checkpointers.cosmosdb import (
    INDEXING_POLICY,
    PARTITION_KEY_PATH,
    AsyncCosmosDBSaver,
    ContainerNotFoundError,
    CosmosDBSaver,
)
from checkpointers.cosmosdb import _mapping as m
from tests.cosmos_service import CosmosServer

pytestmark = pytest.mark.cosmos

LEGAL_ID = re.compile(r"[^/\\?#]+\Z")


# -- helpers -----------------------------------------------------------------------------------------


def make_checkpoint(
    values: dict[str, Any], versions: dict[str, Any], *, checkpoint_id: str | None = None
) -> Checkpoint:
    return {
        "v": 4,
        "id": checkpoint_id or str(uuid6()),
        "ts": datetime.now(timezone.utc).isoformat(),
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }


def cfg(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


class Api:
    """One call style for both savers: ``await api.call("put", ...)`` runs ``put`` on a
    CosmosDBSaver and ``aput`` on an AsyncCosmosDBSaver."""

    def __init__(self, saver: Any, is_async: bool) -> None:
        self.saver = saver
        self.is_async = is_async

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return await getattr(self.saver, f"a{name}")(*args, **kwargs)
        return getattr(self.saver, name)(*args, **kwargs)

    async def list(self, config: Any, **kwargs: Any) -> builtins.list[Any]:
        if self.is_async:
            return [t async for t in self.saver.alist(config, **kwargs)]
        return list(self.saver.list(config, **kwargs))

    async def chain(
        self,
        thread_id: str,
        n: int,
        *,
        ns: str = "",
        values: Callable[[int], dict[str, Any]] | None = None,
        metadata: Callable[[int], dict[str, Any]] | None = None,
    ) -> builtins.list[str]:
        """Put ``n`` checkpoints, each the child of the previous, with the channel values ``values(i)``
        merged into the previous ones; return their ids."""
        ids: builtins.list[str] = []
        versions: dict[str, Any] = {}
        current: dict[str, Any] = {}
        for i in range(n):
            vals = values(i) if values else {}
            # a new version only for channels whose value changes, as LangGraph does
            new = {
                k: self.saver.get_next_version(versions.get(k), None)
                for k, v in vals.items()
                if k not in current or current[k] != v
            }
            versions.update(new)
            current.update(vals)
            cp = make_checkpoint(dict(current), dict(versions))
            md = metadata(i) if metadata else {"source": "loop", "step": i}
            await self.call("put", cfg(thread_id, ns, ids[-1] if ids else None), cp, md, new)
            ids.append(cp["id"])
        return ids


Make = Callable[..., Awaitable[Api]]


@pytest.fixture(params=["sync", "async"])
async def make(
    request: pytest.FixtureRequest, cosmos_server: CosmosServer, cosmos_database: str
) -> AsyncIterator[Make]:
    """``await make(container="checkpoints", hook=None, **saver_kwargs)``: a set-up saver on a client of
    its own (closed after the test); ``hook`` becomes the client's raw_response_hook."""
    is_async = request.param == "async"
    sync_clients: list[Any] = []
    async_clients: list[Any] = []

    async def factory(
        container: str = "checkpoints", hook: Any = None, setup: bool = True, **kwargs: Any
    ) -> Api:
        extra = {} if hook is None else {"raw_response_hook": hook}
        saver: Any
        if is_async:
            client = cosmos_server.async_client(**extra)
            await client.__aenter__()
            async_clients.append(client)
            saver = AsyncCosmosDBSaver(cosmos_database, container, client=client, **kwargs)
            if setup:
                await saver.asetup()
        else:
            client = cosmos_server.client(**extra)
            sync_clients.append(client)
            saver = CosmosDBSaver(cosmos_database, container, client=client, **kwargs)
            if setup:
                saver.setup()
        return Api(saver, is_async)

    yield factory
    for c in sync_clients:
        c.close()
    for c in async_clients:
        await c.close()


def raw_items(server: CosmosServer, database: str, container: str = "checkpoints") -> list[dict[str, Any]]:
    with server.client() as client:
        c = client.get_database_client(database).get_container_client(container)
        return list(c.read_all_items())


def counting_hook() -> tuple[list[str], Callable[[Any], None]]:
    """Records each data-plane response (one per round trip); the SDK's own account reads
    (``GET /``) are not operations of the saver."""
    seen: list[str] = []

    def hook(response: Any) -> None:
        request = response.http_request
        if urlsplit(request.url).path.strip("/"):
            seen.append(f"{request.method} {urlsplit(request.url).path}")

    return seen, hook


# -- odd ids -----------------------------------------------------------------------------------------

ODD_THREADS = [
    "a/b\\c?d#e$f g",
    "a~2Fb",  # what "a/b" would escape to, if '~' were not escaped itself
    "a/b",
    "ünïcødé 🚀 ☃ 漢字",
    "t" * 1000,
    "🚀" * 1000,
    " spaces  ",
    "x!y!z",
]


async def test_odd_thread_ids_namespaces_and_checkpoint_ids(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make()
    for n, tid in enumerate(ODD_THREADS):
        ns = f"node/{tid[:40]}#?"
        first, second = f"cp/1#?{tid[:20]}", f"cp/2#?{tid[:20]}"  # ids compare as their strings do
        cp1 = make_checkpoint({"ch/a#b?": f"v1-{n}"}, {"ch/a#b?": "1"}, checkpoint_id=first)
        cp2 = make_checkpoint({"ch/a#b?": f"v2-{n}"}, {"ch/a#b?": "2"}, checkpoint_id=second)
        await api.call("put", cfg(tid, ns), cp1, {"step": 1}, {"ch/a#b?": "1"})
        stored = await api.call("put", cfg(tid, ns, first), cp2, {"step": 2}, {"ch/a#b?": "2"})
        assert stored == cfg(tid, ns, second)
        await api.call("put_writes", stored, [("ch/a#b?", "w0"), ("other", "w1")], f"task/{tid[:30]}?#")

    for n, tid in enumerate(ODD_THREADS):
        ns = f"node/{tid[:40]}#?"
        first, second = f"cp/1#?{tid[:20]}", f"cp/2#?{tid[:20]}"
        latest = await api.call("get_tuple", cfg(tid, ns))
        assert latest.config == cfg(tid, ns, second)
        assert latest.checkpoint["channel_values"] == {"ch/a#b?": f"v2-{n}"}
        assert latest.parent_config == cfg(tid, ns, first)
        assert latest.pending_writes == [
            (f"task/{tid[:30]}?#", "ch/a#b?", "w0"),
            (f"task/{tid[:30]}?#", "other", "w1"),
        ]
        by_id = await api.call("get_tuple", cfg(tid, ns, first))
        assert by_id.checkpoint["channel_values"] == {"ch/a#b?": f"v1-{n}"}
        assert [t.config["configurable"]["checkpoint_id"] for t in await api.list(cfg(tid, ns))] == [
            second,
            first,
        ]
        assert await api.call("get_tuple", cfg(tid)) is None  # root namespace: nothing there

    items = raw_items(cosmos_server, cosmos_database)
    assert len(items) == len(ODD_THREADS) * 6  # 2 checkpoints, 2 values, 2 writes each
    for item in items:
        assert LEGAL_ID.match(item["id"]), item["id"]
        assert len(item["id"].encode()) <= 1023
        assert len(item["pk"].encode()) <= 1024
    assert {item["thread_id"] for item in items} == set(ODD_THREADS)  # raw values kept as fields

    for tid in ODD_THREADS:
        await api.call("delete_thread", tid)
    assert raw_items(cosmos_server, cosmos_database) == []


async def test_empty_thread_id_is_refused(make: Make) -> None:
    api = await make()
    with pytest.raises(ValueError, match=r"config\['configurable'\]\['thread_id'\] is required"):
        await api.call("get_tuple", {"configurable": {"thread_id": ""}})


async def test_pending_writes_order_and_special_channels(make: Make) -> None:
    from langgraph.checkpoint.serde.types import ERROR, INTERRUPT

    api = await make()
    [cid] = await api.chain("t", 1)
    config = cfg("t", "", cid)
    writes = [(f"ch{i}", i) for i in range(12)]  # idx 10 and 11 must come after 2, not after 1
    await api.call("put_writes", config, writes, "task-b", "path:1")
    await api.call(
        "put_writes", config, [(ERROR, "first"), (INTERRUPT, {"x": 1}), (ERROR, "last")], "task-a", ""
    )
    await api.call("put_writes", config, writes[:1], "task-b", "path:1")  # a retry: no duplicate
    got = await api.call("get_tuple", config)
    assert got.pending_writes == [
        ("task-a", INTERRUPT, {"x": 1}),  # task_path "" first, then by idx: INTERRUPT -3, ERROR -1
        ("task-a", ERROR, "last"),  # two writes to one special channel: the last one wins
        *[("task-b", f"ch{i}", i) for i in range(12)],
    ]


# -- large values ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_3mb_state_is_chunked_and_reassembled(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make()
    big = os.urandom(3 * 1024 * 1024 + 1000)  # 3 MB and a bit: 4 chunks
    text = "x" * (1024 * 1024 + 17)
    cp = make_checkpoint({"blob": big, "text": text, "small": 1}, {"blob": "1", "text": "1", "small": "1"})
    stored = await api.call("put", cfg("big"), cp, {"step": 1}, {"blob": "1", "text": "1", "small": "1"})
    await api.call("put_writes", stored, [("blob", big)], "task-1")

    got = await api.call("get_tuple", cfg("big"))
    assert got.checkpoint["channel_values"] == {"blob": big, "text": text, "small": 1}
    assert got.pending_writes == [("task-1", "blob", big)]

    items = raw_items(cosmos_server, cosmos_database)
    by_ref: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        assert m.item_bytes(item) < m.MAX_ITEM_BYTES  # every item fits Cosmos DB's 2 MB limit
        if item["kind"] != "checkpoint":
            by_ref.setdefault(item["ref"], []).append(item)
    serialized = len(api.saver.serde.dumps_typed(big)[1])
    expected_parts = math.ceil(serialized / m.CHUNK_BYTES)
    assert expected_parts == 4
    assert sorted(len(v) for v in by_ref.values()) == [1, 2, 4, 4]  # small, text, blob, the write

    await api.call("copy_thread", "big", "big-copy")
    copy = await api.call("get_tuple", cfg("big-copy"))
    assert copy.checkpoint["channel_values"]["blob"] == big and copy.pending_writes == [
        ("task-1", "blob", big)
    ]


# -- TTL ---------------------------------------------------------------------------------------------


async def test_ttl_is_written_on_every_item(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make(container="ttl", ttl=60)
    with cosmos_server.client() as client:
        props = client.get_database_client(cosmos_database).get_container_client("ttl").read()
    assert props["defaultTtl"] == -1  # TTL on; only items with a ttl field expire
    ids = await api.chain("t", 2, values=lambda i: {"a": i, "b": "same"})
    await api.call("put_writes", cfg("t", "", ids[-1]), [("a", 1)], "task")
    items = raw_items(cosmos_server, cosmos_database, "ttl")
    ttl_by_kind = {(item["kind"], item["ttl"]) for item in items}
    # values outlive the checkpoints that read them by half a TTL (see checkpointers.cosmosdb._mapping.Ttls)
    assert ttl_by_kind == {("checkpoint", 60), ("write", 60), ("blob", 90)}
    assert sorted(item["kind"] for item in items) == [
        "blob",
        "blob",
        "blob",
        "checkpoint",
        "checkpoint",
        "write",
    ]


async def test_ttl_rewrites_an_unchanged_value_only_when_its_last_write_is_unknown_or_old(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make(container="ttl", ttl=60)
    va, vb = api.saver.get_next_version(None, None), api.saver.get_next_version(None, None)
    cp1 = make_checkpoint({"a": 1, "b": "kept"}, {"a": va, "b": vb})
    await api.call("put", cfg("t"), cp1, {}, {"a": va, "b": vb})

    def etag_of_b() -> str:
        [item] = [i for i in raw_items(cosmos_server, cosmos_database, "ttl") if i.get("channel") == "b"]
        return item["_etag"]

    before = etag_of_b()
    va2 = api.saver.get_next_version(va, None)
    cp2 = make_checkpoint({"a": 2, "b": "kept"}, {"a": va2, "b": vb})
    await api.call("put", cfg("t", "", cp1["id"]), cp2, {}, {"a": va2})
    assert etag_of_b() == before  # this saver wrote "b" moments ago: not rewritten

    other = await make(container="ttl", ttl=60)  # another process: it does not know when "b" was written
    va3 = other.saver.get_next_version(va2, None)
    cp3 = make_checkpoint({"a": 3, "b": "kept"}, {"a": va3, "b": vb})
    await other.call("put", cfg("t", "", cp2["id"]), cp3, {}, {"a": va3})
    assert etag_of_b() != before
    assert (await other.call("get_tuple", cfg("t"))).checkpoint["channel_values"] == {"a": 3, "b": "kept"}


async def test_setup_switches_ttl_on_in_an_existing_container(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    with cosmos_server.client() as client:
        db = client.get_database_client(cosmos_database)
        db.create_container("plain", partition_key=PartitionKey(path=PARTITION_KEY_PATH))
        assert "defaultTtl" not in db.get_container_client("plain").read()
        api = await make(container="plain", ttl=3600)
        api2 = await make(container="plain", ttl=3600)  # idempotent
        props = db.get_container_client("plain").read()
    assert props["defaultTtl"] == -1 and props["partitionKey"]["paths"] == ["/pk"]
    await api.chain("t", 1, values=lambda i: {"a": i})
    assert [t.checkpoint["channel_values"] for t in await api2.list(cfg("t"))] == [{"a": 0}]


@pytest.mark.parametrize("ttl", [0, -5, True, 1.5, "60", 2**31])
def test_ttl_is_validated(ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl must be None or an int number of seconds"):
        CosmosDBSaver("db", "c", endpoint="https://localhost:1", credential="k", ttl=ttl)


# -- metadata filters --------------------------------------------------------------------------------


@pytest.mark.slow
async def test_metadata_filter_and_injection_attempts(make: Make) -> None:
    api = await make()
    ids = await api.chain(
        "t",
        4,
        metadata=lambda i: {
            "source": "loop" if i % 2 else "input",
            "step": i,
            "value": i % 2,
            "select": "kw",
            "nested": {"inner": "x" if i < 2 else "y", "n": i},
        },
    )

    async def found(flt: Any, config: Any = None) -> list[str]:
        return [t.checkpoint["id"] for t in await api.list(config or cfg("t"), filter=flt)]

    newest_first = list(reversed(ids))
    assert await found({"source": "loop"}) == [ids[3], ids[1]]
    assert await found({"source": "input", "step": 2}) == [ids[2]]
    assert await found({"value": 1, "select": "kw"}) == [ids[3], ids[1]]  # Cosmos SQL keywords as keys
    assert await found({"nested.inner": "x"}) == [ids[1], ids[0]]
    assert await found({"nested": {"inner": "y", "n": 3}}) == [ids[3]]  # containment, like Postgres @>
    assert await found({"nested": {}}) == newest_first
    assert await found({"step": None}) == []
    # a hostile *value* is only a parameter: it matches nothing and breaks nothing
    assert await found({"source": 'x") OR 1=1 --'}) == []
    assert await found({"source": "x' OR '1'='1"}) == []

    for key in [
        'x") OR 1=1 --',
        "x' OR '1'='1",
        'source"] = "loop" OR true --',
        "a b",
        "1=1",
        "a.b.",
        "a[0]",
    ]:
        with pytest.raises(ValueError, match=re.escape(f"invalid metadata filter key {key!r}")):
            await found({key: 1})
        with pytest.raises(ValueError, match="invalid metadata filter key"):
            await found({"nested": {key: 1}})
        with pytest.raises(ValueError, match="invalid metadata filter key"):
            await found({key: 1}, config=None)
    assert await found(None) == newest_first  # nothing was changed by the attempts


# -- listing -----------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_list_across_threads_limit_and_before(make: Make) -> None:
    api = await make()
    all_ids: list[str] = []

    def metadata(t: str) -> Callable[[int], dict[str, Any]]:
        return lambda i: {"thread": t, "step": i}

    for t in ("t1", "t2", "t3"):
        all_ids += await api.chain(t, 3, metadata=metadata(t))
    newest = sorted(all_ids, reverse=True)
    assert [x.checkpoint["id"] for x in await api.list(None)] == newest
    assert [x.checkpoint["id"] for x in await api.list(None, limit=4)] == newest[:4]
    assert [x.checkpoint["id"] for x in await api.list(None, filter={"step": 2})] == [
        i for i in newest if i in {all_ids[2], all_ids[5], all_ids[8]}
    ]
    before = cfg("t2", "", all_ids[4])
    assert [x.checkpoint["id"] for x in await api.list(None, before=before)] == [
        i for i in newest if i < all_ids[4]
    ]
    assert [x.checkpoint["id"] for x in await api.list(cfg("t2"), before=before, limit=1)] == [all_ids[3]]
    assert await api.list(cfg("t1"), limit=0) == []
    with pytest.raises(ValueError, match="limit must be None or an int >= 0"):
        await api.list(cfg("t1"), limit=-1)
    listed = await api.list(None, limit=5)
    assert {x.config["configurable"]["thread_id"] for x in listed} <= {"t1", "t2", "t3"}
    assert all(x.metadata["thread"] == x.config["configurable"]["thread_id"] for x in listed)


# -- concurrency -------------------------------------------------------------------------------------


async def test_concurrent_puts_to_different_threads(make: Make) -> None:
    api = await make()
    threads = [f"thread-{i}" for i in range(8)]

    def values(t: str) -> Callable[[int], dict[str, Any]]:
        return lambda i: {"v": f"{t}:{i}"}

    if api.is_async:
        results = await asyncio.gather(*(api.chain(t, 5, values=values(t)) for t in threads))
    else:

        def one(t: str) -> list[str]:
            return asyncio.run(api.chain(t, 5, values=lambda i: {"v": f"{t}:{i}"}))

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(one, threads))
    for t, ids in zip(threads, results, strict=True):
        listed = await api.list(cfg(t))
        assert [x.checkpoint["id"] for x in listed] == list(reversed(ids))
        assert listed[0].checkpoint["channel_values"] == {"v": f"{t}:4"}
        assert [x.parent_config["configurable"]["checkpoint_id"] for x in listed[:-1]] == list(
            reversed(ids[:-1])
        )


# -- round trips -------------------------------------------------------------------------------------


async def test_round_trips_per_operation(make: Make) -> None:
    seen, hook = counting_hook()
    api = await make(hook=hook)
    ids = await api.chain("warm", 1, values=lambda i: {"a": i})  # container metadata cached
    await api.call("get_tuple", cfg("warm", "", ids[0]))
    saver = api.saver
    versions = {k: saver.get_next_version(None, None) for k in ("a", "b", "c", "messages")}
    cp1 = make_checkpoint({"a": 1, "b": [1, 2], "c": {"x": 1}, "messages": ["m"] * 20}, versions)
    stored = await api.call("put", cfg("t"), cp1, {"step": 1}, versions)

    async def round_trips(op: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
        seen.clear()
        result = await op()
        return len(seen), result

    new = {"a": saver.get_next_version(versions["a"], None)}
    cp2 = make_checkpoint({**cp1["channel_values"], "a": 2}, {**versions, **new})
    n_put, stored = await round_trips(lambda: api.call("put", stored, cp2, {"step": 2}, new))
    assert n_put == 1 <= 2  # one transactional batch: the new value and the checkpoint item

    n_latest, latest = await round_trips(lambda: api.call("get_tuple", cfg("t")))
    assert n_latest == 2 <= 2  # TOP 1 ... ORDER BY, then one query for values and writes
    assert latest.checkpoint["channel_values"]["a"] == 2 and latest.checkpoint["channel_values"]["b"] == [
        1,
        2,
    ]
    n_by_id, _ = await round_trips(lambda: api.call("get_tuple", cfg("t", "", cp1["id"])))
    assert n_by_id == 2  # point read, then the values query

    ids = await api.chain("many", 12, values=lambda i: {"a": i, "b": "same"})
    for cid in ids:
        await api.call("put_writes", cfg("many", "", cid), [("a", f"w-{cid}")], "task")
    n_list, listed = await round_trips(lambda: api.list(cfg("many"), limit=10))
    assert n_list == 2 <= 3  # one query for the 10 checkpoints, one for all their values and writes
    assert [t.checkpoint["id"] for t in listed] == list(reversed(ids))[:10]
    assert [t.pending_writes for t in listed] == [[("task", "a", f"w-{cid}")] for cid in reversed(ids[2:])]
    assert [t.checkpoint["channel_values"] for t in listed] == [
        {"a": i, "b": "same"} for i in range(11, 1, -1)
    ]
    n_writes, _ = await round_trips(
        lambda: api.call("put_writes", cfg("many", "", ids[0]), [("x", 1), ("y", 2)], "t2")
    )
    assert n_writes == 1


# -- the reducer ---------------------------------------------------------------------------------------


def _messages(n: int) -> list[Any]:
    msgs: list[Any] = [SystemMessage("sys", id="sys")]
    for i in range(n):
        msgs.append(HumanMessage(f"q{i}", id=f"h{i}"))
        msgs.append(AIMessage(f"a{i}", id=f"a{i}"))
    return msgs


async def test_reducer_reduces_on_put_and_wrapping_never_reduces_twice(make: Make) -> None:
    reducer = MessageReducer(min_messages=4, max_messages=8)
    reports: list[PutReduction] = []
    api = await make(reducer=reducer, on_reduce=reports.append)
    saver = api.saver
    assert saver.reducer is reducer and saver.messages_key == "messages"
    msgs = _messages(15)
    v = saver.get_next_version(None, None)
    cp = make_checkpoint({"messages": msgs, "n": 1}, {"messages": v, "n": v})
    await api.call("put", cfg("t"), cp, {}, {"messages": v, "n": v})
    stored = (await api.call("get_tuple", cfg("t"))).checkpoint["channel_values"]["messages"]
    assert [x.id for x in stored] == ["sys", "h13", "a13", "h14", "a14"]
    assert [x.id for x in stored] == [x.id for x in reducer.reduce(msgs).surviving]  # the same reduction
    assert len(cp["channel_values"]["messages"]) == 31  # the caller's checkpoint is not changed
    assert len(reports) == 1 and reports[0].stats is not None and reports[0].stats.messages_before == 31

    wrapper = ReducingCheckpointSaver(saver, reducer)
    assert wrapper.passthrough  # same reducer: the saver reduces, the wrapper passes puts through
    v2 = saver.get_next_version(v, None)
    cp2 = make_checkpoint({"messages": _messages(16), "n": 1}, {"messages": v2, "n": v})
    if api.is_async:
        await wrapper.aput(cfg("t", "", cp["id"]), cp2, {}, {"messages": v2})
    else:
        wrapper.put(cfg("t", "", cp["id"]), cp2, {}, {"messages": v2})
    assert len(reports) == 2  # one reduction per put, not two

    with pytest.raises(ValueError, match="already applies its own reducer"):
        ReducingCheckpointSaver(saver, MessageReducer(min_messages=2, max_messages=4))


async def test_wrapper_hands_its_reducer_to_a_saver_without_one(make: Make) -> None:
    api = await make()
    reducer = MessageReducer(min_messages=4, max_messages=8)
    reports: list[PutReduction] = []
    wrapper = ReducingCheckpointSaver(api.saver, reducer, on_reduce=reports.append)
    assert wrapper.passthrough and api.saver.reducer is reducer and api.saver.on_reduce is not None
    v = api.saver.get_next_version(None, None)
    cp = make_checkpoint({"messages": _messages(15)}, {"messages": v})
    if api.is_async:
        await wrapper.aput(cfg("t"), cp, {}, {"messages": v})
        got = await wrapper.aget_tuple(cfg("t"))
    else:
        wrapper.put(cfg("t"), cp, {}, {"messages": v})
        got = wrapper.get_tuple(cfg("t"))
    assert got is not None
    assert len(reports) == 1  # reduced once, by the saver
    assert [x.id for x in got.checkpoint["channel_values"]["messages"]] == ["sys", "h13", "a13", "h14", "a14"]


async def test_a_mistyped_messages_key_warns_once_per_saver(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentstate_reducer.checkpointers")
    api = await make(reducer=MessageReducer(min_messages=4, max_messages=8), messages_key="mesages")
    parent = None
    for _ in range(2):
        v = api.saver.get_next_version(None, None)
        cp = make_checkpoint({"messages": _messages(15), "n": 1}, {"messages": v, "n": v})
        await api.call("put", cfg("t", "", parent), cp, {}, {"messages": v, "n": v})
        parent = cp["id"]
    warned = [r.getMessage() for r in caplog.records if "messages_key=" in r.getMessage()]
    assert warned == [
        f"{type(api.saver).__name__}: a checkpoint of thread 't' has no channel 'mesages' (its channels: "
        "['messages', 'n']; messages are in ['messages']), so nothing is reduced; pass messages_key= "
        "naming the channel that holds the message list (warned once per saver)"
    ]
    stored = (await api.call("get_tuple", cfg("t"))).checkpoint["channel_values"]["messages"]
    assert len(stored) == 31


# -- prune, delete_for_runs ----------------------------------------------------------------------------


async def test_prune_keep_latest_collects_unused_values(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make()
    ids = await api.chain("t", 4, values=lambda i: {"a": i, "b": "constant"} if i == 0 else {"a": i})
    for cid in ids:
        await api.call("put_writes", cfg("t", "", cid), [("a", cid)], "task")
    await api.chain("other", 2, values=lambda i: {"a": i})
    await api.call("prune", ["t"], strategy="keep_latest")

    latest = await api.call("get_tuple", cfg("t"))
    assert latest.checkpoint["id"] == ids[-1] and latest.parent_config is None
    assert latest.checkpoint["channel_values"] == {"a": 3, "b": "constant"}
    assert latest.pending_writes == [("task", "a", ids[-1])]
    left = sorted(
        (i["kind"], i.get("channel"), i.get("checkpoint_id"))
        for i in raw_items(cosmos_server, cosmos_database)
        if i["thread_id"] == "t"
    )
    assert left == [
        ("blob", "a", None),
        ("blob", "b", None),
        ("checkpoint", None, ids[-1]),
        ("write", "a", ids[-1]),
    ]
    assert len(await api.list(cfg("other"))) == 2  # other threads untouched


async def test_delete_for_runs_relinks_to_the_nearest_kept_checkpoint(make: Make) -> None:
    api = await make()
    ids = await api.chain(
        "t", 6, values=lambda i: {"a": i}, metadata=lambda i: {"run_id": f"run-{i // 2}", "step": i}
    )
    await api.call("delete_for_runs", ["run-1"])
    listed = await api.list(cfg("t"))
    assert [x.checkpoint["id"] for x in listed] == [ids[5], ids[4], ids[1], ids[0]]
    parents = {
        x.checkpoint["id"]: (x.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        for x in listed
    }
    assert parents == {ids[5]: ids[4], ids[4]: ids[1], ids[1]: ids[0], ids[0]: None}
    assert [x.checkpoint["channel_values"] for x in listed] == [{"a": 5}, {"a": 4}, {"a": 1}, {"a": 0}]


# -- construction, setup, connection, secrets --------------------------------------------------------------


async def test_setup_is_idempotent_and_checks_the_container(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    api = await make(container="c1")
    await api.call("setup")
    await api.call("setup")
    with cosmos_server.client() as client:
        db = client.get_database_client(cosmos_database)
        props = db.get_container_client("c1").read()
        assert props["partitionKey"]["paths"] == ["/pk"]
        assert props["indexingPolicy"]["includedPaths"] == INDEXING_POLICY["includedPaths"]
        db.create_container("wrong", partition_key=PartitionKey(path="/thread_id"))
    wrong = await make(container="wrong", setup=False)
    with pytest.raises(
        ValueError, match=r"partitioned on \['/thread_id'\], but CosmosDBSaver needs \['/pk'\]"
    ):
        await wrong.call("setup")

    lazy = await make(container="created-on-first-use", setup=False)
    assert await lazy.call("get_tuple", cfg("t")) is None  # create_if_missing: the first use sets up
    strict = await make(container="missing", setup=False, create_if_missing=False)
    with pytest.raises(ContainerNotFoundError, match="run the saver's setup"):
        await strict.call("get_tuple", cfg("t"))
    await strict.call("setup")  # an explicit setup() still creates it
    assert await strict.call("get_tuple", cfg("t")) is None


def test_constructor_errors(cosmos_server: CosmosServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSMOSDB_ENDPOINT", raising=False)
    with pytest.raises(ValueError, match="no Cosmos DB endpoint: pass endpoint="):
        CosmosDBSaver(database_name="db", container_name="c")
    with pytest.raises(ValueError, match="database_name must be a non-empty str"):
        CosmosDBSaver(endpoint="https://localhost:1", credential="k")
    with cosmos_server.client() as client:
        container = client.get_database_client("db").get_container_client("c")
        with pytest.raises(ValueError, match="pass client= or container=, not both"):
            CosmosDBSaver("db", "c", client=client, container=container)
        with pytest.raises(ValueError, match="cannot be combined with client= or container="):
            CosmosDBSaver("db", "c", client=client, endpoint="https://x")
        with pytest.raises(TypeError, match=r"AsyncCosmosDBSaver needs an azure\.cosmos\.aio client"):
            AsyncCosmosDBSaver("db", "c", client=client)
        with pytest.raises(TypeError, match=r"reducer must be an agentstate_reducer\.MessageReducer"):
            CosmosDBSaver("db", "c", client=client, reducer=object())  # type: ignore[arg-type]
        assert repr(CosmosDBSaver(container=container)) == (
            "CosmosDBSaver(container='c', ttl=None, reducer=None, messages_key='messages')"
        )


@pytest.mark.slow
def test_seed_example_with_endpoint_and_key_from_the_environment(
    cosmos_server: CosmosServer, cosmos_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's constructor call, as written (database name: the test's fresh database)."""
    from tests.scenario_graph import build_graph, contract_violations, run_turns, thread_config

    monkeypatch.setenv("COSMOSDB_ENDPOINT", cosmos_server.endpoint)
    monkeypatch.setenv("COSMOSDB_KEY", cosmos_server.key)
    reducer = MessageReducer(min_messages=10, max_messages=20)
    saver = CosmosDBSaver(
        database_name=cosmos_database,
        container_name="checkpoints",
        reducer=reducer,  # applied before each checkpoint is stored
        messages_key="messages",  # which channel holds the message list (default)
    )
    with saver:
        graph = build_graph(saver)
        run_turns(graph, 8, thread_id="seed")
        stored = graph.get_state(thread_config("seed")).values["messages"]
    assert contract_violations(stored, max_len=20) == []
    # exactly what ReducingCheckpointSaver over InMemorySaver stores with the same reducer
    reference = build_graph(ReducingCheckpointSaver(InMemorySaver(), reducer))
    run_turns(reference, 8, thread_id="seed")
    expected = [x.id for x in reference.get_state(thread_config("seed")).values["messages"]]
    assert [x.id for x in stored] == expected
    assert expected[:2] == ["sys", "h6"] and expected[-1] == "ai7-final"


def test_no_key_means_azure_ad_through_default_azure_credential(
    cosmos_server: CosmosServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.identity import DefaultAzureCredential

    monkeypatch.setenv("COSMOSDB_ENDPOINT", cosmos_server.endpoint)
    monkeypatch.delenv("COSMOSDB_KEY", raising=False)
    credential = CosmosDBSaver._default_credential()
    assert isinstance(credential, DefaultAzureCredential)
    credential.close()
    saver = CosmosDBSaver(database_name="db", container_name="c")
    monkeypatch.setitem(sys.modules, "azure.identity", None)  # as if azure-identity were not installed
    with pytest.raises(ImportError, match="azure-identity is not installed"):
        saver.get_tuple(cfg("t"))


class StaticToken:
    """An Azure AD TokenCredential with a fixed token (the local server does not check tokens)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("static-token", int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo("static-token", int(time.time()) + 3600)


def test_token_credential(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    with CosmosDBSaver.from_conn_info(
        endpoint=cosmos_server.endpoint, credential=StaticToken(), database_name=cosmos_database
    ) as saver:
        ids = asyncio.run(Api(saver, False).chain("t", 2, values=lambda i: {"a": i}))
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert latest.checkpoint["id"] == ids[-1]


def test_key_never_in_repr_errors_or_logs(
    cosmos_server: CosmosServer, cosmos_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = base64.b64encode(b"a key the local server takes; it is not the emulator's key").decode()
    assert secret.endswith("=")
    core = secret.rstrip("=")
    caplog.set_level(logging.DEBUG)
    for bad in (core, secret + "!"):  # not base64: refused before any request, without the key
        with pytest.raises(ValueError, match="not a valid base64 account key") as info:
            CosmosDBSaver("db", "c", endpoint=cosmos_server.endpoint, credential=bad)
        assert core not in "".join(traceback.format_exception(info.value))
    with cosmos_server.client() as client:
        db = client.get_database_client(cosmos_database)
        db.create_container("wrong", partition_key=PartitionKey(path="/thread_id"))
    saver = CosmosDBSaver(cosmos_database, "wrong", endpoint=cosmos_server.endpoint, credential=secret)
    assert core not in repr(saver) and core not in str(vars(saver))
    with pytest.raises(ValueError, match="partitioned on") as info:  # requests were signed with it
        saver.get_tuple(cfg("t"))
    text = "".join(traceback.format_exception(info.value))
    assert core not in text
    assert "Traceback" in text
    stream = io.StringIO()
    for record in caplog.records:
        stream.write(record.getMessage())
    assert stream.getvalue() and core not in stream.getvalue()
    saver.close()
    with CosmosDBSaver.from_conn_info(
        endpoint=cosmos_server.endpoint, credential=cosmos_server.key, database_name="db"
    ) as ok:
        assert cosmos_server.key not in repr(ok)
        assert base64.b64decode(cosmos_server.key)  # a real key was used here


async def test_from_conn_info_owns_and_closes_its_client(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    with CosmosDBSaver.from_conn_info(
        endpoint=cosmos_server.endpoint, credential=cosmos_server.key, database_name=cosmos_database, ttl=60
    ) as saver:
        assert saver.ttl == 60 and saver.get_tuple(cfg("t")) is None
        client = saver._connection.client
    with pytest.raises(ValueError, match="transport has already been closed"):
        list(client.list_databases())

    async with AsyncCosmosDBSaver.from_conn_info(
        endpoint=cosmos_server.endpoint, credential=cosmos_server.key, database_name=cosmos_database, ttl=60
    ) as asaver:
        assert asaver.ttl == 60 and await asaver.aget_tuple(cfg("t")) is None
        aclient = asaver._connection.client
    assert aclient.client_connection.pipeline_client._pipeline._transport.session is None  # closed

    with cosmos_server.client() as given:  # a client passed in stays open
        with CosmosDBSaver(cosmos_database, "checkpoints", client=given) as borrowed:
            assert borrowed.get_tuple(cfg("t")) is None
        assert list(given.list_databases())


async def test_async_saver_sync_methods_run_on_its_loop(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    async with cosmos_server.async_client() as client:
        saver = AsyncCosmosDBSaver(cosmos_database, "checkpoints", client=client)
        ids = await Api(saver, True).chain("t", 2, values=lambda i: {"a": i})
        # graph.invoke on another thread: the sync methods run the async ones on the saver's loop
        got = await asyncio.to_thread(saver.get_tuple, cfg("t"))
        assert got is not None and got.checkpoint["id"] == ids[-1]
        listed = await asyncio.to_thread(lambda: [t.checkpoint["id"] for t in saver.list(cfg("t"))])
        assert listed == list(reversed(ids))
        with pytest.raises(
            asyncio.InvalidStateError, match="only allowed from a thread other than its event loop"
        ):
            saver.get_tuple(cfg("t"))


# -- errors raised where the cause is --------------------------------------------------------------

BAD_KEYS = [
    pytest.param("SeCrEtKeY-not-base64-x", id="urlsafe-chars"),
    pytest.param("SeCrEtKeYnotbase64x", id="bad-padding"),
    pytest.param("SeCrEtKeY~base64!!", id="foreign-chars"),
    pytest.param("SeCr EtKe YAAA", id="inner-spaces"),
    pytest.param("", id="empty"),
    pytest.param("   ", id="blank"),
]


def _no_secret(error: BaseException, secret: str) -> None:
    text = "".join(traceback.format_exception(error))
    assert not secret.strip() or secret not in text


@pytest.mark.parametrize("secret", BAD_KEYS)
async def test_a_key_that_is_not_base64_is_refused_at_construction(
    secret: str, cosmos_server: CosmosServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK would fail on the first request with ``binascii.Error: Incorrect padding``."""
    where = cosmos_server.endpoint
    message = r"the Cosmos DB key given as credential= is (not a valid base64 account key|empty)"
    for cls in (CosmosDBSaver, AsyncCosmosDBSaver):
        with pytest.raises(ValueError, match=message) as info:
            cls("db", "c", endpoint=where, credential=secret)
        _no_secret(info.value, secret)
    with pytest.raises(ValueError, match=message) as info:
        with CosmosDBSaver.from_conn_info(endpoint=where, credential=secret, database_name="db"):
            pass
    _no_secret(info.value, secret)
    with pytest.raises(ValueError, match=message) as info:
        async with AsyncCosmosDBSaver.from_conn_info(endpoint=where, credential=secret, database_name="db"):
            pass
    _no_secret(info.value, secret)
    if secret.strip():  # an empty or blank COSMOSDB_KEY means "no key": Azure AD sign-in
        monkeypatch.setenv("COSMOSDB_ENDPOINT", where)
        monkeypatch.setenv("COSMOSDB_KEY", secret)
        env_message = "the Cosmos DB key in COSMOSDB_KEY is not a valid base64 account key"
        with pytest.raises(ValueError, match=env_message) as info:
            CosmosDBSaver("db", "c")
        _no_secret(info.value, secret)


def test_a_valid_key_with_surrounding_whitespace_is_accepted(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    with CosmosDBSaver.from_conn_info(
        endpoint=cosmos_server.endpoint, credential=f" {cosmos_server.key}\n", database_name=cosmos_database
    ) as saver:
        assert saver.get_tuple(cfg("t")) is None


BAD_NAMES = [
    pytest.param("a/b", r"contains '/'", id="slash"),
    pytest.param("a\\b", r"contains '\\\\'", id="backslash"),
    pytest.param("a?b", r"contains '\?'", id="question-mark"),
    pytest.param("a#b", r"contains '#'", id="hash"),
    pytest.param("name ", "ends with a space", id="trailing-space"),
    pytest.param("   ", "is blank", id="blank"),
    pytest.param("x" * 256, "is 256 characters long; the limit is 255", id="too-long"),
]


@pytest.mark.parametrize(("name", "why"), BAD_NAMES)
@pytest.mark.parametrize("field", ["database_name", "container_name"])
def test_database_and_container_names_are_checked_at_construction(
    name: str, why: str, field: str, cosmos_server: CosmosServer
) -> None:
    """A '/' used to reach the service as another URL path ("no route")."""
    names: dict[str, Any] = {"database_name": "db", "container_name": "c", field: name}
    message = rf"{field} {re.escape(repr(name))} is not a valid Cosmos DB name: it {why}"
    with cosmos_server.client() as client:
        with pytest.raises(ValueError, match=message):
            CosmosDBSaver(**names, client=client)
    for cls in (CosmosDBSaver, AsyncCosmosDBSaver):
        with pytest.raises(ValueError, match=message):
            cls(**names, endpoint=cosmos_server.endpoint, credential=cosmos_server.key)
    with pytest.raises(ValueError, match=message):
        with CosmosDBSaver.from_conn_info(
            endpoint=cosmos_server.endpoint, credential=cosmos_server.key, **names
        ):
            pass


async def test_names_at_the_limits_work(make: Make) -> None:
    for name in ("x" * 255, "ünï cødé ☃ !$%&'()*+,;=@[]", " leading space", "a.b-c_d"):
        api = await make(container=name)
        [cid] = await api.chain("t", 1, values=lambda i: {"a": i})
        got = await api.call("get_tuple", cfg("t"))
        assert got.checkpoint["id"] == cid


async def test_a_deleted_container_names_itself_and_says_to_run_setup(
    make: Make, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """Every call used to answer ``404 {"message":""}``; a point read answered None as if the
    checkpoint did not exist."""
    api = await make(container="doomed")
    ids = await api.chain("t", 2, values=lambda i: {"a": i})
    assert await api.call("get_tuple", cfg("t", "", "no-such-checkpoint")) is None  # an item miss
    with cosmos_server.client() as client:
        client.get_database_client(cosmos_database).delete_container("doomed")

    message = (
        rf"Cosmos DB container 'doomed' does not exist in database '{cosmos_database}' "
        r"\(deleted, or never created\): run the saver's setup\(\) to create it"
    )
    cp = make_checkpoint({"a": 9}, {"a": "9"})
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: api.call("get_tuple", cfg("t")),
        lambda: api.call("get_tuple", cfg("t", "", ids[0])),  # a point read
        lambda: api.list(cfg("t")),
        lambda: api.list(None, limit=3),
        lambda: api.call("put", cfg("t", "", ids[-1]), cp, {"step": 3}, {"a": "9"}),
        lambda: api.call("put_writes", cfg("t", "", ids[-1]), [("a", 1)], "task"),
        lambda: api.call("delete_thread", "t"),
        lambda: api.call("copy_thread", "t", "u"),
        lambda: api.call("prune", ["t"]),
        lambda: api.call("delete_for_runs", ["run-1"]),
    ]
    for call in calls:
        with pytest.raises(ContainerNotFoundError, match=message) as info:
            await call()
        assert isinstance(info.value, LookupError)
        assert (info.value.database, info.value.container) == (cosmos_database, "doomed")
        assert isinstance(info.value.__cause__, exceptions.CosmosResourceNotFoundError)

    await api.call("setup")  # as the error says: the container is back, empty
    assert await api.call("get_tuple", cfg("t")) is None
    await api.chain("t", 1, values=lambda i: {"a": i})

    with cosmos_server.client() as client:
        client.delete_database(cosmos_database)
    with pytest.raises(
        ContainerNotFoundError,
        match=(
            rf"Cosmos DB database '{cosmos_database}' does not exist \(deleted, or never created\), so "
            r"neither does its container 'doomed': run the saver's setup\(\) to create them"
        ),
    ):
        await api.call("get_tuple", cfg("t"))
    await api.call("setup")
    assert await api.call("get_tuple", cfg("t")) is None


async def test_a_missing_container_without_create_if_missing(make: Make) -> None:
    strict = await make(container="never-made", setup=False, create_if_missing=False)
    with pytest.raises(ContainerNotFoundError, match=r"container 'never-made' does not exist in database"):
        await strict.call("get_tuple", cfg("t"))
    with pytest.raises(ContainerNotFoundError, match=r"container 'never-made' does not exist in database"):
        await strict.call("get_tuple", cfg("t", "", "some-id"))


async def test_a_deleted_container_given_as_container(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    """A saver given only a ContainerProxy cannot create it: the error says how to."""
    with cosmos_server.client() as client:
        db = client.get_database_client(cosmos_database)
        db.create_container("given", partition_key=PartitionKey(path="/pk"))
        saver = CosmosDBSaver(container=db.get_container_client("given"))
        assert saver.get_tuple(cfg("t")) is None
        db.delete_container("given")
        with pytest.raises(
            ContainerNotFoundError,
            match=(
                r"Cosmos DB container 'given' does not exist \(deleted, or never created\): create it "
                r"with partition key '/pk', or pass client= and database_name= so setup\(\) can"
            ),
        ) as info:
            saver.get_tuple(cfg("t"))
        assert (info.value.database, info.value.container) == (None, "given")
