"""A run's first put, which receives the list the saver stored read back, on real graphs over
SQLite: whatever happened to the thread in between, every stored list equals what a fresh
reducer makes of the list that put received.

The wrapper knows the lists it stored again (``checkpointers.reduction.StoredOutputs``) so the
first put of a run is a memo hit; these tests state that this never changes what is stored: after
runs, ``update_state`` replacing a message by one with its id, a ``RemoveMessage``, a fork from
an older checkpoint, another process writing the thread, and retention passes. They also state
what the memory holds: no message, and at most its byte budget however many threads it sees.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate_reducer import MessageReducer, wait_released
from checkpointers import ReducingCheckpointSaver
from checkpointers.reduction import StoredOutputs
from tests.scenario_graph import arun_turns, build_graph, run_turns, thread_config

ROOT = Path(__file__).resolve().parents[1]
KEY = "messages"


def reducer() -> MessageReducer:
    # 4 messages a turn: cut back to sys + 2 turns past 16, so runs' first puts are kept whole
    return MessageReducer(min_messages=8, max_messages=16)


def _given(checkpoint: Any) -> list[Any] | None:
    value = (checkpoint.get("channel_values") or {}).get(KEY)
    return list(value) if isinstance(value, list | tuple) else None


class CheckedSaver(ReducingCheckpointSaver):
    """The wrapper, recording for every put the list it stored (read back from the inner saver)
    and what a fresh reducer with the same settings makes of the list the put received."""

    pairs: list[tuple[list[Any], list[Any]]]

    def _fresh(self, given: list[Any]) -> list[Any]:
        return MessageReducer(config=self.reducer.config).reduce(given).surviving

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        given = _given(checkpoint)
        saved = super().put(config, checkpoint, metadata, new_versions)
        if given is not None:
            tup = self.inner.get_tuple(saved)
            assert tup is not None
            self.pairs.append((list(tup.checkpoint["channel_values"][KEY]), self._fresh(given)))
        return saved

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        given = _given(checkpoint)
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        if given is not None:
            tup = await self.inner.aget_tuple(saved)
            assert tup is not None
            self.pairs.append((list(tup.checkpoint["channel_values"][KEY]), self._fresh(given)))
        return saved

    def mismatches(self) -> list[tuple[list[str], list[str]]]:
        """(stored ids, fresh ids) of every put whose stored list differs from the fresh one."""
        return [([m.id for m in s], [m.id for m in f]) for s, f in self.pairs if s != f]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.db"


@pytest.fixture
def saver(db: Path) -> Iterator[CheckedSaver]:
    with SqliteSaver.from_conn_string(str(db)) as inner:
        inner.setup()
        s = CheckedSaver(inner, reducer())
        s.pairs = []
        yield s


def _stored_ids(graph: Any, thread: str) -> list[str]:
    return [m.id for m in graph.get_state(thread_config(thread)).values[KEY]]


def test_runs_on_a_thread_store_what_a_fresh_reducer_makes(saver: CheckedSaver) -> None:
    graph = build_graph(saver)
    run_turns(graph, 9, thread_id="a")
    run_turns(graph, 3, thread_id="b")
    run_turns(graph, 3, thread_id="a", start=9)
    assert len(saver.pairs) > 40
    assert saver.mismatches() == []
    assert _stored_ids(graph, "a")[:2] == ["sys", "h10"]


def _dangling(call_id: str) -> dict[str, Any]:
    return {"name": "lookup", "args": {"query": "changed"}, "id": call_id, "type": "tool_call"}


def test_a_message_replaced_with_its_id_is_not_taken_for_the_stored_one(saver: CheckedSaver) -> None:
    graph = build_graph(saver)
    run_turns(graph, 5, thread_id="t")
    stored = _stored_ids(graph, "t")
    assert "ai4-0" in stored
    # the same id, another call: the stored result "t4-0-0" answers nothing now, the call is
    # answered by nothing; a fresh reducer drops both
    changed = AIMessage("changed", id="ai4-0", tool_calls=[_dangling("c-changed")])
    graph.update_state(thread_config("t"), {KEY: [changed]})
    after = _stored_ids(graph, "t")
    assert "t4-0-0" not in after and "ai4-0" not in after
    run_turns(graph, 2, thread_id="t", start=5)
    assert saver.mismatches() == []


def test_a_removed_message_is_not_taken_for_the_stored_list(saver: CheckedSaver) -> None:
    graph = build_graph(saver)
    run_turns(graph, 5, thread_id="t")
    graph.update_state(thread_config("t"), {KEY: [RemoveMessage(id="t4-0-0")]})
    assert "ai4-0" not in _stored_ids(graph, "t")  # its call lost its result
    run_turns(graph, 2, thread_id="t", start=5)
    assert saver.mismatches() == []


def test_a_fork_from_an_older_checkpoint_stores_what_a_fresh_reducer_makes(saver: CheckedSaver) -> None:
    graph = build_graph(saver)
    run_turns(graph, 4, thread_id="t")
    older = [s for s in graph.get_state_history(thread_config("t")) if s.metadata.get("step") == 5]
    assert len(older) == 1
    fork_config = older[0].config
    run_turns(graph, 6, thread_id="t", start=4)
    graph.invoke({KEY: [AIMessage("x", id="fork-ai", tool_calls=[_dangling("c-fork")])]}, fork_config)
    run_turns(graph, 1, thread_id="t", start=10)
    assert saver.mismatches() == []


#: run in another process: the same thread's newest tool-calling message replaced by one with its
#: id and another call, written by a bare SqliteSaver (the list keeps its length and its ids; its
#: result answers nothing now and the new call is answered by nothing)
OTHER_PROCESS = """
import sys
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from tests.scenario_graph import build_graph, thread_config

