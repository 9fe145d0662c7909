"""Offload a store in place: the checkpoints and pending writes a SQLite or PostgreSQL saver stored
without offload, rewritten as ``ReducingCheckpointSaver(inner, reducer, offload=...)`` stores them
(``offload_store``; ``agentstate-reducer compact --offload`` runs it).

Per stored checkpoint, in one transaction of the saver's retention backend: its stored values are
read (SQLite: the ``checkpoints.checkpoint`` row; PostgreSQL: the inline values of
``checkpoints.checkpoint`` and the ``checkpoint_blobs`` rows its ``channel_versions`` name) with its
pending writes (``writes.value``, ``checkpoint_writes.blob``); each goes through the same flows as a
put with offload (``checkpoint.stored_checkpoint_flow``, ``stored_writes_flow``): the blobs and the
reference rows of the checkpoint (and of each task's writes) are saved, then the rows that changed
are rewritten with the saver's serde (``dumps_typed``, its type tag with it).

Invariants:

* a value already holding references keeps them as they are (``Offloader.offload(keep=...)``): a
  second run rewrites nothing and reports zero; a reference whose blob is missing or corrupt raises
  ``BlobError`` naming the checkpoint, before anything of that checkpoint is written;
* a PostgreSQL ``checkpoint_blobs`` row is shared by every checkpoint whose ``channel_versions``
  name its version: each of them gets reference rows for the blobs the row names, whichever of
  them rewrote it;
* ``dry_run`` writes nothing (it reads in the same transactions) and reports the numbers the real
  run reports: the rows a checkpoint would rewrite are remembered for the checkpoints after it;
* the file or tables shrink only as the database reuses or returns the freed space (SQLite: a
  ``VACUUM``; PostgreSQL: autovacuum or ``VACUUM``), which is the caller's step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._flow import Flow, translating
from ._sql import Sql
from .offload.checkpoint import (
    referenced_blobs_flow,
    references_in,
    stored_checkpoint_flow,
    stored_writes_flow,
)
from .offload.config import BlobOffload
from .offload.ops import HasBlobs, Owner, SaveBlobs
from .offload.sql import BlobSql, PostgresBlobSql, SqliteBlobSql
from .offload.transform import Offloader
from .retention.backends import Backend, backend_for
from .retention.flows import ListThreads
from .retention.sql import PostgresDialect, SqliteDialect

__all__ = ["StoreOffload", "ThreadOffload", "offload_store", "rewrites_in_place"]


@dataclass
class ThreadOffload:
    """What offloading one thread did (or, in a dry run, would do)."""

    thread_id: str
    #: checkpoints whose stored values changed (a row of theirs rewritten, or blobs newly named)
    checkpoints: int = 0
    #: pending writes rewritten
    writes: int = 0
    #: stored rows rewritten (SQLite: checkpoint and write rows; PostgreSQL: checkpoint_blobs,
    #: checkpoints and checkpoint_writes rows)
    rows: int = 0
    #: distinct blobs the thread's rows newly name, and their bytes
    blobs: int = 0
    blob_bytes: int = 0
    #: serialized bytes of the rewritten values, before and after
    bytes_before: int = 0
    bytes_after: int = 0


@dataclass
class StoreOffload:
    """What ``offload_store`` did (or, with ``dry_run``, would do: the same numbers)."""

    dry_run: bool
    min_bytes: int
    tool_min_bytes: int | None
    threads: list[ThreadOffload] = field(default_factory=list)
    #: blobs newly stored in the blob table (each once, whatever number of threads names it)
    blobs_stored: int = 0
    blob_bytes_stored: int = 0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.threads)

    @property
    def bytes_before(self) -> int:
        return sum(t.bytes_before for t in self.threads)

    @property
    def bytes_after(self) -> int:
        return sum(t.bytes_after for t in self.threads)


class _Value(NamedTuple):
    """One stored value: where it lives (``key``, a layout's), its channel, what it decodes to, and
    its stored size."""

    key: tuple[Any, ...]
    channel: str
    value: Any
    size: int


class _Write(NamedTuple):
    task_id: str
    idx: int
    channel: str
    value: Any
    size: int


class _Layout:
    """Where one saver keeps a checkpoint's values and writes, as statements (no I/O)."""

    blob_sql: BlobSql
    list_checkpoints: str

    def __init__(self, serde: Any, *, lock: bool = False) -> None:
        self.serde = serde
        #: PostgreSQL: lock the rows read until the transaction ends (a real run rewrites them)
        self.lock = lock

    def values_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Value]]:
        raise NotImplementedError

    def writes_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Write]]:
        raise NotImplementedError

    def rewrite_flow(self, thread_id: str, ns: str, checkpoint_id: str, old: Sequence[_Value],
                     new: Mapping[str, Any], write: bool) -> Flow[Any, Any, tuple[int, int, int]]:
        """Rewrite the values of ``old`` whose channel ``new`` holds (only when ``write``: else
        the same numbers, nothing written); (rows, bytes before, bytes after)."""
        raise NotImplementedError

    write_update: str

    def rewrite_write_flow(self, thread_id: str, ns: str, checkpoint_id: str, old: _Write,
                           value: Any, write: bool) -> Flow[Any, Any, int]:
        """Rewrite one write row (only when ``write``); its bytes after."""
        type_, data = self.serde.dumps_typed(value)
        if write:
            yield Sql(self.write_update, (type_, data, thread_id, ns, checkpoint_id, old.task_id, old.idx))
        return len(data)


