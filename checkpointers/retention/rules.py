"""The retention rules: what a thread keeps, decided by pure functions shared by every saver, sync
and async (``plan_retention``; the I/O is ``flows`` and ``backends``).

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
* a ``DeltaChannel`` stores its value only at some checkpoints (a ``_DeltaSnapshot`` every
  ``snapshot_frequency`` updates); LangGraph rebuilds it at any other checkpoint from the nearest
  ancestor holding one, replaying the pending writes of every ancestor on the way, and rebuilds
  it *empty, with no error*, when that chain is cut. So every kept checkpoint keeps its ancestors
  (same namespace, by parent link), with their writes and blobs, back to the nearest one that
  rebuilds no delta channel (``StoredCheckpoint.unseeded`` is empty: every delta channel its
  metadata ``counters_since_delta_snapshot`` names that has a version there has its value
  stored there). An ancestor kept is a checkpoint of the thread like any other and rebuilds its
  own values, so a channel held by one ancestor does not end the walk while another is still
  rebuilt. A checkpoint that holds every value keeps no ancestor, whatever made it (snapshots
  due together, a fork, a reduced value written at a reduction). Delta channels that snapshot
  at different times can make that point lie far back: everything back to it stays, unless the
  caller can rebuild the channels (it knows their ``DeltaChannel``, ``rebuildable``): then a
  kept checkpoint whose parent is not kept anyway and whose rebuilt channels it can all rebuild
  gets a ``_DeltaSnapshot`` of the value it rebuilds (``RetentionPlan.snapshots``), and its
  ancestors go. LangGraph's second safe way, in two steps that each leave the thread whole: the
  snapshots are stored first (``flows.snapshot_flow``, through the saver's own ``put``, its own
  commit), and the deletions are planned again from what is then stored, where those
  checkpoints rebuild nothing; a process killed in between leaves snapshots of values that were
  already there. A snapshot stored at a checkpoint moves its version of the channel on (as
  LangGraph does when it snapshots a channel it did not write): a blob saver stores a value once
  per (channel, version), and the checkpoints after it that name the old version keep reading
  it (they rebuild through this one). On such a thread a checkpoint a run may still be
  extending (above) is kept on row savers too: the run's next checkpoint is rebuilt through it.
  So is a checkpoint another run may have read as the thread's latest and not yet stored its
  first checkpoint after (LangGraph puts it in the background, just after the read): a
  DeltaChannel value, unlike the others, cannot be stored again by that first checkpoint, which
  is rebuilt through the one read. Such a reader read a
  checkpoint while it was the latest and puts before ``SUPERSEDED_GRACE`` (at most
  ``branch_grace``) has passed and before the thread has ``SUPERSEDED_KEEP`` newer checkpoints
  (its first put follows its read within one step of a racing run). So of the checkpoints a newer
  one superseded as the latest less than ``SUPERSEDED_GRACE`` ago, the newest ``SUPERSEDED_KEEP``
  of each namespace are kept: a bound in checkpoints, not in time, so a fast thread stays as flat
  as a slow one. Sequential runs need none of it: a run's first put supersedes the checkpoint it
  read, which stays the latest (never deleted) until then. A blob saver stores a value once
  per (channel, version): a checkpoint reads the snapshot an older one
  stored while the channel is unchanged, and that older checkpoint is kept too (blob offload
  records a value's references under the checkpoint that stored it). A checkpoint kept on such
  a thread, made less than ``branch_grace`` ago and with a step due after it, keeps its stored
  next step (its ``source == "loop"`` child, one ``step`` later), and so on to the end of its
  run (a checkpoint with no step due): with that child deleted it would look like a checkpoint
  a run may still be extending and stay for ``branch_grace``, one a turn.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = [
    "BRANCH_GRACE",
    "ROOT_NS",
    "SUPERSEDED_GRACE",
    "SUPERSEDED_KEEP",
    "DeltaChannelRetentionError",
    "RetentionPlan",
    "StoredCheckpoint",
    "StoredWrites",
    "ThreadState",
    "checkpoint_step",
    "checkpoint_time",
    "delta_counters",
    "is_idle",
    "plan_retention",
    "step_due",
    "stored_checkpoint",
    "unseeded_channels",
    "validate_branch_grace",
    "validate_keep_last",
    "versions_to_store",
    "waiting",
]

ROOT_NS = ""

#: How long a checkpoint a run may still be extending is kept, whatever ``keep_last`` says.
BRANCH_GRACE = timedelta(hours=1)

#: DeltaChannel threads: how long a checkpoint stays after a newer one superseded it as the
#: thread's latest (a run that read it may not have stored its first checkpoint yet); at most
#: ``branch_grace``.
SUPERSEDED_GRACE = timedelta(minutes=1)

#: DeltaChannel threads: how many of the checkpoints superseded less than ``SUPERSEDED_GRACE`` ago
#: stay, per namespace (the newest).
SUPERSEDED_KEEP = 2

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
    """Retention does not raise it: DeltaChannel threads are retained by the rules (module doc).
    The name stays importable for code that catches it."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} uses a DeltaChannel")


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


