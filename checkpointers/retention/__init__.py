"""Retention: bound a thread's stored checkpoints, and sweep whole stores.

One package, a module per job; each module's docstring states its invariants:

* ``rules``: what a thread keeps (``plan_retention``), pure and shared by every saver, sync and
  async; the rules are written there as a list;
* ``flows``: the I/O as flows (``checkpointers._flow``) of a few operations (load a thread, delete
  checkpoints, writes, blobs, a thread, ...), sweep and prune included;
* ``sql``: those operations as SQL on the SQLite and PostgreSQL savers' tables;
* ``follow``: offloaded blobs follow each deletion; ``blobs``: a saver's blob operations run
  through its backend (``checkpointers.offload`` stays below retention: it imports nothing of it);
* ``backends``: one backend per saver class performs the operations, each flow in one transaction
  where the store has them; the registry (``register``, ``backend_for``, ``supports_retention``)
  through which another saver package adds its own (the Cosmos DB savers do);
* ``api``: ``sweep``/``asweep``, ``prune``/``aprune`` and the per-put retention of a saver
  (``RetentionSettings``, ``RetentionSchedule``).

>>> from datetime import timedelta
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from checkpointers.retention import sweep
>>> sweep(InMemorySaver(), older_than=timedelta(days=30), keep_last=5).threads_seen
0
"""

from .api import (
    PRUNE_STRATEGIES,
    DeltaChannels,
    RetentionSchedule,
    RetentionSettings,
    RetentionStats,
    SweepReport,
    aprune,
    asweep,
    check_prune_args,
    delta_channels_of,
    prune,
    sweep,
)
from .backends import Backend, backend_for, register, supported_savers, supports_retention
from .flows import (
    DeleteBlobs,
    DeleteCheckpoints,
    Deleted,
    DeleteThread,
    DeleteWrites,
    Flow,
    ListThreads,
    LoadThread,
    NewestTs,
    Op,
    SweptThread,
    apply_flow,
    delete_thread_flow,
    list_threads_flow,
    retain_flow,
    sweep_thread_flow,
)
from .rules import (
    BRANCH_GRACE,
    ROOT_NS,
    SUPERSEDED_GRACE,
    SUPERSEDED_KEEP,
    DeltaChannelRetentionError,
    RetentionPlan,
    StoredCheckpoint,
    StoredWrites,
    ThreadState,
    checkpoint_step,
    checkpoint_time,
    delta_counters,
    is_idle,
    plan_retention,
    step_due,
    stored_checkpoint,
    unseeded_channels,
    validate_branch_grace,
    validate_keep_last,
    versions_to_store,
    waiting,
)

__all__ = [
    "BRANCH_GRACE",
    "PRUNE_STRATEGIES",
    "ROOT_NS",
    "SUPERSEDED_GRACE",
    "SUPERSEDED_KEEP",
    "Backend",
    "DeleteBlobs",
    "DeleteCheckpoints",
    "DeleteThread",
    "DeleteWrites",
    "Deleted",
    "DeltaChannelRetentionError",
    "DeltaChannels",
    "Flow",
    "ListThreads",
    "LoadThread",
    "NewestTs",
    "Op",
    "RetentionPlan",
    "RetentionSchedule",
    "RetentionSettings",
    "RetentionStats",
    "StoredCheckpoint",
    "StoredWrites",
    "SweepReport",
    "SweptThread",
    "ThreadState",
    "apply_flow",
    "aprune",
    "asweep",
    "backend_for",
    "check_prune_args",
    "checkpoint_step",
    "checkpoint_time",
    "delete_thread_flow",
    "delta_channels_of",
    "delta_counters",
    "is_idle",
    "list_threads_flow",
    "plan_retention",
    "prune",
    "register",
    "retain_flow",
    "step_due",
    "stored_checkpoint",
    "supported_savers",
    "supports_retention",
    "sweep",
    "sweep_thread_flow",
    "unseeded_channels",
    "validate_branch_grace",
    "validate_keep_last",
    "versions_to_store",
    "waiting",
]
