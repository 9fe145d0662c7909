"""Compaction of stored threads: a reduced copy of a thread's latest checkpoint, written as a new
checkpoint through the saver's public API; ``compact_store`` runs it over a store together with
retention (idle threads deleted, the rest trimmed to ``keep_last``), as ``agentstate-reducer
compact`` does, and its dry run reports exactly what the run does.

>>> from checkpointers.compact import compact_thread
>>> result = compact_thread(saver, "thread-1", reducer)        # doctest: +SKIP
>>> result.action, result.messages_before, result.messages_after  # doctest: +SKIP
('compacted', 120, 37)

Invariants:

* a stored checkpoint is never edited: the new one goes on top of the latest, with the messages
  channel reduced and its version bumped (savers that store channel values as blobs store a value
  only under a new version); everything else (other channels, ``versions_seen``,
  ``updated_channels``) is copied, so the thread resumes exactly where it was;
* until the put commits, the old checkpoint stays the latest: an interruption leaves the thread as
  it was, and a second run skips threads already within bounds;
* a thread with pending writes (interrupted, or running) is skipped: the writes belong to the
  latest checkpoint and would be lost under a new one, changing what a resume does;
* a ``DeltaChannel`` messages channel (deepagents', LangGraph's ``DeltaChannel``) is rebuilt as a
  load rebuilds it, reduced, and stored as a snapshot (``_DeltaSnapshot``) on the new checkpoint:
  a load takes it whole, so no write stored before it is replayed on the reduced list, and the
  checkpoints before it stay as they were (retention's cut deletes them);
* the new checkpoint's metadata carries ``{"agentstate_reducer": COMPACT_MARKER}``;
* on a store holding offloaded blobs (``checkpointers.offload``), the latest checkpoint is read
  restored and the new one stored offloaded, its reference rows written before it, so retention
  never collects a blob the new checkpoint names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from agentstate_reducer import MessageReducer, telemetry

from . import retention as r
from ._flow import drive
from .delta import DeltaOp, GetHistory, GetTuple, TaskPaths, rebuilt_value_flow, with_snapshot
from .inplace_offload import offload_store, rewrites_in_place
from .offload.checkpoint import restored_tuple_flow, stored_checkpoint_flow
from .offload.config import BlobOffload, BlobRunner
from .offload.ops import HasBlobs
from .reduction import reduce_checkpoint
from .retention.api import DeltaChannels, delta_channels_of
from .retention.blobs import bind_offload
from .retention.flows import snapshot_flow

__all__ = [
    "COMPACT_MARKER",
    "StoreCompaction",
    "ThreadCompaction",
    "checkpoint_messages",
    "compact_store",
    "compact_thread",
    "supports_prune",
]

#: ``metadata["agentstate_reducer"]`` of the checkpoints ``compact_thread`` writes.
COMPACT_MARKER = "compact"


@dataclass(frozen=True)
class ThreadCompaction:
    """What ``compact_thread`` did (or, in a dry run, would do) to one thread."""

    thread_id: str
    #: "compacted", "would compact" (dry run), "skipped" or "failed"
    action: str
    reason: str | None = None  # why it was skipped or failed; "within bounds" when nothing to prune
    messages_before: int | None = None
    messages_after: int | None = None
    tokens_before: int | None = None  # by the ``count_tokens`` given, else None
    tokens_after: int | None = None
    checkpoint_id: str | None = None  # the new checkpoint ("compacted" only)


def checkpoint_messages(checkpoint_tuple: CheckpointTuple | None, messages_key: str) -> list[Any] | None:
    """The messages list of a checkpoint tuple, or None (no checkpoint, no such list)."""
    if checkpoint_tuple is None:
        return None
    value = (checkpoint_tuple.checkpoint.get("channel_values") or {}).get(messages_key)
    if isinstance(value, _DeltaSnapshot):  # a DeltaChannel's value, held whole
        value = value.value
    return value if isinstance(value, list) else None


def _delta_messages(
    saver: BaseCheckpointSaver[Any], latest: CheckpointTuple, messages_key: str
) -> list[Any] | None:
    """The list a load rebuilds at ``latest`` for a ``DeltaChannel`` ``messages_key`` that holds no
    snapshot there (the nearest snapshot's value with the writes stored after it replayed, as
    LangGraph replays them), or None when the channel is not such a channel."""
    checkpoint = latest.checkpoint
    if messages_key in (checkpoint.get("channel_values") or {}) or messages_key not in (
        checkpoint.get("channel_versions") or {}
    ):
        return None

    def perform(op: DeltaOp) -> Any:
        if isinstance(op, GetTuple):
            return latest
        if isinstance(op, GetHistory):
            return saver.get_delta_channel_history(config=op.config, channels=[op.channel])[op.channel]
        raise TypeError(f"rebuilding a value performs no {type(op).__name__}")

    # the value at a child of ``latest`` is its own: it holds no pending writes (checked before)
    return drive(rebuilt_value_flow(latest.config, messages_key, TaskPaths()), perform)


def supports_prune(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver`` implements ``prune()`` (the base class only raises)."""
    return type(saver).prune is not BaseCheckpointSaver.prune


