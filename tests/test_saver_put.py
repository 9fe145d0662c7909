"""ReducingCheckpointSaver at the put level, on real savers, sync and async.

Savers: InMemorySaver, SqliteSaver (a file), PostgresSaver (sync); InMemorySaver,
AsyncSqliteSaver, AsyncPostgresSaver (async). PostgreSQL comes from the ``pg_url`` fixture.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint
from langgraph.checkpoint.base.id import uuid6

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from checkpointers import PutReduction, ReducingCheckpointSaver, reduce_checkpoint
from tests.scenario_graph import aopen_saver, build_graph, open_saver, run_turns, thread_config

CASES = [
    pytest.param(("sync", "memory"), id="sync-InMemorySaver"),
    pytest.param(("sync", "sqlite"), id="sync-SqliteSaver"),
    pytest.param(("sync", "postgres"), id="sync-PostgresSaver", marks=pytest.mark.postgres),
    pytest.param(("async", "memory"), id="async-InMemorySaver"),
    pytest.param(("async", "aiosqlite"), id="async-AsyncSqliteSaver"),
    pytest.param(("async", "apostgres"), id="async-AsyncPostgresSaver", marks=pytest.mark.postgres),
]
BLOB_SAVERS = {"memory", "postgres", "apostgres"}


class Case:
    """One saver under test, with sync and async calls behind one interface."""

    def __init__(self, mode: str, kind: str, inner: Any) -> None:
        self.mode, self.kind, self.inner = mode, kind, inner

    async def put(self, saver: Any, config: Any, checkpoint: Any, new_versions: Any) -> Any:
        metadata = {"source": "loop", "step": 1}
        if self.mode == "sync":
            return saver.put(config, checkpoint, metadata, new_versions)
        return await saver.aput(config, checkpoint, metadata, new_versions)

    async def get_tuple(self, saver: Any, config: Any) -> Any:
        return saver.get_tuple(config) if self.mode == "sync" else await saver.aget_tuple(config)


@pytest.fixture(params=CASES)
async def case(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Case]:
    mode, kind = request.param
    pg_url = request.getfixturevalue("pg_url") if "postgres" in kind else None
    if mode == "sync":
        with open_saver(kind, path=tmp_path / "cp.db", pg_url=pg_url) as inner:
            yield Case(mode, kind, inner)
    else:
        async with aopen_saver(kind, path=tmp_path / "cp.db", pg_url=pg_url) as inner:
            yield Case(mode, kind, inner)


def history() -> list[Any]:
    """sys + 3 turns (human, tool call, tool result, answer): 13 messages."""
    msgs: list[Any] = [SystemMessage("be brief", id="sys")]
    for t in range(3):
        msgs += [
            HumanMessage(f"q{t}", id=f"h{t}"),
            AIMessage("", id=f"a{t}", tool_calls=[{"name": "f", "args": {}, "id": f"c{t}"}]),
            ToolMessage(f"r{t}", tool_call_id=f"c{t}", id=f"t{t}"),
            AIMessage(f"answer {t}", id=f"f{t}"),
        ]
    return msgs


REDUCED = ["sys", "h2", "a2", "t2", "f2"]  # min_messages=4 keeps the newest whole turn


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=4, max_messages=8)


def ids(messages: Sequence[Any]) -> list[str | None]:
    return [read_message(m).id for m in messages]


def make_checkpoint(
    saver: Any, messages: Sequence[Any], previous: Any = None
) -> tuple[Checkpoint, ChannelVersions]:
    """A checkpoint holding ``messages`` plus a small channel, and its new_versions (both channels)."""
    prev = previous["channel_versions"] if previous else {}
    versions = {k: saver.get_next_version(prev.get(k), None) for k in ("messages", "count")}
    checkpoint: Checkpoint = {
        "v": 4, "id": str(uuid6()), "ts": datetime.now(timezone.utc).isoformat(),
        "channel_values": {"messages": messages, "count": 3},
        "channel_versions": versions,
        "versions_seen": {"agent": {"count": versions["count"]}},
        "updated_channels": None,
    }
    return checkpoint, dict(versions)


def config_for(thread: str, parent: Any = None) -> RunnableConfig:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if parent:
        conf["checkpoint_id"] = parent["id"]
    return {"configurable": conf}


async def test_put_stores_reduced_and_never_touches_the_given_checkpoint(case: Case) -> None:
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(case.inner, reducer(), on_reduce=reports.append)
    live = history()
    checkpoint, new_versions = make_checkpoint(saver, live)
    before = copy.deepcopy(checkpoint)
    thread = f"put-{uuid.uuid4().hex}"
    returned = await case.put(saver, config_for(thread), checkpoint, new_versions)

    # the given checkpoint (whose list is the live run's list) is unchanged, object for object
    assert checkpoint == before
    assert checkpoint["channel_values"]["messages"] is live
    assert ids(live) == ids(before["channel_values"]["messages"])
    assert returned["configurable"]["checkpoint_id"] == checkpoint["id"]

    stored = await case.get_tuple(saver, config_for(thread))
    cp = stored.checkpoint
    assert ids(cp["channel_values"]["messages"]) == REDUCED
    assert cp["channel_values"]["count"] == 3
    assert set(cp["channel_values"]) == {"messages", "count"}
    for key in ("id", "channel_versions", "versions_seen"):
        assert cp[key] == checkpoint[key], key
    assert stored.metadata["step"] == 1 and stored.metadata["source"] == "loop"

    [report] = reports
    assert (report.thread_id, report.checkpoint_ns, report.checkpoint_id) == (thread, "", checkpoint["id"])
    assert (report.skipped, report.new_version) == (None, True)
    assert report.stats is not None
    s = report.stats
    assert (s.messages_before, s.messages_after, s.pruned_count, s.triggered) == (13, 5, 8, True)


async def test_unchanged_version_is_stored_reduced_by_every_saver(case: Case) -> None:
    """A put where the messages channel is not in new_versions still carries the live, full list.
    Row savers (Sqlite) store it as given: the wrapper reduces it too; blob savers keep the blob of
    the version, which was reduced when it was new. Either way the stored list is reduced."""
    reports: list[PutReduction] = []
    saver = ReducingCheckpointSaver(case.inner, reducer(), on_reduce=reports.append)
    live = history()
    thread = f"unchanged-{uuid.uuid4().hex}"
    first, new_versions = make_checkpoint(saver, live)
    await case.put(saver, config_for(thread), first, new_versions)
    # next step: only "count" changed; the messages channel keeps its version and its live list
    second: Checkpoint = {**first, "id": str(uuid6()), "channel_values": {"messages": live, "count": 4},
              "channel_versions": {**first["channel_versions"],
                                   "count": saver.get_next_version(first["channel_versions"]["count"], None)}}
    await case.put(saver, config_for(thread, first), second, {"count": second["channel_versions"]["count"]})

    stored = await case.get_tuple(saver, config_for(thread))
    assert stored.checkpoint["id"] == second["id"]
    assert ids(stored.checkpoint["channel_values"]["messages"]) == REDUCED
    assert stored.checkpoint["channel_values"]["count"] == 4
    pruned = [(r.new_version, r.stats.pruned_count if r.stats else None) for r in reports]
    assert pruned == [(True, 8), (False, 8)]

    # why: the bare row saver would have stored the full live list for the second checkpoint
    if case.kind not in BLOB_SAVERS:
        bare_thread = f"bare-{thread}"
        await case.put(case.inner, config_for(bare_thread), first, new_versions)
        await case.put(case.inner, config_for(bare_thread, first), second, {"count": 2})
        bare = await case.get_tuple(case.inner, config_for(bare_thread))
        assert len(bare.checkpoint["channel_values"]["messages"]) == 13


async def test_puts_that_need_no_reduction_pass_the_checkpoint_on_as_is(case: Case) -> None:
    saver = ReducingCheckpointSaver(case.inner, MessageReducer(min_messages=10, max_messages=20))
    live = history()
    checkpoint, new_versions = make_checkpoint(saver, live)
    out, report = reduce_checkpoint(saver.reducer, config_for("x"), checkpoint, new_versions)
    assert out is checkpoint  # no copy when nothing is pruned
    assert report.stats is not None and report.stats.triggered is False
    thread = f"small-{uuid.uuid4().hex}"
    await case.put(saver, config_for(thread), checkpoint, new_versions)
    stored = await case.get_tuple(saver, config_for(thread))
    assert ids(stored.checkpoint["channel_values"]["messages"]) == ids(live)


def test_reduction_is_idempotent_and_deterministic() -> None:
    r = reducer()
    checkpoint, new_versions = make_checkpoint(ReducingCheckpointSaver(_memory(), r), history())
    once, _ = reduce_checkpoint(r, config_for("t"), checkpoint, new_versions)
    again, _ = reduce_checkpoint(r, config_for("t"), checkpoint, new_versions)
    assert ids(once["channel_values"]["messages"]) == ids(again["channel_values"]["messages"]) == REDUCED
    twice, report = reduce_checkpoint(r, config_for("t"), once, new_versions)
    assert twice is once
    assert report.stats is not None and report.stats.pruned_count == 0


@pytest.mark.parametrize(
    ("values", "versions", "skipped"),
    [
        pytest.param({"count": 1}, {"count": 1}, "absent", id="absent"),
        pytest.param({"count": 1}, {"count": 1, "messages": 1}, "delta channel", id="versioned-but-absent"),
        pytest.param({"messages": "text"}, {"messages": 1}, "not a list or tuple", id="str"),
        pytest.param({"messages": b"text"}, {"messages": 1}, "not a list or tuple", id="bytes"),
        pytest.param({"messages": {"a": 1}}, {"messages": 1}, "not a list or tuple", id="dict"),
        pytest.param({"messages": None}, {"messages": 1}, "not a list or tuple", id="none"),
    ],
)
def test_skipped_puts_are_reported_and_stored_unchanged(values: Any, versions: Any, skipped: str) -> None:
    checkpoint: Checkpoint = {"v": 4, "id": str(uuid6()), "ts": "", "channel_values": values,
                  "channel_versions": versions, "versions_seen": {}, "updated_channels": None}
    out, report = reduce_checkpoint(reducer(), config_for("t"), checkpoint, versions)
    assert out is checkpoint
    assert (report.skipped, report.stats) == (skipped, None)


async def test_a_tuple_channel_is_reduced_and_stays_a_tuple(case: Case) -> None:
    """``reduce()`` takes a tuple; the put used to skip it ("not a list") and store it unbounded."""
    saver = ReducingCheckpointSaver(case.inner, reducer())
    live = tuple(history())
    checkpoint, new_versions = make_checkpoint(saver, live)
    given = copy.deepcopy(checkpoint)

    out, report = reduce_checkpoint(reducer(), config_for("t"), checkpoint, new_versions)
    assert report.skipped is None and report.stats is not None and report.stats.pruned_count == 8
    reduced = out["channel_values"]["messages"]
    assert type(reduced) is tuple and ids(reduced) == REDUCED
    again, _ = reduce_checkpoint(reducer(), config_for("t"), out, new_versions)
    assert again is out  # nothing left to prune: the very same checkpoint, tuple and all

    thread = f"tuple-{uuid.uuid4().hex}"
    await case.put(saver, config_for(thread), checkpoint, new_versions)
    stored = await case.get_tuple(saver, config_for(thread))
    assert ids(stored.checkpoint["channel_values"]["messages"]) == REDUCED
    assert checkpoint == given and checkpoint["channel_values"]["messages"] is live


def test_delta_snapshot_value_is_left_alone(caplog: pytest.LogCaptureFixture, monkeypatch: Any) -> None:
    import threading

    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    import checkpointers.reduction as reduction

    monkeypatch.setattr(reduction, "_warned_delta", threading.Event())
    snapshot = _DeltaSnapshot(history())
    checkpoint: Checkpoint = {"v": 4, "id": str(uuid6()), "ts": "", "channel_values": {"messages": snapshot},
                  "channel_versions": {"messages": 1}, "versions_seen": {}, "updated_channels": None}
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer.checkpointers"):
        for _ in range(3):
            out, report = reduce_checkpoint(reducer(), config_for("t"), checkpoint, {"messages": 1})
            assert out is checkpoint and report.skipped == "delta channel"
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "DeltaChannel" in caplog.records[0].getMessage()


# -- observability ----------------------------------------------------------------------------------


def _memory() -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    return InMemorySaver()


def test_token_mode_stats_and_info_log(caplog: pytest.LogCaptureFixture) -> None:
    reports: list[PutReduction] = []
    r = MessageReducer(config=ReducerConfig(max_tokens=100, target_tokens=60, token_counter=lambda m: 10))
    saver = ReducingCheckpointSaver(_memory(), r, on_reduce=reports.append)
    checkpoint, new_versions = make_checkpoint(saver, history())
    with caplog.at_level(logging.INFO, logger="agentstate_reducer.checkpointers"):
        saver.put(config_for("tok"), checkpoint, {}, new_versions)
    [report] = reports
    assert report.stats is not None
    s = report.stats
    assert (s.mode, s.tokens_before, s.tokens_after, s.messages_before, s.messages_after) == (
        "tokens", 130, 50, 13, 5)
    [record] = [r for r in caplog.records if r.name == "agentstate_reducer.checkpointers"]
    assert record.levelname == "INFO"
    assert record.getMessage() == (
        "reduced 'messages' in thread 'tok' ns '': 13 -> 5 messages, tokens 130 -> 50")


def test_failing_on_reduce_callback_is_logged_and_the_put_lands(caplog: pytest.LogCaptureFixture) -> None:
    def broken(report: PutReduction) -> None:
        raise RuntimeError("metrics backend down")

    saver = ReducingCheckpointSaver(_memory(), reducer(), on_reduce=broken)
    checkpoint, new_versions = make_checkpoint(saver, history())
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer.checkpointers"):
        saver.put(config_for("cb"), checkpoint, {}, new_versions)
    stored = saver.get_tuple(config_for("cb"))
    assert stored is not None
    assert ids(stored.checkpoint["channel_values"]["messages"]) == REDUCED
    assert [r.getMessage() for r in caplog.records] == [
        "on_reduce callback failed; the checkpoint is stored anyway"]
    assert caplog.records[0].exc_info is not None


@pytest.mark.parametrize("messages_key", ["messages", "chat_history"])
def test_messages_key_selects_the_channel(messages_key: str) -> None:
    saver = ReducingCheckpointSaver(_memory(), reducer(), messages_key=messages_key)
    checkpoint, _ = make_checkpoint(saver, history())
    values = {"messages": history(), "chat_history": history()}
    checkpoint = {**checkpoint, "channel_values": values,
                  "channel_versions": {"messages": "1", "chat_history": "1"}}
    saver.put(config_for("k"), checkpoint, {}, {"messages": "1", "chat_history": "1"})
    got = saver.get_tuple(config_for("k"))
    assert got is not None
    stored = got.checkpoint["channel_values"]
    other = "chat_history" if messages_key == "messages" else "messages"
    assert ids(stored[messages_key]) == REDUCED
    assert len(stored[other]) == 13


def _absent_key_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "messages_key=" in r.getMessage()]


def test_a_mistyped_messages_key_warns_once_naming_the_channels(caplog: pytest.LogCaptureFixture) -> None:
    """A graph run behind a saver whose ``messages_key`` names no channel: one warning for the
    saver, naming the checkpoint's state channels and the key looked for; nothing is reduced."""
    caplog.set_level(logging.WARNING, logger="agentstate_reducer.checkpointers")
    saver = ReducingCheckpointSaver(_memory(), MessageReducer(min_messages=2, max_messages=4),
                                    messages_key="mesages")
    graph = build_graph(saver, bookkeeping=True)
    run_turns(graph, 5, thread_id="typo")
    assert _absent_key_warnings(caplog) == [
        "ReducingCheckpointSaver: a checkpoint of thread 'typo' has no channel 'mesages' (its "
        "channels: ['messages']; messages are in ['messages']), so nothing is reduced; pass "
        "messages_key= naming the channel that holds the message list (warned once per saver)"
    ]
    assert len(graph.get_state(thread_config("typo")).values["messages"]) == 1 + 5 * 4  # sys + 5 turns
    # once per saver: another saver warns again
    other = ReducingCheckpointSaver(_memory(), reducer(), messages_key="mesages")
    checkpoint, versions = make_checkpoint(other, history())
    other.put(config_for("other"), checkpoint, {}, versions)
    assert len(_absent_key_warnings(caplog)) == 2
    assert "(its channels: ['count', 'messages']; messages are in ['messages'])" in (
        _absent_key_warnings(caplog)[1])


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"__start__": {"messages": [HumanMessage("hi", id="h")]}},
        {"branch:to:agent": None},
        {"profile": {"name": "x"}, "history": []},
    ],
    ids=["empty", "input-checkpoint", "trigger-only", "no-messages-yet"],
)
def test_checkpoints_without_state_channels_do_not_warn(
    values: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentstate_reducer.checkpointers")
    saver = ReducingCheckpointSaver(_memory(), reducer())
    checkpoint, _ = make_checkpoint(saver, [])
    checkpoint = {**checkpoint, "channel_values": values, "channel_versions": dict.fromkeys(values, "1")}
    saver.put(config_for("quiet"), checkpoint, {}, dict.fromkeys(values, "1"))
    assert _absent_key_warnings(caplog) == []


def test_a_subgraph_with_a_state_of_its_own_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentstate_reducer.checkpointers")
    saver = ReducingCheckpointSaver(_memory(), reducer())
    checkpoint, _ = make_checkpoint(saver, [])
    checkpoint = {**checkpoint, "channel_values": {"notes": history()}, "channel_versions": {"notes": "1"}}
    config: RunnableConfig = {"configurable": {"thread_id": "sub", "checkpoint_ns": "research:1"}}
    saver.put(config, checkpoint, {}, {"notes": "1"})
    assert _absent_key_warnings(caplog) == []


def test_the_right_messages_key_never_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentstate_reducer.checkpointers")
    graph = build_graph(ReducingCheckpointSaver(_memory(), reducer()), bookkeeping=True)
    run_turns(graph, 3, thread_id="right")
    assert _absent_key_warnings(caplog) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_repeated_puts_store_and_report_what_a_fresh_reducer_decides(mode: str) -> None:
    """The reducer remembers its last output; a put of that output again (the same objects, or
    equal copies read back from storage) may take a shortcut. Put by put, the wrapper with its one
    reducer stores and reports what a new reducer decides for the same list."""
    reports: list[PutReduction] = []
    config = ReducerConfig(min_messages=4, max_messages=14)
    saver = ReducingCheckpointSaver(_memory(), MessageReducer(config=config), on_reduce=reports.append)
    live = history()  # 13 messages: under max_messages
    orphan = ToolMessage("late", tool_call_id="nobody", id="orphan")
    more = [HumanMessage("q3", id="h3"), AIMessage("answer 3", id="f3")]
    steps: list[list[Any]] = [
        live, live, list(live), copy.deepcopy(live),  # unchanged: same objects, a copy, read back
        [*live, orphan],  # an orphan result: pruned although nothing triggers
        live, [*live, *more],  # back to the output, then grown past max_messages: triggered
        live[5:], live[:5], live[:5],  # shorter lists: a new output, then it again
        [*live[:4], orphan],  # as long as the last output, not equal to it: an orphan to prune
    ]
    previous = None
    for i, messages in enumerate(steps):
        checkpoint, new_versions = make_checkpoint(saver, messages, previous)
        if mode == "sync":
            saver.put(config_for("rep", previous), checkpoint, {}, new_versions)
        else:
            await saver.aput(config_for("rep", previous), checkpoint, {}, new_versions)
        previous = checkpoint
        expected = MessageReducer(config=config).reduce(messages)
        stored = saver.get_tuple(config_for("rep"))
        assert stored is not None
        assert ids(stored.checkpoint["channel_values"]["messages"]) == ids(expected.surviving), i
        assert reports[-1].stats == expected.stats, i
    pruned = [r.stats.pruned_count for r in reports if r.stats is not None]
    assert pruned == [0, 0, 0, 0, 1, 0, 12, 0, 0, 0, 1]  # the steps above do what they say
