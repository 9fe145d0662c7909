"""An archive for pruned messages: the hot checkpoint stays small, the full transcript survives.

``StoreArchive(store)`` is an ``on_prune`` hook (``fn(pruned, namespace)``) that writes every pruned
message to a LangGraph ``BaseStore`` (InMemoryStore, SqliteStore, PostgresStore, their async forms):

>>> from langgraph.store.memory import InMemoryStore
>>> from agentstate_reducer import MessageReducer, ReducerConfig
>>> archive = StoreArchive(InMemoryStore())
>>> reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[archive]))
>>> roles = ["user", "assistant"] * 3
>>> msgs = [{"role": r, "content": str(i), "id": f"m{i}"} for i, r in enumerate(roles)]
>>> [m["id"] for m in reducer.reduce(msgs, namespace=("memories", "t1")).surviving]
['m0', 'm4', 'm5']
>>> [m["id"] for m in archive.messages(("memories", "t1"))]
['m1', 'm2', 'm3']

Used through a checkpoint saver (``ReducingCheckpointSaver``, ``CosmosDBSaver(reducer=...)``), the
namespace comes from the run config: ``configurable.memory_namespace``, else
``("memories", thread_id)``. ``read_transcript(store, checkpointer, config)`` (and
``aread_transcript``) returns the thread's whole conversation: archive + live checkpoint, in order,
without duplicates.

Guarantees and limits:

* Exactly once: one item per message, keyed by message id inside the namespace (so by thread and
  message id with the default namespace). Before writing, the archive reads which keys exist and
  writes only the missing ones, so a message pruned again (a retried put, a restarted process
  re-pruning a history it loaded) keeps its first item and its place. Messages without an id are
  keyed by a hash of their content: identical id-less messages share one item.
* Order: every item stores ``order = [stamp, position]``: a per-process monotonic nanosecond clock
  taken when the batch is handed to the archive (not when it is written, so background delivery
  cannot reorder), and the message's position in the batch. Across processes the stamp is wall
  clock time; a thread run alternately by machines with skewed clocks within milliseconds could
  interleave.
* What is archived: conversation messages. Injected summary messages (``agentstate_reducer.summary``)
  are derived data and are skipped. LangChain messages are stored as ``message_to_dict`` output and
  come back as the same classes; dicts are stored as dicts (non-JSON values via ``str``).
* Items are written with ``index=False`` (no embedding of transcripts) and the ``ttl`` you give
  (default: none).
* A write that fails is retried ``retries`` times with a short backoff, then logged with traceback
  and counted in ``failed``; the reduction is never broken by the archive.
* Store namespaces cannot contain ``"."``: labels are escaped (``"."`` -> ``"%2E"``, ``"%"`` ->
  ``"%25"``), so a thread id ``"a.b"`` is stored under ``("memories", "a%2Eb")``.
* A ``memory_namespace`` shared by several threads holds all of their pruned messages in one log;
  ``read_transcript`` then returns that log followed by the given thread's live messages.
* The archive follows the thread: ``forget(namespace)`` deletes a namespace's archived messages,
  and a ``ReducingCheckpointSaver`` whose reducer has this archive among its ``on_prune`` hooks
  calls it for the default namespace ``("memories", thread_id)`` whenever it deletes a thread
  (``delete_thread``, ``prune(..., strategy="delete")``, ``retention.sweep``). A custom
  ``memory_namespace`` is not derived from the thread id and is left alone.

Blob references: a ``ReducingCheckpointSaver(..., offload=BlobOffload(...))`` binds each
``StoreArchive`` among its reducer's ``on_prune`` hooks to its blob storage when it is built. A
bound archive stores what the saver's checkpoints store: each large or binary value of a message
(an image's base64, ...) as a reference to the blob kept once by its SHA-256, the item saying so
with ``value["blobs"]`` (its digests). So that retention keeps a blob an archived message names
after the last checkpoint naming it is gone, the archive records one reference row per item, under
the thread id ``reference_thread(namespace)`` (``"\\x1farchive"`` + the namespace as JSON: no
checkpoint's), before it writes the item: a crash between the two keeps a blob, never leaves a
reference without one. ``messages``/``amessages`` and ``read_transcript(store, saver, config)``
restore the references (a missing or corrupt blob raises ``MissingBlobError``/``CorruptBlobError``
naming the item and the blob); an unbound archive, or ``read_transcript`` given a checkpointer
without offload, raises ``ValueError`` for items holding references. ``forget`` deletes the items,
then the namespace's rows and the blobs nothing names any more. An unbound archive stores messages
whole. Limits: one archive references one saver's blob storage (binding it to another raises
``ValueError``); items expired by ``ttl`` keep their blobs until ``forget``; two archives of one
saver sharing a namespace share its rows (forgetting one drops the other's).

Background delivery (``background=True``): batches go to a bounded queue (``max_pending`` batches)
drained by one daemon thread, so a put never waits for the store. When the queue is full,
``when_full="inline"`` (the default) writes that batch in the caller's thread: nothing is dropped,
the put is slowed by one store round trip; ``when_full="drop"`` drops it, counts the messages in
``dropped`` and logs a warning. Call ``flush()`` to wait for the queue, ``close()`` (or use the
archive as a context manager) before the process exits; ``aflush()``/``aclose()`` from async code (on
the event loop of an async saver the archive is bound to, ``flush``/``close`` would wait for the loop
they block, and raise).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, TypeVar

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result, SearchOp

from agentstate_reducer.messages import read_message
from agentstate_reducer.summary import insert_position, is_summary_message

from ._flow import Flow, adrive, drive
from .offload.checkpoint import CorruptBlobError, MissingBlobError
from .offload.config import BlobRunner
from .offload.ops import Collect, DropRefs, LoadBlobs, Owner, SaveBlobs
from .offload.transform import Offloader, Reference, references, restore, text_references
from .reduction import _namespace

__all__ = ["ArchiveStats", "StoreArchive", "archive_namespace", "aread_transcript", "read_transcript"]

logger = logging.getLogger("agentstate_reducer.checkpointers")

#: ``value["kind"]`` of every archived item; reads filter on it.
ITEM_KIND: Final = "agentstate.message"
_PAGE: Final = 10_000

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class BlobStep:
    """A step of an archive flow performed by the blob runner the archive is bound to: ``flow``,
    a flow of blob operations (``checkpointers.offload.ops``), run in one transaction."""

    flow: Flow[Any, Any, Any]


#: A flow of store batches and blob steps, driven by ``_flow.drive``/``adrive`` with ``_Io``.
StoreFlow: TypeAlias = Flow[list[Op] | BlobStep, Any, R]


# -- pure parts: namespaces, items, ordering -----------------------------------------------------


def archive_namespace(namespace: Any) -> tuple[str, ...]:
    """The store namespace for a hook namespace (a tuple, list or str), labels escaped for BaseStore."""
    if namespace is None:
        raise ValueError(
            "StoreArchive needs a namespace: use it through a checkpoint saver (namespace from the run "
            "config) or call reduce(..., namespace=('memories', thread_id))"
        )
    labels = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    if not labels:
        raise ValueError("the archive namespace is empty; set configurable.memory_namespace or thread_id")
    out = []
    for label in labels:
        if label is None or label == "":
            raise ValueError(
                f"archive namespace {labels!r} has an empty label: the run config has no thread_id "
                "(set configurable.thread_id or configurable.memory_namespace)"
            )
        out.append(str(label).replace("%", "%25").replace(".", "%2E"))
    return tuple(out)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _serialize(msg: Any) -> tuple[str, Any]:
    """``(format, JSON value)`` for one message."""
    try:
        from langchain_core.messages import BaseMessage, message_to_dict
    except ImportError:  # pragma: no cover - langgraph always brings langchain_core
        pass
    else:
        if isinstance(msg, BaseMessage):
            return "langchain", _jsonable(message_to_dict(msg))
    if isinstance(msg, Mapping):
        return "dict", _jsonable(dict(msg))
    dump = getattr(msg, "model_dump", None)
    if callable(dump):  # OpenAI SDK objects and other pydantic models
        return "dict", _jsonable(dump())
    info = read_message(msg)
    return "dict", _jsonable({"role": info.role, "content": info.content, "id": info.id})


def _deserialize(value: Mapping[str, Any]) -> Any:
    if value.get("format") == "langchain":
        from langchain_core.messages import messages_from_dict

        return messages_from_dict([value["message"]])[0]
    return value["message"]


@dataclass(frozen=True, slots=True)
class _Entry:
    key: str
    value: dict[str, Any]
    #: the blobs ``value`` references (digest -> bytes), stored before the item
    blobs: Mapping[str, bytes] = field(default_factory=dict)
    #: the message ``value`` was made from (a bound archive offloads it before it becomes JSON)
    raw: Any = None


def _entries(pruned: Sequence[Any], stamp: int) -> list[_Entry]:
    """The items for one pruned batch: summaries skipped, one item per key (first wins)."""
    out: dict[str, _Entry] = {}
    for pos, msg in enumerate(pruned):
        info = read_message(msg)
        if is_summary_message(msg, info):
            continue
        fmt, body = _serialize(msg)
        key = info.id or "sha256-" + hashlib.sha256(
            json.dumps(body, sort_keys=True).encode()).hexdigest()
        if key not in out:
            out[key] = _Entry(key, {"kind": ITEM_KIND, "order": [stamp, pos], "message_id": info.id,
                                    "format": fmt, "message": body}, raw=msg)
    return list(out.values())


# -- blob references ------------------------------------------------------------------------------


def reference_thread(ns: tuple[str, ...]) -> str:
    """The thread id of the reference rows of the archive namespace ``ns`` (a store namespace):
    it begins with the control character ``"\\x1f"``, which no thread id LangGraph makes holds
    (PostgreSQL refuses NUL), so retention, which deletes rows by the thread ids of checkpoints,
    never names it."""
    return "\x1farchive" + json.dumps(list(ns), separators=(",", ":"))


def _owner(ns: tuple[str, ...], key: str) -> Owner:
    """The owner of one archived item's reference row: checkpoint id = the item's key, with NUL
    (which PostgreSQL's text refuses) and ``"%"`` escaped, one to one."""
    return Owner(reference_thread(ns), "", key.replace("%", "%25").replace("\x00", "%00"))


def _offloaded(entries: list[_Entry], offloader: Offloader) -> list[_Entry]:
    """The entries with their messages' large and binary values replaced by references; an item
    holding references says so with ``value["blobs"]`` (its digests), so reads restore exactly the
    items a bound archive wrote. The message is offloaded before it becomes JSON, as a checkpoint
    holds it (so ``bytes`` become a reference, not their ``str``), each reference as text."""
    out = []
    for e in entries:
        stored, blobs = offloader.offload(e.raw, messages=True)
        if not blobs:
            out.append(e)
            continue
        fmt, body = _serialize(text_references(stored))
        out.append(_Entry(e.key, {**e.value, "format": fmt, "message": body, "blobs": sorted(blobs)}, blobs))
    return out


def _blob_ops(*ops: Any) -> Flow[Any, Any, list[Any]]:
    results = []
    for op in ops:
        results.append((yield op))
    return results


def _drop_refs(ns: tuple[str, ...]) -> Flow[Any, Any, int]:
    """Delete the reference rows of ``ns``, then the blobs no row names any more (blobs deleted)."""
    digests = yield DropRefs(reference_thread(ns))
    if not digests:
        return 0
    count, _size = yield Collect(tuple(digests))
    return int(count)


def _restored(item: Item, ns: tuple[str, ...], blobs: Mapping[str, bytes], where: str) -> Any:
    """The message of ``item`` with its references restored; a blob missing or corrupt raises
    ``BlobError`` naming the item. The references are read in the message rebuilt from its body,
    the value the archive offloaded (a LangChain message's body holds its fields one level further
    down), so the read reaches exactly what the offload reached (``offload.transform``, "Depth")."""
    message = _deserialize(item.value)
    if not item.value.get("blobs"):
        return message
    refs = references(message)
    named = f"archived message {item.key!r} in store namespace {ns!r}"
    fields = {"thread_id": reference_thread(ns), "checkpoint_ns": "", "checkpoint_id": item.key}
    for digest, ref in sorted(refs.items()):
        data = blobs.get(digest)
        if data is not None and hashlib.sha256(data).hexdigest() != digest:
            raise CorruptBlobError(
                f"{named} names blob sha256:{digest} ({ref.size} bytes), whose stored bytes in {where} do "
                "not hash to it: the blob was changed outside agentstate-reducer. Restore it from a "
                "backup, or forget the namespace", digest=digest, **fields)

    def missing(ref: Reference) -> Any:
        raise MissingBlobError(
            f"{named} names blob sha256:{ref.digest} ({ref.size} bytes), which is not in {where}: it was "
            "deleted outside agentstate-reducer. Restore it from a backup, or forget the namespace",
            digest=ref.digest, **fields)

    return restore(message, blobs, missing)


class _Io:
    """Performs an archive flow's steps: store batches on ``store``, blob steps with ``blobs`` (the
    runner of the saver the archive is bound to; None: a blob step is an error naming the cure)."""

    def __init__(self, store: BaseStore, blobs: BlobRunner | None) -> None:
        self.store = store
        self.blobs = blobs
        self.where = blobs.where if blobs is not None else "the saver's blob storage"
        self._abatch = _abatch_of(store)

    def _runner(self, step: BlobStep) -> BlobRunner:
        if self.blobs is None:
            step.flow.close()
            raise ValueError(
                "these archived messages hold blob references (written by a StoreArchive of a "
                "ReducingCheckpointSaver with offload on): read them through that saver, by "
                "read_transcript(store, saver, config), or by the archive once such a saver was built "
                "with it among its reducer's on_prune hooks"
            )
        return self.blobs

    def perform(self, step: list[Op] | BlobStep) -> Any:
        if isinstance(step, BlobStep):
            return self._runner(step).run(step.flow)
        return self.store.batch(step)

    async def aperform(self, step: list[Op] | BlobStep) -> Any:
        if isinstance(step, BlobStep):
            return await self._runner(step).arun(step.flow)
        return await self._abatch(step)


def _write_flow(ns: tuple[str, ...], entries: list[_Entry], ttl: float | None) -> StoreFlow[tuple[int, int]]:
    """Write the entries whose keys are not in the store yet, the reference rows of their blobs
    first (a crash between the two leaves a kept blob, never a dangling reference). Returns
    ``(written, existing)``."""
    found = yield [GetOp(ns, e.key, refresh_ttl=False) for e in entries]
    missing = [e for e, item in zip(entries, found, strict=True) if item is None]
    saves = [SaveBlobs(_owner(ns, e.key), e.blobs) for e in missing if e.blobs]
    if saves:
        yield BlobStep(_blob_ops(*saves))
    if missing:
        yield [PutOp(ns, e.key, e.value, index=False, ttl=ttl) for e in missing]
    return len(missing), len(entries) - len(missing)


def _messages_flow(ns: tuple[str, ...], where: str) -> StoreFlow[list[Any]]:
    """The messages archived in ``ns`` (exactly that namespace), in order, references restored
    (``where`` names the blob storage in errors)."""
    items: dict[str, Item] = {}
    offset = 0
    while True:
        results = yield [SearchOp(ns, filter={"kind": ITEM_KIND}, limit=_PAGE, offset=offset,
                                  refresh_ttl=False)]
        page: list[Item] = results[0]  # a SearchOp's result is list[SearchItem]
        for item in page:
            if tuple(item.namespace) == ns:
                items.setdefault(item.key, item)
        if len(page) < _PAGE:
            break
        offset += _PAGE
    ordered = sorted(items.values(), key=lambda it: (*it.value["order"], it.key))
    # an item lists the blobs its message names: the digests to load
    refs = {str(d) for it in ordered for d in it.value.get("blobs") or ()}
    blobs: Mapping[str, bytes] = {}
    if refs:
        blobs = (yield BlobStep(_blob_ops(LoadBlobs(tuple(sorted(refs))))))[0]
    return [_restored(it, ns, blobs, where) for it in ordered]


def _forget_flow(ns: tuple[str, ...], bound: bool) -> StoreFlow[int]:
    """Delete every archived item of ``ns`` (exactly that namespace), then, when ``bound``, the
    namespace's reference rows and the blobs nothing names any more (in this order: a crash between
    leaves kept blobs, never a dangling reference). Returns how many items."""
    keys: set[str] = set()
    named = 0
    offset = 0
    while True:
        results = yield [SearchOp(ns, filter={"kind": ITEM_KIND}, limit=_PAGE, offset=offset,
                                  refresh_ttl=False)]
        page: list[Item] = results[0]  # a SearchOp's result is list[SearchItem]
        mine = [item for item in page if tuple(item.namespace) == ns]
        keys.update(item.key for item in mine)
        named += sum(bool(item.value.get("blobs")) for item in mine)
        if len(page) < _PAGE:
            break
        offset += _PAGE
    if keys:
        yield [PutOp(ns, key, None) for key in sorted(keys)]
    if bound:
        yield BlobStep(_drop_refs(ns))
    elif named:
        logger.warning(
            "forgot %d archived messages in %r that named offloaded blobs; this StoreArchive is not "
            "bound to a saver with offload, so their reference rows and blobs stay (kept, not lost)",
            named, ns,
        )
    return len(keys)


def _abatch_of(store: BaseStore) -> Callable[[list[Op]], Awaitable[list[Result]]]:
    """The store's ``abatch``, or its sync ``batch`` off the event loop (SqliteStore has no async)."""

    async def run(ops: list[Op]) -> list[Result]:
        try:
            return await store.abatch(ops)
        except NotImplementedError:
            return await asyncio.to_thread(store.batch, ops)

    return run


def merge_transcript(
    archived: Sequence[Any],
    live: Sequence[Any],
    *,
    preserve_first: bool = True,
    include_summary: bool = False,
) -> list[Any]:
    """Archive + live, in order, without duplicates: the live messages in front of the summary
    (system prompt, index 0 with ``preserve_first``) come first, then the archive, then the rest of
    the live list; live messages already in the archive (same id) are skipped."""
    archived_ids = {read_message(m).id for m in archived} - {None}
    kept = []
    for m in live:
        info = read_message(m)
        if info.id is not None and info.id in archived_ids:
            continue
        if not include_summary and is_summary_message(m, info):
            continue
        kept.append(m)
    plain = [m for m in kept if not is_summary_message(m)]
    head = insert_position(plain, preserve_first=preserve_first)
    head_ids = {id(m) for m in plain[:head]}
    front = [m for m in kept if id(m) in head_ids]
    rest = [m for m in kept if id(m) not in head_ids]
    return [*front, *archived, *rest]


def _live_messages(tup: Any, key: str) -> list[Any]:
    if tup is None:
        return []
    value = (tup.checkpoint.get("channel_values") or {}).get(key)
    return list(value) if isinstance(value, list) else []


# -- the archive ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchiveStats:
    """Message counts since the archive was made."""

    written: int
    already_archived: int
    dropped: int
    failed: int
    pending_batches: int


class StoreArchive:
    """An ``on_prune`` hook writing pruned messages to a LangGraph ``BaseStore``, exactly once each.

    Args:
        store: any ``BaseStore``. The archive never calls ``setup()``; set the store up first.
        background: deliver from a daemon thread through a bounded queue instead of in the put.
        max_pending: queue size in batches (one batch per reduction that pruned).
        when_full: ``"inline"`` writes a batch in the caller's thread when the queue is full (nothing
            lost); ``"drop"`` drops it (counted in ``dropped``, logged).
        ttl: store TTL in minutes for archived items (the store expires them: it must support
            TTL); None keeps them.
        retries: extra attempts for a failed write, with 0.05 s, 0.1 s, ... backoff.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        background: bool = False,
        max_pending: int = 1000,
        when_full: Literal["inline", "drop"] = "inline",
        ttl: float | None = None,
        retries: int = 2,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise TypeError(f"store must be a langgraph BaseStore (InMemoryStore, PostgresStore, ...), "
                            f"got {type(store).__name__}")
        if when_full not in ("inline", "drop"):
            raise ValueError(f"when_full must be 'inline' or 'drop', got {when_full!r}")
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be an int >= 1, got {max_pending!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if ttl is not None:
            if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
                raise ValueError(f"ttl must be a positive number of minutes or None, got {ttl!r}")
            if not getattr(store, "supports_ttl", False):
                raise ValueError(
                    f"ttl={ttl!r}: {type(store).__name__} does not support TTL (supports_ttl is False); "
                    "use a store that does (SqliteStore, PostgresStore) or leave ttl=None"
                )
        self.store = store
        self.background = background
        self.when_full = when_full
        self.ttl = ttl
        self.retries = retries
        self._lock = threading.Lock()
        self._last_stamp = 0
        self._counts = {"written": 0, "already_archived": 0, "dropped": 0, "failed": 0}
        self._queue: queue.Queue[tuple[tuple[str, ...], list[_Entry]] | None] = queue.Queue(max_pending)
        self._worker: threading.Thread | None = None
        self._closed = False
        self._blobs: BlobRunner | None = None

    def __repr__(self) -> str:
        mode = "background" if self.background else "inline"
        return f"StoreArchive({type(self.store).__name__}, {mode})"

    # -- blob references --------------------------------------------------------------------------

    def _bind_blobs(self, runner: BlobRunner) -> None:
        """Store references to ``runner``'s blobs from now on (called by a ``ReducingCheckpointSaver``
        with offload that has this archive among its reducer's ``on_prune`` hooks). Binding again to
        the same blob storage keeps the first binding.

        Raises:
            ValueError: the archive is bound to another blob storage already.
        """
        with self._lock:
            self._check_blobs(runner)
            if self._blobs is None:
                self._blobs = runner

    def _check_blobs(self, runner: BlobRunner) -> None:
        """Raise the ``ValueError`` of ``_bind_blobs`` without binding."""
        bound = self._blobs
        if bound is None or bound is runner or bound.storage is runner.storage:
            return
        raise ValueError(
            f"this StoreArchive already stores references to {bound.where}; a saver keeping its blobs in "
            f"{runner.where} (another database, connection or store) cannot share it: give each "
            "ReducingCheckpointSaver with offload its own StoreArchive"
        )

    @property
    def blob_runner(self) -> BlobRunner | None:
        """The blob storage this archive's references name (None: it stores messages whole)."""
        return self._blobs

    def _io(self) -> _Io:
        return _Io(self.store, self._blobs)

    # -- the hook ---------------------------------------------------------------------------------

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        """The ``on_prune`` hook: archive ``pruned`` under ``namespace`` (in the put, or queued)."""
        batch = self._batch(pruned, namespace)
        if batch is not None and not self._enqueue(batch):
            self._deliver(*batch)

    async def acall(self, pruned: list[Any], namespace: Any) -> None:
        """The hook for async reductions (``areduce``/``aput``): the store's async API is used."""
        batch = self._batch(pruned, namespace)
        if batch is not None and not self._enqueue(batch):
            await self._adeliver(*batch)

    def _batch(self, pruned: Sequence[Any], namespace: Any) -> tuple[tuple[str, ...], list[_Entry]] | None:
        ns = archive_namespace(namespace)
        entries = _entries(pruned, self._stamp())
        return (ns, entries) if entries else None

    def _stamp(self) -> int:
        # monotonic within the process even if the wall clock steps back
        with self._lock:
            self._last_stamp = max(time.time_ns(), self._last_stamp + 1)
            return self._last_stamp

    # -- delivery ---------------------------------------------------------------------------------

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, n in deltas.items():
                self._counts[name] += n

    def _prepared(self, entries: list[_Entry]) -> list[_Entry]:
        # offloaded at delivery, so a background archive's hashing is off the put's thread
        return entries if self._blobs is None else _offloaded(entries, self._blobs.offloader)

    def _deliver(self, ns: tuple[str, ...], entries: list[_Entry]) -> None:
        io = self._io()
        for attempt in range(self.retries + 1):
            try:
                written, existing = drive(_write_flow(ns, self._prepared(entries), self.ttl), io.perform)
            except Exception:
                if attempt < self.retries:
                    time.sleep(0.05 * 2**attempt)
                    continue
                self._failed(ns, entries)
                return
            self._count(written=written, already_archived=existing)
            return

    async def _adeliver(self, ns: tuple[str, ...], entries: list[_Entry]) -> None:
        io = self._io()
        for attempt in range(self.retries + 1):
            try:
                written, existing = await adrive(_write_flow(ns, self._prepared(entries), self.ttl),
                                                 io.aperform)
            except Exception:
                if attempt < self.retries:
                    await asyncio.sleep(0.05 * 2**attempt)
                    continue
                self._failed(ns, entries)
                return
            self._count(written=written, already_archived=existing)
            return

    def _failed(self, ns: tuple[str, ...], entries: list[_Entry]) -> None:
        self._count(failed=len(entries))
        logger.exception(
            "archiving %d pruned messages to %r failed after %d attempts; they are not in the archive "
            "(first key %r)", len(entries), ns, self.retries + 1, entries[0].key,
        )

    def _enqueue(self, batch: tuple[tuple[str, ...], list[_Entry]]) -> bool:
        """Queue ``batch`` for the worker; False when the caller must deliver it itself."""
        if not self.background or self._closed:
            return False
        self._ensure_worker()
        try:
            self._queue.put_nowait(batch)
            return True
        except queue.Full:
            if self.when_full == "inline":
                return False
            self._count(dropped=len(batch[1]))
            logger.warning(
                "archive queue full (%d batches): dropped %d pruned messages for %r (when_full='drop')",
                self._queue.maxsize, len(batch[1]), batch[0],
            )
            return True

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="agentstate-archive", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                self._deliver(*batch)
            except Exception:  # _deliver logs its own failures; this guards the worker itself
                logger.exception("archive worker: unexpected error")
            finally:
                self._queue.task_done()

    def _not_on_blob_loop(self, what: str) -> None:
        """Refuse to wait on the event loop the queued batches need (an async saver's blobs): the
        worker would wait for the loop and the loop for the worker."""
        blobs = self._blobs
        if blobs is None or blobs.loop is None or not self._queue.unfinished_tasks:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is blobs.loop:
            raise RuntimeError(
                f"StoreArchive.{what}() called on the event loop of {blobs.where}, which the queued "
                f"batches need to store their blob references: use 'await archive.a{what}()' there"
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued batch is written (or failed); False if ``timeout`` s passed first.

        Raises:
            RuntimeError: called on the event loop of the async saver whose blobs the archive
                references while batches are queued (``aflush`` is the form for that loop).
        """
        self._not_on_blob_loop("flush")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    async def aflush(self, timeout: float | None = None) -> bool:
        """``flush`` from async code, off the event loop."""
        return await asyncio.to_thread(self.flush, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued and stop the worker. Later batches are written in the caller.

        Raises:
            RuntimeError: as ``flush`` (``aclose`` is the form for that loop).
        """
        self._not_on_blob_loop("close")
        self._closed = True
        worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout)

    async def aclose(self, timeout: float | None = None) -> None:
        """``close`` from async code, off the event loop."""
        await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> StoreArchive:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def stats(self) -> ArchiveStats:
        with self._lock:
            c = dict(self._counts)
        return ArchiveStats(c["written"], c["already_archived"], c["dropped"], c["failed"],
                            self._queue.unfinished_tasks)

    # -- reading ----------------------------------------------------------------------------------

    def messages(self, namespace: Any) -> list[Any]:
        """The archived messages of ``namespace`` (a hook namespace, as given to the hook), in order,
        blob references restored.

        Raises:
            MissingBlobError, CorruptBlobError: a blob an item names cannot be read back.
            ValueError: items hold references but the archive is bound to no saver's blobs.
        """
        io = self._io()
        return drive(_messages_flow(archive_namespace(namespace), io.where), io.perform)

    async def amessages(self, namespace: Any) -> list[Any]:
        io = self._io()
        return await adrive(_messages_flow(archive_namespace(namespace), io.where), io.aperform)

    # -- forgetting -------------------------------------------------------------------------------

    def forget(self, namespace: Any) -> int:
        """Delete the archived messages of ``namespace`` (after delivering queued batches, so none
        lands afterwards) and, when bound to a saver's blobs, the namespace's reference rows and the
        blobs nothing names any more. Returns how many messages were deleted."""
        if self.background:
            self.flush()
        io = self._io()
        return drive(_forget_flow(archive_namespace(namespace), io.blobs is not None), io.perform)

    async def aforget(self, namespace: Any) -> int:
        if self.background:
            await self.aflush()
        io = self._io()
        return await adrive(_forget_flow(archive_namespace(namespace), io.blobs is not None), io.aperform)


def read_transcript(
    store: BaseStore,
    checkpointer: Any,
    config: Mapping[str, Any],
    *,
    messages_key: str = "messages",
    preserve_first: bool = True,
    include_summary: bool = False,
) -> list[Any]:
    """A thread's full conversation: archived messages + the live checkpoint, in order, no duplicates.

    ``config`` is the run config (``{"configurable": {"thread_id": ...}}``, optionally with
    ``memory_namespace`` and a ``checkpoint_id``). ``preserve_first`` must match the reducer's (it
    says whether index 0 of the live list stays in front of the archive). The injected summary
    message is left out unless ``include_summary``.
    """
    io = _Io(store, _blob_runner_of(checkpointer))
    archived = drive(_messages_flow(archive_namespace(_namespace(config)), io.where), io.perform)
    live = _live_messages(checkpointer.get_tuple(config), messages_key)
    return merge_transcript(archived, live, preserve_first=preserve_first, include_summary=include_summary)


async def aread_transcript(
    store: BaseStore,
    checkpointer: Any,
    config: Mapping[str, Any],
    *,
    messages_key: str = "messages",
    preserve_first: bool = True,
    include_summary: bool = False,
) -> list[Any]:
    """``read_transcript`` with the store's and the checkpointer's async APIs."""
    io = _Io(store, _blob_runner_of(checkpointer))
    archived = await adrive(_messages_flow(archive_namespace(_namespace(config)), io.where), io.aperform)
    live = _live_messages(await checkpointer.aget_tuple(config), messages_key)
    return merge_transcript(archived, live, preserve_first=preserve_first, include_summary=include_summary)


def _blob_runner_of(checkpointer: Any) -> BlobRunner | None:
    """The blob storage of a ``ReducingCheckpointSaver`` with offload (its ``blob_runner``)."""
    runner = getattr(checkpointer, "blob_runner", None)
    return runner if isinstance(runner, BlobRunner) else None
