"""ReducingCheckpointSaver delegation, capability mirroring and the adoption rule.

The savers here are real LangGraph savers; where a test needs a capability or attribute no
shipped saver has (copy_thread, a saver that reduces by itself, a legacy put_writes), it uses a
small working subclass of InMemorySaver, never a mock.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel._checkpoint import put_writes_accepts_task_path

from agentstate_reducer import MessageReducer, read_message
from checkpointers import PutReduction, ReducingCheckpointSaver, reduce_checkpoint
from checkpointers.saver import OPTIONAL_METHODS, capabilities_of
from tests.scenario_graph import aopen_saver, open_saver


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=2, max_messages=4)


def conversation() -> list[Any]:
    msgs: list[Any] = [SystemMessage("s", id="sys")]
    for t in range(3):
        msgs += [HumanMessage(f"q{t}", id=f"h{t}"), AIMessage(f"a{t}", id=f"a{t}")]
    return msgs


def checkpoint_with(saver: Any, messages: list[Any]) -> tuple[Checkpoint, ChannelVersions]:
    version = saver.get_next_version(None, None)
    cp: Checkpoint = {"v": 4, "id": str(uuid6()), "ts": "2026-01-01T00:00:00+00:00",
          "channel_values": {"messages": messages}, "channel_versions": {"messages": version},
          "versions_seen": {}, "updated_channels": None}
    return cp, {"messages": version}


def cfg(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def stored_ids(saver: Any, thread: str) -> list[str | None]:
    return [read_message(m).id for m in saver.get_tuple(cfg(thread)).checkpoint["channel_values"]["messages"]]


# -- construction ----------------------------------------------------------------------------------


def test_bad_arguments_say_what_to_pass() -> None:
    with pytest.raises(TypeError, match="inner must be a langgraph BaseCheckpointSaver"):
        ReducingCheckpointSaver(object(), reducer())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"reducer must be an agentstate_reducer\.MessageReducer"):
        ReducingCheckpointSaver(InMemorySaver(), lambda a, b: a)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages_key must be a non-empty str"):
        ReducingCheckpointSaver(InMemorySaver(), reducer(), messages_key="")
    with pytest.raises(TypeError, match="on_reduce must be callable"):
        ReducingCheckpointSaver(InMemorySaver(), reducer(), on_reduce="print")  # type: ignore[arg-type]


# -- delegation ------------------------------------------------------------------------------------


def test_versions_serde_and_specs_are_the_inner_savers(tmp_path: Path) -> None:
    with open_saver("sqlite", path=tmp_path / "d.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        v = saver.get_next_version(None, None)
        assert isinstance(v, str)  # string versions: BaseCheckpointSaver's default would raise
        with pytest.raises(NotImplementedError):
            BaseCheckpointSaver.get_next_version(saver, v, None)
        # the inner saver's "<counter>.<random>" strings: the counter part is deterministic
        assert v.split(".")[0] == inner.get_next_version(None, None).split(".")[0] == f"{1:032}"
        assert saver.get_next_version(v, None).split(".")[0] == f"{2:032}"
        assert saver.serde is inner.serde
        assert saver.config_specs == inner.config_specs
        assert saver.conn is inner.conn  # backend attributes via __getattr__
        assert saver.setup == inner.setup
        saver.setup()  # idempotent on the inner saver
        with pytest.raises(AttributeError, match="no_such_thing"):
            saver.no_such_thing  # noqa: B018
    memory = InMemorySaver()
    wrapped = ReducingCheckpointSaver(memory, reducer())
    replacement = type(memory.serde)()
    wrapped.serde = replacement
    assert memory.serde is replacement


def test_with_allowlist_wraps_the_inner_savers_clone() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    reports: list[PutReduction] = []
    # a strict msgpack allowlist (what LANGGRAPH_STRICT_MSGPACK=true gives): with_allowlist clones
    inner = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=[("other_pkg", "Other")]))
    saver = ReducingCheckpointSaver(inner, reducer(), messages_key="messages", on_reduce=reports.append)
    allow = {("my_pkg", "MyType")}
    clone = saver.with_allowlist(allow)
    expected_inner = inner.with_allowlist(allow)
    assert isinstance(clone, ReducingCheckpointSaver)
    assert clone is not saver
    assert type(clone.inner) is InMemorySaver and clone.inner is not inner
    assert clone.inner.serde is not inner.serde
    assert type(clone.inner.serde) is type(expected_inner.serde)
    assert (clone.reducer, clone.messages_key, clone.on_reduce) == (saver.reducer, "messages", reports.append)
    # the clone shares the inner saver's storage (a shallow copy) and still reduces
    cp, nv = checkpoint_with(clone, conversation())
    clone.put(cfg("allow"), cp, {}, nv)
    assert stored_ids(saver, "allow") == ["sys", "h2", "a2"]
    assert len(reports) == 1


def test_with_allowlist_returns_self_when_the_inner_saver_does() -> None:
    class NoAllowlist(InMemorySaver):
        def with_allowlist(self, extra_allowlist: Any) -> NoAllowlist:
            return self

    saver = ReducingCheckpointSaver(NoAllowlist(), reducer())
    assert saver.with_allowlist({("a", "B")}) is saver


def test_put_writes_forwards_task_path() -> None:
    inner = InMemorySaver()
    saver = ReducingCheckpointSaver(inner, reducer())
    assert put_writes_accepts_task_path(saver.put_writes)
    assert put_writes_accepts_task_path(saver.aput_writes)
    cp, nv = checkpoint_with(saver, conversation())
    config = saver.put(cfg("w"), cp, {}, nv)
    writes = [("messages", [{"role": "user", "content": "raw"}])]  # raw node output: never reduced
    saver.put_writes(config, writes, "task-1", "agent/0")
    [(task_id, channel, _, task_path)] = inner.writes[("w", "", cp["id"])].values()
    assert (task_id, channel, task_path) == ("task-1", "messages", "agent/0")
    got = saver.get_tuple(config)
    assert got is not None
    assert got.pending_writes == [("task-1", "messages", [{"role": "user", "content": "raw"}])]


def test_put_writes_of_a_saver_without_task_path() -> None:
    class LegacySaver(InMemorySaver):
        def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str) -> None:  # type: ignore[override]
            super().put_writes(config, writes, task_id)

    saver = ReducingCheckpointSaver(LegacySaver(), reducer())
    cp, nv = checkpoint_with(saver, conversation())
    config = saver.put(cfg("legacy"), cp, {}, nv)
    saver.put_writes(config, [("messages", "x")], "task-1", "agent/0")
    got = saver.get_tuple(config)
    assert got is not None
    assert got.pending_writes == [("task-1", "messages", "x")]


def test_reads_and_deletes_are_delegated(tmp_path: Path) -> None:
    with open_saver("sqlite", path=tmp_path / "r.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        first, nv = checkpoint_with(saver, conversation())
        c1 = saver.put(cfg("r"), first, {"source": "loop", "step": 1}, nv)
        second: Checkpoint = {**first, "id": str(uuid6())}
        c2 = saver.put(c1, second, {"source": "loop", "step": 2}, {})
        assert saver.get(c1) == inner.get(c1)
        assert saver.get_tuple(c2) == inner.get_tuple(c2)
        assert [t.config for t in saver.list(cfg("r"))] == [t.config for t in inner.list(cfg("r"))]
        assert [t.checkpoint["id"] for t in saver.list(cfg("r"), limit=1)] == [second["id"]]
        assert [t.checkpoint["id"] for t in saver.list(cfg("r"), filter={"step": 1})] == [first["id"]]
        assert [t.checkpoint["id"] for t in saver.list(cfg("r"), before=c2)] == [first["id"]]
        history = saver.get_delta_channel_history(config=c2, channels=["messages"])
        assert history == inner.get_delta_channel_history(config=c2, channels=["messages"])
        assert [read_message(m).id for m in history["messages"]["seed"]] == ["sys", "h2", "a2"]
        saver.delete_thread("r")
        assert inner.get_tuple(cfg("r")) is None


async def test_async_reads_and_deletes_are_delegated(tmp_path: Path) -> None:
    async with aopen_saver("aiosqlite", path=tmp_path / "ar.db") as inner:
        saver = ReducingCheckpointSaver(inner, reducer())
        first, nv = checkpoint_with(saver, conversation())
        c1 = await saver.aput(cfg("ar"), first, {"source": "loop", "step": 1}, nv)
        await saver.aput_writes(c1, [("messages", "w")], "task-1", "p")
        assert await saver.aget(c1) == await inner.aget(c1)
        got = await saver.aget_tuple(c1)
        assert got == await inner.aget_tuple(c1)
        assert got is not None and got.pending_writes == [("task-1", "messages", "w")]
        listed = [t.config async for t in saver.alist(cfg("ar"))]
        assert listed == [t.config async for t in inner.alist(cfg("ar"))]
        history = await saver.aget_delta_channel_history(config=c1, channels=["messages"])
        assert history == await inner.aget_delta_channel_history(config=c1, channels=["messages"])
        await saver.adelete_thread("ar")
        assert await inner.aget_tuple(cfg("ar")) is None


async def test_context_manager_use() -> None:
    inner = InMemorySaver()
    saver = ReducingCheckpointSaver(inner, reducer())
    with saver as entered:
        assert entered is saver
    async with saver as aentered:
        assert aentered is saver
    # a saver that is no context manager: the wrapper's with-block is a no-op, not an error
    with ReducingCheckpointSaver(BaseSaverWithoutCM(), reducer()) as plain:
        assert isinstance(plain, ReducingCheckpointSaver)


class BaseSaverWithoutCM(BaseCheckpointSaver[int]):
    pass


# -- capability mirroring --------------------------------------------------------------------------


class CopyingSaver(InMemorySaver):
    """InMemorySaver plus a working copy_thread / acopy_thread."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        for ns, checkpoints in list(self.storage[source_thread_id].items()):
            self.storage[target_thread_id][ns].update(checkpoints)
        for (thread, ns, channel, version), blob in list(self.blobs.items()):
            if thread == source_thread_id:
                self.blobs[(target_thread_id, ns, channel, version)] = blob
        for (thread, ns, checkpoint_id), writes in list(self.writes.items()):
            if thread == source_thread_id:
                self.writes[(target_thread_id, ns, checkpoint_id)] = writes

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)