def _root_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def compact_thread(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    reducer: MessageReducer,
    *,
    messages_key: str = "messages",
    dry_run: bool = False,
    count_tokens: Callable[[Any], int] | None = None,
    offload: BlobOffload | None = None,
) -> ThreadCompaction:
    """Reduce the latest checkpoint of ``thread_id``'s root namespace and write the result as a new
    checkpoint on top of it (see the module docstring); ``dry_run``: write nothing and call no
    ``on_prune`` hook or summarizer, report what would change. The new checkpoint is read back
    through the saver: if it is not the latest (a run wrote meanwhile, or this machine's clock is
    behind the writer's), the result is "failed" and the thread reads as before. ``count_tokens``
    (one message -> tokens) fills the token fields; ``offload``: the thresholds the new checkpoint
    is offloaded by on a store holding offloaded blobs (default ``BlobOffload()``)."""

    def tokens(messages: list[Any]) -> int | None:
        return None if count_tokens is None else sum(count_tokens(m) for m in messages)

    blobs = _blob_io(saver, offload)
    latest = saver.get_tuple(_root_config(thread_id))
    if blobs is not None:  # read what a graph reads, so the new checkpoint names its blobs itself
        latest = blobs[0].run(restored_tuple_flow(latest, blobs[0].where))
    if latest is None:
        return ThreadCompaction(thread_id, "skipped", "no checkpoint in the root namespace")
    if latest.pending_writes:
        return ThreadCompaction(
            thread_id,
            "skipped",
            "pending writes (interrupted or running); compact it once the run has finished",
        )
    messages = checkpoint_messages(latest, messages_key)
    delta = messages is None or isinstance(
        (latest.checkpoint.get("channel_values") or {}).get(messages_key), _DeltaSnapshot
    )
    if messages is None:
        messages = _delta_messages(saver, latest, messages_key)
    if messages is None:
        return ThreadCompaction(thread_id, "skipped", f"no {messages_key!r} list in the latest checkpoint")
    if delta and blobs is not None:
        return ThreadCompaction(
            thread_id,
            "skipped",
            f"{messages_key!r} is a DeltaChannel on a store holding offloaded blobs, which compact "
            "does not rewrite; bound it with ReducingCheckpointSaver at put",
        )
    old = latest.checkpoint
    versions = old.get("channel_versions") or {}
    new_versions = {messages_key: saver.get_next_version(versions.get(messages_key), None)}
    step = int((latest.metadata or {}).get("step", -1))
    draft = copy_checkpoint(old)
    draft["id"] = str(uuid6(clock_seq=step + 1))
    draft["ts"] = datetime.now(timezone.utc).isoformat()
    draft["channel_versions"] = {**versions, **new_versions}
    if delta:  # reduced as a list, stored as a snapshot (below)
        draft["channel_values"] = {**draft["channel_values"], messages_key: messages}
    config = _root_config(thread_id, old["id"])
    # a dry run plans with no hook and no summarizer: it writes nothing, to the archive neither
    planner = _without_hooks(reducer) if dry_run else reducer
    reduced, put_report = reduce_checkpoint(planner, config, draft, new_versions, messages_key=messages_key)
    stats = put_report.stats
    if stats is None or not stats.pruned_count:
        count = tokens(messages)
        return ThreadCompaction(
            thread_id, "skipped", "within bounds", len(messages), len(messages), count, count
        )
    after = reduced["channel_values"][messages_key]
    planned = ThreadCompaction(
        thread_id, "would compact", None, len(messages), len(after), tokens(messages), tokens(after)
    )
    if dry_run:
        return planned
    metadata: dict[str, Any] = {
        k: v for k, v in (latest.metadata or {}).items() if k not in ("source", "step", "writes")
    }
    metadata.update(source="update", step=step + 1, agentstate_reducer=COMPACT_MARKER)
    metadata.setdefault("parents", {})
    if delta:  # a load takes a snapshot whole: no write before it is replayed on the reduced list
        reduced = with_snapshot(reduced, messages_key, after)
    if blobs is not None:  # its blobs and reference rows before the checkpoint
        reduced = blobs[0].run(stored_checkpoint_flow(blobs[1].offloader, config, reduced, messages_key))
    saver.put(config, reduced, metadata, new_versions)  # type: ignore[arg-type]
    # Read it back through the saver: what a graph will load next.
    check = saver.get_tuple(_root_config(thread_id))
    stored = checkpoint_messages(check, messages_key)
    if (
        check is None
        or check.checkpoint["id"] != reduced["id"]
        or stored is None
        or len(stored) != len(after)
    ):
        found = None if check is None else check.checkpoint["id"]
        return replace(
            planned,
            action="failed",
            reason=f"the latest checkpoint read back is {found}, not the new {reduced['id']} (a run wrote "
            "meanwhile, or this machine's clock is behind the writer's); the thread reads as before, "
            "re-run compact",
        )
    return replace(planned, action="compacted", checkpoint_id=reduced["id"])


