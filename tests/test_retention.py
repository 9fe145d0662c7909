"""Retention planning (pure) and the wrapper's keep_last / prune on real savers."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import (
    StoredCheckpoint,
    StoredWrites,
    ThreadState,
    plan_retention,
    validate_keep_last,
)
from tests.scenario_graph import build_graph, open_saver, run_turns, thread_config, turn_ids


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=4, max_messages=8)


# -- the plan -------------------------------------------------------------------------------------


def root(i: int, **versions: str) -> StoredCheckpoint:
    return StoredCheckpoint("", f"r{i:02d}", versions=versions)


def call(ns: str, i: int, root_id: str | None) -> StoredCheckpoint:
    return StoredCheckpoint(ns, f"s{i:02d}", root=root_id)


def test_plan_keeps_the_newest_root_checkpoints_with_their_writes() -> None:
    thread = ThreadState(
        "t",
        tuple(root(i) for i in range(5)),
        (StoredWrites("", "r00", 2), StoredWrites("", "r03", 1), StoredWrites("", "r04", 3),
         StoredWrites("", "r99", 5)),  # writes of a checkpoint not stored yet: never counted
    )
    plan = plan_retention(thread, keep_last=2)
    assert plan.checkpoints == {"": ("r02", "r01", "r00")}
    assert plan.kept == {"": ("r04", "r03")}
    assert plan.writes == 2


def test_plan_subgraph_calls_follow_their_root_checkpoint() -> None:
    thread = ThreadState(
        "t",
        (
            *(root(i) for i in range(2, 6)),  # r02..r05; r00 and r01 were deleted earlier
            call("a:1", 1, "r01"), call("a:1", 2, "r01"),  # root deleted earlier: dropped
            call("a:2", 3, "r02"), call("a:2", 4, "r02"),  # root deleted now: dropped
            call("a:3", 5, "r04"), call("a:3", 6, "r04"),  # root kept: its latest only
            call("a:4", 7, "r03"), call("a:4", 8, "r03"),  # root deleted, but interrupted: latest
            call("a:5", 9, "r09"), call("a:5", 10, "r09"),  # root not saved yet: untouched
            call("b", 11, None), call("b", 12, None), call("b", 13, None),  # no call: keep_last
            call("c:1", 14, None), call("c:1", 15, None), call("c:1", 16, None),  # no link: keep_last
        ),
        (StoredWrites("a:4", "s08", 1, interrupt=True),),
    )
    plan = plan_retention(thread, keep_last=2)
    assert plan.kept == {
        "": ("r05", "r04"), "a:1": (), "a:2": (), "a:3": ("s06",), "a:4": ("s08",),
        "a:5": ("s10", "s09"), "b": ("s13", "s12"), "c:1": ("s16", "s15"),
    }
    assert plan.checkpoints == {
        "": ("r03", "r02"), "a:1": ("s02", "s01"), "a:2": ("s04", "s03"), "a:3": ("s05",),
        "a:4": ("s07",), "b": ("s11",), "c:1": ("s14",),
    }


def test_plan_never_deletes_protected_checkpoints() -> None:
    thread = ThreadState("t", tuple(root(i) for i in range(4)))
    plan = plan_retention(thread, keep_last=1, protect={("", "r01")})
    assert plan.kept == {"": ("r03", "r01")}
    assert plan.checkpoints == {"": ("r02", "r00")}


def test_plan_deletes_only_blobs_no_kept_checkpoint_references() -> None:
    thread = ThreadState("t", (
        root(0, messages="1", other="1"),
        root(1, messages="2", other="1"),
        root(2, messages="2", other="2"),  # shares messages v2 with r01
        root(3, messages="3", other="2"),
    ))
    plan = plan_retention(thread, keep_last=2)
    assert plan.checkpoints == {"": ("r01", "r00")}
    # messages v2 and other v2 are still referenced by r02/r03
    assert plan.blobs == {("", "messages"): ("1",), ("", "other"): ("1",)}


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, ValueError, "keep_last must be >= 1"),
        (-3, ValueError, "keep_last must be >= 1"),
        (True, TypeError, "keep_last must be an int >= 1 .* got bool True"),
        ("2", TypeError, "got str '2'"),
        (2.0, TypeError, "got float 2.0"),
    ],
)
def test_keep_last_is_validated(value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        validate_keep_last(value)
    with pytest.raises(error, match=message):
        ReducingCheckpointSaver(InMemorySaver(), reducer(), keep_last=value)


def test_retention_every_and_unsupported_savers_are_refused() -> None:
    with pytest.raises(ValueError, match="retention_every must be an int >= 1"):
        ReducingCheckpointSaver(InMemorySaver(), reducer(), keep_last=2, retention_every=0)

    class Custom(BaseCheckpointSaver[int]):
        pass

    with pytest.raises(TypeError, match=r"keep_last is supported on InMemorySaver.*Custom has no retention"):
        ReducingCheckpointSaver(Custom(), reducer(), keep_last=2)
    assert ReducingCheckpointSaver(Custom(), reducer()).keep_last is None  # the default: no change


# -- on real savers, through a compiled graph -----------------------------------------------------

SYNC = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def saver_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def open_(kind: str) -> Any:
        pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
        return open_saver(kind, path=tmp_path / "retention.db", pg_url=pg_url)

    return open_


def namespaces(saver: Any, thread_id: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for tup in saver.list(thread_config(thread_id)):
        out.setdefault(tup.config["configurable"]["checkpoint_ns"], []).append(tup)
    return out


def all_namespaces(saver: Any, thread_id: str) -> dict[str, list[str]]:
    """Every namespace of the thread, read from the saver's own storage (list() sees one namespace
    per call on some savers)."""
    inner = saver.inner
    if isinstance(inner, InMemorySaver):
        return {ns: sorted(cps) for ns, cps in inner.storage.get(thread_id, {}).items() if cps}
    if isinstance(inner, SqliteSaver):
        rows = inner.conn.execute(
            "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?", (thread_id,)
        ).fetchall()
    else:
        with inner._cursor() as cur:
            cur.execute(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s", (thread_id,)
            )
            rows = [(r["checkpoint_ns"], r["checkpoint_id"]) for r in cur.fetchall()]
    out: dict[str, list[str]] = {}
    for ns, cid in rows:
        out.setdefault(ns, []).append(cid)
    return {ns: sorted(ids) for ns, ids in out.items()}


@pytest.mark.parametrize("kind", SYNC)
def test_keep_last_through_a_graph_keeps_exactly_the_newest(kind: str, saver_factory: Any) -> None:
    with saver_factory(kind) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2, retention_every=1)
        graph = build_graph(saver)
        run_turns(graph, 6, thread_id="a")
        roots = all_namespaces(saver, "a")
        assert list(roots) == [""] and len(roots[""]) == 2
        # what remains is the newest two of what the graph wrote: its history's head
        history = [s.config["configurable"]["checkpoint_id"]
                   for s in graph.get_state_history(thread_config("a"))]
        assert sorted(history) == roots[""]
        stats = saver.retention_stats
        assert stats is not None and stats.failures == 0 and stats.checkpoints_deleted > 0
        # the thread goes on from its latest checkpoint
        run_turns(graph, 1, thread_id="a", start=6)
        ids = [m.id for m in graph.get_state(thread_config("a")).values["messages"]]
        assert ids[-1] == "ai6-final" and len(ids) <= 8


@pytest.mark.parametrize("kind", SYNC)
def test_keep_last_none_changes_nothing(kind: str, saver_factory: Any) -> None:
    with saver_factory(kind) as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        graph = build_graph(saver)
        run_turns(graph, 3, thread_id="a")
        assert saver.retention_stats is None
        # 3 turns x (input + agent + tools + agent + exit) root checkpoints, nothing deleted
        assert len(all_namespaces(saver, "a")[""]) == len(list(graph.get_state_history(thread_config("a"))))
        assert len(all_namespaces(saver, "a")[""]) > 6


@pytest.mark.parametrize("kind", SYNC)
def test_other_threads_are_never_touched(kind: str, saver_factory: Any) -> None:
    with saver_factory(kind) as inner:
        bare_graph = build_graph(inner)
        run_turns(bare_graph, 3, thread_id="bare")
        before = all_namespaces(ReducingCheckpointSaver(inner, reducer()), "bare")
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=1, retention_every=1)
        graph = build_graph(saver)
        for turn in range(4):  # parallel threads, interleaved
            run_turns(graph, 1, thread_id="x", start=turn)
            run_turns(graph, 1, thread_id="y", start=turn)
        assert all_namespaces(saver, "bare") == before
        assert len(all_namespaces(saver, "x")[""]) == 1 and len(all_namespaces(saver, "y")[""]) == 1


@pytest.mark.parametrize("kind", SYNC)
def test_subgraphs_called_many_times_keep_only_what_kept_roots_need(kind: str, saver_factory: Any) -> None:
    with saver_factory(kind) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=2, retention_every=1)
        graph = build_graph(saver, as_subgraph=True)
        run_turns(graph, 6, thread_id="s")
        stored = all_namespaces(saver, "s")
        kept_roots = set(stored.pop(""))
        assert len(kept_roots) == 2
        for ns, ids in stored.items():
            assert ns.startswith("agent_loop:")
            assert len(ids) == 1, (ns, ids)
            conf: RunnableConfig = {
                "configurable": {"thread_id": "s", "checkpoint_ns": ns, "checkpoint_id": ids[0]}
            }
            tup = saver.get_tuple(conf)
            assert tup is not None and tup.metadata["parents"][""] in kept_roots
        # six calls were made; at most the ones started from the two kept roots remain
        assert len(stored) <= 2
        run_turns(graph, 1, thread_id="s", start=6)
        assert graph.get_state(thread_config("s")).values["messages"][-1].id == "ai6-final"


@pytest.mark.parametrize("as_subgraph", [False, True], ids=["root", "subgraph"])
@pytest.mark.parametrize("kind", SYNC)
def test_interrupt_and_resume_across_a_prune(kind: str, as_subgraph: bool, saver_factory: Any) -> None:
    with saver_factory(kind) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=1, retention_every=1)
        graph = build_graph(saver, approve_tools=True, as_subgraph=as_subgraph)
        config = thread_config("i")
        for turn in range(3):
            run_turns(graph, 1, thread_id="i", start=turn)  # stops at the tool approval
            assert graph.get_state(config, subgraphs=True).interrupts, turn
            saver.prune(["i"], strategy="keep_latest")
            out = graph.invoke(Command(resume=True), config)
            assert out["messages"][-1].id == f"ai{turn}-final"
        ids = [m.id for m in graph.get_state(config).values["messages"]]
        assert ids[-len(turn_ids(2)):] == turn_ids(2)
        assert len(all_namespaces(saver, "i")[""]) <= 2


def test_prune_on_sqlite_wrapper_and_its_errors(tmp_path: Path) -> None:
    with open_saver("sqlite", path=tmp_path / "p.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        graph = build_graph(saver)
        run_turns(graph, 2, thread_id="p")
        run_turns(graph, 1, thread_id="q")
        with pytest.raises(TypeError, match="not a single str"):
            saver.prune("p")
        with pytest.raises(ValueError, match="unknown prune strategy 'all'"):
            saver.prune(["p"], strategy="all")
        saver.prune(["p"])
        latest = graph.get_state(thread_config("p")).config["configurable"]["checkpoint_id"]
        assert all_namespaces(saver, "p") == {"": [latest]}
        saver.prune(["q"], strategy="delete")
        assert all_namespaces(saver, "q") == {}
        assert len(all_namespaces(saver, "p")[""]) == 1


def test_a_failing_deletion_never_fails_a_put_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "blocked.db"
    with open_saver("sqlite", path=path) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), keep_last=1, retention_every=2)
        graph = build_graph(saver)
        blocker = sqlite3.connect(path)
        blocker.execute(
            "CREATE TRIGGER no_delete BEFORE DELETE ON checkpoints "
            "BEGIN SELECT RAISE(ABORT, 'deletes blocked'); END"
        )
        blocker.commit()
        with caplog.at_level(logging.WARNING, logger="agentstate_reducer.checkpointers"):
            run_turns(graph, 2, thread_id="f")  # every put succeeds
        stats = saver.retention_stats
        assert stats is not None and stats.failures > 0 and stats.checkpoints_deleted == 0
        assert "deletes blocked" in (stats.last_error or "")
        assert any("retention of thread 'f' failed" in r.getMessage() for r in caplog.records)
        assert len(all_namespaces(saver, "f")[""]) > 2
        assert graph.get_state(thread_config("f")).values["messages"][-1].id == "ai1-final"
        blocker.execute("DROP TRIGGER no_delete")
        blocker.commit()
        blocker.close()
        run_turns(graph, 1, thread_id="f", start=2)  # retried at the next put
        assert len(all_namespaces(saver, "f")[""]) <= 2
        assert saver.retention_stats is not None and saver.retention_stats.checkpoints_deleted > 0


def test_docstring_examples() -> None:
    import doctest

    from checkpointers import retention
    from checkpointers.retention import rules

    attempted = 0
    for module in (retention, rules):
        result = doctest.testmod(module)
        assert result.failed == 0
        attempted += result.attempted
    assert attempted >= 7  # sweep on an empty store, checkpoint_time, step_due