# -- what a thread holds, and what to delete ------------------------------------------------------


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
    #: the delta channels rebuilt from its ancestors: no value stored here (``unseeded_channels``)
    unseeded: frozenset[str] = frozenset()
    #: blob savers: the ``versions`` entries (key, value) of the delta values it reads stored
    held: frozenset[tuple[str, str]] = frozenset()


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
    #: namespace -> checkpoint id -> the delta channels to store a snapshot of there first
    #: (``plan_retention(rebuildable=...)``): the deletions assume those snapshots are stored
    snapshots: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)

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
    rebuildable: Collection[str] = (),
) -> RetentionPlan:
    """What to delete of ``thread`` to keep ``keep_last`` root checkpoints (rules: module doc).

    ``protect``: (namespace, checkpoint id) pairs never deleted. ``now`` (default: the clock) and
    ``branch_grace`` decide which checkpoints a run may still be extending. ``rebuildable``: the
    delta channels the caller can rebuild and store as a snapshot; the plan's ``snapshots`` say
    where, and its deletions are those left once they are stored (a caller stores them first,
    then plans again without ``rebuildable``: module doc).
    """
    keep_last = validate_keep_last(keep_last) or 1
    branch_grace = validate_branch_grace(branch_grace)
    delta = any(c.delta or c.unseeded for c in thread.checkpoints)
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
    if thread.blobs is not None or delta:  # a run's next checkpoint needs these (module doc)
        due = {(c.ns, c.id) for c in thread.checkpoints if c.due}
        extended = unfinished & due
    if delta:
        extended |= _superseded(by_ns, now, min(branch_grace, SUPERSEDED_GRACE))
    roots = [c.id for c in by_ns.get(ROOT_NS, [])]
    spared = protected | extended
    kept_roots = set(roots[:keep_last]) | {i for ns, i in spared if ns == ROOT_NS}
    oldest_root = roots[-1] if roots else None
    interrupted = {(w.ns, w.id) for w in thread.writes if w.interrupt}

    cuts = frozenset(rebuildable)
    # the checkpoints the unfinished rule could spare were their next step deleted
    young = {c.id for c in thread.checkpoints if _within(c.id, now, branch_grace)}
    snapshots: dict[str, dict[str, frozenset[str]]] = {}
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
        if delta:
            at = snapshots.setdefault(ns, {})
            kept[ns] = _with_delta_ancestors(keep, stored, thread.blobs is not None, cuts, at, young)
        else:
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
        snapshots={ns: at for ns, at in snapshots.items() if at},
    )


def _is_call(ns: str, head: StoredCheckpoint) -> bool:
    """A subgraph call's namespace (``"node:<task id>"`` with a root link): it keeps its latest
    checkpoint only while its root checkpoint is kept."""
    return ns != ROOT_NS and ":" in ns and head.root is not None


