"""``TokenCounter``: counts by the rules of ``tokens.rules``, cached per message and checked
unchanged against a snapshot (``messages.snapshot``) before a cached count is used."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import compress, filterfalse, islice
from operator import attrgetter, itemgetter
from typing import Any, Final, NamedTuple, Protocol, cast

from agentstate_reducer.messages import MessageInfo, read_message, snapshot, unchanged
from agentstate_reducer.tokens.rules import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    heuristic_text_tokens,
    measure_capped,
    message_parts,
)

DEFAULT_CACHE_SIZE: Final = 65_536

TokenCounterFn = Callable[[Any], int]


class TokenCountError(ValueError):
    """A token counter raised, or returned something other than a non-negative int."""


# A cache entry: (message, snapshot, info, count). The message is held so that its id() is not
# reused while cached; a tuple, because creating one is the cheapest thing per counted message
# and its columns read at C speed.
_Entry = tuple[Any, Any, MessageInfo, int]
_entry_snapshot: Final[Callable[[_Entry], Any]] = itemgetter(1)
_entry_info: Final[Callable[[_Entry], MessageInfo]] = itemgetter(2)
_entry_count: Final[Callable[[_Entry], int]] = itemgetter(3)
_info_id: Final[Callable[[MessageInfo], str | None]] = attrgetter("id")
_NO_KNOWN: Final[dict[str, _Entry]] = {}
# The snapshot of no entry: equal to nothing (``==`` answers by identity, at C speed)
_NOT_CACHED: Final = object()
_NO_ENTRY: Final[_Entry] = (None, _NOT_CACHED, MessageInfo("unknown", None, None, None), 0)
Found = tuple[list[int], list[MessageInfo], list[int]]


class Unchecked(NamedTuple):
    """The leading ``upto`` messages of a call whose counts and readings were taken from a
    remembered list of the same messages without a check (the column path's memo), with what
    ``TokenCounter.confirm`` compares them with: the snapshots (and, for models, the
    ``fast_view`` of each) of the whole call. Read them, never change them."""

    upto: int
    dicts: bool
    views: list[Any]
    snapshots: list[Any]


class WarmPath(Protocol):
    """A faster way to answer ``TokenCounter.read_and_count`` and ``confirm``, equal
    to the one-by-one reference on every input: the column path (``agentstate_reducer._columns``)
    installs one with ``use_warm_path``; without one, every counter answers one message at a
    time."""

    def read_and_count(
        self, counter: TokenCounter, messages: Sequence[Any]
    ) -> tuple[list[int], list[MessageInfo]]: ...

    def confirm(
        self,
        counter: TokenCounter,
        messages: Sequence[Any],
        unchecked: Unchecked,
        lo: int,
        extra: Sequence[int],
    ) -> bool: ...


_warm: list[WarmPath] = []


def use_warm_path(path: WarmPath | None) -> None:
    """Answer every counter's warm checks with ``path`` from now on, or one message at a time
    (None): the switch between the column path and the reference."""
    _warm[:] = [path] if path is not None else []


class TokenCounter:
    """A ``message -> int`` counter with a bounded cache of per-message counts.

    Entries are found by object identity (the cache holds a reference, so an identity is not
    reused while cached) and, for a new object, by its message id; either way the cached count
    is used only while the message still equals the snapshot taken when it was counted
    (``messages.snapshot``: a deep copy of what the count depends on, compared with ``==``,
    identity first). What a snapshot watches, so which changes in place are recounted:

    * a dict message: the whole dict, nested dicts, lists and tuples included (``msg["content"]
      = ...``, an edited or appended content block, an edited tool call or its arguments, any
      new or removed key);
    * a pydantic model (LangChain messages): its class (``msg.__class__ = ...``), each
      ``READ_FIELDS`` field its class declares (``content``, ``tool_calls``,
      ``additional_kwargs``, ``name``, ``id``, ``tool_call_id``, ``type``, ...), deep, so a
      block or a tool call's ``args`` edited in place is seen, and its extras dict, deep, where
      pydantic keeps every attribute the class does not declare (``msg.role = ...``);
    * any other object: its class and every ``READ_FIELDS`` field as ``getattr`` serves it,
      wherever it lives (instance ``__dict__``, slots, properties, ``__getattribute__``,
      ``__getattr__``), deep, so content a property serves is recounted when it changes.

    Not watched: changes inside objects other than dicts, lists and tuples (compared with
    ``==``, true for the same object), and a field a pydantic model does not declare written
    into its ``__dict__`` around pydantic (``object.__setattr__``). A message replaced by one
    with the same id and new content is recounted; a reloaded copy of an unchanged message is not.

    At most ``cache_size`` messages are kept (``cache_size=0`` disables the cache). A hit costs
    no bookkeeping: when admitting new messages overfills the cache, the entries of messages
    the current call did not pass go first, oldest inserted first (up to a sixteenth of
    ``cache_size`` more than needed, so that a full cache does not evict on every call), then
    the others, oldest inserted first, only as needed.

    This class is the reference: it checks, counts and caches one message at a time. The column
    path (``agentstate_reducer._columns.warm``, installed on import) answers the same calls by
    columns (``map`` over the list, no Python code per message) on lists of dicts and of
    ``fast_view`` classes (LangChain messages), and a reducer hands it the columns of the list it
    reduced last (its memo), so that the messages they share are taken unchecked and only those
    its decision reads are confirmed (``read_and_count_unchecked`` without that memo checks
    every message). Each remembered column pairs a snapshot with the count and reading taken
    with it, so a message that passes the check has the right count, cached or not.

    Messages not in the cache are read by columns (``read_plain``) and snapshot by columns
    (``snapshots``). The heuristic counts the plain messages and tool calls it reads by columns
    (``_heuristic_counts``) faster than it can snapshot them, so it caches such a message only
    the second time it sees the same object: a history reduced once costs no snapshots, one
    reduced turn after turn is answered from the cache from its third reduction on. Every other
    message is cached the first time it is counted.

    ``count_messages`` counts a whole list; over a warm cache it neither re-reads nor recounts
    old messages, it only checks that they are unchanged. ``read_and_count_unchecked`` leaves
    that check of the leading messages of a remembered call to the caller (``confirm``), who
    checks only those its decision reads.
    """

    def __init__(
        self,
        measure: Callable[[str], int],
        *,
        name: str,
        cache_size: int = DEFAULT_CACHE_SIZE,
        image_tokens: int = IMAGE_TOKENS,
    ) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ValueError(f"image_tokens must be an int >= 0, got {image_tokens!r}")
        self.measure = measure
        self.name = name
        self.cache_size = cache_size
        self.image_tokens = image_tokens
        self._cache: dict[int, _Entry] = {}  # id(message) -> entry, in insertion order
        self._by_msg_id: dict[str, _Entry] = {}  # message id -> its newest entry
        self._seen: set[int] = set()  # id() of messages the heuristic counted by columns once
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count_uncached(self, message: Any, info: MessageInfo | None = None) -> int:
        """The count of one message by the module's rules, without the cache. Never raises on a
        message: what cannot be read of it counts as absent (``message_parts``)."""
        texts, media = message_parts(message, info)
        return MESSAGE_OVERHEAD + media * self.image_tokens + self._measure_all(texts)

    def _measure_all(self, texts: list[str]) -> int:
        """The tokens of one message's text pieces: with the heuristic each piece's length, with
        any other measure (tiktoken) at most ``MAX_ENCODED_CHARS`` characters measured."""
        if self.measure is heuristic_text_tokens:
            return sum(map(heuristic_text_tokens, texts))
        return measure_capped(self.measure, texts)

    def __call__(self, message: Any) -> int:
        return self.count_messages([message])[0]

    def count_messages(self, messages: Sequence[Any]) -> list[int]:
        """The token count of each of ``messages``, from the cache where it is still right."""
        return self.read_and_count(messages)[0]

    def read_and_count(self, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo]]:
        """``(counts, infos)``: each message's token count and its ``read_message`` reading, from
        the cache where it is still right (the planner then needs not read messages again).
        What is cached when: see the class docstring."""
        if _warm:
            return _warm[0].read_and_count(self, messages)
        return self._read_and_count_each(messages)

    def read_and_count_unchecked(
        self, messages: Sequence[Any]
    ) -> tuple[list[int], list[MessageInfo], Unchecked | None]:
        """``read_and_count``, with the ``Unchecked`` counts a memo leaves to ``confirm``: a
        counter on its own keeps no memo, so every message is checked and the third value is
        None. (A reducer passes the column path its memo: ``_columns.count``.)"""
        counts, infos = self.read_and_count(messages)
        return counts, infos, None

    def confirm(
        self, messages: Sequence[Any], unchecked: Unchecked, lo: int, extra: Sequence[int] = ()
    ) -> bool:
        """True when each of ``messages[lo:unchecked.upto]`` and of ``messages[i]`` for ``i`` in
        ``extra`` (each below ``upto``) still equals the snapshot its unchecked count was taken
        with (the check ``read_and_count`` makes of every message)."""
        if _warm:
            return _warm[0].confirm(self, messages, unchecked, lo, extra)
        snaps = unchecked.snapshots
        picks = [i for i in extra if i < lo]
        try:
            return all(unchanged(snaps[i], messages[i]) for i in [*range(lo, unchecked.upto), *picks])
        except Exception:  # a declared field gone, an == that raises: not confirmed
            return False

    def _read_and_count_each(self, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo]]:
        """``read_and_count`` by the reference: each message looked up, checked and, when
        missed, counted and cached on its own."""
        if self.cache_size <= 0:
            return self._count_each(messages, by_id=False)
        with self._lock:
            counts, infos, missed = self._lookup_each(messages)
            self.hits += len(messages) - len(missed)
            self.misses += len(missed)
        if missed:
            sub = [messages[i] for i in missed]
            sub_counts, sub_infos = self._count_each(sub, by_id=True)
            for i, count, info in zip(missed, sub_counts, sub_infos, strict=True):
                counts[i] = count
                infos[i] = info
            self._admit(sub, list(map(id, sub)), sub_infos, sub_counts, messages)
        return counts, infos

    def _count_each(self, messages: Sequence[Any], *, by_id: bool) -> tuple[list[int], list[MessageInfo]]:
        """``(counts, infos)`` of messages counted now, one at a time. With ``by_id``, a message
        equal to a cached one with its id (a copy reloaded from a checkpoint) takes that count
        instead of being measured."""
        counts: list[int] = []
        infos: list[MessageInfo] = []
        known_ids = self._by_msg_id if by_id else _NO_KNOWN
        for msg in messages:
            info = read_message(msg)
            known = known_ids.get(info.id) if known_ids and info.id is not None else None
            if known is not None and unchanged(_entry_snapshot(known), msg):
                counts.append(_entry_count(known))  # an equal copy of a counted message
            else:
                counts.append(self.count_uncached(msg, info))
            infos.append(info)
        return counts, infos

    def _admit(
        self,
        messages: Sequence[Any],
        keys: list[int],
        infos: list[MessageInfo],
        counts: list[int],
        current: Sequence[Any],
        snaps: Sequence[Any] | None = None,
    ) -> int:
        """Cache ``messages`` (found by ``keys``, their ids) with their readings and counts;
        ``current``: every message of the call, kept over older entries when the cache is full.
        Returns 1 when it evicted entries, else 0."""
        if snaps is None:
            snaps = list(map(snapshot, messages))
        entries: list[_Entry] = list(zip(messages, snaps, infos, counts, strict=True))
        msg_ids = list(map(_info_id, infos))
        cache = self._cache
        by_msg_id = self._by_msg_id
        with self._lock:
            # a message changed in place is cached already: drop what pointed at its old entry
            replaced = list(compress(keys, map(cache.__contains__, keys)))
            for key in replaced:
                old_id = _entry_info(cache[key]).id
                if old_id is not None and by_msg_id.get(old_id) is cache[key]:
                    del by_msg_id[old_id]
            cache.update(zip(keys, entries, strict=True))
            held_ids = cast("list[str]", list(compress(msg_ids, msg_ids)))  # the true ones: str ids
            by_msg_id.update(zip(held_ids, compress(entries, msg_ids), strict=True))
            excess = len(cache) - self.cache_size
            if excess > 0:  # kept first: the messages of this call
                keep = set(map(id, current))
                # a sixteenth of the room freed at once (of the entries not kept first), so that a
                # full cache builds ``keep`` once per that many admissions, not on every call
                room = excess + self.cache_size // 16
                victims = list(islice(filterfalse(keep.__contains__, cache), room))
                if len(victims) < excess:  # the messages kept first alone overfill the cache
                    victims += islice(filter(keep.__contains__, cache), excess - len(victims))
                for key in victims:
                    old = cache.pop(key)
                    msg_id = _entry_info(old).id
                    if msg_id is not None and by_msg_id.get(msg_id) is old:
                        del by_msg_id[msg_id]
                return 1
        return 0

    def _lookup_each(self, messages: Sequence[Any]) -> Found:
        """The warm check one message at a time, for mixed lists and unusual message classes."""
        n = len(messages)
        counts = [0] * n
        infos: list[MessageInfo] = [None] * n  # type: ignore[list-item]
        missed: list[int] = []
        cache = self._cache
        for i, msg in enumerate(messages):
            entry = cache.get(id(msg))
            if entry is not None and unchanged(_entry_snapshot(entry), msg):
                infos[i] = _entry_info(entry)
                counts[i] = _entry_count(entry)
            else:
                missed.append(i)
        return counts, infos, missed

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._by_msg_id.clear()
            self._seen.clear()

    def cache_len(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, cache_size={self.cache_size})"


def heuristic_counter(
    *, cache_size: int = DEFAULT_CACHE_SIZE, image_tokens: int = IMAGE_TOKENS
) -> TokenCounter:
    """The dependency-free counter: ``ceil(len(text) / 4)`` per text piece, same rules otherwise."""
    return TokenCounter(
        heuristic_text_tokens, name="heuristic", cache_size=cache_size, image_tokens=image_tokens
    )
