"""The counter's warm check by columns: ``TokenCounter`` (``tokens.cache``, the reference, one
message at a time) answers through these functions when the column path is on.

A warm check maps over the whole list at C speed: a dict compared whole with its snapshot, a
LangChain message's ``fast_view`` (class, declared fields, extras: one C call) compared with its
snapshot. The columns of a list the reducer remembers (``CountColumns``, in its memo) let a list
that starts with the same messages take their snapshots, counts and readings without a lookup
each. Every function equals
the reference on every input (tests/test_tokens*.py compare them); where it cannot answer (a
mixed list, an unusual class, an ``==`` that raises) it falls back to the reference.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, repeat
from operator import add, attrgetter, eq, floordiv, is_, is_not, itemgetter, not_
from typing import Any, Final, NamedTuple, cast

from agentstate_reducer._columns.bulk import fast_views, read_plain
from agentstate_reducer.messages import MessageInfo, read_message, unchanged
from agentstate_reducer.messages.fields import apply_view, fast_view
from agentstate_reducer.tokens.cache import (
    _NO_ENTRY,
    _NO_KNOWN,
    _NOT_CACHED,
    Found,
    TokenCounter,
    Unchecked,
    _entry_count,
    _entry_info,
    _entry_snapshot,
)
from agentstate_reducer.tokens.rules import (
    HEURISTIC_CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD,
    heuristic_text_tokens,
    plain_texts,
)


def _unchanged_each(
    snaps: Iterable[Any], views: Iterable[Any], live: Iterable[Any], dicts: bool
) -> Iterator[bool]:
    """``unchanged`` of each snapshot and live message, by columns (``map``, C speed): a dict
    compared whole, else the message's ``fast_view`` (``views``: one per message, unused for
    dicts); stops at the shortest of ``snaps`` and ``live``."""
    return map(eq, snaps, live if dicts else map(apply_view, views, live))


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


_info_content: Final = attrgetter("content")


class CountColumns(NamedTuple):
    """The counter's columns of a list checked by columns (``memo.Remembered.counts``), to check
    the same messages again without a lookup each: ``snapshots[i]`` is the snapshot
    ``counts[i]`` and ``infos[i]`` were taken with (one equal to nothing when the message was
    not cached: ``uncached``, ascending), ``views[i]`` the message's ``fast_view`` (unused for
    dicts). A message equal to its snapshot has that count, whether its cache entry is still
    there or not. Never changed once made (``memo``'s assumption 2)."""

    dicts: bool
    views: list[Any]
    snapshots: list[Any]
    counts: list[int]
    infos: list[MessageInfo]
    uncached: list[int]


class Counted(NamedTuple):
    """What ``count`` returns: each message's count and reading, which leading ones were not
    checked (None: every one was), and the columns for the memo (None: not rememberable)."""

    counts: list[int]
    infos: list[MessageInfo]
    unchecked: Unchecked | None
    columns: CountColumns | None


class _Checked(NamedTuple):
    """The warm check's outcome (``_check``): counts and readings (placeholders where missed),
    the missed indices, the views and snapshots compared (None: the cache was empty), and how
    many leading messages were taken from the memo unchecked."""

    counts: list[int]
    infos: list[MessageInfo]
    missed: list[int]
    views: list[Any] | None
    snapshots: list[Any] | None
    upto: int


def confirm(
    counter: TokenCounter, messages: Sequence[Any], unchecked: Unchecked, lo: int, extra: Sequence[int] = ()
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


def read_and_count(counter: TokenCounter, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo]]:
    """``TokenCounter.read_and_count`` by columns (no memo: every message is checked)."""
    counts, infos, _, _ = count(counter, messages)
    return counts, infos


def count(
    counter: TokenCounter, messages: Sequence[Any], prior: CountColumns | None = None, shared: int = 0
) -> Counted:
    """Each message's count and reading, by columns where the list allows. ``prior``: the
    columns of a remembered list whose first ``shared`` messages are these (``memo.recall``):
    their counts come unchecked (``Counted.unchecked``; confirm those a decision reads with
    ``confirm``). The lists returned are new, never changed later: the memo may keep them."""
    n = len(messages)
    if counter.cache_size <= 0:
        counts, infos, _ = _count_fresh(counter, messages, by_id=False)
        return Counted(counts, infos, None, None)
    unchecked: Unchecked | None = None
    views: list[Any] | None = None
    snaps: list[Any] | None = None
    by_dicts = bool(n) and type(messages[0]) is dict
    if prior is None or prior.dicts is not by_dicts:
        prior, shared = None, 0
    with counter._lock:
        checked = _check(counter, messages, by_dicts, prior, shared)
        if checked is None:
            counts, infos, missed = counter._lookup_each(messages)
        else:
            counts, infos, missed, views, snaps, upto = checked
            if upto and snaps is not None:
                unchecked = Unchecked(upto, by_dicts, views or [], snaps)
        counter.hits += n - len(missed)
        if not missed:
            columns = None
            if checked is not None and snaps is not None:
                columns = _columns_of(messages, by_dicts, views, snaps, counts, infos, [])
            return Counted(counts, infos, unchecked, columns)
    sub = messages if len(missed) == n else list(map(messages.__getitem__, missed))
    sub_all = sub
    sub_counts, sub_infos, cheap = _count_fresh(counter, sub, by_id=True)
    if len(missed) == n:
        counts, infos = sub_counts, sub_infos
    else:
        for i, tokens, info in zip(missed, sub_counts, sub_infos, strict=True):
            counts[i] = tokens
            infos[i] = info
    keys = list(map(id, sub))
    admit: Sequence[int] = range(len(sub))
    if cheap:
        # counted by columns: cached only when seen before (an id may be reused by a new
        # object: then a message is cached early, which costs time, never a wrong count)
        seen = counter._seen
        mask = list(map(seen.__contains__, keys)) if seen else [False] * len(keys)
        if len(cheap) == len(sub):
            new_keys: Any = keys
        else:
            new_keys = map(keys.__getitem__, cheap)
            for j in set(admit).difference(cheap):  # counted one by one: cached at once
                mask[j] = True
        admit = list(compress(admit, mask))
        if len(seen) > counter.seen_size:
            seen.clear()
        seen.update(new_keys)
    if admit:
        if len(admit) != len(sub):
            sub = list(map(sub.__getitem__, admit))
            keys = list(map(keys.__getitem__, admit))
            sub_infos = list(map(sub_infos.__getitem__, admit))
            sub_counts = list(map(sub_counts.__getitem__, admit))
        counter._admit(sub, keys, sub_infos, sub_counts, messages)
    columns = None
    with counter._lock:
        counter.misses += len(missed)
        if checked is not None and (admit or snaps is not None):
            # the snapshots of the messages cached now (of the others: one equal to nothing,
            # so that they are looked up again, even when an entry of an older state of the
            # message is still cached); an entry found by the id of a message passed is that
            # message's own. (Nothing cached into an empty cache: no memo.)
            cache = counter._cache
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
            if not (views and None in map(views.__getitem__, missed)):  # else: a class read otherwise
                # a message passed has a snapshot: only a missed one may have none
                uncached = [i for i in missed if snaps[i] is _NOT_CACHED]
                columns = _columns_of(messages, by_dicts, views, snaps, counts, infos, uncached)
    return Counted(counts, infos, unchecked, columns)


def _columns_of(
    messages: Sequence[Any],
    dicts: bool,
    views: list[Any] | None,
    snaps: list[Any],
    counts: list[int],
    infos: list[MessageInfo],
    uncached: list[int],
) -> CountColumns | None:
    """This call's columns for the memo, or None when its list is not one the check by columns
    reads (``views`` None: the cache was empty, the shapes are not checked yet)."""
    if not messages:
        return None
    if views is None:
        if dicts:
            if set(map(type, messages)) != {dict}:
                return None
            views = []
        else:
            views = fast_views(messages)
            if views is None:
                return None
    return CountColumns(dicts, views, snaps, counts, infos, uncached)


def _count_fresh(
    counter: TokenCounter, messages: Sequence[Any], *, by_id: bool
) -> tuple[list[int], list[MessageInfo], list[int]]:
    """``(counts, infos, cheap)`` of messages counted now: read by ``read_plain`` where it
    can, else one by one. ``cheap``: the indices counted by columns (the heuristic's plain
    messages and tool calls). With ``by_id``, a message equal to a cached one with its id
    (a copy reloaded from a checkpoint) takes that count instead of being measured."""
    n = len(messages)
    by_length = counter.measure is heuristic_text_tokens
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
    known_ids = counter._by_msg_id if by_id else _NO_KNOWN
    for i in todo:
        msg = messages[i]
        info = read[i]
        plain = info is not None
        if info is None:
            info = infos[i] = read_message(msg)
        known = known_ids.get(info.id) if known_ids and info.id is not None else None
        if known is not None and unchanged(_entry_snapshot(known), msg):
            counts[i] = _entry_count(known)  # an equal copy of a counted message (reloaded)
        elif plain:
            counts[i] = _count_plain(counter, info)
        else:
            counts[i] = counter.count_uncached(msg, info)
    return counts, infos, cheap


def _count_plain(counter: TokenCounter, info: MessageInfo) -> int:
    """``count_uncached`` of a message ``read_plain`` read without calls: its reading says all."""
    return MESSAGE_OVERHEAD + counter._measure_all(plain_texts(info))


def _check(
    counter: TokenCounter, messages: Sequence[Any], dicts: bool, prior: CountColumns | None, k: int
) -> _Checked | None:
    """The warm check by columns (``map`` over the list, no Python code per message), when
    every message is an exact dict (``dicts``) or every one an instance of a ``fast_view``
    class (LangChain messages); else None.

    Each cached snapshot is compared with ``==`` (at C speed, identity first) with the live
    message: a dict whole, a model's ``fast_view`` (class, declared fields, extras: one C
    call). The snapshots come from the entries found by ``id()``, except for the first ``k``
    messages, those of the remembered list ``prior`` (``memo.recall``): their counts and
    readings are taken from its columns without a lookup or a comparison (but those it has no
    snapshot of), and ``upto`` says how many (``confirm`` checks those a decision reads). A
    message whose check fails is looked up again and checked on its own. Under the lock.
    """
    n = len(messages)
    cache = counter._cache
    if not cache:  # nothing to check (the shapes are checked when remembered)
        return _Checked([0] * n, cast("list[MessageInfo]", [None] * n), list(range(n)), None, None, 0)
    msgs = messages if type(messages) is list else list(messages)
    if prior is None:
        k = 0
    tail = msgs[k:] if k else msgs
    if dicts:
        if tail and set(map(type, tail)) != {dict}:
            return None
        tail_views: list[Any] | None = []
    else:
        tail_views = fast_views(tail)
    if tail_views is None:
        return None
    tail_keys = list(map(id, tail))
    entries = list(map(cache.get, tail_keys, repeat(_NO_ENTRY)))
    tail_snaps = list(map(_entry_snapshot, entries))
    uncached = prior.uncached if prior is not None else []
    try:
        # unchecked: the memo's messages with a snapshot (confirm() checks them later)
        same = [True] * k
        for i in uncached[: bisect_left(uncached, k)]:
            same[i] = False
        same += _unchanged_each(tail_snaps, tail_views, tail, dicts)
    except Exception:  # a declared field missing, an == that raises: check one by one
        return None
    counter.touch(compress(tail_keys, same[k:]))  # a message equal to its snapshot: a hit
    if prior is not None and k:  # new lists: a record is never changed
        views, snaps, counts, infos = (
            prior.views[:k],
            prior.snapshots[:k],
            prior.counts[:k],
            prior.infos[:k],
        )
    else:
        views, snaps, counts, infos = [], [], [], []
    if not dicts:
        views += tail_views
    snaps += tail_snaps
    counts += map(_entry_count, entries)
    infos += map(_entry_info, entries)
    upto = k
    try:
        first = same.index(False, upto)  # (before upto: only where the memo has no snapshot)
    except ValueError:
        first = n
    if upto and uncached and uncached[0] < upto:
        first = uncached[0]
    if first == n:
        return _Checked(counts, infos, [], views, snaps, upto)
    missed = list(compress(range(first, n), map(not_, same[first:])))
    again = missed[: bisect_left(missed, k)]  # checked against the memo: the cache may be newer
    if again:
        found = list(map(cache.get, map(id, map(msgs.__getitem__, again)), repeat(_NO_ENTRY)))
        newer = map(is_not, map(_entry_snapshot, found), map(snaps.__getitem__, again))
        hits = set()
        for i, entry in compress(zip(again, found, strict=True), newer):
            if unchanged(_entry_snapshot(entry), msgs[i]):
                counts[i], infos[i] = _entry_count(entry), _entry_info(entry)
                snaps[i] = _entry_snapshot(entry)
                hits.add(i)
                if not dicts:  # the snapshot was taken with the view of the class it has now
                    views[i] = fast_view(type(msgs[i]))
                    if views[i] is None:
                        return None
        if hits:
            missed = [i for i in missed if i not in hits]
    return _Checked(counts, infos, missed, views, snaps, upto)


def lookup(counter: TokenCounter, messages: Sequence[Any]) -> Found | None:
    """The warm check (``_check``) of a list of ``fast_view`` instances (LangChain messages),
    without a memo; None for any other list, dicts included."""
    checked = _check(counter, messages, False, None, 0)
    return None if checked is None else (checked.counts, checked.infos, checked.missed)


class ColumnPath:
    """``tokens.cache.WarmPath`` by the functions of this module."""

    def read_and_count(
        self, counter: TokenCounter, messages: Sequence[Any]
    ) -> tuple[list[int], list[MessageInfo]]:
        return read_and_count(counter, messages)

    def confirm(
        self,
        counter: TokenCounter,
        messages: Sequence[Any],
        unchecked: Unchecked,
        lo: int,
        extra: Sequence[int],
    ) -> bool:
        return confirm(counter, messages, unchecked, lo, extra)