def _without_hooks(reducer: MessageReducer) -> MessageReducer:
    """``reducer`` planning the same cut without calling ``on_prune`` hooks or a summarizer (an
    injected summary message is then not counted in a dry run's ``messages_after``)."""
    c = reducer.config
    if not (c.on_prune or c.summarize_fn or c.asummarize_fn):
        return reducer
    return MessageReducer(
        config=replace(c, on_prune=(), summarize_fn=None, asummarize_fn=None, inject_summary=False)
    )


def _blob_io(
    saver: BaseCheckpointSaver[Any], offload: BlobOffload | None = None
) -> tuple[BlobRunner, BlobOffload] | None:
    """For a saver that does not offload by itself but whose store holds offloaded blobs: the runner
    of its blob operations and the offload to apply to a checkpoint ``compact_thread`` writes."""
    if getattr(saver, "offload", None) is not None:
        return None
    try:
        backend = r.backend_for(saver)  # looks through a wrapper to the saver that stores
    except TypeError:
        return None
    if not backend.stores_blobs or not backend.run(_has_blobs_flow()):
        return None
    offload = offload if offload is not None and offload.store is None else BlobOffload()
    return bind_offload(offload, backend.saver), offload


def _has_blobs_flow() -> Any:
    return (yield HasBlobs())


def _record_references(saver: Any, backend: Any, dry_run: bool, messages_key: str) -> int:
    """Record the references of every stored checkpoint (``compact_store``'s docstring says when
    and why); the checkpoints that lacked them."""
    if not rewrites_in_place(backend) or _blob_io(saver) is None:
        return 0
    done = offload_store(saver, BlobOffload(min_bytes=1 << 62), dry_run=dry_run, messages_key=messages_key)
    return sum(t.checkpoints for t in done.threads)


# -- a whole store: delete idle threads, compact the latest checkpoints, trim to keep_last ----------


