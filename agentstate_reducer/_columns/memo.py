"""``PrefixMemo``: what one reducer learned about the lists it handled, found again for a list
that starts with the same objects. The one "same list as before" memo of the column path.

A reducer keeps one ``PrefixMemo``. Each call hands its list to ``recall`` and gets back the
remembered list that shares the longest *identity* prefix with it (``same_prefix``: the same
objects at the same places, compared with ``is``, at C speed), and that prefix's length. What it
learned about that list is attached to the record by job (``Remembered``): the counter's
columns, the planner's table of a window, and, for a reducer's output, that it is sendable.

The assumptions every user of the memo relies on, in one place (docs/contract.md links here):

1. **Identity, not equality.** The prefix is found by identity (``same_prefix``; an item in
   it that is an equal other object counts as the same: ``==`` means content equality). A
   message that is the same object as before is taken to have the same kind and call ids
   (count mode reads no message it has read before); in token mode every count is still
   checked against its snapshot, so a message edited in place is recounted. An
   equal copy (a checkpoint read back, a deep copy) shares no prefix: it costs what a fresh
   reducer costs on it, never more, and the next call on those objects is warm again.
2. **Records never change.** ``keep`` stores a record whose lists nobody changes afterwards: the
   memo copies the caller's list unless it is handed over (``owned``), and what the users attach
   is built for the record (a later call copies the prefix it reuses). A record handed out
   stays valid for as long as it is held, whatever other calls do meanwhile, so threads and
   asyncio tasks sharing one reducer need no ownership: the lock guards only the choice of
   records.
3. **Only a cache.** A record that does not apply (another list, a shorter prefix than a user
   needs) is ignored, and every user then reads what it needs from the list itself; the memo
   changes what a call costs, never what it returns. ``deepcopy``/``pickle`` of a reducer start
   it empty.
4. **Dropped off the call.** A record the memo lets go of is freed by one daemon thread
   (``release``), not by the call that drops it: it may hold the last references to a copy its
   caller let go, and freeing those is not the call's work. The thread ends after
   ``IDLE_POLLS`` empty looks; the next drop starts another.
5. ``target_tokens <= max_tokens``: a triggered token-mode decision reads the costs of no message
   older than the newest ones worth more than ``max_tokens`` (``Plan.newest``), so only those
   and the kept ones need their unchecked counts confirmed (``tokens.cache.Unchecked``).

Two other checks ask other questions and stay with their owners: ``summary.SummaryMemo``
(which message ids a conversation's running summary already covers, per conversation and across
lists read back from storage: by ids, its span's ends by identity) and the LangGraph
annotation's ``existing is trusted`` (the very list it returned last, whole: one ``is``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Final

from agentstate_reducer._columns.structure import same_prefix

if TYPE_CHECKING:
    from agentstate_reducer._columns.table import TableState
    from agentstate_reducer._columns.warm import CountColumns
    from agentstate_reducer.planner import Tail
    from agentstate_reducer.results import ReducerStats

#: records kept, none a prefix of another: an input and the output cut from it, for each of two
#: histories that alternate (one and its copy reloaded from a checkpoint)
SLOTS: Final = 4


@dataclass(frozen=True, slots=True)
class Sendable:
    """A reducer output known sendable: a list that starts with it needs only its new messages
    checked (``planner.extend_tail`` of ``tail``)."""

    tail: Tail
    #: the stats of reducing the output again on its own, when that keeps it whole untriggered
    #: (count mode, at most ``max_messages``); None otherwise
    again: ReducerStats | None = None


@dataclass(frozen=True, slots=True)
class Remembered:
    """One list a reducer handled (``items``, the memo's own copy) and what was learned about it."""

    items: list[Any]
    #: the counter's columns of ``items`` (token mode, a ``TokenCounter`` checked by columns)
    counts: CountColumns | None = None
    #: the planner's table of a window of ``items`` (planned by columns)
    table: TableState | None = None
    #: ``items`` was a reducer's output and is sendable
    sendable: Sendable | None = None


class PrefixMemo:
    """The last ``SLOTS`` lists one reducer handled, newest first (see the module docstring)."""

    __slots__ = ("_lock", "_records")

    def __init__(self) -> None:
        self._records: tuple[Remembered, ...] = ()
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[PrefixMemo], tuple[()]]:
        return PrefixMemo, ()  # a copy (deepcopy, pickle) starts empty: the memo only saves time

    def recall(self, items: list[Any]) -> tuple[Remembered | None, int]:
        """The remembered list sharing the longest identity prefix with ``items`` and its length,
        or ``(None, 0)``."""
        if not items:
            return None, 0
        records = self._records  # a tuple, replaced whole under the lock: read without it
        first = items[0]
        best, shared = None, 0
        for record in records:
            if record.items and record.items[0] is first:
                k = same_prefix(record.items, items)
                if k > shared:
                    best, shared = record, k
        return best, shared

    def keep(
        self, items: list[Any], extends: Remembered | None = None, *, owned: bool = False, **learned: Any
    ) -> None:
        """Remember ``items`` with what was learned about it (``Remembered``'s fields), newest
        first, in place of the records of lists it extends (or repeats). ``extends``: a record the
        caller knows ``items`` extends (from ``recall``), not compared again. ``owned``: ``items``
        is a list no one else holds or changes (the memo keeps it as it is), else it is copied."""
        record = Remembered(items if owned else list(items), **learned)
        new = record.items
        n = len(new)

        def superseded(r: Remembered) -> bool:
            k = len(r.items)
            if r is extends:
                return True
            # a prefix of the new list ends with the same object at the same place
            return k <= n and (k == 0 or r.items[k - 1] is new[k - 1]) and same_prefix(r.items, new) == k

        with self._lock:
            records = (record, *(r for r in self._records if not superseded(r)))
            self._records = records[:SLOTS]
        if len(records) > SLOTS:
            # another list's records: they may hold the last references to messages their caller
            # let go (a superseded record's items are the new record's, freed with nothing)
            release(records[SLOTS:])


