"""Retention's entry points: ``sweep``/``asweep`` over a whole store, LangGraph's ``prune``/
``aprune`` on savers that lack it, and the per-put retention of a saver (``RetentionSettings``,
``RetentionSchedule``, ``RetentionStats``), all by the rules of ``rules``.

``sweep(saver, older_than=..., keep_last=..., dry_run=..., vacuum=...)`` / ``asweep`` apply the
rules to every thread of a store (``older_than``: delete whole threads whose newest root
checkpoint's ``ts`` is older) and return a ``SweepReport``. Space: SQLite reuses the pages freed
by deletions for later inserts (the file stops growing) but shrinks only with ``vacuum=True``:
``PRAGMA incremental_vacuum`` on a database created with ``auto_vacuum=INCREMENTAL``, otherwise
``VACUUM``, which rewrites the whole file (it needs free disk space up to the database's size and
holds an exclusive lock while it runs). PostgreSQL leaves dead rows to autovacuum; ``vacuum=True``
runs ``VACUUM (ANALYZE)`` on the three checkpoint tables (the saver's connection must be in
autocommit mode, as ``from_conn_string`` makes it). ``bytes_before``/``bytes_after``: SQLite: the
file's bytes (with its WAL, after a WAL checkpoint); PostgreSQL: ``pg_total_relation_size`` of
the checkpoint tables; InMemorySaver: the serialized bytes it holds; Cosmos DB: the container's
``documentsSize`` as the service reports it (``x-ms-resource-usage``; real Cosmos DB updates it
lazily), else, where the service reports none (the local test server), the UTF-8 JSON bytes of
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver

from agentstate_reducer import telemetry

from ..delta import messages_channel
from .backends import Backend, backend_for
from .flows import (
    Deleted,
    SweptThread,
    delete_thread_flow,
    list_threads_flow,
    retain_flow,
    snapshot_flow,
    sweep_thread_flow,
)
from .rules import (
    BRANCH_GRACE,
    ROOT_NS,
    validate_branch_grace,
    validate_keep_last,
)

__all__ = [
    "PRUNE_STRATEGIES",
    "DeltaChannels",
    "RetentionSchedule",
    "RetentionSettings",
    "RetentionStats",
    "SweepReport",
    "aprune",
    "asweep",
    "check_delta_channels",
    "check_prune_args",
    "delta_channels_of",
    "prune",
    "sweep",
]

logger = logging.getLogger("agentstate_reducer.checkpointers")

#: channel name -> its DeltaChannel: what retention can rebuild and store a snapshot of
DeltaChannels = Mapping[str, DeltaChannel[Any]]


def check_delta_channels(delta_channels: object) -> dict[str, DeltaChannel[Any]]:
    """The ``DeltaChannel`` s of ``delta_channels`` (a mapping of channel name to channel, such as
    a compiled graph's ``channels``; other channels in it are not delta channels and are left
    out), or ``{}`` for None."""
    if delta_channels is None:
        return {}
    if not isinstance(delta_channels, Mapping):
        raise TypeError(
            "delta_channels must be a mapping of channel name to channel, such as a compiled "
            f"graph's .channels, or None; got {type(delta_channels).__name__}"
        )
    return {str(k): v for k, v in delta_channels.items() if isinstance(v, DeltaChannel)}


def delta_channels_of(saver: Any, delta_channels: object) -> DeltaChannels:
    """The delta channels retention of ``saver`` stores a snapshot of at the cut:
    ``delta_channels`` (checked as ``check_delta_channels`` does), else the saver's own
    ``delta_channels`` (``RetentionSettings``: a ``ReducingCheckpointSaver`` or a Cosmos DB
    saver), none where the saver offloads blobs."""
    channels = check_delta_channels(delta_channels)
    if delta_channels is None:
        channels = dict(getattr(saver, "delta_channels", None) or {})
    return _rebuildable(saver, channels)


def _rebuildable(saver: Any, channels: DeltaChannels) -> DeltaChannels:
    """``channels``, or none where the saver (or the wrapper around it) offloads blobs: a value
    read back there holds references owned by the checkpoints retention deletes."""
    return {} if channels and getattr(saver, "blob_runner", None) is not None else channels


def _retain(backend: Backend, thread_id: str, keep_last: int, protect: frozenset[tuple[str, str]],
            grace: timedelta, channels: DeltaChannels) -> Deleted:
    """One thread's retention: the snapshots it asks for first (committed), then the deletions
    planned again from what is stored (``rules``: DeltaChannel threads)."""
    if channels:
        backend.snapshots(snapshot_flow(thread_id, keep_last, channels, protect, branch_grace=grace))
    deleted: Deleted = backend.run(retain_flow(thread_id, keep_last, protect, branch_grace=grace))
    return deleted


async def _aretain(backend: Backend, thread_id: str, keep_last: int,
                   protect: frozenset[tuple[str, str]], grace: timedelta, channels: DeltaChannels) -> Deleted:
    if channels:
        await backend.asnapshots(snapshot_flow(thread_id, keep_last, channels, protect, branch_grace=grace))
    deleted: Deleted = await backend.arun(retain_flow(thread_id, keep_last, protect, branch_grace=grace))
    return deleted

# -- sweep ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class SweepReport:
    """What a ``sweep`` deleted (or, with ``dry_run``, would delete)."""

    dry_run: bool
    threads_seen: int = 0
    #: whole threads deleted (idle longer than ``older_than``)
    threads_deleted: list[str] = field(default_factory=list)
    #: threads trimmed to ``keep_last``
    threads_trimmed: list[str] = field(default_factory=list)
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    blobs_deleted: int = 0
    #: thread -> why it was left as it is (pending writes or an interrupt)
    skipped: dict[str, str] = field(default_factory=dict)
    #: stored bytes (module doc says how each saver counts); None where not measurable
    bytes_before: int | None = None
    bytes_after: int | None = None
    vacuumed: bool = False

    def add(self, deleted: Deleted) -> None:
        self.checkpoints_deleted += deleted.checkpoints
        self.writes_deleted += deleted.writes
        self.blobs_deleted += deleted.blobs

    def record(self, thread_id: str, swept: SweptThread) -> None:
        """Count what ``sweep_thread_flow`` did to ``thread_id``."""
        if swept.action == "skipped":
            self.skipped[thread_id] = str(swept.reason)
        elif swept.action == "deleted":
            self.threads_deleted.append(thread_id)
        elif swept.action == "trimmed":
            self.threads_trimmed.append(thread_id)
        self.add(swept.deleted)


def _check_sweep_args(older_than: object, keep_last: object) -> tuple[timedelta | None, int | None]:
    if older_than is not None and not isinstance(older_than, timedelta):
        raise TypeError(f"older_than must be a datetime.timedelta or None, got {type(older_than).__name__}")
    if isinstance(older_than, timedelta) and older_than <= timedelta(0):
        raise ValueError(f"older_than must be a positive timedelta, got {older_than}")
    keep = validate_keep_last(keep_last)
    if older_than is None and keep is None:
        raise ValueError(
            "sweep needs older_than=timedelta(...) and/or keep_last=N: with neither it does nothing"
        )
    return older_than, keep


def sweep(
    saver: BaseCheckpointSaver[Any],
    *,
    older_than: timedelta | None = None,
    keep_last: int | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
    force: bool = False,
    branch_grace: timedelta = BRANCH_GRACE,
    delta_channels: DeltaChannels | None = None,
) -> SweepReport:
    """Delete threads idle longer than ``older_than`` and trim the others to ``keep_last``.

    A thread's idle time is read from its newest root checkpoint's ``ts``. Each thread is swept in
    a transaction of its own. Threads whose latest checkpoint has pending writes (a step ran, or an
    interrupt waits) are skipped unless ``force``. ``dry_run`` deletes nothing and reports what
    the run would delete. ``vacuum``: free the space (module doc). Works on ``saver`` bare or
    wrapped. ``branch_grace``: as ``ReducingCheckpointSaver``'s (``rules``). ``delta_channels``:
    as ``prune``'s (a dry run stores no snapshot, so it reports what retention deletes without
    them).
    """
    older, keep = _check_sweep_args(older_than, keep_last)
    grace = validate_branch_grace(branch_grace)
    channels = delta_channels_of(saver, delta_channels)  # checked in a dry run too
    channels = channels if keep and not dry_run else {}
    backend = backend_for(saver)
    with telemetry.retention_span("sweep") as traced:
        report = SweepReport(dry_run=dry_run, bytes_before=backend.size())
        now = datetime.now(timezone.utc)
        threads = backend.run(list_threads_flow())
        report.threads_seen = len(threads)
        for thread_id in threads:
            if channels and keep is not None:
                backend.snapshots(snapshot_flow(thread_id, keep, channels, branch_grace=grace, now=now))
            swept = backend.run(sweep_thread_flow(thread_id, older, keep, now, dry_run, force, grace))
            report.record(thread_id, swept)
        forget = getattr(type(saver), "forget_archived", None)
        if forget is not None and not dry_run:  # a wrapper with an archive: the archive follows the thread
            for thread_id in report.threads_deleted:
                forget(saver, thread_id)
        if vacuum and not dry_run:
            backend.vacuum()
            report.vacuumed = True
        report.bytes_after = report.bytes_before if dry_run else backend.size()
        traced.update(_traced(report))
    return report


async def asweep(
    saver: BaseCheckpointSaver[Any],
    *,
    older_than: timedelta | None = None,
    keep_last: int | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
    force: bool = False,
    branch_grace: timedelta = BRANCH_GRACE,
    delta_channels: DeltaChannels | None = None,
) -> SweepReport:
    """``sweep`` for async code (and async savers)."""
    older, keep = _check_sweep_args(older_than, keep_last)
    grace = validate_branch_grace(branch_grace)
    channels = delta_channels_of(saver, delta_channels)  # checked in a dry run too
    channels = channels if keep and not dry_run else {}
    backend = backend_for(saver)
    with telemetry.retention_span("sweep") as traced:
        report = SweepReport(dry_run=dry_run, bytes_before=await backend.asize())
        now = datetime.now(timezone.utc)
        threads = await backend.arun(list_threads_flow())
        report.threads_seen = len(threads)
        for thread_id in threads:
            if channels and keep is not None:
                await backend.asnapshots(
                    snapshot_flow(thread_id, keep, channels, branch_grace=grace, now=now)
                )
            swept = await backend.arun(sweep_thread_flow(thread_id, older, keep, now, dry_run, force, grace))
            report.record(thread_id, swept)
        aforget = getattr(type(saver), "aforget_archived", None)
        if aforget is not None and not dry_run:
            for thread_id in report.threads_deleted:
                await aforget(saver, thread_id)
        if vacuum and not dry_run:
            await backend.avacuum()
            report.vacuumed = True
        report.bytes_after = report.bytes_before if dry_run else await backend.asize()
        traced.update(_traced(report))
    return report


def _traced(report: SweepReport) -> dict[str, int]:
    """What a sweep's telemetry span reports: what it deleted, and the bytes it freed where both
    sizes were measured (a dry run frees nothing)."""
    out = {"checkpoints_deleted": report.checkpoints_deleted, "writes_deleted": report.writes_deleted,
           "blobs_deleted": report.blobs_deleted, "threads_deleted": len(report.threads_deleted)}
    if report.bytes_before is not None and report.bytes_after is not None:
        out["bytes_freed"] = max(report.bytes_before - report.bytes_after, 0)
    return out


def _deleted(deleted: Deleted) -> dict[str, int]:
    return {"checkpoints_deleted": deleted.checkpoints, "writes_deleted": deleted.writes,
            "blobs_deleted": deleted.blobs}


# -- prune: LangGraph's API, on savers that lack it -----------------------------------------------

PRUNE_STRATEGIES = ("keep_latest", "delete")


def check_prune_args(thread_ids: object, strategy: object) -> list[str]:
    if isinstance(thread_ids, (str, bytes)):
        raise TypeError("thread_ids must be a sequence of thread ids, not a single str: prune([thread_id])")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
    return [str(t) for t in thread_ids]  # type: ignore[attr-defined]


def prune(
    saver: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
    branch_grace: timedelta = BRANCH_GRACE, delta_channels: DeltaChannels | None = None,
) -> None:
    """LangGraph's ``prune`` on any supported saver: ``"keep_latest"`` is ``keep_last=1`` per thread,
    each in its own transaction (a DeltaChannel thread also keeps what its latest values are
    rebuilt from: ``rules``); ``"delete"`` deletes the threads. ``branch_grace``: as
    ``ReducingCheckpointSaver``'s (``rules``). ``delta_channels``: the graph's channels
    (``graph.channels``; default: the saver's own ``delta_channels``, where it has them): the
    checkpoint kept then gets a snapshot of each delta channel among them it rebuilds, and its
    ancestors go (``rules``)."""
    ids = check_prune_args(thread_ids, strategy)
    grace = validate_branch_grace(branch_grace)
    channels = delta_channels_of(saver, delta_channels)
    backend = backend_for(saver)
    if strategy == "delete":
        for thread_id in ids:
            backend.run(delete_thread_flow(thread_id))
        return
    for thread_id in ids:
        with telemetry.retention_span("prune", thread=thread_id) as traced:
            traced.update(_deleted(_retain(backend, thread_id, 1, frozenset(), grace, channels)))


async def aprune(
    saver: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
    branch_grace: timedelta = BRANCH_GRACE, delta_channels: DeltaChannels | None = None,
) -> None:
    """``prune`` for async code (and async savers)."""
    ids = check_prune_args(thread_ids, strategy)
    grace = validate_branch_grace(branch_grace)
    channels = delta_channels_of(saver, delta_channels)
    backend = backend_for(saver)
    if strategy == "delete":
        for thread_id in ids:
            await backend.arun(delete_thread_flow(thread_id))
        return
    for thread_id in ids:
        with telemetry.retention_span("prune", thread=thread_id) as traced:
            traced.update(_deleted(await _aretain(backend, thread_id, 1, frozenset(), grace, channels)))


# -- per-put retention: what ReducingCheckpointSaver(keep_last=...) runs -------------------------


@dataclass(slots=True)
class RetentionStats:
    """Counters of a saver's per-put retention."""

    runs: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    blobs_deleted: int = 0
    #: retention runs that raised (each logged; the thread is retried at its next put)
    failures: int = 0
    last_error: str | None = None


class RetentionSettings:
    """``keep_last``/``retention_every`` of a saver that runs retention after its puts, validated
    once (``_init_retention``) and read through the same three properties on every such saver."""

    _keep_last: int | None
    _retention_every: int
    _branch_grace: timedelta
    _delta_channels: DeltaChannels
    _schedule: RetentionSchedule | None

    def _init_retention(
        self, keep_last: object, retention_every: object, branch_grace: object = BRANCH_GRACE
    ) -> None:
        self._keep_last = validate_keep_last(keep_last)
        self._branch_grace = validate_branch_grace(branch_grace)
        if isinstance(retention_every, bool) or not isinstance(retention_every, int) or retention_every < 1:
            raise ValueError(
                f"retention_every must be an int >= 1 (puts of a thread between two retention runs), "
                f"got {retention_every!r}"
            )
        self._retention_every = retention_every
        self._delta_channels: DeltaChannels = {}
        self._schedule = None
        if self._keep_last is not None:
            self._schedule = RetentionSchedule(self._keep_last, retention_every, self._branch_grace,
                                               channels=lambda: self.delta_channels)

    @property
    def keep_last(self) -> int | None:
        """Root checkpoints kept per thread (None: all); rules in ``checkpointers.retention.rules``."""
        return self._keep_last

    @property
    def retention_every(self) -> int:
        """With ``keep_last``: puts of a thread between two retention runs."""
        return self._retention_every

    @property
    def branch_grace(self) -> timedelta:
        """With ``keep_last``: how long a checkpoint a run may still extend is kept."""
        return self._branch_grace

    @property
    def delta_channels(self) -> DeltaChannels:
        """The delta channels ``keep_last`` and ``prune`` store a snapshot of where they cut a
        thread (``rules``): those set (the compiled graph's ``channels``, once the graph is
        compiled: its ``DeltaChannel`` s are taken, the rest left out), and by default the
        ``messages_key`` channel the saver reduces, rebuilt as the reduction rebuilds it
        (``delta.messages_channel``; a channel of that name in those set wins). A thread with
        another DeltaChannel not set here (deepagents' ``files``) keeps every ancestor its kept
        checkpoints rebuild that channel through. Empty with blob offload on."""
        own: dict[str, DeltaChannel[Any]] = {}
        key = getattr(self, "messages_key", None)
        if getattr(self, "reducer", None) is not None and isinstance(key, str):
            own[key] = messages_channel()
        return _rebuildable(self, {**own, **self._delta_channels})

    @delta_channels.setter
    def delta_channels(self, channels: DeltaChannels | None) -> None:
        self._delta_channels = check_delta_channels(channels)

    @property
    def retention_stats(self) -> RetentionStats | None:
        """Counters of the per-put retention (None without ``keep_last``)."""
        return None if self._schedule is None else self._schedule.stats


_STEPS_REMEMBERED = 100_000


class RetentionSchedule:
    """Runs a thread's retention after a put that stored its checkpoint, on the thread that ran
    the put (LangGraph's background writer, not the step).

    Which puts run it is read from what they store, so the bound holds whichever process serves
    each turn: LangGraph counts the metadata ``step`` along each branch, across runs, and a put
    runs retention when ``step + 1`` reached a multiple of ``every`` since the last put of its
    namespace this process saw (``durability="exit"`` puts only a run's last step), and at the
    first root put of a thread in this process. A put without a ``step`` counts in this process.

    A failing run never fails the put: it is logged on ``agentstate_reducer.checkpointers``,
    counted in ``stats``, and the thread is retried at its next put. One run per thread at a time
    in a process; runs of different threads may overlap (each is one transaction).
    """

    def __init__(
        self, keep_last: int, every: int, branch_grace: timedelta = BRANCH_GRACE, *,
        channels: Callable[[], DeltaChannels] | None = None,
    ) -> None:
        self.keep_last = keep_last
        self.every = every
        self.branch_grace = branch_grace
        #: the delta channels retention stores a snapshot of at the cut (``rules``), read at each
        #: run (``channels``: the saver's ``delta_channels``, which may change after compile)
        self._channels = channels or (lambda: {})
        self.stats = RetentionStats()
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        #: (thread, namespace) -> the step of its last put seen here (bounded: a forgotten
        #: thread runs at its next root put)
        self._steps: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._retry: set[str] = set()
        self._running: set[str] = set()

    def _due(
        self, saved: Mapping[str, Any], metadata: Mapping[str, Any] | None
    ) -> tuple[str, frozenset[tuple[str, str]]] | None:
        conf = saved.get("configurable", {})
        thread_id = str(conf.get("thread_id"))
        ns = str(conf.get("checkpoint_ns", ""))
        step = (metadata or {}).get("step")
        with self._lock:
            if thread_id in self._running:
                return None
            if isinstance(step, int) and not isinstance(step, bool):
                last = self._steps.pop((thread_id, ns), None)
                if last is None:
                    due = ns == ROOT_NS
                else:
                    due = (step + 1) // self.every != (last + 1) // self.every
                self._steps[(thread_id, ns)] = step
                if len(self._steps) > _STEPS_REMEMBERED:
                    self._steps.popitem(last=False)
            else:
                count = self._counts.get(thread_id, 0) + 1
                due = count >= self.every
                self._counts[thread_id] = 0 if due else count
            if not due and thread_id not in self._retry:
                return None
            self._retry.discard(thread_id)
            self._running.add(thread_id)
        return thread_id, frozenset({(ns, str(conf.get("checkpoint_id")))})

    def _done(self, thread_id: str, deleted: Deleted | None, error: BaseException | None) -> None:
        with self._lock:
            self._running.discard(thread_id)
            if deleted is not None:
                self.stats.runs += 1
                self.stats.checkpoints_deleted += deleted.checkpoints
                self.stats.writes_deleted += deleted.writes
                self.stats.blobs_deleted += deleted.blobs
                return
            self.stats.failures += 1
            self.stats.last_error = f"{type(error).__name__}: {error}"
            self._retry.add(thread_id)  # retried at the thread's next put
        logger.warning(
            "keep_last=%d: retention of thread %r failed, retried at its next put (%s)",
            self.keep_last, thread_id, self.stats.last_error, exc_info=error,
        )

    def after_put(
        self, backend: Backend, saved: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
    ) -> None:
        due = self._due(saved, metadata)
        if due is None:
            return
        thread_id, protect = due
        try:
            with telemetry.retention_span("keep_last", thread=thread_id) as traced:
                deleted = _retain(backend, thread_id, self.keep_last, protect, self.branch_grace,
                                  self._channels())
                traced.update(_deleted(deleted))
        except Exception as exc:
            self._done(thread_id, None, exc)
        else:
            self._done(thread_id, deleted, None)

    async def aafter_put(
        self, backend: Backend, saved: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
    ) -> None:
        due = self._due(saved, metadata)
        if due is None:
            return
        thread_id, protect = due
        try:
            with telemetry.retention_span("keep_last", thread=thread_id) as traced:
                deleted = await _aretain(backend, thread_id, self.keep_last, protect, self.branch_grace,
                                         self._channels())
                traced.update(_deleted(deleted))
        except Exception as exc:
            self._done(thread_id, None, exc)
        else:
            self._done(thread_id, deleted, None)