class PruneOnlySyncSaver(InMemorySaver):
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            self.delete_thread(thread_id)


@pytest.mark.parametrize(
    ("inner_type", "mirrored", "own"),
    [
        pytest.param(BaseSaverWithoutCM, set(), set(), id="none"),
        # retention implements prune/aprune for InMemorySaver (and the SQL savers), which lack them
        pytest.param(InMemorySaver, set(), {"prune", "aprune"}, id="prune-by-retention"),
        pytest.param(CopyingSaver, {"copy_thread", "acopy_thread"}, {"prune", "aprune"}, id="copy_thread"),
        pytest.param(PruneOnlySyncSaver, {"prune"}, set(), id="sync-prune-only"),
    ],
)
def test_wrapper_class_mirrors_exactly_the_inner_capabilities(
    inner_type: type, mirrored: set[str], own: set[str]
) -> None:
    expected = mirrored | own
    saver = ReducingCheckpointSaver(inner_type(), reducer())
    assert capabilities_of(saver.inner) == mirrored
    assert capabilities_of(saver) == expected  # what LangGraph's conformance suite sees
    for name in OPTIONAL_METHODS:
        overridden = getattr(type(saver), name) is not getattr(BaseCheckpointSaver, name)
        assert overridden == (name in expected), name
    assert isinstance(saver, ReducingCheckpointSaver)
    # one cached class per capability set
    assert type(ReducingCheckpointSaver(inner_type(), reducer())) is type(saver)
    if not expected:
        assert type(saver) is ReducingCheckpointSaver
        with pytest.raises(NotImplementedError):
            saver.prune(["t"])
    else:
        assert type(saver).__name__ == f"ReducingCheckpointSaver[{','.join(sorted(expected))}]"