@dataclass
class StoreCompaction:
    """What ``compact_store`` did (or, with ``dry_run``, would do: the same numbers)."""

    dry_run: bool
    threads: list[ThreadCompaction] = field(default_factory=list)
    #: whole threads deleted: idle longer than ``older_than``
    threads_deleted: list[str] = field(default_factory=list)
    #: threads trimmed to ``keep_last``
    threads_trimmed: list[str] = field(default_factory=list)
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    blobs_deleted: int = 0
    #: checkpoints written by the compaction (one per compacted thread)
    checkpoints_written: int = 0
    #: thread -> why its checkpoints were left as they are (pending writes, an interrupt)
    kept_whole: dict[str, str] = field(default_factory=dict)
    #: checkpoints whose blob references were recorded before anything was deleted (written by a
    #: saver without offload on a store holding blobs)
    references_recorded: int = 0
    #: the delta channels the trim stored a snapshot of at the cut (``delta_channels``), sorted;
    #: empty without them, or where they cannot be used (a store holding offloaded blobs)
    snapshot_channels: list[str] = field(default_factory=list)
    #: checkpoints stored again with those snapshots (0 in a dry run)
    snapshots_written: int = 0

    def add(self, deleted: Any) -> None:
        self.checkpoints_deleted += deleted.checkpoints
        self.writes_deleted += deleted.writes
        self.blobs_deleted += deleted.blobs


def _with_compacted(state: Any, backend: Any, latest: CheckpointTuple, messages_key: str) -> Any:
    """``state`` with the checkpoint a compaction would write on top of ``latest``: the newest root
    checkpoint, reading what ``latest`` reads but a new version of the messages channel."""

    head = next(c for c in state.checkpoints if c.ns == r.ROOT_NS and c.id == latest.checkpoint["id"])
    versions = dict(head.versions)
    old = (latest.checkpoint.get("channel_versions") or {}).get(messages_key)
    if old is not None:
        versions.pop(backend.version_entry("", messages_key, old)[0], None)
    versions["\0compacted"] = "new"  # the new messages value: kept, and read by no deleted checkpoint
    # sorts after every stored id; its delta channels are rebuilt through ``latest``, as the real one's
    new = r.StoredCheckpoint(
        r.ROOT_NS, "\uffff", versions=versions, parent=head.id, delta=head.delta, unseeded=head.unseeded
    )
    return r.ThreadState(state.thread_id, (*state.checkpoints, new), state.writes, state.blobs)