class _SqliteLayout(_Layout):
    """``SqliteSaver``: the whole checkpoint in one ``checkpoints`` row (its channel values inside),
    each write in a ``writes`` row."""

    blob_sql = SqliteBlobSql()
    list_checkpoints = (
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, "
        "checkpoint_id"
    )
    write_update = (
        "UPDATE writes SET type = ?, value = ? WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id = ? AND task_id = ? AND idx = ?"
    )

    def values_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Value]]:
        rows = yield Sql("SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                         "AND checkpoint_id = ?", (thread_id, ns, checkpoint_id), True)
        if not rows:
            return []
        checkpoint = self.serde.loads_typed((rows[0][0], bytes(rows[0][1])))
        size = len(rows[0][1])
        # one row holds every channel: each value names the row, the first carries its size
        return [_Value(("checkpoint", checkpoint), channel, value, size if i == 0 else 0)
                for i, (channel, value) in enumerate((checkpoint.get("channel_values") or {}).items())]

    def writes_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Write]]:
        rows = yield Sql("SELECT task_id, idx, channel, type, value FROM writes WHERE thread_id = ? "
                         "AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_id, idx",
                         (thread_id, ns, checkpoint_id), True)
        return [_Write(r[0], int(r[1]), r[2], self.serde.loads_typed((r[3], bytes(r[4] or b""))),
                       len(r[4] or b"")) for r in rows if r[3] is not None]

    def rewrite_flow(self, thread_id: str, ns: str, checkpoint_id: str, old: Sequence[_Value],
                     new: Mapping[str, Any], write: bool) -> Flow[Any, Any, tuple[int, int, int]]:
        if not new or not old:
            return (0, 0, 0)
        checkpoint = old[0].key[1]
        values = checkpoint.get("channel_values") or {}
        rewritten = {**checkpoint, "channel_values": {k: new.get(k, v) for k, v in values.items()}}
        type_, data = self.serde.dumps_typed(rewritten)
        if write:
            yield Sql("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? "
                      "AND checkpoint_ns = ? AND checkpoint_id = ?",
                      (type_, data, thread_id, ns, checkpoint_id))
        return (1, sum(v.size for v in old), len(data))


