"""``TokenCounter``: counts by the rules of ``tokens.rules``, cached per message and checked
unchanged against a snapshot (``messages.snapshot``) before a cached count is used."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
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
#: The default bound of one counter's cache, in bytes (``ENTRY_BYTES`` per message plus the
#: characters it holds), whatever the messages' number or size.
DEFAULT_CACHE_BYTES: Final = 16 * 1024 * 1024
#: What one cached message costs besides its text, in bytes: its snapshot's containers, its
#: reading, the entry and its keys (measured with tracemalloc: benchmarks/bench_token_memory.py).
ENTRY_BYTES: Final = 1_024

TokenCounterFn = Callable[[Any], int]


class TokenCountError(ValueError):
    """A token counter raised, or returned something other than a non-negative int."""


# A cache entry: (snapshot, info, count, bytes). Found by the message's id() or its message id,
# never holding the message: the snapshot alone decides whether a count is right (an id() reused
# by another object equal to the snapshot has the same count). An entry outlives its message
# until the LRU drops it, so that a copy reloaded from a checkpoint after the objects it copies
# were collected is still found by its message id. A tuple, because creating one is the cheapest
# thing per counted message and its columns read at C speed.
_Entry = tuple[Any, MessageInfo, int, int]
_entry_snapshot: Final[Callable[[_Entry], Any]] = itemgetter(0)
_entry_info: Final[Callable[[_Entry], MessageInfo]] = itemgetter(1)
_entry_count: Final[Callable[[_Entry], int]] = itemgetter(2)
_entry_bytes: Final[Callable[[_Entry], int]] = itemgetter(3)
_info_id: Final[Callable[[MessageInfo], str | None]] = attrgetter("id")
_NO_KNOWN: Final[dict[str, _Entry]] = {}
# The snapshot of no entry: equal to nothing (``==`` answers by identity, at C speed)
_NOT_CACHED: Final = object()
_NO_ENTRY: Final[_Entry] = (_NOT_CACHED, MessageInfo("unknown", None, None, None), 0, 0)


def _chars(value: Any) -> int:
    """The characters of the strings in a snapshot's dicts, lists and tuples (what it holds
    alive beyond its containers: the texts, a base64 payload)."""
    n = 0
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            n += len(v)
        elif t is dict:
            stack.extend(v.values())
        elif t is list or t is tuple:
            stack.extend(v)
    return n


def _held_bytes(snap: Any, info: MessageInfo, count: int) -> int:
    """What a cache entry holds, estimated: ``ENTRY_BYTES`` plus the characters of its text
    (at least four per token counted; a message of content blocks: every string its snapshot
    holds, so that a base64 image counts by its size)."""
    content = info.content
    chars = len(content) if type(content) is str else _chars(snap)
    return ENTRY_BYTES + max(chars, 4 * count)


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

    Entries are found by ``id()`` of the message and, for a new object, by its message id; the
    cache never holds a message (a caller's dropped messages are collected), and either way the
    cached count is used only while the message still equals the snapshot taken when it was counted
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

    The cache is an LRU bounded by bytes and by entries: at most ``cache_bytes`` bytes as it
    estimates them (``ENTRY_BYTES`` per message plus the characters its snapshot holds: a
    base64 image by its size) and at most ``cache_size`` messages (either at 0 disables the
    cache). A hit makes an entry the most recent. When admitting new messages overfills it, the
    least recently used entries go first, down to a sixteenth under each bound (so that a full
    cache does not evict on every call), those of messages the current call passed last and
    only as needed. An entry outlives its message until evicted: a copy of it reloaded from a
    checkpoint is found by its message id; a message bigger than the bound is counted, not kept.

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
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be an int >= 0 (0 disables the cache), got {cache_bytes!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ValueError(f"image_tokens must be an int >= 0, got {image_tokens!r}")
        self.measure = measure
        self.name = name
        # cache_bytes=0 disables the cache as cache_size=0 does: one switch for both paths
        self.cache_size = cache_size if cache_bytes else 0
        self.cache_bytes = cache_bytes
        self.image_tokens = image_tokens
        # id(message) -> entry, least recently used first
        self._cache: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0  # the sum of the entries' bytes
        self._by_msg_id: dict[str, _Entry] = {}  # message id -> its newest entry
        self._seen: set[int] = set()  # id() of messages the heuristic counted by columns once
        # at most this many ids in ``_seen`` (about 100 bytes each): 1/1024 of the byte bound
        self.seen_size = min(cache_size, cache_bytes // 1024)
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
        """Cache ``messages`` (found by ``keys``, their ids) with their readings and counts, as
        the most recently used; ``current``: every message of the call, kept over older entries
        when the cache is over a bound. Returns 1 when it evicted entries, else 0."""
        if snaps is None:
            snaps = list(map(snapshot, messages))
        sizes = list(map(_held_bytes, snaps, infos, counts))
        entries: list[_Entry] = list(zip(snaps, infos, counts, sizes, strict=True))
        msg_ids = list(map(_info_id, infos))
        cache = self._cache
        by_msg_id = self._by_msg_id
        with self._lock:
            # a message changed in place (or a new one at a collected one's id) is cached
            # already: drop its old entry first, with what pointed at it
            for key in compress(keys, map(cache.__contains__, keys)):
                self._drop(key)
            admitted = dict(zip(keys, entries, strict=True))  # a message passed twice: one entry
            cache.update(admitted)
            self._bytes += sum(map(_entry_bytes, admitted.values()))
            held_ids = cast("list[str]", list(compress(msg_ids, msg_ids)))  # the true ones: str ids
            by_msg_id.update(zip(held_ids, compress(entries, msg_ids), strict=True))
            if len(cache) > self.cache_size or self._bytes > self.cache_bytes:
                self._evict(current)
                return 1
        return 0

    def _evict(self, current: Sequence[Any]) -> None:
        """Drop least recently used entries until the cache is within a sixteenth under both
        bounds (so that a full cache does not evict on every call), those of messages ``current``
        (the call's) passed last, and of those only as many as the bounds need. Under the lock."""
        cache = self._cache
        keep = set(map(id, current))
        n_goal = self.cache_size - self.cache_size // 16
        b_goal = self.cache_bytes - self.cache_bytes // 16
        kept: list[int] = []
        for key in list(cache):
            if len(cache) <= n_goal and self._bytes <= b_goal:
                return
            if key in keep:
                kept.append(key)
            else:
                self._drop(key)
        for key in kept:  # the call's own messages alone overfill the cache
            if len(cache) <= self.cache_size and self._bytes <= self.cache_bytes:
                return
            self._drop(key)

    def _drop(self, key: int) -> None:
        """Remove the entry at ``key`` (present), with its id's pointer to it. Under the lock."""
        old = self._cache.pop(key)
        self._bytes -= _entry_bytes(old)
        msg_id = _entry_info(old).id
        if msg_id is not None and self._by_msg_id.get(msg_id) is old:
            del self._by_msg_id[msg_id]

    def touch(self, keys: Iterable[int]) -> None:
        """Mark the entries at ``keys`` (each present) as the most recently used. Under the lock."""
        deque(map(self._cache.move_to_end, keys), maxlen=0)

    def _lookup_each(self, messages: Sequence[Any]) -> Found:
        """The warm check one message at a time, for mixed lists and unusual message classes.
        Under the lock."""
        n = len(messages)
        counts = [0] * n
        infos: list[MessageInfo] = [None] * n  # type: ignore[list-item]
        missed: list[int] = []
        cache = self._cache
        for i, msg in enumerate(messages):
            key = id(msg)
            entry = cache.get(key)
            if entry is not None and unchanged(_entry_snapshot(entry), msg):
                infos[i] = _entry_info(entry)
                counts[i] = _entry_count(entry)
                cache.move_to_end(key)
            else:
                missed.append(i)
        return counts, infos, missed

    def clear_cache(self) -> None:
        """Empty the cache."""
        with self._lock:
            self._cache.clear()
            self._bytes = 0
            self._by_msg_id.clear()
            self._seen.clear()

    def cache_len(self) -> int:
        """How many messages the cache holds counts of."""
        return len(self._cache)

    def cache_nbytes(self) -> int:
        """The bytes the cache holds, as it estimates them (``ENTRY_BYTES`` per message plus its
        characters): at most ``cache_bytes`` after every call."""
        return self._bytes

    def __repr__(self) -> str:
        return (
            f"TokenCounter(name={self.name!r}, cache_size={self.cache_size}, cache_bytes={self.cache_bytes})"
        )


def heuristic_counter(
    *,
    cache_size: int = DEFAULT_CACHE_SIZE,
    image_tokens: int = IMAGE_TOKENS,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TokenCounter:
    """The dependency-free counter: ``ceil(len(text) / 4)`` per text piece, same rules otherwise."""
    return TokenCounter(
        heuristic_text_tokens,
        name="heuristic",
        cache_size=cache_size,
        image_tokens=image_tokens,
        cache_bytes=cache_bytes,
    )
