"""keep_last, prune and sweep on CosmosDBSaver and AsyncCosmosDBSaver, on the local Cosmos DB
server (``tests/cosmos_service.py``): the retention rules of ``checkpointers.retention``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.types import Command

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.cosmosdb import AsyncCosmosDBSaver, CosmosDBSaver
from checkpointers.cosmosdb import _mapping as m
from checkpointers.retention import asweep, sweep
from tests.cosmos_service import CosmosServer
from tests.scenario_graph import arun_turns, build_graph, run_turns, thread_config, turn_ids

pytestmark = [pytest.mark.cosmos, pytest.mark.slow]


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=4, max_messages=8)


@contextmanager
def sync_saver(server: CosmosServer, database: str, container: str = "c", **kwargs: Any) -> Iterator[Any]:
    with server.client() as client:
        saver = CosmosDBSaver(database, container, client=client, **kwargs)
        saver.setup()
        yield saver


@asynccontextmanager
async def async_saver(
    server: CosmosServer, database: str, container: str = "c", **kwargs: Any
) -> AsyncIterator[Any]:
    async with server.async_client() as client:
        saver = AsyncCosmosDBSaver(database, container, client=client, **kwargs)
        await saver.asetup()
        yield saver


def items(server: CosmosServer, database: str, thread_id: str, container: str = "c") -> list[dict[str, Any]]:
    """Every item of the thread, read with a client of its own."""
    with server.client() as client:
        proxy = client.get_database_client(database).get_container_client(container)
        return list(proxy.query_items(
            "SELECT * FROM c WHERE c.thread_id = @t", parameters=[{"name": "@t", "value": thread_id}],
            partition_key=m.partition_key(thread_id),
        ))


def checkpoints_by_ns(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in rows:
        if row["kind"] == "checkpoint":
            out.setdefault(row["checkpoint_ns"], []).append(row["checkpoint_id"])
    return {ns: sorted(ids) for ns, ids in out.items()}


def assert_consistent(rows: list[dict[str, Any]]) -> None:
    """Every value a stored checkpoint reads is stored, and no value is left that none reads.
    (Writes are not checked: by the shared rules they go only with their checkpoint, and a step's
    writes can commit after retention dropped it; deleting the thread removes them.)"""
    checkpoints = [r for r in rows if r["kind"] == "checkpoint"]
    read = {ref for r in checkpoints for ref in r.get("blobs") or ()}
    stored = {r["ref"] for r in rows if r["kind"] == "blob"}
    assert stored <= read, f"unreferenced values left: {sorted(stored - read)[:3]}"


def test_keep_last_keeps_exactly_the_newest_through_a_graph(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    kwargs: dict[str, Any] = {"reducer": reducer(), "keep_last": 2, "retention_every": 1}
    with sync_saver(cosmos_server, cosmos_database, **kwargs) as saver:
        graph = build_graph(saver)
        run_turns(graph, 6, thread_id="a")
        rows = items(cosmos_server, cosmos_database, "a")
        stored = checkpoints_by_ns(rows)
        assert list(stored) == [""] and len(stored[""]) == 2
        history = sorted(s.config["configurable"]["checkpoint_id"]
                         for s in graph.get_state_history(thread_config("a")))
        assert history == stored[""]
        assert_consistent(rows)
        # the oldest kept checkpoint's parent went: its link is cleared, the history stays walkable
        oldest = saver.get_tuple({"configurable": {"thread_id": "a", "checkpoint_id": stored[""][0]}})
        assert oldest is not None and oldest.parent_config is None
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0 and stats.checkpoints_deleted > 0
        assert stats.blobs_deleted > 0 and stats.writes_deleted > 0
        run_turns(graph, 1, thread_id="a", start=6)
        ids = [msg.id for msg in graph.get_state(thread_config("a")).values["messages"]]
        assert ids[-1] == "ai6-final" and len(ids) <= 8


def test_keep_last_none_and_other_threads(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    with sync_saver(cosmos_server, cosmos_database, reducer=reducer()) as bare:
        run_turns(build_graph(bare), 3, thread_id="bare")
        assert bare.retention_stats is None
    before = items(cosmos_server, cosmos_database, "bare")
    assert len(checkpoints_by_ns(before)[""]) > 6
    kwargs: dict[str, Any] = {"reducer": reducer(), "keep_last": 1, "retention_every": 1}
    with sync_saver(cosmos_server, cosmos_database, **kwargs) as saver:
        graph = build_graph(saver)
        for turn in range(3):  # parallel threads, interleaved
            run_turns(graph, 1, thread_id="x", start=turn)
            run_turns(graph, 1, thread_id="y", start=turn)
    after = items(cosmos_server, cosmos_database, "bare")
    assert sorted((r["id"], r["_etag"]) for r in after) == sorted((r["id"], r["_etag"]) for r in before)
    for thread in ("x", "y"):
        assert len(checkpoints_by_ns(items(cosmos_server, cosmos_database, thread))[""]) == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_subgraphs_called_many_times_keep_only_what_kept_roots_need(
    kind: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    kwargs: dict[str, Any] = {"reducer": reducer(), "keep_last": 2, "retention_every": 1}
    if kind == "sync":
        with sync_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            graph = build_graph(saver, as_subgraph=True)
            run_turns(graph, 6, thread_id="s")
            tuples = {ns: saver.get_tuple({"configurable": {"thread_id": "s", "checkpoint_ns": ns}})
                      for ns in checkpoints_by_ns(items(cosmos_server, cosmos_database, "s"))}
            run_turns(graph, 1, thread_id="s", start=6)
            last = graph.get_state(thread_config("s")).values["messages"][-1].id
    else:
        async with async_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            graph = build_graph(saver, as_subgraph=True)
            await arun_turns(graph, 6, thread_id="s")
            tuples = {ns: await saver.aget_tuple({"configurable": {"thread_id": "s", "checkpoint_ns": ns}})
                      for ns in checkpoints_by_ns(items(cosmos_server, cosmos_database, "s"))}
            await arun_turns(graph, 1, thread_id="s", start=6)
            last = (await graph.aget_state(thread_config("s"))).values["messages"][-1].id
    assert last == "ai6-final"
    rows = items(cosmos_server, cosmos_database, "s")
    stored = checkpoints_by_ns(rows)
    kept_roots = set(stored.pop(""))
    assert len(kept_roots) == 2
    assert 1 <= len(stored) <= 2  # seven calls were made; only those of the two kept roots remain
    for ns, ids in stored.items():
        assert ns.startswith("agent_loop:") and len(ids) == 1, (ns, ids)
        row = next(r for r in rows if r["kind"] == "checkpoint" and r["checkpoint_id"] == ids[0])
        assert row["metadata"]["parents"][""] in kept_roots
    assert_consistent(rows)
    assert all(t is not None for t in tuples.values())


@pytest.mark.parametrize("as_subgraph", [False, True], ids=["root", "subgraph"])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_interrupt_and_resume_across_a_prune(
    kind: str, as_subgraph: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    kwargs: dict[str, Any] = {"reducer": reducer(), "keep_last": 1, "retention_every": 1}
    config = thread_config("i")
    if kind == "sync":
        with sync_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            graph = build_graph(saver, approve_tools=True, as_subgraph=as_subgraph)
            for turn in range(3):
                run_turns(graph, 1, thread_id="i", start=turn)  # stops at the tool approval
                assert graph.get_state(config, subgraphs=True).interrupts, turn
                saver.prune(["i"], strategy="keep_latest")
                out = graph.invoke(Command(resume=True), config)
                assert out["messages"][-1].id == f"ai{turn}-final"
            ids = [msg.id for msg in graph.get_state(config).values["messages"]]
    else:
        async with async_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            graph = build_graph(saver, approve_tools=True, as_subgraph=as_subgraph)
            for turn in range(3):
                await arun_turns(graph, 1, thread_id="i", start=turn)
                assert (await graph.aget_state(config, subgraphs=True)).interrupts, turn
                await saver.aprune(["i"], strategy="keep_latest")
                out = await graph.ainvoke(Command(resume=True), config)
                assert out["messages"][-1].id == f"ai{turn}-final"
            ids = [msg.id for msg in (await graph.aget_state(config)).values["messages"]]
    assert ids[-len(turn_ids(2)):] == turn_ids(2)
    rows = items(cosmos_server, cosmos_database, "i")
    assert len(checkpoints_by_ns(rows)[""]) <= 2
    assert_consistent(rows)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_item_count_stays_flat_with_keep_last_2(
    kind: str, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    counts: list[int] = []

    def count(turn: int, out: Any) -> None:
        counts.append(len(items(cosmos_server, cosmos_database, "flat")))

    kwargs: dict[str, Any] = {"reducer": reducer(), "keep_last": 2}  # retention every 8 puts
    if kind == "sync":
        with sync_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            run_turns(build_graph(saver), 60, thread_id="flat", after_turn=count)
    else:
        async with async_saver(cosmos_server, cosmos_database, **kwargs) as saver:
            graph = build_graph(saver)
            for turn in range(60):
                await arun_turns(graph, 1, thread_id="flat", start=turn)
                count(turn, None)
    early, late = max(counts[10:20]), max(counts[50:60])
    assert late <= early * 1.1, (early, late, counts)
    assert saver.retention_stats.failures == 0


class FailingDeletes(CosmosDBSaver):
    """A CosmosDBSaver whose delete batches fail while ``block`` is set (the service stays real)."""

    block = True

    def _execute(self, op: m.Op) -> Any:
        if self.block and isinstance(op, m.Batch) and any(kind == "delete" for kind, _ in op.operations):
            raise RuntimeError("deletes blocked")
        return super()._execute(op)


def test_a_failing_deletion_never_fails_a_put_and_is_retried(
    cosmos_server: CosmosServer, cosmos_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    with cosmos_server.client() as client:
        saver = FailingDeletes(cosmos_database, "c", client=client, reducer=reducer(), keep_last=1,
                               retention_every=2)
        graph = build_graph(saver)
        with caplog.at_level(logging.WARNING, logger="agentstate_reducer.checkpointers"):
            run_turns(graph, 2, thread_id="f")  # every put succeeds
        stats = saver.retention_stats
        assert stats is not None and stats.failures > 0 and stats.checkpoints_deleted == 0
        assert "deletes blocked" in (stats.last_error or "")
        assert any("retention of thread 'f' failed" in r.getMessage() for r in caplog.records)
        assert len(checkpoints_by_ns(items(cosmos_server, cosmos_database, "f"))[""]) > 2
        saver.block = False
        run_turns(graph, 1, thread_id="f", start=2)  # retried at the next put
        assert len(checkpoints_by_ns(items(cosmos_server, cosmos_database, "f"))[""]) <= 2
        assert stats.checkpoints_deleted > 0


def test_keep_last_is_validated(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    with cosmos_server.client() as client:
        with pytest.raises(ValueError, match="keep_last must be >= 1"):
            CosmosDBSaver(cosmos_database, "c", client=client, keep_last=0)
        with pytest.raises(TypeError, match="keep_last must be an int >= 1"):
            CosmosDBSaver(cosmos_database, "c", client=client, keep_last="2")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="retention_every must be an int >= 1"):
            CosmosDBSaver(cosmos_database, "c", client=client, keep_last=2, retention_every=0)


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "wrapped"])
def test_sweep_dry_run_predicts_the_run_and_reports_bytes(
    wrapped: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    shared = reducer()
    with sync_saver(cosmos_server, cosmos_database, reducer=shared) as inner:
        saver: Any = ReducingCheckpointSaver(inner, shared) if wrapped else inner
        graph = build_graph(saver)
        for thread in ("p", "q"):
            run_turns(graph, 4, thread_id=thread)
        dry = sweep(saver, keep_last=1, dry_run=True)
        assert dry.checkpoints_deleted > 0 and sorted(dry.threads_trimmed) == ["p", "q"]
        real = sweep(saver, keep_last=1)
        assert (real.checkpoints_deleted, real.writes_deleted, real.blobs_deleted, real.threads_trimmed) == (
            dry.checkpoints_deleted, dry.writes_deleted, dry.blobs_deleted, dry.threads_trimmed)
        assert real.bytes_before == dry.bytes_before and real.bytes_before is not None
        assert real.bytes_after is not None and real.bytes_after < real.bytes_before
        again = sweep(saver, keep_last=1)  # idempotent
        assert again.checkpoints_deleted == 0 and again.bytes_after == real.bytes_after
        for thread in ("p", "q"):
            rows = items(cosmos_server, cosmos_database, thread)
            assert len(checkpoints_by_ns(rows)[""]) == 1
            assert_consistent(rows)
            assert graph.get_state(thread_config(thread)).values["messages"][-1].id == "ai3-final"
        # whole idle threads: nothing is older than a day; everything is older than a millisecond
        assert sweep(saver, older_than=timedelta(days=1)).threads_deleted == []
        gone = sweep(saver, older_than=timedelta(milliseconds=1))
        assert sorted(gone.threads_deleted) == ["p", "q"]
        assert items(cosmos_server, cosmos_database, "p") == []


async def test_asweep_and_aprune_on_the_async_saver(
    cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    async with async_saver(cosmos_server, cosmos_database, reducer=reducer()) as saver:
        graph = build_graph(saver)
        await arun_turns(graph, 3, thread_id="p")
        await arun_turns(graph, 3, thread_id="q")
        dry = await asweep(saver, keep_last=2, dry_run=True)
        real = await asweep(saver, keep_last=2)
        assert (real.checkpoints_deleted, real.writes_deleted, real.blobs_deleted) == (
            dry.checkpoints_deleted, dry.writes_deleted, dry.blobs_deleted)
        assert real.checkpoints_deleted > 0
        assert real.bytes_after is not None and real.bytes_before is not None
        assert real.bytes_after < real.bytes_before
        await saver.aprune(["q"], strategy="delete")
        assert items(cosmos_server, cosmos_database, "q") == []
        rows = items(cosmos_server, cosmos_database, "p")
        assert len(checkpoints_by_ns(rows)[""]) == 2
        assert_consistent(rows)


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "wrapped"])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_conformance_full_with_keep_last_4(
    kind: str, wrapped: bool, cosmos_server: CosmosServer, cosmos_database: str
) -> None:
    counter = iter(range(100))
    savers: list[Any] = []

    def wrap(saver: Any) -> Any:
        out = ReducingCheckpointSaver(saver, reducer(), keep_last=4, retention_every=1) if wrapped else saver
        savers.append(out)
        return out

    async def factory() -> AsyncIterator[Any]:
        container = f"keep4-{next(counter)}"
        # retention at every put: the strictest schedule; keep_last on the saver or on the wrapper
        own: dict[str, Any] = {} if wrapped else {"keep_last": 4, "retention_every": 1}
        if kind == "sync":
            with sync_saver(cosmos_server, cosmos_database, container, **own) as saver:
                yield wrap(saver)
        else:
            async with async_saver(cosmos_server, cosmos_database, container, **own) as saver:
                yield wrap(saver)

    report = await validate(checkpointer_test(name=f"keep_last=4 {kind} cosmos")(factory))
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    assert sum(s.retention_stats.runs for s in savers) > 0
    assert all(s.retention_stats.failures == 0 for s in savers)


# -- the translation of retention operations into Cosmos DB ops (pure: no service) ----------------


def _row(ns: str, cid: str, parent: str | None, blobs: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": f"c!{ns}!{cid}", "checkpoint_ns": ns, "checkpoint_id": cid,
            "parent_checkpoint_id": parent, "blobs": blobs, **extra}


def test_retention_flow_plans_by_the_shared_rules_and_batches_its_deletes() -> None:
    from checkpointers import retention as r
    from checkpointers.cosmosdb._retention import retention_flow

    checkpoints = [
        _row("", "1", None, ["a1", "b1"]),
        _row("", "2", "1", ["a2", "b1"]),
        _row("", "3", "2", ["a3", "b1"]),
        _row("node:t1", "7", None, ["s1"], root="1"),  # a call from a root checkpoint not kept
        _row("node:t2", "8", None, ["s2"], root="3"),  # one from the kept root checkpoint
        _row("node:t3", "9", None, ["s3"], root="unsaved"),  # its root is not stored yet: kept
    ]
    values = [{"id": ref, "kind": "blob", "checkpoint_ns": "", "ref": ref, "part": 0}
              for ref in ("a1", "a2", "a3", "b1")]
    values += [{"id": "a1!1", "kind": "blob", "checkpoint_ns": "", "ref": "a1", "part": 1}]  # a chunk
    values += [{"id": f"s{i}", "kind": "blob", "checkpoint_ns": f"node:t{i}", "ref": f"s{i}", "part": 0}
               for i in (1, 2, 3)]
    writes = [{"id": "w1", "kind": "write", "checkpoint_ns": "", "checkpoint_id": "1", "part": 0,
               "channel": "messages"},
              {"id": "w1!1", "kind": "write", "checkpoint_ns": "", "checkpoint_id": "1", "part": 1}]
    flow = retention_flow(r.retain_flow("t", 1), JsonSerde())
    batches: list[m.Batch] = []
    op = next(flow)
    try:
        while True:
            if isinstance(op, m.Query):
                assert op.pk == "t" and ("@thread", "t") in op.params
                if op.sql.startswith("SELECT c.id, c.blobs"):  # read again before values go
                    op = flow.send(checkpoints)
                else:
                    op = flow.send(checkpoints if "kind = 'checkpoint'" in op.sql else values + writes)
            else:
                assert isinstance(op, m.Batch) and op.pk == "t" and len(op.operations) <= 100
                batches.append(op)
                op = flow.send(None)
    except StopIteration as done:
        deleted = done.value
    assert (deleted.checkpoints, deleted.writes, deleted.blobs) == (3, 1, 3)
    first, second = batches
    assert [args[0] for kind, args in first.operations if kind == "delete"] == [
        "w1", "w1!1", "c!!1", "c!!2", "c!node:t1!7"]
    assert [(args[0], args[1][0]["value"]) for kind, args in first.operations if kind == "patch"] == [
        ("c!!3", None)]
    assert sorted(args[0] for _, args in second.operations) == ["a1", "a1!1", "a2", "s1"]
    assert first.missing_ok and second.missing_ok


class JsonSerde:
    """A plain-JSON SerializerProtocol, so the blob values here can be written by hand."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        import json

        return "json", json.dumps(obj).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        import json

        return json.loads(data[1])


def test_prune_arguments(cosmos_server: CosmosServer, cosmos_database: str) -> None:
    with sync_saver(cosmos_server, cosmos_database) as saver:
        with pytest.raises(ValueError, match="unknown prune strategy 'all'"):
            saver.prune(["t"], strategy="all")
        with pytest.raises(TypeError, match="not a single str"):
            saver.prune("t", strategy="delete")


def test_docstring_examples() -> None:
    import doctest

    from checkpointers.cosmosdb import _retention

    result = doctest.testmod(_retention)
    assert result.failed == 0 and result.attempted == 2
