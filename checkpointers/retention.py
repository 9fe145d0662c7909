"""Retention: bound a thread's stored checkpoints, and sweep whole stores.

The rules (``plan_retention``, pure, shared by every saver, sync and async):

* the root namespace (``checkpoint_ns == ""``) keeps its newest ``keep_last`` checkpoints, with
  their pending writes; checkpoint ids are time-ordered, so "newest" is the greatest id;
* a subgraph call's namespace (``"node:<task id>"``, a new one per call: a ``":"`` in the name)
  keeps only its latest checkpoint, and only while a kept root checkpoint still needs it: its
  metadata ``parents[""]`` names the root checkpoint the call started from. A call whose root
  checkpoint is deleted (now, or earlier) is dropped whole. A call whose latest checkpoint has an
  ``__interrupt__`` write (an interrupt waits on it) keeps that checkpoint whatever its root. A
  call whose root checkpoint is not stored yet (LangGraph saves in the background: a call can
  commit first) is left untouched;
* any other namespace (a ``checkpointer=True`` subgraph, or one without a ``parents`` link) keeps
  its newest ``keep_last`` checkpoints, as the root does;
* on blob savers, a checkpoint a run may still be extending is kept whatever ``keep_last`` says:
  one made less than ``branch_grace`` ago (by the time in its uuid6 id; default one hour) after
  which a step is due (its ``updated_channels`` name a trigger: ``__start__``, a ``branch:to:``
  channel, a ``Send``; unknown counts as due) and that no stored checkpoint continues as the
  next step of its run (a child with metadata ``source == "loop"``, one ``step`` later). That
  run's next checkpoint names this one's blobs: two runs on one thread (the second starts from
  the first one's checkpoint and writes newer ones), or a worker between two steps while another
  finishes a turn. Older, it is an abandoned run and goes by the rules above. Row savers
  (SQLite) store each checkpoint whole, so deleting such a parent loses no value there (and
  where no ``updated_channels`` can be read, every checkpoint would count as one). A run's input
  checkpoint stores again every value it names (``versions_to_store``): the finished checkpoint
  it started from is not spared;
* a blob (blob savers: InMemorySaver, the Postgres savers) is shared by every checkpoint whose
  ``channel_versions`` names its (channel, version): it is deleted only when a deleted checkpoint
  named it and no kept checkpoint of its namespace does, and the deletion checks again that no
  stored checkpoint names it (PostgreSQL: in the DELETE; the others: just before). That narrows
  the race with another process's put to the statement itself;
* writes go with the checkpoint they belong to: they are deleted with the checkpoints deleted,
  and writes whose checkpoint is not stored (they landed after retention deleted it) are deleted
  when their checkpoint id is older than every checkpoint kept in their namespace and every one
  whose run may still write its child (made less than ``branch_grace`` ago, no step of its run
  stored after it; a namespace with neither: the root namespace's; a subgraph call dropped
  whole: all of them). Writes of a checkpoint not stored *yet* are newer than its parent, so
  they stay;
* never deleted: the checkpoints in ``protect`` (the one a put just wrote), the latest root
  checkpoint (the running step's pending writes and an open interrupt belong to it), and
  anything of another thread: every statement names the thread;
* a thread whose metadata shows a ``DeltaChannel`` (``counters_since_delta_snapshot`` or
  ``delta_writes_versioned``) is refused with ``DeltaChannelRetentionError``: its latest value
  is rebuilt from older checkpoints, which retention would delete.

The I/O is a flow (``checkpointers._flow``) of a few operations (load a thread, delete checkpoints,
delete blobs, delete a thread, ...), performed by a thin backend per saver class: our own
parameterized SQL for ``SqliteSaver``/``AsyncSqliteSaver`` and ``PostgresSaver``/
``AsyncPostgresSaver``, ``InMemorySaver``'s dictionaries, and the Cosmos DB mapping's ops for
``CosmosDBSaver``/``AsyncCosmosDBSaver`` (``checkpointers.cosmosdb._retention``). Each flow runs in
one transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction on the saver's connection),
so a process killed in the middle of a retention batch leaves the thread as it was before the
batch. Cosmos DB has no transaction across batches: its deletions run in transactional batches
(<= 100 operations) in the thread's partition, writes and checkpoints before the values they read,
so a stop between batches leaves every kept checkpoint whole.

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
all the container's items, read with a paged scan. Vacuum is a no-op on InMemorySaver and Cosmos DB.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.types import INTERRUPT

from ._flow import adrive, drive

__all__ = [
    "DeltaChannelRetentionError",
    "RetentionPlan",
    "RetentionSchedule",
    "RetentionStats",
    "StoredCheckpoint",
    "StoredWrites",
    "SweepReport",
    "ThreadState",
    "aprune",
    "asweep",
    "plan_retention",
    "prune",
    "supports_retention",
    "sweep",
    "validate_keep_last",
]

logger = logging.getLogger("agentstate_reducer.checkpointers")

ROOT_NS = ""

#: How long a checkpoint a run may still be extending is kept, whatever ``keep_last`` says.
BRANCH_GRACE = timedelta(hours=1)

# uuid6 timestamps count 100 ns intervals since the Gregorian calendar's start (RFC 9562).
_GREGORIAN_TO_UNIX_100NS = 0x01B21DD213814000


def checkpoint_time(checkpoint_id: str) -> datetime | None:
    """When a checkpoint was made, from its id (LangGraph's ids are uuid6); None for other ids.

    >>> checkpoint_time("1f0c7f3e-9a4b-6d2c-8000-000000000000").year
    2025
    >>> checkpoint_time("r01") is None
    True
    """
    try:
        u = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if u.version != 6:
        return None
    stamp = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    return datetime.fromtimestamp((stamp - _GREGORIAN_TO_UNIX_100NS) / 1e7, timezone.utc)


def validate_branch_grace(branch_grace: object) -> timedelta:
    """``branch_grace`` as a ``timedelta`` >= 0; anything else raises with what to pass."""
    if not isinstance(branch_grace, timedelta):
        raise TypeError(
            "branch_grace must be a datetime.timedelta >= 0 (how long a checkpoint a run may still "
            f"extend is kept), got {type(branch_grace).__name__} {branch_grace!r}"
        )
    if branch_grace < timedelta(0):
        raise ValueError(f"branch_grace must be >= timedelta(0), got {branch_grace}")
    return branch_grace


class DeltaChannelRetentionError(NotImplementedError):
    """The thread uses a ``DeltaChannel``: retention would delete what its latest value is rebuilt
    from. (A ``NotImplementedError``, as LangGraph's own ``prune`` raises for such threads.)"""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} uses a DeltaChannel: its latest value is rebuilt from older "
            "checkpoints, so keeping only the newest ones would silently empty the channel. Retention "
            "refuses such threads; delete the whole thread instead, or do not use keep_last with it."
        )


def validate_keep_last(keep_last: object, *, name: str = "keep_last") -> int | None:
    """``keep_last`` as an int >= 1, or None; anything else raises with what to pass."""
    if keep_last is None:
        return None
    if isinstance(keep_last, bool) or not isinstance(keep_last, int):
        raise TypeError(
            f"{name} must be an int >= 1 (root checkpoints kept per thread) or None, "
            f"got {type(keep_last).__name__} {keep_last!r}"
        )
    if keep_last < 1:
        raise ValueError(
            f"{name} must be >= 1 (the latest checkpoint is what a thread resumes from), got {keep_last}"
        )
    return keep_last


# -- the pure part: what a thread holds, and what to delete ---------------------------------------


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """One stored checkpoint, as much of it as retention needs."""

    ns: str
    id: str
    #: metadata ``parents[""]``: the root checkpoint a subgraph call started from (None: no link)
    root: str | None = None
    #: metadata shows a DeltaChannel
    delta: bool = False
    #: ``channel_versions`` (blob savers only; row savers store values inline)
    versions: Mapping[str, str] = field(default_factory=dict)
    #: the parent checkpoint's id in the same namespace (None: the first of its branch)
    parent: str | None = None
    #: metadata ``source == "loop"``: a step of the run that made its parent
    loop: bool = False
    #: metadata ``step`` (LangGraph counts it along each branch; None: not recorded)
    step: int | None = None
    #: a step is due after it (``updated_channels`` name a trigger; True when unknown)
    due: bool = True


@dataclass(frozen=True, slots=True)
class StoredWrites:
    """The pending writes stored for one checkpoint."""

    ns: str
    id: str
    count: int
    #: one of them is an ``__interrupt__`` write: an interrupt waits on this checkpoint
    interrupt: bool = False


@dataclass(frozen=True, slots=True)
class ThreadState:
    thread_id: str
    checkpoints: tuple[StoredCheckpoint, ...]
    writes: tuple[StoredWrites, ...] = ()
    #: the (namespace, channel, version) blobs stored (blob savers; None: every version has one)
    blobs: frozenset[tuple[str, str, str]] | None = None


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What ``plan_retention`` deletes of one thread."""

    thread_id: str
    #: namespace -> ids of the checkpoints deleted (with their writes)
    checkpoints: Mapping[str, tuple[str, ...]]
    #: (namespace, channel) -> blob versions deleted
    blobs: Mapping[tuple[str, str], tuple[str, ...]]
    #: write rows that go: those of the deleted checkpoints and the orphaned ones
    writes: int
    #: namespace -> ids kept
    kept: Mapping[str, tuple[str, ...]]
    #: namespace -> ids of checkpoints not stored whose writes are deleted (orphaned writes)
    orphans: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def checkpoint_count(self) -> int:
        return sum(len(ids) for ids in self.checkpoints.values())

    @property
    def blob_count(self) -> int:
        return sum(len(v) for v in self.blobs.values())

    @property
    def empty(self) -> bool:
        return not self.checkpoints and not self.blobs and not self.orphans


def plan_retention(
    thread: ThreadState,
    *,
    keep_last: int,
    protect: Collection[tuple[str, str]] = (),
    now: datetime | None = None,
    branch_grace: timedelta = BRANCH_GRACE,
) -> RetentionPlan:
    """What to delete of ``thread`` to keep ``keep_last`` root checkpoints (rules: module doc).

    ``protect``: (namespace, checkpoint id) pairs never deleted. ``now`` (default: the clock) and
    ``branch_grace`` decide which checkpoints a run may still be extending. Raises
    ``DeltaChannelRetentionError`` for a thread using a DeltaChannel.
    """
    keep_last = validate_keep_last(keep_last) or 1
    branch_grace = validate_branch_grace(branch_grace)
    if any(c.delta for c in thread.checkpoints):
        raise DeltaChannelRetentionError(thread.thread_id)
    now = datetime.now(timezone.utc) if now is None else now
    by_ns: dict[str, list[StoredCheckpoint]] = {}
    for c in thread.checkpoints:
        by_ns.setdefault(c.ns, []).append(c)
    for stored in by_ns.values():
        stored.sort(key=lambda c: c.id, reverse=True)
    protected = set(protect)
    # a subgraph call follows its root checkpoint (a running call's root is itself extended)
    unfinished = {(ns, c.id) for ns, stored in by_ns.items() if not _is_call(ns, stored[0])
                  for c in _unfinished(stored, now, branch_grace)}
    extended: set[tuple[str, str]] = set()
    if thread.blobs is not None:
        due = {(c.ns, c.id) for c in thread.checkpoints if c.due}
        extended = unfinished & due
    roots = [c.id for c in by_ns.get(ROOT_NS, [])]
    spared = protected | extended
    kept_roots = set(roots[:keep_last]) | {i for ns, i in spared if ns == ROOT_NS}
    oldest_root = roots[-1] if roots else None
    interrupted = {(w.ns, w.id) for w in thread.writes if w.interrupt}

    kept: dict[str, list[StoredCheckpoint]] = {}
    for ns, stored in by_ns.items():
        head = stored[0]
        if not _is_call(ns, head):
            keep = stored[:keep_last]
        elif (ns, head.id) in interrupted or head.root in kept_roots:
            keep = [head]
        elif head.root in roots or (oldest_root is not None and str(head.root) < oldest_root):
            keep = []  # the call's root checkpoint is deleted: nothing needs the call any more
        else:
            keep = stored  # its root checkpoint is not saved yet
        keep_ids = {c.id for c in keep}
        keep += [c for c in stored if c.id not in keep_ids and (ns, c.id) in spared]
        kept[ns] = keep

    deleted: dict[str, tuple[str, ...]] = {}
    blobs: dict[tuple[str, str], tuple[str, ...]] = {}
    for ns, stored in by_ns.items():
        keep_ids = {c.id for c in kept[ns]}
        gone = [c for c in stored if c.id not in keep_ids]
        if not gone:
            continue
        deleted[ns] = tuple(c.id for c in gone)
        referenced = {(ch, str(v)) for c in kept[ns] for ch, v in c.versions.items()}
        garbage: dict[str, set[str]] = {}
        for c in gone:
            for ch, v in c.versions.items():
                stored_blob = thread.blobs is None or (ns, ch, str(v)) in thread.blobs
                if (ch, str(v)) not in referenced and stored_blob:
                    garbage.setdefault(ch, set()).add(str(v))
        blobs.update(((ns, ch), tuple(sorted(vs))) for ch, vs in garbage.items())
    gone_keys = {(ns, i) for ns, ids in deleted.items() for i in ids}
    orphans = _orphaned_writes(thread, by_ns, kept, unfinished)
    orphan_keys = {(ns, i) for ns, ids in orphans.items() for i in ids}
    writes = sum(w.count for w in thread.writes if (w.ns, w.id) in gone_keys or (w.ns, w.id) in orphan_keys)
    return RetentionPlan(
        thread_id=thread.thread_id,
        checkpoints=deleted,
        blobs=blobs,
        writes=writes,
        kept={ns: tuple(c.id for c in keep) for ns, keep in kept.items()},
        orphans=orphans,
    )


def _is_call(ns: str, head: StoredCheckpoint) -> bool:
    """A subgraph call's namespace (``"node:<task id>"`` with a root link): it keeps its latest
    checkpoint only while its root checkpoint is kept."""
    return ns != ROOT_NS and ":" in ns and head.root is not None


def _unfinished(
    stored: Sequence[StoredCheckpoint], now: datetime, grace: timedelta
) -> list[StoredCheckpoint]:
    """The checkpoints of one namespace whose run may still write their child (rules: module
    doc): made less than ``grace`` before ``now`` (or after it: a writer's clock ahead of ours)
    with no stored step of their run after them. An id that tells no time is old."""
    steps = {c.id: c.step for c in stored}
    continued: set[str] = set()
    for c in stored:
        if not c.loop or c.parent is None:
            continue
        # a parent relinked past deleted checkpoints (Cosmos DB) is not continued by this child
        parent_step = steps.get(c.parent)
        if c.step is None or parent_step is None or c.step == parent_step + 1:
            continued.add(c.parent)
    out = []
    for c in stored:
        made = checkpoint_time(c.id)
        if c.id not in continued and made is not None and now - made < grace:
            out.append(c)
    return out


def _orphaned_writes(
    thread: ThreadState, by_ns: Mapping[str, Sequence[StoredCheckpoint]],
    kept: Mapping[str, Sequence[StoredCheckpoint]], unfinished: Collection[tuple[str, str]],
) -> dict[str, tuple[str, ...]]:
    """Namespace -> ids of checkpoints not stored whose writes go (rules: module doc)."""
    floors: dict[str, str] = {}
    for ns, i in [*((ns, c.id) for ns, keep in kept.items() for c in keep), *unfinished]:
        floors[ns] = min(floors.get(ns, i), i)
    root_floor = floors.get(ROOT_NS)
    stored_ids = {(c.ns, c.id) for c in thread.checkpoints}
    orphans: dict[str, list[str]] = {}
    for w in thread.writes:
        if (w.ns, w.id) in stored_ids:
            continue
        dropped = w.ns not in floors and bool(by_ns.get(w.ns))  # a call dropped whole: all go
        # a namespace with nothing stored compares with the root's; with no floor at all, the
        # thread's first checkpoint may be on its way
        floor = floors.get(w.ns, root_floor)
        if dropped or (floor is not None and w.id < floor):
            orphans.setdefault(w.ns, []).append(w.id)
    return {ns: tuple(sorted(ids)) for ns, ids in orphans.items()}


# -- operations and flows --------------------------------------------------------------------------


class LoadThread(NamedTuple):
    thread_id: str


class DeleteCheckpoints(NamedTuple):
    """Delete these checkpoints of one namespace and their writes; result: (checkpoints, writes)."""

    thread_id: str
    ns: str
    ids: tuple[str, ...]


class DeleteWrites(NamedTuple):
    """Delete the writes of these checkpoints (not stored) of one namespace; result: rows deleted."""

    thread_id: str
    ns: str
    ids: tuple[str, ...]


class DeleteBlobs(NamedTuple):
    """Delete these blob versions of one channel, each unless a stored checkpoint names it
    (checked when deleting); result: blobs deleted."""

    thread_id: str
    ns: str
    channel: str
    versions: tuple[str, ...]


class DeleteThread(NamedTuple):
    thread_id: str


class ListThreads(NamedTuple):
    pass


class NewestTs(NamedTuple):
    """The ``ts`` of the thread's newest root checkpoint (None: the thread has none)."""

    thread_id: str


Op = LoadThread | DeleteCheckpoints | DeleteWrites | DeleteBlobs | DeleteThread | ListThreads | NewestTs
Flow = Generator[Op, Any, Any]


@dataclass(frozen=True, slots=True)
class Deleted:
    """What one flow deleted (or, dry, would delete)."""

    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0


def apply_flow(plan: RetentionPlan) -> Generator[Op, Any, Deleted]:
    checkpoints = writes = blobs = 0
    for ns, ids in plan.checkpoints.items():
        c, w = yield DeleteCheckpoints(plan.thread_id, ns, ids)
        checkpoints += c
        writes += w
    for ns, ids in plan.orphans.items():
        writes += yield DeleteWrites(plan.thread_id, ns, ids)
    for (ns, channel), versions in plan.blobs.items():
        blobs += yield DeleteBlobs(plan.thread_id, ns, channel, versions)
    return Deleted(checkpoints, writes, blobs)


def retain_flow(
    thread_id: str, keep_last: int, protect: Collection[tuple[str, str]] = (), *, dry_run: bool = False,
    branch_grace: timedelta = BRANCH_GRACE,
) -> Generator[Op, Any, Deleted]:
    """Load ``thread_id``, plan its retention, delete what the plan says (unless ``dry_run``)."""
    state = yield LoadThread(thread_id)
    plan = plan_retention(state, keep_last=keep_last, protect=protect, branch_grace=branch_grace)
    if dry_run or plan.empty:
        return Deleted(plan.checkpoint_count, plan.writes, plan.blob_count)
    return (yield from apply_flow(plan))


def delete_thread_flow(thread_id: str, *, dry_run: bool = False) -> Generator[Op, Any, Deleted]:
    state: ThreadState = yield LoadThread(thread_id)
    counts = Deleted(len(state.checkpoints), sum(w.count for w in state.writes))
    if not dry_run:
        yield DeleteThread(thread_id)
    return counts


def waiting(state: ThreadState) -> bool:
    """The thread's latest root checkpoint has pending writes (a step ran, or an interrupt waits)."""
    roots = [c.id for c in state.checkpoints if c.ns == ROOT_NS]
    if not roots:
        return False
    head = max(roots)
    return any(w.ns == ROOT_NS and w.id == head for w in state.writes)


# -- backends: perform the operations on one saver class ------------------------------------------


def _loads_json(raw: Any) -> Any:
    if raw is None:
        return None
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw).decode("utf-8")
    return json.loads(raw) if isinstance(raw, str) else raw


#: channels whose update makes a step due: the input, an edge to a node, a ``Send``
_TRIGGERS = ("__start__", "branch:to:", "__pregel_tasks")


def step_due(updated_channels: Any) -> bool:
    """Whether a step is due after a checkpoint with these ``updated_channels`` (None: unknown,
    so due).

    >>> step_due(["branch:to:tools", "messages"]), step_due(["messages"]), step_due(None)
    (True, False, True)
    """
    if not isinstance(updated_channels, (list, tuple)):
        return True
    return any(isinstance(ch, str) and ch.startswith(_TRIGGERS) for ch in updated_channels)


def _checkpoint_row(
    ns: str, cid: str, metadata: Any, versions: Any = None, parent: Any = None, updated: Any = None
) -> StoredCheckpoint:
    meta = metadata if isinstance(metadata, Mapping) else (_loads_json(metadata) or {})
    parents = meta.get("parents") or {}
    root = parents.get(ROOT_NS) if isinstance(parents, Mapping) else None
    delta = "counters_since_delta_snapshot" in meta or "delta_writes_versioned" in meta
    vers = versions if isinstance(versions, Mapping) else (_loads_json(versions) or {})
    if isinstance(updated, (str, bytes, bytearray, memoryview)):
        updated = _loads_json(updated)
    return StoredCheckpoint(
        ns, cid, root if isinstance(root, str) else None, delta,
        {str(k): str(v) for k, v in vers.items()}, None if parent is None else str(parent),
        meta.get("source") == "loop", checkpoint_step(meta.get("step")), step_due(updated),
    )


def checkpoint_step(value: Any) -> int | None:
    """A metadata ``step`` as an int, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Sql(NamedTuple):
    text: str
    params: Sequence[Any]
    fetch: bool = False


class _SqlDialect:
    """The statements of each operation, and what their results mean. Subclasses: SQLite, PG."""

    load_checkpoints: str
    load_writes: str
    delete_writes: str
    delete_checkpoints: str
    delete_blobs: str | None
    delete_thread: tuple[str, ...]
    list_threads: str
    newest: str

    def __init__(self, serde: Any) -> None:
        self.serde = serde

    def ids(self, ids: Sequence[str]) -> Any:
        raise NotImplementedError

    def statements(self, op: Op) -> list[Sql]:
        if isinstance(op, LoadThread):
            return [Sql(self.load_checkpoints, (op.thread_id,), True),
                    Sql(self.load_writes, (op.thread_id,), True)]
        if isinstance(op, DeleteCheckpoints):
            args = (op.thread_id, op.ns, self.ids(op.ids))
            return [Sql(self.delete_checkpoints, args), Sql(self.delete_writes, args)]
        if isinstance(op, DeleteWrites):
            return [Sql(self.delete_writes, (op.thread_id, op.ns, self.ids(op.ids)))]
        if isinstance(op, DeleteBlobs):
            assert self.delete_blobs is not None
            return [Sql(self.delete_blobs, (op.thread_id, op.ns, op.channel, self.ids(op.versions)))]
        if isinstance(op, DeleteThread):
            return [Sql(s, (op.thread_id,)) for s in self.delete_thread]
        if isinstance(op, ListThreads):
            return [Sql(self.list_threads, (), True)]
        if isinstance(op, NewestTs):
            return [Sql(self.newest, (op.thread_id,), True)]
        raise TypeError(f"unknown retention operation {op!r}")

    def result(self, op: Op, results: list[Any]) -> Any:
        if isinstance(op, LoadThread):
            checkpoints = tuple(self.checkpoint(r) for r in results[0])
            writes = tuple(StoredWrites(r[0], r[1], int(r[2]), bool(r[3])) for r in results[1])
            return ThreadState(op.thread_id, checkpoints, writes)
        if isinstance(op, DeleteCheckpoints):
            return (results[0], results[1])
        if isinstance(op, (DeleteWrites, DeleteBlobs)):
            return results[0]
        if isinstance(op, ListThreads):
            return [r[0] for r in results[0]]
        if isinstance(op, NewestTs):
            return self.ts(results[0][0]) if results[0] else None
        return None

    def checkpoint(self, row: Sequence[Any]) -> StoredCheckpoint:
        return _checkpoint_row(row[0], row[1], row[2], parent=row[3])

    def ts(self, row: Sequence[Any]) -> str | None:
        raise NotImplementedError


class _SqliteDialect(_SqlDialect):
    load_checkpoints = (
        "SELECT checkpoint_ns, checkpoint_id, CAST(metadata AS TEXT), parent_checkpoint_id FROM checkpoints "
        "WHERE thread_id = ?"
    )
    load_writes = (
        "SELECT checkpoint_ns, checkpoint_id, COUNT(*), MAX(channel = ?) FROM writes "
        "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id"
    )
    delete_checkpoints = (
        "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id IN (SELECT value FROM json_each(?))"
    )
    delete_writes = (
        "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id IN (SELECT value FROM json_each(?))"
    )
    delete_blobs = None
    delete_thread = ("DELETE FROM checkpoints WHERE thread_id = ?", "DELETE FROM writes WHERE thread_id = ?")
    list_threads = "SELECT DISTINCT thread_id FROM checkpoints"
    newest = (
        "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    )

    def ids(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def statements(self, op: Op) -> list[Sql]:
        out = super().statements(op)
        if isinstance(op, LoadThread):
            out[1] = Sql(self.load_writes, (INTERRUPT, op.thread_id), True)
        return out

    def ts(self, row: Sequence[Any]) -> str | None:
        ts = self.serde.loads_typed((row[0], row[1])).get("ts")
        return str(ts) if ts is not None else None


class _PostgresDialect(_SqlDialect):
    load_checkpoints = (
        "SELECT checkpoint_ns, checkpoint_id, metadata, parent_checkpoint_id, "
        "checkpoint -> 'channel_versions' AS versions, checkpoint -> 'updated_channels' AS updated "
        "FROM checkpoints WHERE thread_id = %s"
    )
    load_writes = (
        "SELECT checkpoint_ns, checkpoint_id, COUNT(*), BOOL_OR(channel = %s) FROM checkpoint_writes "
        "WHERE thread_id = %s GROUP BY checkpoint_ns, checkpoint_id"
    )
    delete_checkpoints = (
        "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
    )
    delete_writes = (
        "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
        "AND checkpoint_id = ANY(%s)"
    )
    # A checkpoint committed since the thread was loaded (another run's put) may name a version
    # the plan found unreferenced: the statement checks again.
    delete_blobs = (
        "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
        "AND b.channel = %s AND b.version = ANY(%s) AND NOT EXISTS (SELECT 1 FROM checkpoints c "
        "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
    )
    delete_thread = (
        "DELETE FROM checkpoints WHERE thread_id = %s",
        "DELETE FROM checkpoint_blobs WHERE thread_id = %s",
        "DELETE FROM checkpoint_writes WHERE thread_id = %s",
    )
    list_threads = "SELECT DISTINCT thread_id FROM checkpoints"
    newest = (
        "SELECT checkpoint ->> 'ts' FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    )

    load_blobs = "SELECT checkpoint_ns, channel, version FROM checkpoint_blobs WHERE thread_id = %s"

    def ids(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def statements(self, op: Op) -> list[Sql]:
        out = super().statements(op)
        if isinstance(op, LoadThread):
            out[1] = Sql(self.load_writes, (INTERRUPT, op.thread_id), True)
            out.append(Sql(self.load_blobs, (op.thread_id,), True))
        return out

    def result(self, op: Op, results: list[Any]) -> Any:
        value = super().result(op, results)
        if isinstance(op, LoadThread):
            blobs = frozenset((r[0], r[1], str(r[2])) for r in results[2])
            return ThreadState(value.thread_id, value.checkpoints, value.writes, blobs)
        return value

    def checkpoint(self, row: Sequence[Any]) -> StoredCheckpoint:
        return _checkpoint_row(row[0], row[1], row[2], row[4], row[3], row[5])

    def ts(self, row: Sequence[Any]) -> str | None:
        return str(row[0]) if row[0] is not None else None


PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def _rows(cur: Any) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) if isinstance(r, Mapping) else tuple(r) for r in cur.fetchall()]


async def _arows(cur: Any) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) if isinstance(r, Mapping) else tuple(r) for r in await cur.fetchall()]


class Backend:
    """Performs retention operations on one saver; ``run``/``arun`` drive a flow in one transaction."""

    is_async: bool = False

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def run(self, flow: Flow) -> Any:
        if self.is_async:
            return _on_saver_loop(self.saver, self.arun(flow))
        return self._run(flow)

    async def arun(self, flow: Flow) -> Any:
        if not self.is_async:
            return await asyncio.to_thread(self._run, flow)
        return await self._arun(flow)

    def size(self) -> int | None:
        return _on_saver_loop(self.saver, self._asize()) if self.is_async else self._size()

    async def asize(self) -> int | None:
        return await self._asize() if self.is_async else await asyncio.to_thread(self._size)

    def vacuum(self) -> None:
        _on_saver_loop(self.saver, self._avacuum()) if self.is_async else self._vacuum()

    async def avacuum(self) -> None:
        await self._avacuum() if self.is_async else await asyncio.to_thread(self._vacuum)

    def version_entry(self, ns: str, channel: str, version: Any) -> tuple[str, str]:
        """How (channel, version) appears in the ``versions`` of this backend's StoredCheckpoint."""
        return channel, str(version)

    # implemented by the sync or the async backends
    def _run(self, flow: Flow) -> Any:
        raise NotImplementedError

    async def _arun(self, flow: Flow) -> Any:
        raise NotImplementedError

    def _size(self) -> int | None:
        raise NotImplementedError

    async def _asize(self) -> int | None:
        raise NotImplementedError

    def _vacuum(self) -> None:
        raise NotImplementedError

    async def _avacuum(self) -> None:
        raise NotImplementedError


def _on_saver_loop(saver: Any, coro: Any) -> Any:
    """Run ``coro`` on an async saver's event loop from another thread (as its sync methods do)."""
    loop = getattr(saver, "loop", None)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop:
        coro.close()
        raise asyncio.InvalidStateError(
            f"{type(saver).__name__} is async: from its event loop call the async form "
            "(aprune, asweep, or let the graph use aput) instead of the sync one"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


class _MemoryBackend(Backend):
    def perform(self, op: Op) -> Any:
        s = self.saver
        if isinstance(op, LoadThread):
            rows = []
            for ns, stored in list(s.storage.get(op.thread_id, {}).items()):
                for cid, (typed, meta, parent) in list(stored.items()):
                    body = s.serde.loads_typed(typed)
                    rows.append(_checkpoint_row(
                        ns, cid, s.serde.loads_typed(meta), body.get("channel_versions", {}), parent,
                        body.get("updated_channels"),
                    ))
            pending = [
                StoredWrites(ns, cid, len(w), any(v[1] == INTERRUPT for v in w.values()))
                for (tid, ns, cid), w in list(s.writes.items())
                if tid == op.thread_id and w
            ]
            blobs = frozenset((ns, ch, str(v)) for (tid, ns, ch, v) in list(s.blobs) if tid == op.thread_id)
            return ThreadState(op.thread_id, tuple(rows), tuple(pending), blobs)
        if isinstance(op, DeleteCheckpoints):
            stored = s.storage.get(op.thread_id, {}).get(op.ns, {})
            checkpoints = writes = 0
            for cid in op.ids:
                if stored.pop(cid, None) is not None:
                    checkpoints += 1
                writes += len(s.writes.pop((op.thread_id, op.ns, cid), None) or ())
            return checkpoints, writes
        if isinstance(op, DeleteWrites):
            return sum(len(s.writes.pop((op.thread_id, op.ns, cid), None) or ()) for cid in op.ids)
        if isinstance(op, DeleteBlobs):
            named = {  # checked again: another run's put since the load may name a version
                str(s.serde.loads_typed(typed).get("channel_versions", {}).get(op.channel))
                for typed, _meta, _parent in list(s.storage.get(op.thread_id, {}).get(op.ns, {}).values())
            }
            popped = [s.blobs.pop((op.thread_id, op.ns, op.channel, v), None) for v in op.versions
                      if v not in named]
            return sum(b is not None for b in popped)
        if isinstance(op, DeleteThread):
            s.delete_thread(op.thread_id)
            return None
        if isinstance(op, ListThreads):
            return [t for t, spaces in list(s.storage.items()) if any(spaces.values())]
        if isinstance(op, NewestTs):
            stored = s.storage.get(op.thread_id, {}).get(ROOT_NS, {})
            if not stored:
                return None
            return s.serde.loads_typed(stored[max(stored)][0]).get("ts")
        raise TypeError(f"unknown retention operation {op!r}")

    def _run(self, flow: Flow) -> Any:
        return drive(flow, self.perform)

    def _size(self) -> int | None:
        s = self.saver
        total = sum(len(t[1]) + len(m[1]) for spaces in list(s.storage.values())
                    for stored in list(spaces.values()) for t, m, _ in list(stored.values()))
        total += sum(len(v[2][1]) for w in list(s.writes.values()) for v in list(w.values()))
        return total + sum(len(b[1]) for b in list(s.blobs.values()))

    def _vacuum(self) -> None:
        return None


class _SqliteBackend(Backend):
    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = _SqliteDialect(saver.serde)

    def _run(self, flow: Flow) -> Any:
        saver = self.saver
        saver.setup()
        with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                conn.commit()
            cur = conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")

                def perform(op: Op) -> Any:
                    results = []
                    for s in self.dialect.statements(op):
                        cur.execute(s.text, s.params)
                        results.append(_rows(cur) if s.fetch else cur.rowcount)
                    return self.dialect.result(op, results)

                result = drive(flow, perform)
                conn.commit()
                return result
            except BaseException:
                conn.rollback()
                raise
            finally:
                cur.close()

    def _size(self) -> int | None:
        with self.saver.lock:
            conn = self.saver.conn
            return _sqlite_size(conn.execute, conn.execute("PRAGMA database_list").fetchall())

    def _vacuum(self) -> None:
        with self.saver.lock:
            conn = self.saver.conn
            if conn.in_transaction:
                conn.commit()
            mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
            if mode == 2:
                conn.execute("PRAGMA incremental_vacuum").fetchall()
            else:
                conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _sqlite_size(execute: Callable[..., Any], databases: Iterable[Sequence[Any]]) -> int | None:
    from pathlib import Path

    path = next((r[2] for r in databases if r[1] == "main"), "")
    if not path:
        return None  # an in-memory database
    execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(p.stat().st_size for p in (Path(path), Path(path + "-wal")) if p.exists())


class _AsyncSqliteBackend(Backend):
    is_async = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = _SqliteDialect(saver.serde)

    async def _arun(self, flow: Flow) -> Any:
        saver = self.saver
        await saver.setup()
        async with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                await conn.commit()
            cur = await conn.cursor()
            try:
                await cur.execute("BEGIN IMMEDIATE")

                async def perform(op: Op) -> Any:
                    results = []
                    for s in self.dialect.statements(op):
                        await cur.execute(s.text, s.params)
                        results.append(await _arows(cur) if s.fetch else cur.rowcount)
                    return self.dialect.result(op, results)

                result = await adrive(flow, perform)
                await conn.commit()
                return result
            except BaseException:
                await conn.rollback()
                raise
            finally:
                await cur.close()

    async def _asize(self) -> int | None:
        from pathlib import Path

        saver = self.saver
        await saver.setup()
        async with saver.lock:
            databases = await saver.conn.execute_fetchall("PRAGMA database_list")
            path = next((r[2] for r in databases if r[1] == "main"), "")
            if not path:
                return None
            await saver.conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            return sum(p.stat().st_size for p in (Path(path), Path(path + "-wal")) if p.exists())

    async def _avacuum(self) -> None:
        saver = self.saver
        await saver.setup()
        async with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                await conn.commit()
            mode = (await conn.execute_fetchall("PRAGMA auto_vacuum"))[0][0]
            await conn.execute_fetchall("PRAGMA incremental_vacuum" if mode == 2 else "VACUUM")
            await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")


_PG_SIZE_SQL = "SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in PG_TABLES)
_PG_VACUUM_SQL = "VACUUM (ANALYZE) " + ", ".join(PG_TABLES)


def _vacuum_error(exc: Exception) -> RuntimeError:
    return RuntimeError(
        "VACUUM cannot run inside a transaction: give the Postgres saver a connection in autocommit "
        f"mode (from_conn_string does), or vacuum from psql ({type(exc).__name__}: {exc})"
    )


class _PostgresBackend(Backend):
    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = _PostgresDialect(saver.serde)

    def _run(self, flow: Flow) -> Any:
        saver = self.saver
        with saver._cursor() as cur:
            if saver.pipe:
                saver.pipe.sync()
            with cur.connection.transaction():

                def perform(op: Op) -> Any:
                    results = []
                    for s in self.dialect.statements(op):
                        cur.execute(s.text, s.params, prepare=False)
                        results.append(_rows(cur) if s.fetch else cur.rowcount)
                    return self.dialect.result(op, results)

                return drive(flow, perform)

    def _size(self) -> int | None:
        with self.saver._cursor() as cur:
            cur.execute(_PG_SIZE_SQL)
            return int(_rows(cur)[0][0])

    def _vacuum(self) -> None:
        import psycopg

        with self.saver._cursor() as cur:
            try:
                cur.execute(_PG_VACUUM_SQL)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _vacuum_error(exc) from None


class _AsyncPostgresBackend(Backend):
    is_async = True

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self.dialect = _PostgresDialect(saver.serde)

    async def _arun(self, flow: Flow) -> Any:
        saver = self.saver
        async with saver._cursor() as cur:
            if saver.pipe:
                await saver.pipe.sync()
            async with cur.connection.transaction():

                async def perform(op: Op) -> Any:
                    results = []
                    for s in self.dialect.statements(op):
                        await cur.execute(s.text, s.params, prepare=False)
                        results.append(await _arows(cur) if s.fetch else cur.rowcount)
                    return self.dialect.result(op, results)

                return await adrive(flow, perform)

    async def _asize(self) -> int | None:
        async with self.saver._cursor() as cur:
            await cur.execute(_PG_SIZE_SQL)
            return int((await _arows(cur))[0][0])

    async def _avacuum(self) -> None:
        import psycopg

        async with self.saver._cursor() as cur:
            try:
                await cur.execute(_PG_VACUUM_SQL)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _vacuum_error(exc) from None


class _CosmosVersions:
    def version_entry(self, ns: str, channel: str, version: Any) -> tuple[str, str]:
        from .cosmosdb._ids import blob_item_id

        return blob_item_id(ns, channel, version), ""  # versions are the value items' ids


class _CosmosBackend(_CosmosVersions, Backend):
    """``CosmosDBSaver``: the operations as Cosmos DB ops (``checkpointers.cosmosdb._retention``),
    in transactional batches of at most 100 operations per thread; no transaction spans batches."""

    def _run(self, flow: Flow) -> Any:
        from .cosmosdb._retention import retention_flow

        return self.saver._run(retention_flow(flow, self.saver.serde))

    def _size(self) -> int | None:
        from .cosmosdb._retention import documents_bytes, stored_bytes_flow

        reported = documents_bytes(self.saver._resource_usage())
        return reported if reported is not None else self.saver._run(stored_bytes_flow())

    def _vacuum(self) -> None:
        return None


class _AsyncCosmosBackend(_CosmosVersions, Backend):
    """``AsyncCosmosDBSaver``: as ``_CosmosBackend``, on ``azure.cosmos.aio``; the sync forms run
    on the saver's event loop from another thread."""

    is_async = True

    def run(self, flow: Flow) -> Any:
        return self.saver._sync(self._arun(flow))

    def size(self) -> int | None:
        return self.saver._sync(self._asize())

    def vacuum(self) -> None:
        return None

    async def _arun(self, flow: Flow) -> Any:
        from .cosmosdb._retention import retention_flow

        return await self.saver._run(retention_flow(flow, self.saver.serde))

    async def _asize(self) -> int | None:
        from .cosmosdb._retention import documents_bytes, stored_bytes_flow

        reported = documents_bytes(await self.saver._aresource_usage())
        return reported if reported is not None else await self.saver._run(stored_bytes_flow())

    async def _avacuum(self) -> None:
        return None


def _backend_class(saver_class: type) -> type[Backend] | None:
    """The backend for a saver class, by its LangGraph class (exact classes and their subclasses)."""
    for module, name, backend in _BACKENDS:
        try:
            mod = __import__(module, fromlist=[name])
        except ImportError:
            continue
        cls = getattr(mod, name, None)
        if isinstance(cls, type) and issubclass(saver_class, cls):
            return backend
    return None


_BACKENDS: tuple[tuple[str, str, type[Backend]], ...] = (
    ("langgraph.checkpoint.memory", "InMemorySaver", _MemoryBackend),
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", _AsyncSqliteBackend),
    ("langgraph.checkpoint.sqlite", "SqliteSaver", _SqliteBackend),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", _AsyncPostgresBackend),
    ("langgraph.checkpoint.postgres", "PostgresSaver", _PostgresBackend),
    ("checkpointers.cosmosdb.aio", "AsyncCosmosDBSaver", _AsyncCosmosBackend),
    ("checkpointers.cosmosdb.sync", "CosmosDBSaver", _CosmosBackend),
)

SUPPORTED = (
    "InMemorySaver, SqliteSaver, AsyncSqliteSaver, PostgresSaver, AsyncPostgresSaver, CosmosDBSaver, "
    "AsyncCosmosDBSaver"
)


def supports_retention(saver_class: type) -> bool:
    """Whether retention has a backend for savers of this class."""
    return _backend_class(saver_class) is not None


def backend_for(saver: Any) -> Backend:
    """The retention backend of ``saver`` (a wrapper is looked through to its inner saver)."""
    inner = saver
    while isinstance(getattr(inner, "__dict__", {}).get("_inner"), BaseCheckpointSaver):
        inner = inner.__dict__["_inner"]
    backend = _backend_class(type(inner))
    if backend is None:
        raise TypeError(
            f"retention supports {SUPPORTED} (bare or wrapped in a ReducingCheckpointSaver), "
            f"got {type(inner).__name__}"
        )
    return backend(inner)


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
    #: thread -> why it was left as it is (a DeltaChannel; pending writes or an interrupt)
    skipped: dict[str, str] = field(default_factory=dict)
    #: stored bytes (module doc says how each saver counts); None where not measurable
    bytes_before: int | None = None
    bytes_after: int | None = None
    vacuumed: bool = False

    def add(self, deleted: Deleted) -> None:
        self.checkpoints_deleted += deleted.checkpoints
        self.writes_deleted += deleted.writes
        self.blobs_deleted += deleted.blobs


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


def is_idle(ts: str | None, older_than: timedelta | None, now: datetime) -> bool:
    """True when a checkpoint written at ``ts`` (ISO, naive means UTC) is older than ``older_than``."""
    if older_than is None or ts is None:
        return False
    stamp = datetime.fromisoformat(ts)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return now - stamp > older_than


def _sweep_thread_flow(
    thread_id: str, older_than: timedelta | None, keep_last: int | None, now: datetime, dry_run: bool,
    force: bool, report: SweepReport,
) -> Generator[Op, Any, None]:
    ts = yield NewestTs(thread_id)
    state: ThreadState = yield LoadThread(thread_id)
    if not force and waiting(state):
        report.skipped[thread_id] = (
            "its latest checkpoint has pending writes (a step ran or an interrupt waits)"
        )
        return
    if is_idle(ts, older_than, now):
        report.add(Deleted(len(state.checkpoints), sum(w.count for w in state.writes)))
        report.threads_deleted.append(thread_id)
        if not dry_run:
            yield DeleteThread(thread_id)
        return
    if keep_last is None:
        return
    try:
        plan = plan_retention(state, keep_last=keep_last)
    except DeltaChannelRetentionError as exc:
        report.skipped[thread_id] = str(exc)
        return
    if plan.empty:
        return
    report.threads_trimmed.append(thread_id)
    if dry_run:
        report.add(Deleted(plan.checkpoint_count, plan.writes, plan.blob_count))
        return
    report.add((yield from apply_flow(plan)))


def sweep(
    saver: BaseCheckpointSaver[Any],
    *,
    older_than: timedelta | None = None,
    keep_last: int | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
    force: bool = False,
) -> SweepReport:
    """Delete threads idle longer than ``older_than`` and trim the others to ``keep_last``.

    A thread's idle time is read from its newest root checkpoint's ``ts``. Each thread is swept in
    a transaction of its own. Threads whose latest checkpoint has pending writes (a step ran, or an
    interrupt waits) are skipped unless ``force``; DeltaChannel threads are never trimmed (they may
    be deleted whole). ``dry_run`` deletes nothing and reports what the run would delete.
    ``vacuum``: free the space (module doc). Works on ``saver`` bare or wrapped.
    """
    older, keep = _check_sweep_args(older_than, keep_last)
    backend = backend_for(saver)
    report = SweepReport(dry_run=dry_run, bytes_before=backend.size())
    now = datetime.now(timezone.utc)
    threads = backend.run(_list_flow())
    report.threads_seen = len(threads)
    for thread_id in threads:
        backend.run(_sweep_thread_flow(thread_id, older, keep, now, dry_run, force, report))
    forget = getattr(type(saver), "forget_archived", None)
    if forget is not None and not dry_run:  # a wrapper with an archive: the archive follows the thread
        for thread_id in report.threads_deleted:
            forget(saver, thread_id)
    if vacuum and not dry_run:
        backend.vacuum()
        report.vacuumed = True
    report.bytes_after = report.bytes_before if dry_run else backend.size()
    return report


async def asweep(
    saver: BaseCheckpointSaver[Any],
    *,
    older_than: timedelta | None = None,
    keep_last: int | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
    force: bool = False,
) -> SweepReport:
    """``sweep`` for async code (and async savers)."""
    older, keep = _check_sweep_args(older_than, keep_last)
    backend = backend_for(saver)
    report = SweepReport(dry_run=dry_run, bytes_before=await backend.asize())
    now = datetime.now(timezone.utc)
    threads = await backend.arun(_list_flow())
    report.threads_seen = len(threads)
    for thread_id in threads:
        await backend.arun(_sweep_thread_flow(thread_id, older, keep, now, dry_run, force, report))
    aforget = getattr(type(saver), "aforget_archived", None)
    if aforget is not None and not dry_run:
        for thread_id in report.threads_deleted:
            await aforget(saver, thread_id)
    if vacuum and not dry_run:
        await backend.avacuum()
        report.vacuumed = True
    report.bytes_after = report.bytes_before if dry_run else await backend.asize()
    return report


def _list_flow() -> Generator[Op, Any, list[str]]:
    threads = yield ListThreads()
    return sorted(str(t) for t in threads)


# -- prune: LangGraph's API, on savers that lack it -----------------------------------------------

PRUNE_STRATEGIES = ("keep_latest", "delete")


def check_prune_args(thread_ids: object, strategy: object) -> list[str]:
    if isinstance(thread_ids, (str, bytes)):
        raise TypeError("thread_ids must be a sequence of thread ids, not a single str: prune([thread_id])")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
    return [str(t) for t in thread_ids]  # type: ignore[attr-defined]


def _refuse_delta_flow(thread_ids: Sequence[str]) -> Generator[Op, Any, None]:
    for thread_id in thread_ids:
        state: ThreadState = yield LoadThread(thread_id)
        if any(c.delta for c in state.checkpoints):
            raise DeltaChannelRetentionError(thread_id)


def prune(saver: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
    """LangGraph's ``prune`` on any supported saver: ``"keep_latest"`` is ``keep_last=1`` per thread
    (each in its own transaction; DeltaChannel threads refused before any is pruned);
    ``"delete"`` deletes the threads."""
    ids = check_prune_args(thread_ids, strategy)
    backend = backend_for(saver)
    if strategy == "delete":
        for thread_id in ids:
            backend.run(delete_thread_flow(thread_id))
        return
    backend.run(_refuse_delta_flow(ids))
    for thread_id in ids:
        backend.run(retain_flow(thread_id, 1))


async def aprune(saver: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
    """``prune`` for async code (and async savers)."""
    ids = check_prune_args(thread_ids, strategy)
    backend = backend_for(saver)
    if strategy == "delete":
        for thread_id in ids:
            await backend.arun(delete_thread_flow(thread_id))
        return
    await backend.arun(_refuse_delta_flow(ids))
    for thread_id in ids:
        await backend.arun(retain_flow(thread_id, 1))


# -- per-put retention: what ReducingCheckpointSaver(keep_last=...) runs -------------------------


def versions_to_store(
    checkpoint: Mapping[str, Any], metadata: Mapping[str, Any], new_versions: Mapping[str, Any]
) -> dict[str, Any]:
    """The channel versions a put under retention stores values for: ``new_versions``, and for a
    run's input checkpoint every value it names. A run reads the thread's latest checkpoint when it
    starts; until its input checkpoint is stored, another run's retention may delete that one and
    the values only it named (a finished checkpoint is not spared), so the input stores them again.
    Blob savers skip a value already stored (Postgres ``ON CONFLICT DO NOTHING``); row savers
    ignore ``new_versions``.
    """
    if metadata.get("source") != "input":
        return dict(new_versions)
    values = checkpoint.get("channel_values", {})
    named = {ch: v for ch, v in checkpoint.get("channel_versions", {}).items() if ch in values}
    return {**named, **new_versions}



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
    #: threads refused for good (a DeltaChannel), each logged once
    refused: set[str] = field(default_factory=set)


class RetentionSettings:
    """``keep_last``/``retention_every`` of a saver that runs retention after its puts, validated
    once (``_init_retention``) and read through the same three properties on every such saver."""

    _keep_last: int | None
    _retention_every: int
    _branch_grace: timedelta
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
        self._schedule = None
        if self._keep_last is not None:
            self._schedule = RetentionSchedule(self._keep_last, retention_every, self._branch_grace)

    @property
    def keep_last(self) -> int | None:
        """Root checkpoints kept per thread (None: all); rules in ``checkpointers.retention``."""
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
    counted in ``stats``, and the thread is retried at its next put. A DeltaChannel thread is
    logged once and left alone. One run per thread at a time in a process; runs of different
    threads may overlap (each is one transaction).
    """

    def __init__(self, keep_last: int, every: int, branch_grace: timedelta = BRANCH_GRACE) -> None:
        self.keep_last = keep_last
        self.every = every
        self.branch_grace = branch_grace
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
            if thread_id in self.stats.refused or thread_id in self._running:
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
            if isinstance(error, DeltaChannelRetentionError):
                self.stats.refused.add(thread_id)
                logger.warning("keep_last=%d: %s", self.keep_last, error)
                return
            self.stats.failures += 1
            self.stats.last_error = f"{type(error).__name__}: {error}"
            self._retry.add(thread_id)  # retried at the thread's next put
        logger.warning(
            "keep_last=%d: retention of thread %r failed, retried at its next put (%s)",
            self.keep_last, thread_id, self.stats.last_error,
        )

    def after_put(
        self, backend: Backend, saved: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
    ) -> None:
        due = self._due(saved, metadata)
        if due is None:
            return
        thread_id, protect = due
        try:
            deleted = backend.run(
                retain_flow(thread_id, self.keep_last, protect, branch_grace=self.branch_grace)
            )
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
            deleted = await backend.arun(
                retain_flow(thread_id, self.keep_last, protect, branch_grace=self.branch_grace)
            )
        except Exception as exc:
            self._done(thread_id, None, exc)
        else:
            self._done(thread_id, deleted, None)