def test_postgres_saver_classes_are_mirrored() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from checkpointers.saver import _saver_class

    # the detection works on the class; PostgresSaver implements prune, the async one both forms
    sync_caps = frozenset(n for n in OPTIONAL_METHODS
                          if getattr(PostgresSaver, n) is not getattr(BaseCheckpointSaver, n))
    async_caps = frozenset(n for n in OPTIONAL_METHODS
                           if getattr(AsyncPostgresSaver, n) is not getattr(BaseCheckpointSaver, n))
    assert (sync_caps, async_caps) == ({"prune"}, {"prune", "aprune"})
    cls = _saver_class(ReducingCheckpointSaver, async_caps)
    assert cls.aprune is not BaseCheckpointSaver.aprune and cls.prune is not BaseCheckpointSaver.prune
    assert cls.acopy_thread is BaseCheckpointSaver.acopy_thread
    assert list(inspect.signature(cls.prune).parameters) == ["self", "thread_ids", "strategy"]


async def test_mirrored_methods_delegate() -> None:
    inner = CopyingSaver()
    saver = ReducingCheckpointSaver(inner, reducer())
    cp, nv = checkpoint_with(saver, conversation())
    saver.put(cfg("src"), cp, {}, nv)
    saver.copy_thread("src", "dst")
    assert stored_ids(saver, "dst") == ["sys", "h2", "a2"]
    await saver.acopy_thread("src", "dst2")
    assert stored_ids(saver, "dst2") == ["sys", "h2", "a2"]

    pruning = ReducingCheckpointSaver(PruneOnlySyncSaver(), reducer())
    pruning.put(cfg("gone"), *_args(pruning))
    pruning.prune(["gone"], strategy="delete")
    assert pruning.get_tuple(cfg("gone")) is None