def _with_delta_ancestors(
    keep: Sequence[StoredCheckpoint], stored: Sequence[StoredCheckpoint], shared: bool,
    rebuildable: frozenset[str] = frozenset(), snapshots: dict[str, frozenset[str]] | None = None,
    young: Collection[str] = (),
) -> list[StoredCheckpoint]:
    """``keep`` and what its delta channels are rebuilt from (rules: module doc), in ``stored``'s
    order (newest first): the parent of each checkpoint kept that rebuilds a delta channel, and
    (``shared``: a blob saver) the checkpoint that stored each delta value one kept reads. A
    checkpoint whose parent is not kept anyway and whose rebuilt channels are all
    ``rebuildable`` gets a snapshot of them instead (recorded in ``snapshots``): its walk ends
    there. A checkpoint kept after which a step is due, of those in ``young`` (made within the
    grace), keeps its stored next step too."""
    by_id = {c.id: c for c in stored}
    read = {entry for c in stored for entry in c.held} if shared else set()
    writer: dict[tuple[str, str], str] = {}
    for c in stored:  # newest first: the oldest checkpoint naming a value stored it
        for entry in read.intersection(c.versions.items()):
            writer[entry] = c.id
    base = {c.id for c in keep}
    steps = {c.id: c.step for c in stored}
    next_step = {c.parent: c for c in stored if c.loop and c.parent is not None
                 and c.step is not None and steps.get(c.parent) == c.step - 1}
    keep_ids: set[str] = set()
    todo = list(keep)
    while todo:
        c = todo.pop()
        if c.id in keep_ids:
            continue
        keep_ids.add(c.id)
        if c.due and c.id in young and c.id in next_step:
            # without it, c would look like a checkpoint a run may still be extending
            todo.append(next_step[c.id])
        if c.unseeded and c.parent in by_id:
            if snapshots is not None and c.parent not in base and c.unseeded <= rebuildable:
                snapshots[c.id] = c.unseeded
            else:
                todo.append(by_id[c.parent])
        if shared:
            todo.extend(by_id[writer[entry]] for entry in c.held)
    return [c for c in stored if c.id in keep_ids]


def _superseded(
    by_ns: Mapping[str, Sequence[StoredCheckpoint]], now: datetime, grace: timedelta
) -> set[tuple[str, str]]:
    """Of the checkpoints a newer one of their namespace superseded as the latest less than
    ``grace`` before ``now`` (by the time in the newer one's id), the newest ``SUPERSEDED_KEEP``
    of each namespace: a run that started from one of them may not have stored its first
    checkpoint, whose delta channels are rebuilt through it (rules: module doc)."""
    out = set()
    for ns, stored in by_ns.items():  # each newest first
        for newer, c in itertools.islice(itertools.pairwise(stored), SUPERSEDED_KEEP):
            made = checkpoint_time(newer.id)
            if made is not None and now - made < grace:
                out.add((ns, c.id))
    return out


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
    return [c for c in stored if c.id not in continued and _within(c.id, now, grace)]


def _within(checkpoint_id: str, now: datetime, grace: timedelta) -> bool:
    """Made less than ``grace`` before ``now`` (or after it); an id that tells no time is old."""
    made = checkpoint_time(checkpoint_id)
    return made is not None and now - made < grace


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


def waiting(state: ThreadState) -> bool:
    """The thread's latest root checkpoint has pending writes (a step ran, or an interrupt waits)."""
    roots = [c.id for c in state.checkpoints if c.ns == ROOT_NS]
    if not roots:
        return False
    head = max(roots)
    return any(w.ns == ROOT_NS and w.id == head for w in state.writes)


