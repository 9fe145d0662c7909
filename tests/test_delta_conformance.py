"""The properties LangGraph's checkpoint conformance suite states for its ``delta_channel_history``
capability, stated here against ``ReducingCheckpointSaver`` (the installed
langgraph-checkpoint-conformance, 0.0.2, has no such capability; its ``prune`` capability runs in
``tests/test_conformance.py``). Written from the properties, not from the suite's code:

* the writes come oldest first, from those stored at the seed checkpoint to those of the target's
  parent; the target's own pending writes are not among them;
* the seed is the value of the nearest ancestor holding one (a ``_DeltaSnapshot``, or a plain
  value left by a channel that was not a DeltaChannel before); with none, there is no seed;
* each channel's walk ends at its own seed; no channel asked, an empty answer;
* the writes of one step replay in ``task_path`` order, writes without a path first.

Then ``prune(keep_latest)`` on such a thread: the latest checkpoint answers the same history
afterwards (values, not the walk: the snapshot at the cut stands in for the ancestors).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from checkpointers.retention import prune
from tests.scenario_graph import open_saver, saver_params


@pytest.fixture(params=saver_params(["memory", "sqlite", "postgres"]))
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    with open_saver(request.param, path=tmp_path / "conf.db", pg_url=pg_url) as inner:
        yield ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=99))


def _put_chain(
    saver: Any, steps: int, stored: dict[int, dict[str, Any]],
    writes: Mapping[int, Sequence[tuple[str, Any]]] | None = None, *, graph_like: bool = False,
) -> list[Any]:
    """``steps`` checkpoints of a new thread, each the parent of the next; ``stored[step]``: the
    channel values step stores (the others store none); ``writes[step]``: its pending writes
    (default: ("ch", step)). ``graph_like``: as LangGraph stores them, "ch" versioned at every
    step and counted in the metadata's ``counters_since_delta_snapshot`` until a snapshot.
    Returns each checkpoint's config."""
    thread = str(uuid.uuid4())
    configs: list[Any] = []
    since = 0
    for step in range(steps):
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if configs:
            conf["checkpoint_id"] = configs[-1]["configurable"]["checkpoint_id"]
        values = stored.get(step, {})
        versions: dict[str, str | int | float] = {
            ch: f"{step + 1:032}.0" for ch in (["ch"] if graph_like else values)
        }
        checkpoint = Checkpoint(v=1, id=str(uuid6(clock_seq=step)), ts="", channel_values=values,
                                channel_versions=versions, versions_seen={}, updated_channels=None)
        metadata: dict[str, Any] = {"source": "loop", "step": step}
        since = 0 if "ch" in values else since + 1
        if graph_like and since:
            metadata["counters_since_delta_snapshot"] = {"ch": [since, since]}
        saved = saver.put({"configurable": conf}, checkpoint, metadata, versions)
        configs.append(saved)
        step_writes = (writes or {}).get(step, [("ch", step)])
        if step_writes:
            saver.put_writes(saved, list(step_writes), str(uuid.uuid4()))
    return configs


def _writes(history: Any, channel: str = "ch") -> list[Any]:
    return [w[2] for w in history[channel]["writes"]]


def _seed(history: Any, channel: str = "ch") -> Any:
    seed = history[channel]["seed"]
    return seed.value if isinstance(seed, _DeltaSnapshot) else seed


def test_writes_come_oldest_first_and_exclude_the_target_s_own(saver: Any) -> None:
    configs = _put_chain(saver, 5, {0: {"ch": _DeltaSnapshot(0)}})
    saver.put_writes(configs[-1], [("ch", "pending")], str(uuid.uuid4()))
    history = saver.get_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _seed(history) == 0
    assert _writes(history) == [0, 1, 2, 3]  # the seed's own write produced its child


