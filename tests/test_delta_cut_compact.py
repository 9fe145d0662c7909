"""Snapshot at the cut where ``compact_store``, the CLI ``compact --graph`` and the Cosmos DB savers'
own ``prune``/``aprune`` trim a DeltaChannel thread, given the graph's channels: every checkpoint
left rebuilds exactly what it rebuilt before and what a twin thread that was never pruned rebuilds
at the same step, the ancestors the snapshot stands in for go, and the thread goes on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.compact import compact_store
from tests.scenario_graph import open_saver
from tests.test_delta_cut import (
    CADENCES,
    LARGE_K,
    STAGGERED,
    arebuilt,
    build,
    config,
    expected,
    rebuilt,
    saver_of,
    turn_input,
    values,
)
from tests.test_delta_retention import NO_GRACE, assert_like_twin, assert_unchanged

__all__ = ["saver_of"]  # the fixture, shared with test_delta_cut

SYNC = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
CHANNELS = ["files", "messages", "notes"]


def run_both(graph: Any, twin: Any, turns: range) -> None:
    for turn in turns:
        graph.invoke(turn_input(turn), config("t"))
        twin.invoke(turn_input(turn), config("t"))


# -- compact_store --------------------------------------------------------------------------------


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", SYNC)
def test_compact_store_with_the_graph_s_channels_cuts_at_the_kept_checkpoint(
    kind: str, cadence: tuple[int, int], saver_of: Any
) -> None:
    with saver_of(kind) as saver, saver_of(kind, "twin") as twin_saver:
        graph, twin = build(saver, cadence), build(twin_saver, cadence)
        run_both(graph, twin, range(9))
        graph.invoke(turn_input(0), config("other"))
        before, other = rebuilt(graph, "t"), rebuilt(graph, "other")
        dry = compact_store(saver, None, thread_ids=["t"], keep_last=1, dry_run=True,
                            branch_grace=NO_GRACE, delta_channels=graph.channels)
        assert rebuilt(graph, "t") == before  # the dry run writes nothing
        report = compact_store(saver, None, thread_ids=["t"], keep_last=1, branch_grace=NO_GRACE,
                               delta_channels=graph.channels)
        assert report.snapshot_channels == dry.snapshot_channels == CHANNELS
        assert report.snapshots_written == 1 and dry.snapshots_written == 0
        assert report.threads_trimmed == dry.threads_trimmed == ["t"]
        assert report.checkpoints_deleted == dry.checkpoints_deleted == len(before) - 1
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1  # the latest, holding every value
        assert_like_twin(after, rebuilt(twin, "t"))
        assert rebuilt(graph, "other") == other
        run_both(graph, twin, range(9, 12))  # the thread goes on
        assert values(graph.get_state(config("t"))) == values(twin.get_state(config("t"))) == expected(12)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_compact_store_takes_the_wrapper_s_delta_channels(kind: str, saver_of: Any) -> None:
    """A ``ReducingCheckpointSaver`` whose ``delta_channels`` are set is cut by ``compact_store``
    without passing them again; without them, the ancestors the kept checkpoint rebuilds the other
    delta channels through stay (LangGraph's first way)."""
    with saver_of(kind) as inner, saver_of(kind, "twin") as twin_saver:
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99),
                                        branch_grace=NO_GRACE)
        graph, twin = build(saver, LARGE_K), build(twin_saver, LARGE_K)
        run_both(graph, twin, range(5))
        before = rebuilt(graph, "t")
        kept = compact_store(saver, None, keep_last=1, branch_grace=NO_GRACE)
        # by default only the channel it reduces, which its puts store whole: nothing to snapshot
        assert kept.snapshot_channels == ["messages"] and kept.snapshots_written == 0
        assert len(rebuilt(graph, "t")) > 1  # notes and files never snapshot: their ancestors stay
        before = rebuilt(graph, "t")
        saver.delta_channels = graph.channels
        report = compact_store(saver, None, keep_last=1, branch_grace=NO_GRACE)
        assert report.snapshot_channels == CHANNELS
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        assert_like_twin(after, rebuilt(twin, "t"))
        run_both(graph, twin, range(5, 7))
        assert values(graph.get_state(config("t"))) == expected(7)