class _PostgresLayout(_Layout):
    """``PostgresSaver``: ``None``/str/int/float/bool channel values inline in the checkpoint's JSONB,
    the others in ``checkpoint_blobs`` rows keyed by (channel, version), which every checkpoint
    naming that version reads; each write in a ``checkpoint_writes`` row."""

    blob_sql = PostgresBlobSql()
    list_checkpoints = (
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_ns, "
        "checkpoint_id"
    )
    write_update = (
        "UPDATE checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s AND checkpoint_ns = %s "
        "AND checkpoint_id = %s AND task_id = %s AND idx = %s"
    )

    def values_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Value]]:
        # named columns: the saver's connection returns rows as dicts
        rows = yield Sql("SELECT checkpoint -> 'channel_versions' AS versions, "
                         "checkpoint -> 'channel_values' AS inline FROM checkpoints "
                         "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
                         + (" FOR UPDATE" if self.lock else ""), (thread_id, ns, checkpoint_id), True)
        if not rows:
            return []
        versions = {str(k): str(v) for k, v in (rows[0][0] or {}).items()}
        out = {channel: _Value(("inline",), channel, value, len(json.dumps(value).encode()))
               for channel, value in (rows[0][1] or {}).items()}
        if versions:
            channels = sorted(versions)
            blobs = yield Sql(
                "SELECT b.channel, b.version, b.type, b.blob FROM checkpoint_blobs b "
                "JOIN unnest(%s::text[], %s::text[]) AS v(channel, version) "
                "ON b.channel = v.channel AND b.version = v.version "
                "WHERE b.thread_id = %s AND b.checkpoint_ns = %s" + (" FOR UPDATE OF b" if self.lock else ""),
                (channels, [versions[c] for c in channels], thread_id, ns), True)
            for channel, version, type_, data in blobs:
                if type_ == "empty" or data is None:
                    continue
                # a blob wins over an inline marker, as the saver reads them
                out[channel] = _Value(("blob", version), channel,
                                      self.serde.loads_typed((type_, bytes(data))), len(data))
        return list(out.values())

    def writes_flow(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[Any, Any, list[_Write]]:
        rows = yield Sql("SELECT task_id, idx, channel, type, blob FROM checkpoint_writes "
                         "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s "
                         "ORDER BY task_id, idx" + (" FOR UPDATE" if self.lock else ""),
                         (thread_id, ns, checkpoint_id), True)
        return [_Write(r[0], int(r[1]), r[2], self.serde.loads_typed((r[3], bytes(r[4] or b""))),
                       len(r[4] or b"")) for r in rows if r[3] is not None]

    def rewrite_flow(self, thread_id: str, ns: str, checkpoint_id: str, old: Sequence[_Value],
                     new: Mapping[str, Any], write: bool) -> Flow[Any, Any, tuple[int, int, int]]:
        rows = before = after = 0
        for stored in old:
            if stored.channel not in new:
                continue
            value = new[stored.channel]
            if stored.key[0] == "blob":
                type_, data = self.serde.dumps_typed(value)
                if write:
                    yield Sql("UPDATE checkpoint_blobs SET type = %s, blob = %s WHERE thread_id = %s "
                              "AND checkpoint_ns = %s AND channel = %s AND version = %s",
                              (type_, data, thread_id, ns, stored.channel, stored.key[1]))
                size = len(data)
            else:
                text = json.dumps(value)
                if write:
                    yield Sql("UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, "
                              "ARRAY['channel_values', %s::text], %s::jsonb) WHERE thread_id = %s "
                              "AND checkpoint_ns = %s AND checkpoint_id = %s",
                              (stored.channel, text, thread_id, ns, checkpoint_id))
                size = len(text.encode())
            rows, before, after = rows + 1, before + stored.size, after + size
        return (rows, before, after)


def rewrites_in_place(backend: Backend) -> bool:
    """Whether ``offload_store`` can rewrite the store of ``backend`` (SQLite and PostgreSQL)."""
    return isinstance(getattr(backend, "dialect", None), (SqliteDialect, PostgresDialect))


def _layout(backend: Backend, dry_run: bool) -> _Layout:
    dialect = getattr(backend, "dialect", None)
    if isinstance(dialect, SqliteDialect):  # BEGIN IMMEDIATE: no other writer meanwhile
        return _SqliteLayout(backend.saver.serde)
    if isinstance(dialect, PostgresDialect):
        return _PostgresLayout(backend.saver.serde, lock=not dry_run)
    raise TypeError(
        f"offloading a store in place works on SqliteSaver and PostgresSaver stores, got "
        f"{type(backend.saver).__name__}"
    )


class _Run:
    """What one ``offload_store`` run has seen so far."""

    def __init__(self, layout: _Layout, offloader: Offloader, where: str, messages_key: str,
                 dry_run: bool) -> None:
        self.layout = layout
        self.offloader = offloader
        self.where = where
        self.messages_key = messages_key
        self.dry_run = dry_run
        #: digests stored in the blob table, or to be stored by this run
        self.stored: set[str] = set()
        self.has_table: bool | None = None
        self.report: StoreOffload | None = None


class _Thread:
    """One thread's share of a run: the bytes of the blobs its rows name (to keep their references,
    and name them from each checkpoint), and what a dry run would have rewritten."""

    def __init__(self, thread_id: str) -> None:
        self.report = ThreadOffload(thread_id)
        self.blobs: dict[str, bytes] = {}
        self.named: set[str] = set()
        #: PostgreSQL blob rows rewritten (or, in a dry run, that would be): (ns, channel, version)
        self.rewritten: dict[tuple[str, str, str], Any] = {}


def _checkpoints_flow(layout: _Layout, thread_id: str) -> Flow[Any, Any, list[tuple[str, str]]]:
    rows = yield Sql(layout.list_checkpoints, (thread_id,), True)
    return [(str(r[0]), str(r[1])) for r in rows]


def _new_blobs_flow(run: _Run, digests: Iterable[str]) -> Flow[Any, Any, list[str]]:
    """Of ``digests``, those neither in the blob table nor already stored by this run."""
    fresh = sorted(set(digests) - run.stored)
    if not fresh:
        return []
    if not run.has_table:
        run.has_table = bool((yield HasBlobs()))
    present: set[str] = set()
    if run.has_table:
        sql = run.layout.blob_sql
        rows = yield Sql(f"SELECT digest FROM agentstate_blobs WHERE {sql.in_list('digest')}",
                         (sql.ids(fresh),), True)
        present = {r[0] for r in rows}
    run.stored.update(fresh)
    return [d for d in fresh if d not in present]


def _named_by_flow(run: _Run, owner: Owner) -> Flow[Any, Any, set[str]]:
    """The digests the reference rows of ``owner`` name."""
    if not run.has_table:
        run.has_table = bool((yield HasBlobs()))
        if not run.has_table:
            return set()
    p = run.layout.blob_sql.p
    rows = yield Sql(f"SELECT digest FROM agentstate_blob_refs WHERE thread_id = {p} AND checkpoint_ns = {p} "
                     f"AND checkpoint_id = {p} AND task_id = {p}", tuple(owner), True)
    return {r[0] for r in rows}


def _checkpoint_flow(run: _Run, thread: _Thread, ns: str, checkpoint_id: str) -> Flow[Any, Any, None]:
    """Offload one checkpoint and its writes (one transaction: run by the backend as one flow)."""
    layout, report, thread_id = run.layout, thread.report, thread.report.thread_id
    values = yield from layout.values_flow(thread_id, ns, checkpoint_id)
    # a blob row this run rewrote already (a dry run: would have) reads as rewritten
    values = [v._replace(value=thread.rewritten[(ns, v.channel, v.key[1])])
              if v.key[0] == "blob" and (ns, v.channel, v.key[1]) in thread.rewritten else v
              for v in values]
    writes = yield from layout.writes_flow(thread_id, ns, checkpoint_id)
    refs = references_in(v.value for v in values)
    refs.update(references_in(w.value for w in writes))
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
    keep = (yield from referenced_blobs_flow(refs, config, run.where, thread.blobs)) if refs else {}
    thread.blobs.update(keep)
    saved: list[int] = []

    def perform(op: Any) -> Flow[Any, Any, Any]:
        if isinstance(op, SaveBlobs):
            new = [d for d in op.blobs if d not in keep]
            thread.blobs.update(op.blobs)
            for digest in new:
                if digest not in thread.named:
                    thread.named.add(digest)
                    report.blobs += 1
                    report.blob_bytes += len(op.blobs[digest])
            stored = yield from _new_blobs_flow(run, new)
            assert run.report is not None
            run.report.blobs_stored += len(stored)
            run.report.blob_bytes_stored += sum(len(op.blobs[d]) for d in stored)
            saved.append(len(new))
            if run.dry_run:
                return 0
            if not new and set(op.blobs) <= (yield from _named_by_flow(run, op.owner)):
                return 0  # a second run: nothing to write
        return (yield op)

    checkpoint = {"id": checkpoint_id, "channel_values": {v.channel: v.value for v in values}}
    stored = yield from translating(
        stored_checkpoint_flow(run.offloader, config, checkpoint, run.messages_key, keep=keep), perform)
    new_values = {v.channel: stored["channel_values"][v.channel] for v in values
                  if stored["channel_values"][v.channel] is not v.value}
    by_task: dict[str, list[_Write]] = {}
    for write in writes:
        by_task.setdefault(write.task_id, []).append(write)
    new_writes: list[tuple[_Write, Any]] = []
    for task_id, task_writes in by_task.items():
        out = yield from translating(stored_writes_flow(
            run.offloader, config, [(w.channel, w.value) for w in task_writes], task_id, run.messages_key,
            keep=keep), perform)
        new_writes += [(w, o[1]) for w, o in zip(task_writes, out, strict=True) if o[1] is not w.value]
    if not new_values and not new_writes and not any(saved):
        return None
    report.checkpoints += 1
    for v in values:
        if v.key[0] == "blob" and v.channel in new_values:
            thread.rewritten[(ns, v.channel, v.key[1])] = new_values[v.channel]
    rows, before, after = yield from layout.rewrite_flow(
        thread_id, ns, checkpoint_id, values, new_values, not run.dry_run)
    for write, value in new_writes:
        before += write.size
        after += yield from layout.rewrite_write_flow(
            thread_id, ns, checkpoint_id, write, value, not run.dry_run)
    report.rows += rows + len(new_writes)
    report.writes += len(new_writes)
    report.bytes_before += before
    report.bytes_after += after
    return None


def offload_store(
    saver: Any,
    offload: BlobOffload,
    *,
    thread_ids: Sequence[str] | None = None,
    dry_run: bool = False,
    messages_key: str = "messages",
    on_thread: Callable[[str], None] | None = None,
) -> StoreOffload:
    """Offload every stored checkpoint and pending write of ``saver``'s threads (``thread_ids``, or
    every thread) in place, by ``offload``'s thresholds (the module docstring states the rules).
    ``saver`` is a ``SqliteSaver`` or ``PostgresSaver`` (or a wrapper of one); ``offload.store``
    must be None: the blobs go to the saver's own tables.

    Raises:
        TypeError: another saver, or ``offload`` keeps its blobs in a ``BaseStore``.
        BlobError: a stored reference names a blob missing or corrupt (nothing of that checkpoint
            is written).
    """
    if offload.store is not None:
        raise TypeError("offloading a store in place keeps the blobs in the saver's own database: pass "
                        "BlobOffload(store=None)")
    backend = backend_for(saver)
    layout = _layout(backend, dry_run)
    where = f"the {type(backend.saver).__name__}'s blob table"
    run = _Run(layout, offload.offloader, where, messages_key, dry_run)
    report = run.report = StoreOffload(dry_run, offload.min_bytes, offload.tool_min_bytes)
    if thread_ids is None:
        thread_ids = backend.run(_threads_flow())
    for thread_id in thread_ids:
        if on_thread is not None:
            on_thread(thread_id)
        thread = _Thread(thread_id)
        for ns, checkpoint_id in backend.run(_checkpoints_flow(layout, thread_id)):
            backend.run(_checkpoint_flow(run, thread, ns, checkpoint_id))
        report.threads.append(thread.report)
    return report


def _threads_flow() -> Flow[Any, Any, list[str]]:
    return (yield ListThreads())