#: how many messages the releasing thread frees before it lets other threads run
CHUNK: Final = 256
#: how long the releasing thread sleeps between looks at what was dropped (seconds): a call that
#: drops records only appends them, so that it wakes no thread (on a loaded machine a thread woken
#: from a call may take that call's CPU)
POLL: Final = 0.1
#: how many empty looks in a row end the thread: an idle process runs no thread of ours
IDLE_POLLS: Final = 20


class _Releaser:
    """One daemon thread per process that frees what the memos drop (``release``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: batches to free, oldest first; one is taken off only once it is freed (``released``)
        self.retired: deque[list[Any]] = deque()
        self.thread: threading.Thread | None = None

    def put(self, batch: list[Any]) -> None:
        self.retired.append(batch)
        with self.lock:  # the thread checks ``retired`` under it before it ends: no batch is left
            if self.thread is None:
                name = "agentstate-memo-release"
                self.thread = threading.Thread(target=self.run, name=name, daemon=True)
                self.thread.start()

    def run(self) -> None:
        retired = self.retired
        idle = 0
        while True:
            if not retired:
                if idle >= IDLE_POLLS:
                    with self.lock:
                        if not retired:
                            self.thread = None  # the next drop starts a new thread
                            return
                idle += 1
                time.sleep(POLL)
                continue
            idle = 0
            batch = retired[0]
            items = batch.pop()
            batch.clear()  # the records: their lists and tables (the messages are in ``items``)
            while items:
                del items[-CHUNK:]
                time.sleep(0)  # let the callers' threads run between chunks
            del batch, items
            retired.popleft()


_releaser = _Releaser()


def _after_fork() -> None:
    global _releaser
    _releaser = _Releaser()  # the thread is not in the child: the child starts its own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def release(records: Sequence[Remembered]) -> None:
    """Drop ``records``, which no memo holds any longer, off the caller's thread.

    A dropped record may hold the last references to messages its caller let go (an equal copy
    read back from a checkpoint, replaced in the memo by the next copy): freeing ten thousand
    LangChain messages costs about half a reduction of them. A daemon thread frees them instead,
    ``CHUNK`` messages at a time, letting the GIL go between chunks, so the call that drops them
    costs what a fresh reducer costs (docs/contract.md: never more). Nothing waits for it, and a
    record is not used once dropped (assumption 2: a call still holding one keeps it valid).
    """
    items = list(chain.from_iterable(r.items for r in records))  # freed last, in chunks
    _releaser.put([*records, items])


def released(timeout: float | None = None) -> bool:
    """Wait until everything dropped so far is freed; ``False`` if ``timeout`` seconds passed
    first. Public as ``agentstate_reducer.wait_released``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _releaser.retired:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL / 10)
    return True