def test_compact_store_refuses_bad_delta_channels_before_anything_is_written(saver_of: Any) -> None:
    with saver_of("sqlite") as saver:
        graph = build(saver, LARGE_K)
        graph.invoke(turn_input(0), config("t"))
        before = rebuilt(graph, "t")
        with pytest.raises(TypeError, match="delta_channels must be a mapping of channel name"):
            compact_store(saver, None, keep_last=1, delta_channels=["messages"])  # type: ignore[arg-type]
        assert rebuilt(graph, "t") == before


# -- the CLI: compact --graph -----------------------------------------------------------------------

GRAPH_MODULE = """
from tests.test_delta_cut import LARGE_K, build

graph = build(None, LARGE_K)
builder = graph.builder
not_a_graph = 42
"""


def _store(tmp_path: Path, turns: int = 6) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A SQLite file holding thread ``t`` (``turns`` turns), and a twin file never pruned; the
    thread's checkpoints as each rebuilds them."""
    path, twin_path = tmp_path / "cli.db", tmp_path / "twin.db"
    with open_saver("sqlite", path=path) as saver, open_saver("sqlite", path=twin_path) as twin_saver:
        graph, twin = build(saver, LARGE_K), build(twin_saver, LARGE_K)
        run_both(graph, twin, range(turns))
        return path, rebuilt(graph, "t"), rebuilt(twin, "t")


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent_graph.py"
    path.write_text(GRAPH_MODULE)
    return path


