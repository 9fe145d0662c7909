"""A snapshot retention stores at the cut moves the channel's version on, as LangGraph's own
snapshot bumps do: the nodes that had seen the old version see the new one, so resuming from the
kept checkpoint reruns nothing, and ``update_state`` without ``as_node`` infers the node it
infers on a twin thread that was never pruned (the version each node really read is recorded).
A Pregel graph whose node is triggered by a ``DeltaChannel``, as only the low-level API makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langgraph.channels import DeltaChannel, LastValue
from langgraph.pregel import NodeBuilder, Pregel

from checkpointers.retention import aprune, prune
from tests.scenario_graph import aopen_saver, open_saver
from tests.test_delta_retention import NO_GRACE

#: threads per test: without the record of what each node read, update_state's inference goes
#: by random version suffixes, right for a thread one time in two
THREADS = 6


def _extend(state: Any, writes: Sequence[Any]) -> Any:
    out = list(state or [])
    for update in writes:
        out.extend(update)
    return out


def build(saver: Any) -> Any:
    """``inbox`` (a DeltaChannel that never snapshots by itself) triggers ``reader``, which writes
    ``count``; ``count`` triggers ``tally``, which writes ``total``."""
    reader = NodeBuilder().subscribe_only("inbox").do(len).write_to("count")
    tally = NodeBuilder().subscribe_only("count").do(lambda c: c * 10).write_to("total")
    return Pregel(
        nodes={"reader": reader, "tally": tally},
        channels={"inbox": DeltaChannel(_extend, snapshot_frequency=1000), "count": LastValue(int),
                  "total": LastValue(int)},
        input_channels=["inbox"], output_channels=["count", "total"], checkpointer=saver,
    )


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def state(graph: Any, thread_id: str) -> tuple[Any, ...]:
    s = graph.get_state(cfg(thread_id))
    return s.values, s.next


async def astate(graph: Any, thread_id: str) -> tuple[Any, ...]:
    s = await graph.aget_state(cfg(thread_id))
    return s.values, s.next


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_snapshot_at_the_cut_reruns_nothing_and_keeps_update_state_s_node(
    kind: str, tmp_path: Path
) -> None:
    with open_saver(kind, path=tmp_path / "a.db") as saver, \
            open_saver(kind, path=tmp_path / "b.db") as twin_saver:
        graph, twin = build(saver), build(twin_saver)
        threads = [f"t{i}" for i in range(THREADS)]
        for thread_id in threads:
            for turn in range(3):
                graph.invoke({"inbox": [f"x{turn}"]}, cfg(thread_id))
                twin.invoke({"inbox": [f"x{turn}"]}, cfg(thread_id))
        prune(saver, threads, delta_channels=graph.channels, branch_grace=NO_GRACE)
        for thread_id in threads:
            assert len(list(graph.get_state_history(cfg(thread_id)))) == 1  # the cut was made
            assert state(graph, thread_id) == state(twin, thread_id)
            assert state(graph, thread_id)[1] == ()  # nothing to run: reader saw the snapshot
            assert graph.invoke(None, cfg(thread_id)) == twin.invoke(None, cfg(thread_id))
            graph.update_state(cfg(thread_id), 7)  # the node that ran last: tally
            twin.update_state(cfg(thread_id), 7)
            assert state(graph, thread_id) == state(twin, thread_id)
            graph.invoke({"inbox": ["y"]}, cfg(thread_id))  # the thread goes on
            twin.invoke({"inbox": ["y"]}, cfg(thread_id))
            assert state(graph, thread_id) == state(twin, thread_id)
            assert state(graph, thread_id)[0]["inbox"] == ["x0", "x1", "x2", "y"]


async def test_async_a_snapshot_at_the_cut_reruns_nothing(tmp_path: Path) -> None:
    async with aopen_saver("aiosqlite", path=tmp_path / "a.db") as saver, \
            aopen_saver("aiosqlite", path=tmp_path / "b.db") as twin_saver:
        graph, twin = build(saver), build(twin_saver)
        threads = [f"t{i}" for i in range(THREADS)]
        for thread_id in threads:
            for turn in range(3):
                await graph.ainvoke({"inbox": [f"x{turn}"]}, cfg(thread_id))
                await twin.ainvoke({"inbox": [f"x{turn}"]}, cfg(thread_id))
        await aprune(saver, threads, delta_channels=graph.channels, branch_grace=NO_GRACE)
        for thread_id in threads:
            assert [s async for s in graph.aget_state_history(cfg(thread_id))][1:] == []
            assert await astate(graph, thread_id) == await astate(twin, thread_id)
            await graph.aupdate_state(cfg(thread_id), 7)
            await twin.aupdate_state(cfg(thread_id), 7)
            assert await astate(graph, thread_id) == await astate(twin, thread_id)