def is_idle(ts: str | None, older_than: timedelta | None, now: datetime) -> bool:
    """True when a checkpoint written at ``ts`` (ISO, naive means UTC) is older than ``older_than``."""
    if older_than is None or ts is None:
        return False
    stamp = datetime.fromisoformat(ts)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return now - stamp > older_than


# -- reading stored checkpoints ------------------------------------------------------------------


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


def stored_checkpoint(
    ns: str, cid: str, metadata: Any, versions: Any = None, parent: Any = None, updated: Any = None,
    *, unseeded: Collection[str] | None = None, stored: Collection[str] | None = None,
) -> StoredCheckpoint:
    """A ``StoredCheckpoint`` from a saver's stored fields: ``metadata``, ``versions`` (the
    checkpoint's ``channel_versions``) and ``updated`` (its ``updated_channels``) as mappings or
    lists, or as the JSON text or bytes a database returns. ``unseeded``: the delta channels it
    rebuilds, where the saver worked them out itself (row savers, which give no ``versions``);
    otherwise they are ``unseeded_channels(metadata, versions, stored)`` (``stored``: the
    channels it holds a value for, None when unknown)."""
    meta = metadata if isinstance(metadata, Mapping) else (_loads_json(metadata) or {})
    parents = meta.get("parents") or {}
    root = parents.get(ROOT_NS) if isinstance(parents, Mapping) else None
    delta = "counters_since_delta_snapshot" in meta or "delta_writes_versioned" in meta
    vers = versions if isinstance(versions, Mapping) else (_loads_json(versions) or {})
    if isinstance(updated, (str, bytes, bytearray, memoryview)):
        updated = _loads_json(updated)
    held: frozenset[tuple[str, str]] = frozenset()
    if unseeded is None:
        unseeded = unseeded_channels(meta, vers, stored)
        if stored is not None:
            held = frozenset((c, str(vers[c])) for c in delta_counters(meta) if c in vers and c in stored)
    return StoredCheckpoint(
        ns, cid, root if isinstance(root, str) else None, delta,
        {str(k): str(v) for k, v in vers.items()}, None if parent is None else str(parent),
        meta.get("source") == "loop", checkpoint_step(meta.get("step")), step_due(updated),
        frozenset(unseeded), held,
    )


def delta_counters(metadata: Any) -> frozenset[str]:
    """The channels a checkpoint's metadata ``counters_since_delta_snapshot`` names: LangGraph
    counts every delta channel there until the checkpoint that snapshots it (then drops it).

    >>> sorted(delta_counters({"counters_since_delta_snapshot": {"messages": [2, 2], "files": [0, 2]}}))
    ['files', 'messages']
    >>> delta_counters({"step": 1})
    frozenset()
    """
    meta = metadata if isinstance(metadata, Mapping) else (_loads_json(metadata) or {})
    counters = meta.get("counters_since_delta_snapshot")
    return frozenset(str(k) for k in counters) if isinstance(counters, Mapping) else frozenset()


def unseeded_channels(
    metadata: Any, versions: Mapping[str, Any], stored: Collection[str] | None = None
) -> frozenset[str]:
    """The delta channels a checkpoint rebuilds from its ancestors, as LangGraph's loader decides:
    named by its metadata counters (``delta_counters``), with a version in ``versions`` (a channel
    never written has none and is empty without a walk) and no value in ``stored`` (the channels
    it holds a value for; None: unknown, so every one counts, which keeps more, never less).

    >>> meta = {"counters_since_delta_snapshot": {"messages": [2, 2], "files": [0, 2]}}
    >>> sorted(unseeded_channels(meta, {"messages": "3"}))
    ['messages']
    >>> unseeded_channels(meta, {"messages": "3"}, stored={"messages"})
    frozenset()
    """
    named = {c for c in delta_counters(metadata) if c in versions}
    return frozenset(named - set(stored or ()))


def checkpoint_step(value: Any) -> int | None:
    """A metadata ``step`` as an int, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- per-put retention: what a put stores so that retention cannot lose a value ------------------


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