def test_the_seed_is_the_nearest_stored_value_snapshot_or_plain(saver: Any) -> None:
    configs = _put_chain(saver, 6, {0: {"ch": _DeltaSnapshot(0)}, 3: {"ch": _DeltaSnapshot(30)}})
    history = saver.get_delta_channel_history(config=configs[-1], channels=["ch"])
    assert (_seed(history), _writes(history)) == (30, [3, 4])
    migrated = _put_chain(saver, 4, {1: {"ch": [10, 20]}})
    history = saver.get_delta_channel_history(config=migrated[-1], channels=["ch"])
    assert (history["ch"]["seed"], _writes(history)) == ([10, 20], [1, 2])


def test_no_stored_value_means_no_seed_and_no_channel_an_empty_answer(saver: Any) -> None:
    configs = _put_chain(saver, 4, {})
    history = saver.get_delta_channel_history(config=configs[-1], channels=["ch"])
    assert "seed" not in history["ch"]
    assert _writes(history) == [0, 1, 2]
    assert saver.get_delta_channel_history(config=configs[-1], channels=[]) == {}


def test_each_channel_s_walk_ends_at_its_own_seed(saver: Any) -> None:
    stored = {1: {"a": _DeltaSnapshot("a1")}, 3: {"b": _DeltaSnapshot("b3")}}
    both = {step: [("a", step), ("b", step)] for step in range(5)}
    configs = _put_chain(saver, 5, stored, both)
    history = saver.get_delta_channel_history(config=configs[-1], channels=["a", "b"])
    assert (_seed(history, "a"), _writes(history, "a")) == ("a1", [1, 2, 3])
    assert (_seed(history, "b"), _writes(history, "b")) == ("b3", [3])


def test_one_step_s_writes_replay_by_task_path_pathless_first(saver: Any) -> None:
    configs = _put_chain(saver, 3, {0: {"ch": _DeltaSnapshot(0)}}, {1: []})
    first_id, last_id = "0" * 8 + "-0000-0000-0000-" + "0" * 12, "f" * 8 + "-ffff-ffff-ffff-" + "f" * 12
    saver.put_writes(configs[1], [("ch", "second")], first_id, "~pull, 02")
    saver.put_writes(configs[1], [("ch", "first")], last_id, "~pull, 01")
    saver.put_writes(configs[1], [("ch", "input")], str(uuid.uuid4()))
    history = saver.get_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _writes(history) == [0, "input", "first", "second"]


def _value(saver: Any, config: Any) -> list[Any]:
    """What LangGraph loads for "ch" at ``config``: the value stored there, else the walk."""
    channel: DeltaChannel[Any] = DeltaChannel(lambda state, ws: [*(state or []), *ws])
    tup = saver.get_tuple(config)
    if "ch" in tup.checkpoint["channel_values"]:
        return list(channel.from_checkpoint(tup.checkpoint["channel_values"]["ch"]).get())
    history = saver.get_delta_channel_history(config=config, channels=["ch"])["ch"]
    rebuilt = channel.from_checkpoint(history.get("seed"))
    rebuilt.replay_writes(history["writes"])
    return list(rebuilt.get())


def test_prune_keep_latest_leaves_the_latest_rebuilding_the_same(saver: Any) -> None:
    configs = _put_chain(saver, 6, {0: {"ch": _DeltaSnapshot([])}}, graph_like=True)
    thread = configs[-1]["configurable"]["thread_id"]
    before = _value(saver, configs[-1])
    assert before == [0, 1, 2, 3, 4]
    spec: DeltaChannel[Any] = DeltaChannel(lambda state, ws: [*(state or []), *ws])
    prune(saver, [thread], delta_channels={"ch": spec}, branch_grace=timedelta(0))
    left = [t.config["configurable"]["checkpoint_id"] for t in saver.list(configs[-1] | {"configurable": {
        "thread_id": thread}})]
    assert left == [configs[-1]["configurable"]["checkpoint_id"]]
    assert _value(saver, configs[-1]) == before