with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    graph = build_graph(saver)
    stored = graph.get_state(thread_config("t")).values["messages"]
    calling = [m for m in stored if getattr(m, "tool_calls", None)][-1]
    call = {"name": "lookup", "args": {"query": "other"}, "id": "c-other", "type": "tool_call"}
    changed = AIMessage("other", id=calling.id, tool_calls=[call])
    graph.update_state(thread_config("t"), {"messages": [changed]})
"""


def test_a_thread_written_by_another_process_is_not_taken_for_the_stored_list(
    saver: CheckedSaver, db: Path
) -> None:
    graph = build_graph(saver)
    run_turns(graph, 5, thread_id="t")
    before = _stored_ids(graph, "t")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(db)], check=True, env=env, cwd=ROOT, timeout=120)
    assert _stored_ids(graph, "t") == before  # the same ids, one message changed
    run_turns(graph, 2, thread_id="t", start=5)
    assert saver.mismatches() == []
    assert "c-other" not in str(graph.get_state(thread_config("t")).values[KEY])


def test_retention_between_runs_changes_nothing_stored(db: Path) -> None:
    with SqliteSaver.from_conn_string(str(db)) as inner:
        inner.setup()
        saver = CheckedSaver(inner, reducer(), keep_last=2, retention_every=1)
        saver.pairs = []
        graph = build_graph(saver)
        run_turns(graph, 8, thread_id="t")
        assert len(list(graph.get_state_history(thread_config("t")))) <= 4
        assert saver.mismatches() == []


def test_async_runs_and_a_replaced_message_store_what_a_fresh_reducer_makes(db: Path) -> None:
    async def main() -> list[tuple[list[str], list[str]]]:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as inner:
            await inner.setup()
            saver = CheckedSaver(inner, reducer())
            saver.pairs = []
            graph = build_graph(saver)
            await arun_turns(graph, 5, thread_id="t")
            changed = AIMessage("changed", id="ai4-0", tool_calls=[_dangling("c-changed")])
            await graph.aupdate_state(thread_config("t"), {KEY: [changed]})
            await arun_turns(graph, 3, thread_id="t", start=5)
            assert len(saver.pairs) > 20
            return saver.mismatches()

    assert asyncio.run(main()) == []


def test_loads_of_many_threads_keep_no_message_alive(saver: CheckedSaver) -> None:
    """The copies read back are held by the reducer's memo only, which keeps its last few lists:
    loading twenty threads leaves the messages of the first ten unreferenced."""
    graph = build_graph(saver)
    for i in range(20):
        run_turns(graph, 2, thread_id=f"t{i}")
    refs = []
    for i in range(20):
        tup = saver.get_tuple(thread_config(f"t{i}"))
        assert tup is not None
        if i < 10:
            refs += [weakref.ref(m) for m in tup.checkpoint["channel_values"][KEY]]
    del tup
    assert wait_released(timeout=120)  # the memo frees what it let go of on its own thread
    gc.collect()
    assert len(refs) == 90 and all(r() is None for r in refs)


def _entry(i: int, messages: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    config = {"configurable": {"thread_id": f"thread-{i}", "checkpoint_ns": "", "checkpoint_id": f"c{i}"}}
    return config, {"id": f"c{i}", "channel_values": {KEY: messages}}


def test_memory_is_bounded_by_bytes_across_thousands_of_threads() -> None:
    r = MessageReducer(min_messages=100, max_messages=200)
    history = [m for t in range(50) for m in _turn(t)]
    assert len(history) == 200
    stored = StoredOutputs(max_bytes=256 * 1024)
    sizes = {}
    for i in range(5000):
        out = r.reduce(history).surviving
        config, checkpoint = _entry(i, out)
        stored.after_put(config, checkpoint, KEY)  # type: ignore[arg-type]
        stored.after_load(r, CheckpointTuple(config, checkpoint, {}, None, []), KEY)  # type: ignore[arg-type]
        if i + 1 in (1000, 5000):
            sizes[i + 1] = stored.nbytes
    assert 0 < sizes[1000] <= 256 * 1024 and sizes[5000] <= 256 * 1024
    assert len(stored) < 5000  # the oldest threads' entries went


def _turn(t: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"q{t}", "id": f"h{t}"},
        {"role": "assistant", "content": "", "id": f"a{t}",
         "tool_calls": [{"id": f"c{t}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "r", "tool_call_id": f"c{t}", "id": f"t{t}"},
        {"role": "assistant", "content": f"answer {t}", "id": f"f{t}"},
    ]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_a_bad_byte_budget_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"max_bytes must be an int >= 0, got"):
        StoredOutputs(max_bytes=bad)