@pytest.mark.parametrize("form", ["file", "module", "builder"])
def test_cli_compact_graph_cuts_at_the_kept_checkpoint(
    form: str, tmp_path: Path, graph_file: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--graph`` names the graph as langgraph.json does (a file, or a module on the working
    directory's path; a compiled graph or its StateGraph): the trim stores a snapshot at the cut and
    deletes the ancestors. The default grace spares the newest SUPERSEDED_KEEP checkpoints
    superseded a moment ago (``rules``), so the thread keeps 1 + 2 here."""
    import checkpointers.cli.main as cli

    path, before, twin = _store(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "agent_graph", raising=False)
    spec = {"file": f"{graph_file}:graph", "module": "agent_graph:graph",
            "builder": "./agent_graph.py:builder"}[form]
    capsys.readouterr()
    assert cli.main(["compact", str(path), "--keep-last", "1", "--graph", spec, "--yes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["snapshot_channels"] == CHANNELS and report["snapshots_written"] == 1
    with open_saver("sqlite", path=path) as saver:
        graph = build(saver, LARGE_K)
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 3
        assert_like_twin(after, twin)
        graph.invoke(turn_input(6), config("t"))
        assert values(graph.get_state(config("t"))) == expected(7)


def test_cli_compact_graph_dry_run_says_what_the_run_does(
    tmp_path: Path, graph_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import checkpointers.cli.main as cli

    path, before, _ = _store(tmp_path)
    capsys.readouterr()
    args = ["compact", str(path), "--keep-last", "1", "--graph", f"{graph_file}:graph"]
    assert cli.main([*args, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert cli.main([*args, "--yes", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert dry["checkpoints_deleted"] == done["checkpoints_deleted"] == len(before) - 3
    assert dry["checkpoints_after"] == done["checkpoints_after"] == 3
    assert dry["snapshot_channels"] == done["snapshot_channels"] == CHANNELS
    assert cli.main([*args, "--dry-run"]) == 0
    assert "prune: would delete 0 checkpoints" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["--keep-last", "1", "--graph", "agent_graph"], "is not MODULE:ATTR"),
    (["--keep-last", "1", "--graph", "no_such_module_here:graph"],
     "importing 'no_such_module_here' failed (ModuleNotFoundError"),
    (["--keep-last", "1", "--graph", "./missing.py:graph"], "no such file"),
    (["--keep-last", "1", "--graph", "./agent_graph.py:nope"], "has no attribute 'nope'"),
    (["--keep-last", "1", "--graph", "./agent_graph.py:not_a_graph"], "is a int, not a graph"),
    (["--graph", "./agent_graph.py:graph"], "--graph only applies with --keep-last or --prune-old"),
])
def test_cli_compact_graph_errors_change_nothing(
    args: list[str], message: str, tmp_path: Path, graph_file: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import checkpointers.cli.main as cli

    path, before, _ = _store(tmp_path, turns=2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    capsys.readouterr()
    assert cli.main(["compact", str(path), *args, "--yes"]) == 2
    err = capsys.readouterr().err
    assert message in err and "nothing was changed" in err
    with open_saver("sqlite", path=path) as saver:
        assert rebuilt(build(saver, LARGE_K), "t") == before


# -- Cosmos DB: the savers' own prune ----------------------------------------------------------------


@pytest.mark.cosmos
def test_cosmos_saver_s_own_prune_cuts_with_the_graph_s_channels(request: pytest.FixtureRequest) -> None:
    from tests.test_delta_retention import cosmos_saver

    with cosmos_saver(request) as saver, cosmos_saver(request, "twin") as twin_saver:
        graph, twin = build(saver, STAGGERED), build(twin_saver, STAGGERED)
        run_both(graph, twin, range(7))
        before = rebuilt(graph, "t")
        saver.prune(["t"], delta_channels=graph.channels)
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert_like_twin(after, rebuilt(twin, "t"))
        run_both(graph, twin, range(7, 10))
        before = rebuilt(graph, "t")
        saver.delta_channels = graph.channels  # the saver's own: prune() takes them
        saver.prune(["t"])
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert_like_twin(after, rebuilt(twin, "t"))
        assert values(graph.get_state(config("t"))) == expected(10)


@pytest.mark.cosmos
async def test_async_cosmos_saver_s_own_aprune_cuts_with_the_graph_s_channels(
    request: pytest.FixtureRequest,
) -> None:
    from tests.test_delta_retention import acosmos_saver

    async with acosmos_saver(request) as saver, acosmos_saver(request, "twin") as twin_saver:
        graph, twin = build(saver, STAGGERED), build(twin_saver, STAGGERED)
        for turn in range(7):
            await graph.ainvoke(turn_input(turn), config("t"))
            await twin.ainvoke(turn_input(turn), config("t"))
        before = await arebuilt(graph, "t")
        await saver.aprune(["t"], delta_channels=graph.channels)
        after = await arebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert_like_twin(after, await arebuilt(twin, "t"))
        for turn in range(7, 9):
            await graph.ainvoke(turn_input(turn), config("t"))
        assert values(await graph.aget_state(config("t"))) == expected(9)


@pytest.mark.cosmos
def test_cosmos_compact_store_and_a_wrapper_s_prune_cut_with_the_graph_s_channels(
    request: pytest.FixtureRequest,
) -> None:
    """``compact_store`` on a Cosmos DB saver, and ``prune`` of a wrapper around one (delegated to
    the saver's own ``prune``, with the wrapper's ``delta_channels``)."""
    from tests.test_delta_retention import cosmos_saver

    with cosmos_saver(request) as saver, cosmos_saver(request, "twin") as twin_saver, \
            cosmos_saver(request, "wrapped") as inner:
        wrapper = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99))
        graph, twin = build(saver, STAGGERED), build(twin_saver, STAGGERED)
        wrapped = build(wrapper, STAGGERED)
        for turn in range(7):
            for g in (graph, twin, wrapped):
                g.invoke(turn_input(turn), config("t"))
        before = rebuilt(graph, "t")
        report = compact_store(saver, None, keep_last=1, branch_grace=NO_GRACE, delta_channels=graph.channels)
        assert report.snapshot_channels == CHANNELS and report.snapshots_written == 1
        after = rebuilt(graph, "t")
        assert_unchanged(before, after, trimmed=True)
        assert len(after) == 1
        assert_like_twin(after, rebuilt(twin, "t"))
        before = rebuilt(wrapped, "t")
        wrapper.delta_channels = wrapped.channels
        wrapper.prune(["t"])
        after = rebuilt(wrapped, "t")
        assert_unchanged(before, after, trimmed=True)
        assert_like_twin(after, rebuilt(twin, "t"))
        # the latest, the two superseded a moment ago and those that stored a value they read
        # (rules): a handful, where the ancestors of notes and files kept 26
        assert len(after) <= 6
        for g in (graph, twin, wrapped):
            g.invoke(turn_input(7), config("t"))
        assert values(graph.get_state(config("t"))) == values(wrapped.get_state(config("t"))) == expected(8)
