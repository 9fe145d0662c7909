"""``ReducingCheckpointSaver``: keep the persisted messages channel of any LangGraph saver bounded.

>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from agentstate_reducer import MessageReducer
>>> saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=20, max_messages=40))
>>> saver.reducer.max_messages, saver.messages_key
(40, 'messages')

``graph = builder.compile(checkpointer=saver)``. Invariants:

* ``put``/``aput`` reduce ``checkpoint["channel_values"][messages_key]`` through
  ``checkpointers.reduction`` (the one reduction path, shared with ``CosmosDBSaver``) and hand the
  inner saver a new checkpoint; the given one is never mutated. Everything else is delegated.
* a ``DeltaChannel`` ``messages_key`` (no value in the checkpoint) is rebuilt from the parent
  checkpoint and its writes (``checkpointers.delta``), reduced the same way, and stored as a
  ``_DeltaSnapshot``: every checkpoint put through the wrapper holds the reduced value.
* Optional capabilities (``delete_for_runs``, ``copy_thread``, ``prune`` and their async forms)
  exist on the wrapper's class exactly when the inner class has them, because LangGraph detects
  them on the class; ``prune``/``aprune`` are ``checkpointers.retention``'s wherever it supports
  the inner class and the class has none or LangGraph's (Postgres's refuses DeltaChannel threads).
  ``ReducingCheckpointSaver(...)`` therefore returns an instance of a cached subclass per
  capability set (``_saver_class``); ``isinstance(x, ReducingCheckpointSaver)`` holds for all.
* A saver that reduces by itself (a ``reducer`` attribute) is never reduced twice: it is handed
  the wrapper's reducer when it has none, passed through with the same one, refused with another.
* each put notes the checkpoint it stored, and a ``get_tuple`` that reads it back hands the
  reducer the list as its own output, so the run's first put is a memo hit
  (``reduction.StoredOutputs``: no message held, bounded by bytes).
* ``keep_last`` runs retention after the inner put has stored the checkpoint; a failing run is
  logged, counted in ``retention_stats`` and retried, never failing the put.
* with ``offload``, the checkpoint and writes handed to the inner saver hold references
  (``checkpointers.offload``), their blobs and reference rows stored first; every read
  (``get``, ``get_tuple``, ``list``, ``get_delta_channel_history`` and the async forms) returns
  them restored, or raises ``BlobError`` naming the checkpoint and the blob. A read that loses a
  race with retention (the checkpoint and its blobs deleted between its row read and its blob
  read) reads the rows again: the state stored now, never an error
  (``offload.checkpoint.read_restored``).

The user guide (in-run vs stored state, interrupts and forks, observability, retention) is
docs/savers.md.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentstate_reducer import MessageReducer

from . import retention as _retention
from ._flow import adrive, drive
from .delta import DeltaMemo, DeltaOp, GetTuple, Reduce, holds_list, reduced_checkpoint_flow
from .offload.checkpoint import (
    BlobCache,
    aread_restored,
    history_read_key,
    read_restored,
    restored_history_flow,
    restored_tuple_flow,
    stored_checkpoint_flow,
    stored_writes_flow,
)
from .offload.config import BlobOffload, BlobRunner
from .offload.ops import DropRefs
from .reduction import (
    DEFAULT_MEMO,
    AbsentKeyCheck,
    DefaultMemo,
    OnReduce,
    StoredOutputs,
    SummaryMemo,
    _namespace,
    areduce_for_put,
    reduce_for_put,
    resolve_memo,
)
from .retention.blobs import bind_offload
from .retention.follow import drop_refs_flow

__all__ = ["ReducingCheckpointSaver"]

logger = logging.getLogger("agentstate_reducer.checkpointers")

#: Optional BaseCheckpointSaver methods; each is mirrored only when the inner saver's class has it.
OPTIONAL_METHODS = ("delete_for_runs", "adelete_for_runs", "copy_thread", "acopy_thread", "prune", "aprune")


def _accepts_task_path(method: Callable[..., Any]) -> bool:
    # Pregel passes task_path only to savers whose put_writes takes it (older savers do not).
    import inspect

    try:
        return "task_path" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


class ReducingCheckpointSaver(_retention.RetentionSettings, BaseCheckpointSaver[Any]):
    """Wrap ``inner`` so the ``messages_key`` channel of every stored checkpoint is reduced.

    Args:
        inner: any ``BaseCheckpointSaver`` (InMemorySaver, SqliteSaver, PostgresSaver, their async
            forms, CosmosDBSaver, ...). It keeps doing all the storage.
        reducer: the ``MessageReducer`` applied to ``checkpoint["channel_values"][messages_key]``.
        messages_key: the channel holding the message list.
        on_reduce: called with a ``PutReduction`` for every put (also the skipped ones, with
            ``skipped`` saying why); runs on LangGraph's background writer, so keep it quick.
        summary_memo: the ``checkpointers.reduction.SummaryMemo`` remembering per thread what the
            running summary already covers, so a summarizer is called once per pruned batch
            although LangGraph re-puts a run's full list on every step. Default: a new one per
            wrapper; ``None`` turns it off (every put then prunes and summarizes the run's whole
            list again). It only acts when the reducer has a summarizer.
        keep_last: keep each thread's newest ``keep_last`` root checkpoints (an int >= 1); None (the
            default) keeps all. Needs an inner saver ``checkpointers.retention`` supports.
        retention_every: with ``keep_last``, run a thread's retention at a put whose metadata
            ``step`` + 1 passed a multiple of ``retention_every`` (int >= 1), whichever process
            makes it (``checkpointers.retention.RetentionSchedule``).
        branch_grace: with ``keep_last``, how long a checkpoint another run on the thread may
            still be extending (a step due after it, none of its run stored after it) is kept
            whatever ``keep_last`` says (a ``timedelta`` >= 0; default one hour).
        offload: a ``checkpointers.BlobOffload``: large and binary content of every checkpoint and
            write is stored once by its SHA-256 and read back in place (docs/savers.md, "Blob
            offload"); None (the default) stores checkpoints as they are. With it on, retention,
            ``prune`` and ``delete_thread`` delete a blob once nothing names it, and
            ``copy_thread``/``delete_for_runs`` are not offered. Each ``StoreArchive`` among the
            reducer's ``on_prune`` hooks then stores references to these blobs instead of the bytes.
            An inner saver with an ``offload`` setting of its own (the Cosmos DB savers) is handed
            it and offloads itself, after its reduction (``ValueError`` if it already has a
            different one).

    Raises:
        TypeError: ``inner`` is not a ``BaseCheckpointSaver`` or ``reducer`` not a ``MessageReducer``;
            ``keep_last`` is not an int or None, or is set on an inner saver retention lacks.
        ValueError: ``inner`` already applies a different reducer (it would reduce twice);
            ``keep_last`` or ``retention_every`` is below 1; with ``offload``, a ``StoreArchive``
            among the reducer's hooks already stores references to another saver's blobs.
    """

    def __new__(cls, inner: Any = None, *args: Any, **kwargs: Any) -> ReducingCheckpointSaver:
        if not isinstance(inner, BaseCheckpointSaver):
            # copy.copy() and friends call __new__(cls) with no arguments; __init__ reports bad input
            return super().__new__(cls)
        base = cls.__dict__.get("_base_class", cls)
        offload = kwargs.get("offload") is not None
        return super().__new__(_saver_class(base, *_capabilities(inner, offload)))

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        reducer: MessageReducer,
        *,
        messages_key: str = "messages",
        on_reduce: OnReduce | None = None,
        summary_memo: SummaryMemo | DefaultMemo | None = DEFAULT_MEMO,
        keep_last: int | None = None,
        retention_every: int = 8,
        branch_grace: timedelta = _retention.BRANCH_GRACE,
        offload: BlobOffload | None = None,
    ) -> None:
        # No super().__init__(): it would set a serde of our own; ``serde`` is the inner saver's.
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(
                f"inner must be a langgraph BaseCheckpointSaver (InMemorySaver, SqliteSaver, ...), "
                f"got {type(inner).__name__}"
            )
        if not isinstance(reducer, MessageReducer):
            raise TypeError(
                f"reducer must be an agentstate_reducer.MessageReducer, got {type(reducer).__name__}"
            )
        if not isinstance(messages_key, str) or not messages_key:
            raise TypeError(f"messages_key must be a non-empty str, got {messages_key!r}")
        if on_reduce is not None and not callable(on_reduce):
            raise TypeError(
                f"on_reduce must be callable(PutReduction) or None, got {type(on_reduce).__name__}"
            )
        self._inner = inner
        self._reducer = reducer
        self._messages_key = messages_key
        self._on_reduce = on_reduce
        #: True when the inner saver applies the reducer itself: puts pass through unchanged.
        self._passthrough = _adopt(inner, reducer, messages_key, on_reduce)
        self._summary_memo = resolve_memo(summary_memo)
        self._absent_key = AbsentKeyCheck()
        self._init_retention(keep_last, retention_every, branch_grace)
        if self._keep_last is not None and not _retention.supports_retention(type(inner)):
            raise TypeError(
                f"keep_last is supported on {', '.join(_retention.supported_savers())}; "
                f"{type(inner).__name__} has no retention backend: leave keep_last=None"
            )
        if offload is not None and not isinstance(offload, BlobOffload):
            raise TypeError(
                f"offload must be a checkpointers.BlobOffload or None, got {type(offload).__name__}"
            )
        self._offload = offload
        self._blobs: BlobRunner | None = None
        if offload is not None and not _adopt_offload(inner, offload):
            self._blobs = bind_offload(offload, inner)
        runner = self.blob_runner
        if runner is not None:
            # the archive stores references to this saver's blobs, not the bytes again
            archives = self._archives()
            for archive in archives:  # every one checked before any is bound
                archive._check_blobs(runner)
            for archive in archives:
                archive._bind_blobs(runner)
        # through the wrapper: with blobs in a BaseStore, retention follows them there
        self._backend: _retention.Backend | None = (
            _retention.backend_for(self) if self._keep_last is not None else None
        )
        self._delta = DeltaMemo()
        #: the reduced lists this wrapper stored, known again when a run reads them back
        self._stored = StoredOutputs()
        self._task_path = _accepts_task_path(inner.put_writes)
        self._atask_path = _accepts_task_path(inner.aput_writes)

    # -- what the wrapper is ------------------------------------------------------------------

    @property
    def inner(self) -> BaseCheckpointSaver[Any]:
        """The wrapped saver."""
        return self._inner

    @property
    def reducer(self) -> MessageReducer:
        return self._reducer

    @property
    def messages_key(self) -> str:
        return self._messages_key

    @property
    def on_reduce(self) -> OnReduce | None:
        return self._on_reduce

    @property
    def offload(self) -> BlobOffload | None:
        return self._offload

    @property
    def blob_runner(self) -> BlobRunner | None:
        """Performs the blob operations of ``offload`` (None without it): the wrapper's, or those of
        the inner saver that adopted it; ``retention.backend_for`` reads it, so retention run on
        this wrapper follows blobs kept in a ``BaseStore``."""
        if self._blobs is not None or self._offload is None:
            return self._blobs
        return getattr(self._inner, "blob_runner", None)  # the inner saver adopted the offload

    @property
    def passthrough(self) -> bool:
        """True when the inner saver applies ``reducer`` itself and puts are passed through."""
        return self._passthrough

    def __repr__(self) -> str:
        return (
            f"ReducingCheckpointSaver({self._inner!r}, {self._reducer!r}, "
            f"messages_key={self._messages_key!r})"
        )

    def __getattr__(self, name: str) -> Any:
        # Backend methods and attributes (setup(), conn, lock, ...) are the inner saver's. Dunder
        # and private lookups must not recurse while copy/pickle build an instance without _inner.
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        try:
            inner = self.__dict__["_inner"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(inner, name)

    @property
    def serde(self) -> SerializerProtocol:
        """The inner saver's serializer (it does the storing)."""
        return self._inner.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self._inner.serde = value

    @property
    def config_specs(self) -> list[Any]:
        return self._inner.config_specs

    def get_next_version(self, current: Any, channel: None) -> Any:
        # Must be the inner saver's: InMemorySaver and the SQL savers use string versions.
        return self._inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ReducingCheckpointSaver:
        """Wrap the inner saver's ``with_allowlist`` result (strict msgpack keeps custom types)."""
        inner = self._inner.with_allowlist(extra_allowlist)
        if inner is self._inner:
            return self
        # same storage, same threads: the clone shares the memo
        clone = type(self)(inner, self._reducer, messages_key=self._messages_key, on_reduce=self._on_reduce,
                           summary_memo=self._summary_memo, keep_last=self._keep_last,
                           retention_every=self._retention_every, branch_grace=self._branch_grace,
                           offload=self._offload)
        clone._schedule = self._schedule  # same threads: one schedule
        clone._stored = self._stored
        return clone

    # -- context-manager use ------------------------------------------------------------------

    def __enter__(self) -> ReducingCheckpointSaver:
        enter = getattr(self._inner, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        exit_ = getattr(self._inner, "__exit__", None)
        return exit_(exc_type, exc, tb) if exit_ is not None else None

    async def __aenter__(self) -> ReducingCheckpointSaver:
        enter = getattr(self._inner, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        exit_ = getattr(self._inner, "__aexit__", None)
        return await exit_(exc_type, exc, tb) if exit_ is not None else None

    # -- writes: reduce, then delegate ----------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if not self._passthrough:
            self._absent_key.check("ReducingCheckpointSaver", config, checkpoint, self._messages_key)
            checkpoint = self._reduced(config, checkpoint, new_versions)
        if self._schedule is not None:
            new_versions = _retention.versions_to_store(checkpoint, metadata, new_versions)
        reduced = checkpoint
        if self._blobs is not None:
            checkpoint = self._blobs.run(
                stored_checkpoint_flow(self._blobs.offloader, config, checkpoint, self._messages_key)
            )
        saved = self._inner.put(config, checkpoint, metadata, new_versions)
        if not self._passthrough:
            self._stored.after_put(saved, reduced, self._messages_key)
        if self._schedule is not None and self._backend is not None:
            self._schedule.after_put(self._backend, saved, metadata)
        return saved

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if not self._passthrough:
            self._absent_key.check("ReducingCheckpointSaver", config, checkpoint, self._messages_key)
            checkpoint = await self._areduced(config, checkpoint, new_versions)
        if self._schedule is not None:
            new_versions = _retention.versions_to_store(checkpoint, metadata, new_versions)
        reduced = checkpoint
        if self._blobs is not None:
            checkpoint = await self._blobs.arun(
                stored_checkpoint_flow(self._blobs.offloader, config, checkpoint, self._messages_key)
            )
        saved = await self._inner.aput(config, checkpoint, metadata, new_versions)
        if not self._passthrough:
            self._stored.after_put(saved, reduced, self._messages_key)
        if self._schedule is not None and self._backend is not None:
            await self._schedule.aafter_put(self._backend, saved, metadata)
        return saved

    # -- DeltaChannel messages channels (checkpointers.delta) ------------------------------------

    def _reduced(
        self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> Checkpoint:
        if holds_list(checkpoint, self._messages_key):  # the flow's one step (Reduce), performed directly
            return reduce_for_put(
                self._reducer, config, checkpoint, new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )
        flow = reduced_checkpoint_flow(
            config, checkpoint, new_versions, self._messages_key, self._delta, self._on_reduce
        )
        return drive(flow, self._perform_delta)

    async def _areduced(
        self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> Checkpoint:
        if holds_list(checkpoint, self._messages_key):  # the flow's one step (Reduce), performed directly
            return await areduce_for_put(
                self._reducer, config, checkpoint, new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )
        flow = reduced_checkpoint_flow(
            config, checkpoint, new_versions, self._messages_key, self._delta, self._on_reduce
        )
        return await adrive(flow, self._aperform_delta)

    def _perform_delta(self, op: DeltaOp) -> Any:
        if isinstance(op, Reduce):
            return reduce_for_put(
                self._reducer, op.config, op.checkpoint, op.new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )
        if isinstance(op, GetTuple):
            return self.get_tuple(op.config)
        return self.get_delta_channel_history(config=op.config, channels=[op.channel])[op.channel]

    async def _aperform_delta(self, op: DeltaOp) -> Any:
        if isinstance(op, Reduce):
            return await areduce_for_put(
                self._reducer, op.config, op.checkpoint, op.new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )
        if isinstance(op, GetTuple):
            return await self.aget_tuple(op.config)
        history = await self.aget_delta_channel_history(config=op.config, channels=[op.channel])
        return history[op.channel]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        # Writes are raw node output, replayed by LangGraph through the channel reducer: never
        # reduced, only offloaded (and restored on read).
        self._delta.task_paths.record(task_id, task_path)
        if self._blobs is not None:
            writes = self._blobs.run(
                stored_writes_flow(self._blobs.offloader, config, writes, task_id, self._messages_key)
            )
        if self._task_path:
            return self._inner.put_writes(config, writes, task_id, task_path)
        return self._inner.put_writes(config, writes, task_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._delta.task_paths.record(task_id, task_path)
        if self._blobs is not None:
            writes = await self._blobs.arun(
                stored_writes_flow(self._blobs.offloader, config, writes, task_id, self._messages_key)
            )
        if self._atask_path:
            return await self._inner.aput_writes(config, writes, task_id, task_path)
        return await self._inner.aput_writes(config, writes, task_id)

    # -- reads and deletes: delegate ------------------------------------------------------------

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        if self._blobs is None:
            return self._inner.get(config)
        tup = self.get_tuple(config)
        return tup.checkpoint if tup is not None else None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = self._inner.get_tuple(config)
        blobs = self._blobs
        if blobs is not None and tup is not None:
            # retention may delete what was read before its blobs are: read the rows again
            tup = read_restored(tup, lambda: self._inner.get_tuple(config),
                                lambda t: blobs.run(restored_tuple_flow(t, blobs.where)))
        if not self._passthrough:
            self._stored.after_load(self._reducer, tup, self._messages_key)
        return tup

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        listed = self._inner.list(config, filter=filter, before=before, limit=limit)
        if self._blobs is None:
            return listed
        return self._restored(listed)

    def _restored(self, listed: Iterator[CheckpointTuple]) -> Iterator[CheckpointTuple]:
        # Read the page first: a SQLite saver holds its lock while it iterates.
        blobs = self._blobs
        assert blobs is not None
        cache = BlobCache()
        for tup in list(listed):
            # a checkpoint deleted since the listing read it is left out
            restored = read_restored(tup, functools.partial(self._inner.get_tuple, tup.config),
                                     lambda t: blobs.run(restored_tuple_flow(t, blobs.where, cache)))
            if restored is not None:
                yield restored

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread, then its archived messages (``forget_archived``) and, with offload,
        the blobs nothing names any more."""
        self._inner.delete_thread(thread_id)
        if self._blobs is not None:
            self._blobs.run(drop_refs_flow([DropRefs(thread_id)]))
        self.forget_archived(thread_id)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        history = self._inner.get_delta_channel_history(config=config, channels=channels)
        blobs = self._blobs
        if blobs is None:
            return history
        restored = read_restored(
            history, lambda: self._inner.get_delta_channel_history(config=config, channels=channels),
            lambda h: blobs.run(restored_history_flow(h, config, blobs.where)), history_read_key)
        assert restored is not None  # a history is never None
        return restored

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        if self._blobs is None:
            return await self._inner.aget(config)
        tup = await self.aget_tuple(config)
        return tup.checkpoint if tup is not None else None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await self._inner.aget_tuple(config)
        blobs = self._blobs
        if blobs is not None and tup is not None:
            tup = await aread_restored(tup, lambda: self._inner.aget_tuple(config),
                                       lambda t: blobs.arun(restored_tuple_flow(t, blobs.where)))
        if not self._passthrough:
            self._stored.after_load(self._reducer, tup, self._messages_key)
        return tup

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        listed = self._inner.alist(config, filter=filter, before=before, limit=limit)
        if self._blobs is None:
            return listed
        return self._arestored(listed)

    async def _arestored(self, listed: AsyncIterator[CheckpointTuple]) -> AsyncIterator[CheckpointTuple]:
        blobs = self._blobs
        assert blobs is not None
        cache = BlobCache()
        for tup in [t async for t in listed]:
            restored = await aread_restored(
                tup, functools.partial(self._inner.aget_tuple, tup.config),
                lambda t: blobs.arun(restored_tuple_flow(t, blobs.where, cache)))
            if restored is not None:
                yield restored

    async def adelete_thread(self, thread_id: str) -> None:
        await self._inner.adelete_thread(thread_id)
        if self._blobs is not None:
            await self._blobs.arun(drop_refs_flow([DropRefs(thread_id)]))
        await self.aforget_archived(thread_id)

    # -- the archive follows the thread ---------------------------------------------------------

    def _archives(self) -> tuple[Any, ...]:
        from .archive import StoreArchive

        return tuple(h for h in self._reducer.config.on_prune if isinstance(h, StoreArchive))

    def forget_archived(self, thread_id: str) -> int:
        """Delete the thread's archived messages from every ``StoreArchive`` among the reducer's
        ``on_prune`` hooks (default namespace ``("memories", thread_id)``); how many were deleted."""
        namespace = _namespace({"configurable": {"thread_id": thread_id}})
        return sum(archive.forget(namespace) for archive in self._archives())

    async def aforget_archived(self, thread_id: str) -> int:
        namespace = _namespace({"configurable": {"thread_id": thread_id}})
        return sum([await archive.aforget(namespace) for archive in self._archives()])

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        history = await self._inner.aget_delta_channel_history(config=config, channels=channels)
        blobs = self._blobs
        if blobs is None:
            return history
        restored = await aread_restored(
            history, lambda: self._inner.aget_delta_channel_history(config=config, channels=channels),
            lambda h: blobs.arun(restored_history_flow(h, config, blobs.where)), history_read_key)
        assert restored is not None  # a history is never None
        return restored


# -- optional capabilities: mirrored per class ------------------------------------------------


def _delete_for_runs(self: ReducingCheckpointSaver, run_ids: Sequence[str]) -> None:
    return self.inner.delete_for_runs(run_ids)


async def _adelete_for_runs(self: ReducingCheckpointSaver, run_ids: Sequence[str]) -> None:
    return await self.inner.adelete_for_runs(run_ids)


def _copy_thread(self: ReducingCheckpointSaver, source_thread_id: str, target_thread_id: str) -> None:
    return self.inner.copy_thread(source_thread_id, target_thread_id)


async def _acopy_thread(self: ReducingCheckpointSaver, source_thread_id: str, target_thread_id: str) -> None:
    return await self.inner.acopy_thread(source_thread_id, target_thread_id)


def _prune(
    self: ReducingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    if isinstance(self.inner, _retention.RetentionSettings):  # ours (Cosmos DB): its prune takes them
        self.inner.prune(thread_ids, strategy=strategy, delta_channels=self.delta_channels)  # type: ignore[call-arg]
    else:
        self.inner.prune(thread_ids, strategy=strategy)
    if strategy == "delete":
        for thread_id in thread_ids:
            self.forget_archived(str(thread_id))


async def _aprune(
    self: ReducingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    if isinstance(self.inner, _retention.RetentionSettings):
        await self.inner.aprune(thread_ids, strategy=strategy, delta_channels=self.delta_channels)  # type: ignore[call-arg]
    else:
        await self.inner.aprune(thread_ids, strategy=strategy)
    if strategy == "delete":
        for thread_id in thread_ids:
            await self.aforget_archived(str(thread_id))


def _own_prune(
    self: ReducingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    _retention.prune(self, thread_ids, strategy=strategy, branch_grace=self.branch_grace,
                     delta_channels=self.delta_channels)
    if strategy == "delete":
        for thread_id in thread_ids:
            self.forget_archived(str(thread_id))


async def _own_aprune(
    self: ReducingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    await _retention.aprune(self, thread_ids, strategy=strategy, branch_grace=self.branch_grace,
                            delta_channels=self.delta_channels)
    if strategy == "delete":
        for thread_id in thread_ids:
            await self.aforget_archived(str(thread_id))


#: Optional methods the wrapper implements itself (``checkpointers.retention``) where the inner
#: saver's class lacks them and retention supports the class.
_OWN: dict[str, Callable[..., Any]] = {"prune": _own_prune, "aprune": _own_aprune}
for _name, _fn in _OWN.items():
    _fn.__name__ = _name
    _fn.__qualname__ = f"ReducingCheckpointSaver.{_name}"
    _fn.__doc__ = (
        f"LangGraph's ``{_name}(thread_ids, strategy='keep_latest'|'delete')``, implemented by "
        "``checkpointers.retention`` (the inner saver's class has none)."
    )


_DELEGATES: dict[str, Callable[..., Any]] = {
    "delete_for_runs": _delete_for_runs,
    "adelete_for_runs": _adelete_for_runs,
    "copy_thread": _copy_thread,
    "acopy_thread": _acopy_thread,
    "prune": _prune,
    "aprune": _aprune,
}
assert set(_DELEGATES) == set(OPTIONAL_METHODS)
for _name, _fn in _DELEGATES.items():
    _fn.__name__ = _name
    _fn.__qualname__ = f"ReducingCheckpointSaver.{_name}"
    _fn.__doc__ = f"Delegates to the inner saver's ``{_name}`` (present because its class implements it)."


def capabilities_of(saver: BaseCheckpointSaver[Any]) -> frozenset[str]:
    """The optional methods ``saver``'s class implements, detected as LangGraph's conformance suite
    does: the class attribute is not ``BaseCheckpointSaver``'s stub."""
    cls = type(saver)
    return frozenset(n for n in OPTIONAL_METHODS if getattr(cls, n) is not getattr(BaseCheckpointSaver, n))


#: Optional methods that would store or delete checkpoints without their blobs' reference rows:
#: not offered by a wrapper with offload on (prune is then the wrapper's own, where retention can).
_BLOB_UNSAFE = frozenset({"delete_for_runs", "adelete_for_runs", "copy_thread", "acopy_thread"})


def _capabilities(
    inner: BaseCheckpointSaver[Any], offload: bool = False
) -> tuple[frozenset[str], frozenset[str]]:
    """(optional methods delegated to ``inner``, optional methods the wrapper implements)."""
    delegated = capabilities_of(inner)
    if offload:
        delegated -= _BLOB_UNSAFE
    if _retention.supports_retention(type(inner)) and not _own_prune_of_its_package(inner):
        # retention's prune also where the inner class has LangGraph's: PostgresSaver.prune
        # refuses DeltaChannel threads, which retention keeps correct
        return delegated - set(_OWN), frozenset(_OWN)
    return delegated, frozenset()  # a saver package's own prune (Cosmos DB's runs retention): mirrored


def _own_prune_of_its_package(inner: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``inner``'s class has a ``prune`` of its own outside LangGraph (it may keep state
    of its own in step, as the Cosmos DB savers do)."""
    prune = getattr(type(inner), "prune", BaseCheckpointSaver.prune)
    return prune is not BaseCheckpointSaver.prune and not prune.__module__.startswith("langgraph.")


@functools.cache
def _saver_class(
    base: type[ReducingCheckpointSaver], capabilities: frozenset[str], own: frozenset[str] = frozenset()
) -> type[ReducingCheckpointSaver]:
    """``base`` plus delegates for exactly ``capabilities`` and the wrapper's own implementations
    of ``own``; one cached class per pair of sets.

    Without either, ``base`` itself is used, whose optional methods are the base class stubs
    (they raise NotImplementedError, as the inner saver's would).
    """
    if not capabilities and not own:
        return base
    names = sorted(capabilities | own)
    qualname = f"{base.__qualname__}[{','.join(names)}]"
    namespace: dict[str, Any] = {"__module__": base.__module__, "__qualname__": qualname, "_base_class": base}
    namespace.update((name, _DELEGATES[name]) for name in capabilities)
    namespace.update((name, _OWN[name]) for name in own)
    return type(qualname, (base,), namespace)


def _adopt_offload(inner: Any, offload: BlobOffload) -> bool:
    """The adoption rule for ``offload``: a saver with an ``offload`` setting of its own (the Cosmos
    DB savers) is handed the wrapper's and does the offloading itself, after its reduction, so
    nothing is offloaded twice; True means the wrapper leaves blobs to it."""
    setting = getattr(type(inner), "offload", None)
    if not isinstance(setting, property) or setting.fset is None:
        return False
    name = type(inner).__name__
    current = inner.offload
    if current is not None and current is not offload:
        raise ValueError(
            f"{name} already offloads with its own BlobOffload ({current!r}); wrapping it with a different "
            f"one ({offload!r}) would offload every checkpoint twice. Pass the same BlobOffload object, or "
            f"create the {name} with offload=None and let the wrapper hand it its offload."
        )
    inner.offload = offload
    return True


def _adopt(inner: Any, reducer: MessageReducer, messages_key: str, on_reduce: OnReduce | None) -> bool:
    """Apply the adoption rule to a saver that reduces by itself; True means pass puts through."""
    if not hasattr(inner, "reducer"):
        return False
    name = type(inner).__name__
    current = inner.reducer
    if current is not None and current is not reducer:
        raise ValueError(
            f"{name} already applies its own reducer ({current!r}); wrapping it with a different one "
            f"({reducer!r}) would reduce every checkpoint twice. Pass the same MessageReducer object, "
            f"or create the {name} with reducer=None and let the wrapper hand it its reducer."
        )
    inner_key = getattr(inner, "messages_key", messages_key)
    if current is not None and inner_key != messages_key:
        raise ValueError(
            f"{name} reduces channel {inner_key!r} but the wrapper was given messages_key="
            f"{messages_key!r}; use the same key for both"
        )
    try:
        if current is None:
            inner.reducer = reducer
            if hasattr(inner, "messages_key"):
                inner.messages_key = messages_key
            logger.debug("%s had no reducer: it now applies %r itself; puts pass through", name, reducer)
        if on_reduce is not None and getattr(inner, "on_reduce", False) is None:
            inner.on_reduce = on_reduce
    except AttributeError as exc:
        raise TypeError(
            f"{name} has read-only reducer settings; create it with reducer=... (and on_reduce=...) "
            "instead of wrapping it in a ReducingCheckpointSaver"
        ) from exc
    if on_reduce is not None and getattr(inner, "on_reduce", None) is not on_reduce:
        logger.warning(
            "%s applies the reducer itself and will not call this wrapper's on_reduce callback; "
            "pass on_reduce to the %s instead",
            name, name,
        )
    return True