def compact_store(
    saver: BaseCheckpointSaver[Any],
    reducer: MessageReducer | None,
    *,
    thread_ids: Sequence[str] | None = None,
    keep_last: int | None = None,
    older_than: timedelta | None = None,
    dry_run: bool = False,
    force: bool = False,
    messages_key: str = "messages",
    count_tokens: Callable[[Any], int] | None = None,
    on_thread: Callable[[str], None] | None = None,
    offload: BlobOffload | None = None,
    record_references: bool = True,
    branch_grace: timedelta = r.BRANCH_GRACE,
    delta_channels: DeltaChannels | None = None,
) -> StoreCompaction:
    """Per thread of ``saver`` (``thread_ids``, or every thread), in this order:

    1. a thread whose latest root checkpoint has pending writes (a step ran, or an interrupt waits)
       is left whole unless ``force`` (even with ``force`` it is not compacted: its writes belong
       to the latest checkpoint);
    2. a thread whose newest root checkpoint's ``ts`` is older than ``older_than`` is deleted whole
       (decided before compaction, which would make it look new);
    3. with ``reducer``, the latest checkpoint is compacted (``compact_thread``);
    4. with ``keep_last``, the thread is trimmed by the rules of ``checkpointers.retention.rules``.

    ``dry_run`` writes and deletes nothing, and reports exactly what the run would do: the trim is
    planned on the thread as it would be after the compaction (with its new checkpoint). Works on
    the savers ``checkpointers.retention`` supports (needed for ``keep_last``/``older_than``).
    ``offload``: the thresholds of the checkpoints compaction writes on a store holding offloaded
    blobs (``compact_thread``).

    On a SQLite or PostgreSQL store holding offloaded blobs, read through a saver without offload
    of its own, a run that deletes first records the blob references every stored checkpoint of
    every thread holds (``inplace_offload.offload_store`` with no threshold a value reaches, so
    nothing new is offloaded): a checkpoint a saver without offload wrote copies the references it
    read without recording them, and the deletions would otherwise collect blobs it still names.
    A reference to a missing or corrupt blob then raises ``BlobError`` before anything is deleted.
    ``record_references=False`` skips that pass, for a caller that has just offloaded every thread.
    ``branch_grace``: as ``ReducingCheckpointSaver``'s (``checkpointers.retention.rules``).
    ``delta_channels``: the graph's channels (``graph.channels``; default: the saver's own
    ``delta_channels``, where it has them): the trim of a DeltaChannel thread then stores a snapshot
    of each of them the oldest kept checkpoint rebuilds, and deletes its ancestors, as ``prune``
    does (``rules``); the dry run plans the same cut. Without them, or on a store holding offloaded
    blobs, the trim keeps every ancestor a kept checkpoint rebuilds a value through.
    """

    report = StoreCompaction(dry_run=dry_run)
    with telemetry.retention_span("compact") as traced:
        if keep_last is not None:
            r.validate_keep_last(keep_last)
        channels = delta_channels_of(saver, delta_channels)
        backend = r.backend_for(saver) if (keep_last is not None or older_than is not None) else None
        if thread_ids is None:
            if backend is None:
                raise ValueError("compact_store needs thread_ids= without keep_last or older_than")
            thread_ids = backend.run(r.list_threads_flow())
        if backend is not None and record_references:
            report.references_recorded = _record_references(saver, backend, dry_run, messages_key)
        if keep_last is None or (channels and _blob_io(saver) is not None):
            channels = {}  # values read back there hold references the cut would orphan
        report.snapshot_channels = sorted(channels)
        now = datetime.now(timezone.utc)
        for thread_id in thread_ids:
            if on_thread is not None:
                on_thread(thread_id)
            state = ts = None
            if backend is not None:
                ts = backend.run(_newest_ts_flow(thread_id))
                state = backend.run(_load_flow(thread_id))
                if r.waiting(state) and not force:
                    report.kept_whole[thread_id] = (
                        "pending writes on its latest checkpoint (a step ran or an interrupt waits); "
                        "--force to trim it anyway"
                    )
                    if reducer is not None:
                        report.threads.append(compact_thread(
                            saver, thread_id, reducer, messages_key=messages_key, dry_run=True,
                            count_tokens=count_tokens, offload=offload,
                        ))
                    continue
                if r.is_idle(ts, older_than, now):
                    report.add(r.Deleted(len(state.checkpoints), sum(w.count for w in state.writes)))
                    report.threads_deleted.append(thread_id)
                    if not dry_run:
                        backend.run(r.delete_thread_flow(thread_id))
                    continue
            compacted = None
            if reducer is not None:
                compacted = compact_thread(
                    saver, thread_id, reducer, messages_key=messages_key, dry_run=dry_run,
                    count_tokens=count_tokens, offload=offload,
                )
                report.threads.append(compacted)
                if compacted.action in ("compacted", "would compact"):
                    report.checkpoints_written += 1
            if keep_last is None or backend is None or state is None:
                continue
            if dry_run:
                planned = state
                if compacted is not None and compacted.action == "would compact":
                    latest = saver.get_tuple(_root_config(thread_id))
                    assert latest is not None
                    planned = _with_compacted(state, backend, latest, messages_key)
                plan = r.plan_retention(planned, keep_last=keep_last, now=now, branch_grace=branch_grace,
                                        rebuildable=channels.keys())
                deleted = r.Deleted(plan.checkpoint_count, plan.writes, plan.blob_count)
            else:
                if channels:  # committed first: the trim is planned again from what is stored
                    report.snapshots_written += backend.snapshots(
                        snapshot_flow(thread_id, keep_last, channels, branch_grace=branch_grace, now=now)
                    )
                deleted = backend.run(r.retain_flow(thread_id, keep_last, branch_grace=branch_grace))
            if deleted.checkpoints or deleted.blobs:
                report.threads_trimmed.append(thread_id)
                report.add(deleted)
        traced.update(checkpoints_deleted=report.checkpoints_deleted, writes_deleted=report.writes_deleted,
                      blobs_deleted=report.blobs_deleted, threads_deleted=len(report.threads_deleted))
    return report


def _newest_ts_flow(thread_id: str) -> Any:

    return (yield r.NewestTs(thread_id))


def _load_flow(thread_id: str) -> Any:

    return (yield r.LoadThread(thread_id))