def _args(saver: Any) -> tuple[Checkpoint, CheckpointMetadata, ChannelVersions]:
    cp, nv = checkpoint_with(saver, conversation())
    return cp, {}, nv


def test_subclasses_of_the_wrapper_keep_their_class() -> None:
    class Tagged(ReducingCheckpointSaver):
        tag = "mine"

    plain = Tagged(BaseSaverWithoutCM(), reducer())
    copying = Tagged(CopyingSaver(), reducer())
    assert type(plain) is Tagged
    assert isinstance(copying, Tagged) and copying.tag == "mine"
    assert type(copying).copy_thread is not BaseCheckpointSaver.copy_thread


# -- adoption: savers that reduce by themselves ----------------------------------------------------


class SelfReducingSaver(InMemorySaver):
    """Applies ``reducer`` in put, like CosmosDBSaver(reducer=...)."""

    def __init__(self, reducer: MessageReducer | None = None, messages_key: str = "messages") -> None:
        super().__init__()
        self.reducer = reducer
        self.messages_key = messages_key
        self.on_reduce: Any = None

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.reducer is not None:
            checkpoint, _ = reduce_checkpoint(self.reducer, config, checkpoint, new_versions,
                                              messages_key=self.messages_key, on_reduce=self.on_reduce)
        return super().put(config, checkpoint, metadata, new_versions)


def test_adoption_hands_our_reducer_to_a_saver_without_one() -> None:
    reports: list[PutReduction] = []
    r = reducer()
    inner = SelfReducingSaver(messages_key="history")
    saver = ReducingCheckpointSaver(inner, r, messages_key="chat", on_reduce=reports.append)
    assert saver.passthrough
    assert (inner.reducer, inner.messages_key, inner.on_reduce) == (r, "chat", reports.append)
    cp, _ = checkpoint_with(saver, conversation())
    cp = {**cp, "channel_values": {"chat": conversation()}, "channel_versions": {"chat": "1"}}
    saver.put(cfg("adopt"), cp, {}, {"chat": "1"})
    got = saver.get_tuple(cfg("adopt"))
    assert got is not None
    stored = got.checkpoint["channel_values"]["chat"]
    assert [m.id for m in stored] == ["sys", "h2", "a2"]
    assert len(reports) == 1  # reduced once, by the inner saver


def test_adoption_passes_through_with_the_same_reducer() -> None:
    reports: list[PutReduction] = []
    r = reducer()
    inner = SelfReducingSaver(r)
    inner.on_reduce = reports.append
    saver = ReducingCheckpointSaver(inner, r)
    assert saver.passthrough
    saver.put(cfg("same"), *_args(saver))
    assert stored_ids(saver, "same") == ["sys", "h2", "a2"]
    assert len(reports) == 1  # never reduced twice


def test_adoption_refuses_a_different_reducer_or_key() -> None:
    twice = r"already applies its own reducer .* would reduce every checkpoint twice"
    with pytest.raises(ValueError, match=twice):
        ReducingCheckpointSaver(SelfReducingSaver(reducer()), reducer())
    r = reducer()
    with pytest.raises(ValueError, match="reduces channel 'history' but the wrapper was given messages_key="):
        ReducingCheckpointSaver(SelfReducingSaver(r, messages_key="history"), r)


def test_wrapping_a_wrapper_never_reduces_twice() -> None:
    reports: list[PutReduction] = []
    r = reducer()
    inner = ReducingCheckpointSaver(InMemorySaver(), r, on_reduce=reports.append)
    outer = ReducingCheckpointSaver(inner, r)
    assert outer.passthrough and not inner.passthrough
    outer.put(cfg("nested"), *_args(outer))
    assert len(reports) == 1
    with pytest.raises(ValueError, match="would reduce every checkpoint twice"):
        ReducingCheckpointSaver(inner, reducer())


def test_adoption_warns_when_the_callback_cannot_be_handed_over(caplog: pytest.LogCaptureFixture) -> None:
    r = reducer()
    inner = SelfReducingSaver(r)
    inner.on_reduce = print
    with caplog.at_level("WARNING", logger="agentstate_reducer.checkpointers"):
        ReducingCheckpointSaver(inner, r, on_reduce=lambda report: None)
    assert [rec.getMessage() for rec in caplog.records] == [
        "SelfReducingSaver applies the reducer itself and will not call this wrapper's on_reduce callback; "
        "pass on_reduce to the SelfReducingSaver instead"
    ]

