"""``TokenCounter``: counts by the rules of ``tokens.rules``, cached per message and checked
unchanged against a snapshot (``messages.snapshot``) before a cached count is used."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, filterfalse, islice, repeat
from operator import add, attrgetter, eq, floordiv, is_, is_not, itemgetter, not_
from typing import Any, Final, NamedTuple, cast

from agentstate_reducer.messages import (
    MessageInfo,
    fast_views,
    read_message,
    read_plain,
    snapshots,
    unchanged,
)
from agentstate_reducer.messages.fields import apply_view, fast_view
from agentstate_reducer.messages.structure import common_lead
from agentstate_reducer.tokens.rules import (
    HEURISTIC_CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    heuristic_text_tokens,
    measure_capped,
    message_parts,
    plain_texts,
)

DEFAULT_CACHE_SIZE: Final = 65_536

TokenCounterFn = Callable[[Any], int]


class TokenCountError(ValueError):
    """A token counter raised, or returned something other than a non-negative int."""


def _unchanged_each(
    snaps: Iterable[Any], views: Iterable[Any], live: Iterable[Any], dicts: bool
) -> Iterator[bool]:
    """``unchanged`` of each snapshot and live message, by columns (``map``, C speed): a dict
    compared whole, else the message's ``fast_view`` (``views``: one per message, unused for
    dicts); stops at the shortest of ``snaps`` and ``live``."""
    return map(eq, snaps, live if dicts else map(apply_view, views, live))


def _lead(own: list[Any], live: list[Any]) -> int:
    """How many leading messages of ``live`` equal (``==``, identity first) those of ``own``, a
    memo's list, at the same places: all the two share when they differ at most in the last
    place they share (a list extending the memo's, a turn's new message in place of its last),
    else at least those that are the same objects. Equal messages that are other objects (a
    reloaded copy) replace ``own``'s, so that the next call finds them the same objects."""
    try:
        k = common_lead(own, live)
    except Exception:  # an == that raises: by identity
        k = 0
    if k:
        if own[k - 1] is not live[k - 1] or own[k // 2] is not live[k // 2]:
            own[:k] = live[:k]
        return k
    same = list(map(is_, live, own))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


def _heuristic_counts(read: Sequence[MessageInfo | None], gaps: bool) -> list[int]:
    """The heuristic count of each plain reading (junk where None: ``gaps``), by columns at C
    speed: ``MESSAGE_OVERHEAD + ceil(len(content) / 4)``, plus the name and the answered call
    id (tool calls are added by the caller)."""
    n = len(read)
    per = HEURISTIC_CHARS_PER_TOKEN
    # ceil(length / per) + overhead == (length + per - 1 + overhead * per) // per, for length >= 0
    if gaps:  # getattr with a default reads past the gaps (each filled in by the caller)
        lengths = map(len, map(getattr, read, repeat("content"), repeat("")))
    else:
        lengths = map(len, map(_info_content, cast("list[MessageInfo]", read)))
    counts = list(map(floordiv, map(add, lengths, repeat(per - 1 + MESSAGE_OVERHEAD * per)), repeat(per)))
    names = list(map(getattr, read, repeat("name"), repeat(None)))
    if names.count(None) != n:
        for i in compress(range(n), names):
            counts[i] += heuristic_text_tokens(cast("str", names[i]))
    results = list(map(getattr, read, repeat("result_ids"), repeat(())))
    answering = list(compress(range(n), results))
    answered = list(compress(results, results))
    if set(map(len, answered)) <= {1}:  # tool results answer one call each: measured by columns
        lengths = map(len, map(itemgetter(0), answered))
        tokens = map(floordiv, map(add, lengths, repeat(per - 1)), repeat(per))
        for i, extra in zip(answering, tokens, strict=True):
            counts[i] += extra
    else:
        for i, ids in zip(answering, answered, strict=True):
            counts[i] += sum(map(heuristic_text_tokens, ids))
    return counts


# A cache entry: (message, snapshot, info, count). The message is held so that its id() is not
# reused while cached; a tuple, because creating one is the cheapest thing per counted message
# and its columns read at C speed.
_Entry = tuple[Any, Any, MessageInfo, int]
_entry_snapshot: Final[Callable[[_Entry], Any]] = itemgetter(1)
_entry_info: Final[Callable[[_Entry], MessageInfo]] = itemgetter(2)
_entry_count: Final[Callable[[_Entry], int]] = itemgetter(3)
_info_id: Final[Callable[[MessageInfo], str | None]] = attrgetter("id")
_info_content: Final[Callable[[MessageInfo], Any]] = attrgetter("content")
_NO_KNOWN: Final[dict[str, _Entry]] = {}
# The snapshot of no entry: equal to nothing (``==`` answers by identity, at C speed)
_NOT_CACHED: Final = object()
_NO_ENTRY: Final[_Entry] = (None, _NOT_CACHED, MessageInfo("unknown", None, None, None), 0)
Found = tuple[list[int], list[MessageInfo], list[int]]


class _Memo(NamedTuple):
    """The columns of a recent call checked by columns, to check the same messages again without
    a lookup per message: ``snapshots[i]`` is the cached snapshot of ``messages[i]`` (or one equal
    to nothing when it was not cached), ``views[i]`` its ``fast_view`` (unused for dicts).
    Each snapshot was taken with its count and reading, so a message equal to its snapshot has
    that count whether its cache entry is still there or not; their messages are evicted last,
    and an eviction that must take some of them drops the memos remembered before it.
    ``uncached``: the indices whose snapshot is the one equal to nothing, ascending.

    A call that extends the memo's list takes its lists over and changes them in place (from its
    first new message on) instead of copying them, when it runs in the thread that made the memo
    (``owner``, a thread identifier): a caller of ``read_and_count_unchecked`` in another thread
    may still be reading the counts and readings it was handed, and one in this thread has
    finished (it made no call in between); ``lent``: the most leading entries of them that an
    earlier ``Unchecked`` may still compare with (``Unchecked.upto``), which no call changes."""

    dicts: bool
    messages: list[Any]
    views: list[Any]
    snapshots: list[Any]
    counts: list[int]
    infos: list[MessageInfo]
    uncached: list[int]
    lent: int
    owner: int


_NO_MEMO: Final = _Memo(False, [], [], [], [], [], [], 0, 0)
#: memos kept: the last calls of lists that start with different messages (two lists that
#: alternate, as a history reduced warm and its copy reloaded from a checkpoint)
_MEMOS: Final = 2
#: what ``_columns`` returns: counts, infos, missed, the views and snapshots of the call, how
#: many leading messages were taken from the memo unchecked, and the memo's message list and
#: ``lent`` when the call took its lists over (else None and that number)
Checked = tuple[
    list[int], list[MessageInfo], list[int], list[Any] | None, list[Any] | None, int, list[Any] | None, int
]


class Unchecked(NamedTuple):
    """The leading ``upto`` messages of a call whose counts and readings were taken from a
    remembered call of the same messages without a check, with what ``TokenCounter.confirm``
    compares them with: the snapshots (and, for models, the ``fast_view`` of each) of the whole
    call. The lists are the counter's own, shared with its memo: read them, never change them."""

    upto: int
    dicts: bool
    views: list[Any]
    snapshots: list[Any]


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
    neither the current call nor the remembered recent calls (below) passed go first, oldest
    inserted first (up to a sixteenth of ``cache_size`` more than needed, so that a full cache
    does not evict on every call), then the others, oldest inserted first, only as needed.

    The warm check runs by columns (``map`` over the list, no Python code per message) on lists
    of dicts and on lists of ``fast_view`` classes (LangChain messages: one C call reads a
    message's class, declared fields and extras); other lists are checked one message at a
    time. The columns of the last two such calls whose lists start with different messages are
    remembered (a history reduced warm and its copy reloaded from a checkpoint alternate): the
    leading messages of a list that starts with the same object as such a call and equal its
    messages at the same places (``==``, identity first, as the reducer compares its last
    output) take their snapshots, counts and readings from its columns instead of a lookup each
    (the snapshots are still compared). Their messages are evicted last, and an eviction that
    must take one of them forgets the calls remembered before it. Each remembered column pairs a
    snapshot with the count and reading taken with it (a message not cached gets a snapshot
    equal to nothing), so a message that passes the check has the right count, cached or not.

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
        self._memos: list[_Memo] = []  # the most recent first
        self._evictions = 0  # evictions so far: a new memo is kept when this is as expected
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
        counts, infos, _ = self._read_and_count(messages, trust=False)
        return counts, infos

    def read_and_count_unchecked(
        self, messages: Sequence[Any]
    ) -> tuple[list[int], list[MessageInfo], Unchecked | None]:
        """``read_and_count``, except that the leading messages equal (``==``, identity first) to
        those at the same places of a remembered call (``_Memo``: one of the last two lists
        counted) take that call's counts and readings without the check that they are
        unchanged. The third value says which (``Unchecked.upto``), or is None when every
        message was checked; the caller confirms those its decision read with ``confirm`` and,
        when one changed, calls ``read_and_count``, which checks them all (and recounts the
        changed ones). The counts and readings are lists the counter keeps: read them, never
        change them; they stay as they are until the next call of this counter in the same
        thread (a call in another thread never changes them)."""
        return self._read_and_count(messages, trust=True)

    def confirm(
        self, messages: Sequence[Any], unchecked: Unchecked, lo: int, extra: Sequence[int] = ()
    ) -> bool:
        """True when each of ``messages[lo:unchecked.upto]`` and of ``messages[i]`` for ``i`` in
        ``extra`` (each below ``upto``) still equals the snapshot its unchecked count was taken
        with (the check ``read_and_count`` makes of every message, by columns)."""
        hi, dicts, views, snaps = unchecked
        msgs = messages if type(messages) is list else list(messages)
        picks = [i for i in extra if i < lo]
        try:
            in_range = _unchanged_each(snaps[lo:hi], views[lo:hi], msgs[lo:hi], dicts)
            at_picks = _unchanged_each(
                map(snaps.__getitem__, picks),
                map(views.__getitem__, picks),
                map(msgs.__getitem__, picks),
                dicts,
            )
            return all(in_range) and all(at_picks)
        except Exception:  # a declared field gone, an == that raises: not confirmed
            return False

    def _read_and_count(
        self, messages: Sequence[Any], *, trust: bool
    ) -> tuple[list[int], list[MessageInfo], Unchecked | None]:
        """``read_and_count``; with ``trust``, ``read_and_count_unchecked``."""
        n = len(messages)
        if self.cache_size <= 0:
            counts, infos, _ = self._count_fresh(messages, by_id=False)
            return counts, infos, None
        unchecked: Unchecked | None = None
        with self._lock:
            by_dicts = bool(n) and type(messages[0]) is dict
            checked = self._columns(messages, by_dicts, trust=trust)
            if checked is None:
                counts, infos, missed = self._lookup_each(messages)
            else:
                counts, infos, missed, views, snaps, upto, own, lent = checked
                if upto and snaps is not None:
                    unchecked = Unchecked(upto, by_dicts, views or [], snaps)
            self.hits += n - len(missed)
            evictions = self._evictions
            if not missed:
                if checked is not None and snaps is not None:
                    self._remember(
                        messages, by_dicts, views, snaps, counts, infos, [], evictions, own, lent, trust
                    )
                return counts, infos, unchecked
        sub = messages if len(missed) == n else list(map(messages.__getitem__, missed))
        sub_all = sub
        sub_counts, sub_infos, cheap = self._count_fresh(sub, by_id=True)
        if len(missed) == n:
            counts, infos = sub_counts, sub_infos
        else:
            for i, count, info in zip(missed, sub_counts, sub_infos, strict=True):
                counts[i] = count
                infos[i] = info
        keys = list(map(id, sub))
        admit: Sequence[int] = range(len(sub))
        if cheap:
            # counted by columns: cached only when seen before (an id may be reused by a new
            # object: then a message is cached early, which costs time, never a wrong count)
            seen = self._seen
            mask = list(map(seen.__contains__, keys)) if seen else [False] * len(keys)
            if len(cheap) == len(sub):
                new_keys: Any = keys
            else:
                new_keys = map(keys.__getitem__, cheap)
                for j in set(admit).difference(cheap):  # counted one by one: cached at once
                    mask[j] = True
            admit = list(compress(admit, mask))
            if len(seen) > self.cache_size:
                seen.clear()
            seen.update(new_keys)
        if admit:
            if len(admit) != len(sub):
                sub = list(map(sub.__getitem__, admit))
                keys = list(map(keys.__getitem__, admit))
                sub_infos = list(map(sub_infos.__getitem__, admit))
                sub_counts = list(map(sub_counts.__getitem__, admit))
            evictions += self._admit(sub, keys, sub_infos, sub_counts, messages)
        with self._lock:
            self.misses += len(missed)
            if checked is not None and (admit or snaps is not None):
                # the snapshots of the messages cached now (of the others: one equal to nothing,
                # so that they are looked up again, even when an entry of an older state of the
                # message is still cached); an entry found by the id of a message passed is that
                # message's own. (Nothing cached into an empty cache: no memo.)
                cache = self._cache
                found: list[Any] = [_NOT_CACHED] * len(sub_all)
                if admit:
                    cached_now = map(_entry_snapshot, map(cache.get, keys, repeat(_NO_ENTRY)))
                    deque(map(found.__setitem__, admit, cached_now), maxlen=0)
                if snaps is None:
                    snaps = list(found)
                else:
                    for i, snap in zip(missed, found, strict=True):
                        snaps[i] = snap
                    if views:  # a missed message may have changed class: its view as snapshot now
                        for i in missed:
                            views[i] = fast_view(type(messages[i]))
                if views and None in map(views.__getitem__, missed):  # now of a class read otherwise
                    self._memos = []  # (a confirmation that reaches it finds no view: it fails)
                else:
                    # a message passed has a snapshot: only a missed one may have none
                    uncached = [i for i in missed if snaps[i] is _NOT_CACHED]
                    self._remember(
                        messages, by_dicts, views, snaps, counts, infos, uncached, evictions, own, lent, trust
                    )
        return counts, infos, unchecked

    def _remember(
        self,
        messages: Sequence[Any],
        dicts: bool,
        views: list[Any] | None,
        snaps: list[Any],
        counts: list[int],
        infos: list[MessageInfo],
        uncached: list[int],
        evictions: int,
        own: list[Any] | None,
        lent: int,
        shared: bool,
    ) -> None:
        """Keep this call's columns for the next calls (``_Memo``), in place of the memo of a
        list that starts with the same message, when all of it can be cached and no entry left
        the cache since the check but by this call's own admission (which evicts no message of
        the call when the call fits); ``evictions``: the count that leaves. ``own``: the list of
        ``messages`` taken over from the last memo, else None (the memo copies ``messages``);
        ``lent``: see ``_Memo``. The caller owns ``counts`` and ``infos``, so the memo keeps
        copies, but when ``shared`` (``read_and_count_unchecked``: they are read, never
        changed). Under the lock."""
        if not messages or len(messages) > self.cache_size or self._evictions != evictions:
            return  # some of its entries may be out of the cache
        if views is None:  # not read (the cache was empty): the shapes are not checked yet
            if dicts:
                if set(map(type, messages)) != {dict}:
                    return
                views = []
            else:
                views = fast_views(messages)
                if views is None:
                    return
        first = messages[0]
        others = [m for m in self._memos if m.messages[0] is not first]
        if not shared:
            counts, infos = counts.copy(), infos.copy()
        kept = own if own is not None else list(messages)
        memo = _Memo(dicts, kept, views, snaps, counts, infos, uncached, lent, threading.get_ident())
        self._memos = [memo, *others][:_MEMOS]

    def _count_fresh(
        self, messages: Sequence[Any], *, by_id: bool
    ) -> tuple[list[int], list[MessageInfo], list[int]]:
        """``(counts, infos, cheap)`` of messages counted now: read by ``read_plain`` where it
        can, else one by one. ``cheap``: the indices counted by columns (the heuristic's plain
        messages and tool calls). With ``by_id``, a message equal to a cached one with its id
        (a copy reloaded from a checkpoint) takes that count instead of being measured."""
        n = len(messages)
        by_length = self.measure is heuristic_text_tokens
        read, calls = read_plain(messages, with_calls=by_length)
        infos = cast("list[MessageInfo]", read)
        cheap: list[int] = []
        if by_length:
            todo: Sequence[int] = list(compress(range(n), map(is_, read, repeat(None))))
            counts = _heuristic_counts(read, bool(todo))
            per = HEURISTIC_CHARS_PER_TOKEN
            for i, payloads in calls.items():
                for call_id, name, args in payloads:  # heuristic_text_tokens of each, inlined
                    counts[i] += (
                        (len(call_id) + per - 1) // per
                        + (len(name) + per - 1) // per
                        + (len(args) + per - 1) // per
                    )
            if len(todo) != n:
                cheap = list(compress(range(n), map(is_not, read, repeat(None)))) if todo else list(range(n))
        else:
            counts = [0] * n
            todo = range(n)
        known_ids = self._by_msg_id if by_id else _NO_KNOWN
        for i in todo:
            msg = messages[i]
            info = read[i]
            plain = info is not None
            if info is None:
                info = infos[i] = read_message(msg)
            known = known_ids.get(info.id) if known_ids and info.id is not None else None
            if known is not None and unchanged(known[1], msg):
                counts[i] = known[3]  # an equal copy of a counted message, e.g. reloaded from a checkpoint
            elif plain:
                counts[i] = self._count_plain(info)
            else:
                counts[i] = self.count_uncached(msg, info)
        return counts, infos, cheap

    def _count_plain(self, info: MessageInfo) -> int:
        """``count_uncached`` of a message ``read_plain`` read without calls: its reading says all."""
        return MESSAGE_OVERHEAD + self._measure_all(plain_texts(info))

    def _admit(
        self,
        messages: Sequence[Any],
        keys: list[int],
        infos: list[MessageInfo],
        counts: list[int],
        current: Sequence[Any],
    ) -> int:
        """Cache ``messages`` (found by ``keys``, their ids) with their readings and counts;
        ``current``: every message of the call, kept over older entries when the cache is full.
        Returns 1 when it evicted entries, else 0."""
        entries: list[_Entry] = list(zip(messages, snapshots(messages), infos, counts, strict=True))
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
            if excess > 0:  # kept first: the messages of this call and of the memos
                keep = set(map(id, current))
                for memo in self._memos:
                    keep.update(map(id, memo.messages))
                # a sixteenth of the room freed at once (of the entries not kept first), so that a
                # full cache builds ``keep`` once per that many admissions, not on every call
                room = excess + self.cache_size // 16
                victims = list(islice(filterfalse(keep.__contains__, cache), room))
                if len(victims) < excess:  # the messages kept first alone overfill the cache
                    victims += islice(filter(keep.__contains__, cache), excess - len(victims))
                    self._memos = []
                self._evictions += 1
                for key in victims:
                    old = cache.pop(key)
                    msg_id = _entry_info(old).id
                    if msg_id is not None and by_msg_id.get(msg_id) is old:
                        del by_msg_id[msg_id]
                return 1
        return 0

    def _columns(self, messages: Sequence[Any], dicts: bool, *, trust: bool = False) -> Checked | None:
        """The warm check by columns (``map`` over the list, no Python code per message), when
        every message is an exact dict (``dicts``) or every one an instance of a ``fast_view``
        class (LangChain messages); else None.

        Each cached snapshot is compared with ``==`` (at C speed, identity first) with the live
        message: a dict whole, a model's ``fast_view`` (class, declared fields, extras: one C
        call). The snapshots come from the entries found by ``id()``, except for the leading
        messages equal to those of a remembered call at the same places (``_Memo``, ``_lead``):
        those are taken from its columns, without a lookup. A message whose check fails is
        looked up again (its entry may be newer than the memo) and checked on its own.

        With ``trust``, the leading messages taken from the memo are not compared (but those the
        memo has no snapshot of): the last value says how many lead (0 without ``trust``).

        Returns the counts and readings (placeholders where missed), the missed indices, the
        views and snapshots compared (for the next memo), and that number. Under the lock.
        """
        n = len(messages)
        cache = self._cache
        if not cache:  # nothing to check (the shapes are checked when remembered)
            return [0] * n, cast("list[MessageInfo]", [None] * n), list(range(n)), None, None, 0, None, 0
        msgs = messages if type(messages) is list else list(messages)
        memo = _NO_MEMO
        for recent in self._memos:
            if recent.dicts is dicts and n and recent.messages[0] is msgs[0]:
                memo = recent
        k = _lead(memo.messages, msgs) if memo.messages else 0
        tail = msgs[k:] if k else msgs
        if dicts:
            if tail and set(map(type, tail)) != {dict}:
                return None
            tail_views: list[Any] | None = []
        else:
            tail_views = fast_views(tail)
        if tail_views is None:
            return None
        entries = list(map(cache.get, map(id, tail), repeat(_NO_ENTRY)))
        tail_snaps = list(map(_entry_snapshot, entries))
        try:
            if trust and k:
                # unchecked: the memo's messages with a snapshot (confirm() checks them later)
                same = [True] * k
                for i in memo.uncached[: bisect_left(memo.uncached, k)]:
                    same[i] = False
            else:
                same = list(_unchanged_each(memo.snapshots, memo.views, msgs[:k], dicts)) if k else []
            same += _unchanged_each(tail_snaps, tail_views, tail, dicts)
        except Exception:  # a declared field missing, an == that raises: check one by one
            return None
        # a list that extends the memo's takes its lists over, when no caller may still compare
        # with what changes: the entries from k on, and those of the memo's messages without a
        # snapshot (set below when found cached now)
        lent = memo.lent
        own: list[Any] | None = None
        if (
            trust
            and k
            and k >= lent
            and (not memo.uncached or memo.uncached[0] >= lent)
            and memo.owner == threading.get_ident()
        ):
            self._memos = [m for m in self._memos if m is not memo]
            own, views, snaps, counts, infos = (
                memo.messages,
                memo.views,
                memo.snapshots,
                memo.counts,
                memo.infos,
            )
            for column in (own, views, snaps, counts, infos):
                del column[k:]
            own += tail
            lent = k
        else:
            views = memo.views[:k] if k else []
            snaps = memo.snapshots[:k] if k else []
            counts = memo.counts[:k] if k else []
            infos = memo.infos[:k] if k else []
            lent = k if trust else 0
        if not dicts:
            views += tail_views
        snaps += tail_snaps
        counts += map(_entry_count, entries)
        infos += map(_entry_info, entries)
        upto = k if trust else 0
        try:
            first = same.index(False, upto)  # (before upto: only where the memo has no snapshot)
        except ValueError:
            first = n
        if upto and memo.uncached and memo.uncached[0] < upto:
            first = memo.uncached[0]
        if first == n:
            return counts, infos, [], views, snaps, upto, own, lent
        missed = list(compress(range(first, n), map(not_, same[first:])))
        again = missed[: bisect_left(missed, k)]  # checked against the memo: the cache may be newer
        if again:
            found = list(map(cache.get, map(id, map(msgs.__getitem__, again)), repeat(_NO_ENTRY)))
            newer = map(is_not, map(_entry_snapshot, found), map(snaps.__getitem__, again))
            hits = set()
            for i, entry in compress(zip(again, found, strict=True), newer):
                if unchanged(entry[1], msgs[i]):
                    counts[i], infos[i], snaps[i] = entry[3], entry[2], entry[1]
                    hits.add(i)
                    if not dicts:  # the snapshot was taken with the view of the class it has now
                        views[i] = fast_view(type(msgs[i]))
                        if views[i] is None:
                            return None
            if hits:
                missed = [i for i in missed if i not in hits]
        return counts, infos, missed, views, snaps, upto, own, lent

    def _lookup(self, messages: Sequence[Any]) -> Found | None:
        """``_columns`` of a list of ``fast_view`` instances (LangChain messages); None for any
        other list, dicts included."""
        checked = self._columns(messages, False)
        return None if checked is None else checked[:3]

    def _lookup_each(self, messages: Sequence[Any]) -> Found:
        """The warm check one message at a time, for mixed lists and unusual message classes."""
        n = len(messages)
        counts = [0] * n
        infos: list[MessageInfo] = [None] * n  # type: ignore[list-item]
        missed: list[int] = []
        cache = self._cache
        for i, msg in enumerate(messages):
            entry = cache.get(id(msg))
            if entry is not None and unchanged(entry[1], msg):
                infos[i] = entry[2]
                counts[i] = entry[3]
            else:
                missed.append(i)
        return counts, infos, missed

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._by_msg_id.clear()
            self._seen.clear()
            self._memos = []

    def cache_len(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, cache_size={self.cache_size})"


def count_messages(counter: TokenCounterFn, messages: Sequence[Any]) -> list[int]:
    """The token count of each message with any counter: the reducer's one counting path.

    A ``TokenCounter`` answers from its cache. Any other callable is called once per message and
    its result checked: an exception, or a result that is not a non-negative int, raises
    ``TokenCountError`` naming the message index.
    """
    if isinstance(counter, TokenCounter):
        return counter.count_messages(messages)
    counts: list[int] = []
    for i, msg in enumerate(messages):
        try:
            n = counter(msg)
        except Exception as exc:
            raise TokenCountError(
                f"token_counter raised {type(exc).__name__} for message {i} ({_describe(msg)}): {exc}; "
                "fix the counter so that it returns an int for every message"
            ) from exc
        if not (type(n) is int or (isinstance(n, int) and not isinstance(n, bool))) or n < 0:
            raise TokenCountError(
                f"token_counter returned {n!r} ({type(n).__name__}) for message {i} ({_describe(msg)}); "
                "it must return a non-negative int"
            )
        counts.append(n)
    return counts


def read_and_count(
    counter: TokenCounterFn, messages: Sequence[Any]
) -> tuple[list[int], list[MessageInfo] | None]:
    """``count_messages``, plus each message's reading when the counter has it (a
    ``TokenCounter``), else None: a user callable never makes the reducer read twice either."""
    if isinstance(counter, TokenCounter):
        return counter.read_and_count(messages)
    return count_messages(counter, messages), None


def read_and_count_unchecked(
    counter: TokenCounterFn, messages: Sequence[Any]
) -> tuple[list[int], list[MessageInfo] | None, Unchecked | None]:
    """``read_and_count``, with a ``TokenCounter``'s ``read_and_count_unchecked``: the counts of
    the leading messages of its last call may come unchecked (third value; confirm them with
    ``counter.confirm``). Any other counter counts every message: None."""
    if isinstance(counter, TokenCounter):
        return counter.read_and_count_unchecked(messages)
    return count_messages(counter, messages), None, None


def _describe(msg: Any) -> str:
    info = read_message(msg)
    ident = f", id {info.id!r}" if info.id is not None else ""
    return f"{type(msg).__name__}, role {info.role!r}{ident}"


def heuristic_counter(
    *, cache_size: int = DEFAULT_CACHE_SIZE, image_tokens: int = IMAGE_TOKENS
) -> TokenCounter:
    """The dependency-free counter: ``ceil(len(text) / 4)`` per text piece, same rules otherwise."""
    return TokenCounter(
        heuristic_text_tokens, name="heuristic", cache_size=cache_size, image_tokens=image_tokens
    )
