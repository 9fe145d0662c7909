"""The planner's columns: each message's kind, the calls it makes, the calls it answers, and
whether it leads, read by columns over a window of the list.

``read_structure(messages, lo)`` equals ``[read_message(m) for m in messages[lo:]]`` in those four
fields (tests/test_structure.py checks it with hypothesis). Where an object's ``type`` names its
kind (LangChain messages) or an exact dict names its role, and the fields that decide
the rest are plain (text content, tool calls as dicts with string ids, a string
``tool_call_id``), the fields are read with one ``map`` per column; every other message is read
with ``read_message``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate, chain, compress, count, islice, repeat, takewhile
from operator import attrgetter, eq, is_, is_not
from typing import Any, Final, NamedTuple

from agentstate_reducer._columns.bulk import ObjectColumns, dict_kinds, object_kinds
from agentstate_reducer.messages.read import Kind, MessageInfo, read_message

_NO_CALLS: Final = frozenset({list, type(None)})
_TEXT: Final = frozenset({str, type(None)})


class Structure(NamedTuple):
    """The columns of ``messages[lo:]``: ``kinds[i - lo]`` is message ``i``'s kind; ``calls``
    maps each AI message making tool calls to their ids, ``results`` each tool message to the
    ids it answers (maybe none), ``leads`` each leading message to its ``MessageInfo.leads``;
    the three maps in ascending index order, never changed once built (a window may share
    them)."""

    lo: int
    kinds: list[Kind]
    calls: dict[int, tuple[str, ...]]
    results: dict[int, tuple[str, ...]]
    leads: dict[int, int]
    #: one letter per message: ``h`` human, ``a`` AI without calls, ``c`` AI with calls, ``t``
    #: tool result, ``p`` a pinned kind (system, unknown, remove)
    text: str


#: the letter of each kind in ``Structure.text`` (an AI message with calls is ``c``)
LETTERS: Final = {"human": "h", "ai": "a", "tool": "t", "system": "p", "unknown": "p", "remove": "p"}


def _text(lo: int, kinds: list[Kind], calls: dict[int, tuple[str, ...]]) -> str:
    letters = list(map(LETTERS.__getitem__, kinds))
    for i in calls:
        letters[i - lo] = "c"
    return "".join(letters)


def structure_of_infos(infos: Sequence[MessageInfo], lo: int = 0, hi: int | None = None) -> Structure:
    """The ``Structure`` of ``infos[lo:hi]``, readings made already (the token counter's)."""
    window = infos[lo:hi]
    kinds: list[Kind] = list(map(attrgetter("kind"), window))
    m = len(kinds)
    calls: dict[int, tuple[str, ...]] = {}
    results: dict[int, tuple[str, ...]] = {}
    leads: dict[int, int] = {}
    if "ai" in kinds:
        ai = [lo + j for j in compress(range(m), map(eq, kinds, repeat("ai")))]
        ids = list(map(attrgetter("call_ids"), map(infos.__getitem__, ai)))
        calls = dict(zip(compress(ai, ids), compress(ids, ids), strict=True))
    if "tool" in kinds:
        tool = [lo + j for j in compress(range(m), map(eq, kinds, repeat("tool")))]
        results = dict(zip(tool, map(attrgetter("result_ids"), map(infos.__getitem__, tool)), strict=True))
    flags = list(map(attrgetter("leads"), window))
    if any(flags):
        leads = {lo + j: flags[j] for j in compress(range(m), flags)}
    return Structure(lo, kinds, calls, results, leads, _text(lo, kinds, calls))


def read_structure(
    messages: Sequence[Any], lo: int = 0, hi: int | None = None, columns: ObjectColumns | None = None
) -> Structure:
    """The ``Structure`` of ``messages[lo:hi]`` (to the end by default); ``columns``: the types
    and contents of the whole list, read already (``bulk.object_columns``)."""
    window = messages[lo:hi]
    if type(window) is not list:
        window = list(window)
    m = len(window)
    contents = None
    if columns is not None:
        dicts = False
        contents = columns.contents[lo : lo + m]
    else:
        dicts = set(map(type, window)) == {dict}
    try:
        if columns is not None:
            kinds = object_kinds(window, columns.types[lo : lo + m])
        else:
            kinds = dict_kinds(window) if dicts else object_kinds(window)
    except TypeError:  # an unhashable role: read one by one
        kinds = [None] * m
    # indices are the list's (``lo`` on), so the maps need no shifting
    todo = list(compress(range(lo, lo + m), map(is_, kinds, repeat(None)))) if None in kinds else []
    calls: dict[int, tuple[str, ...]] = {}
    results: dict[int, tuple[str, ...]] = {}
    leads: dict[int, int] = {}
    try:
        if contents is not None:
            _object_fields(window, lo, kinds, contents, todo, calls, results)
        else:
            _fields(window, lo, kinds, todo, calls, results, _dict_column if dicts else _attr_column)
    except Exception:  # a hostile field: every message read one by one
        todo, calls, results = list(range(lo, lo + m)), {}, {}
    for i in set(todo):
        calls.pop(i, None)  # what the columns read of it before it was found not plain
        results.pop(i, None)
        info = read_message(window[i - lo])
        kinds[i - lo] = info.kind
        if info.kind == "ai" and info.call_ids:
            calls[i] = info.call_ids
        elif info.kind == "tool":
            results[i] = info.result_ids
        if info.leads:
            leads[i] = info.leads
    if todo:  # back in index order
        calls = dict(sorted(calls.items()))
        results = dict(sorted(results.items()))
        leads = dict(sorted(leads.items()))
    done: list[Kind] = kinds  # type: ignore[assignment]  # every None was read above
    return Structure(lo, done, calls, results, leads, _text(lo, done, calls))


def _plain_calls(
    where: list[int], contents: list[Any], tool_calls: list[Any], extras: list[Any], todo: list[int]
) -> dict[int, tuple[str, ...]]:
    """The call ids of AI messages at ``where`` whose content is text (or None), whose tool calls
    are a list of dicts with distinct str ids and whose extras hold no calls; every
    other one joins ``todo``."""
    if not set(map(type, contents)) <= _TEXT:
        todo += [j for j, c in zip(where, contents, strict=True) if type(c) not in _TEXT]
    plain_lists = set(map(type, tool_calls)) <= _NO_CALLS
    if not plain_lists:
        todo += [j for j, c in zip(where, tool_calls, strict=True) if type(c) not in _NO_CALLS]
    # a falsy extra holds no calls (``read.tool_call_ids`` skips it): only truthy ones are looked into
    if any(extras) and (set(map(type, extras)) != {dict} or any(map(dict.get, extras, repeat("tool_calls")))):
        odd = [e and (type(e) is not dict or e.get("tool_calls")) for e in extras]
        todo += compress(where, odd)
    callers = list(compress(where, tool_calls))
    made = list(compress(tool_calls, tool_calls))
    if not made:
        return {}
    if plain_lists:  # every truthy one is a list
        flat = list(chain.from_iterable(made))
        if set(map(type, flat)) == {dict}:
            ids: list[Any] = list(map(dict.get, flat, repeat("id")))
            if set(map(type, ids)) == {str}:
                sizes = list(map(len, made))
                grouped = _grouped(ids, sizes)
                # distinct ids in each message: ids distinct across the window say it at once
                if len(set(ids)) == len(ids) or list(map(len, map(set, grouped))) == sizes:
                    return dict(zip(callers, grouped, strict=True))
    # some message's calls are not plain: find which, one message at a time
    calls: dict[int, tuple[str, ...]] = {}
    for j, one in zip(callers, made, strict=True):
        if type(one) is not list or set(map(type, one)) != {dict}:
            todo.append(j)
            continue
        got: tuple[Any, ...] = tuple(map(dict.get, one, repeat("id")))
        if set(map(type, got)) != {str} or len(set(got)) != len(got):
            todo.append(j)
            continue
        calls[j] = got
    return calls


def _grouped(ids: list[str], sizes: list[int]) -> list[tuple[str, ...]]:
    """``ids`` cut into consecutive tuples of ``sizes``: one ``zip`` when every size is the same
    (the common case: one or two calls per message), else a slice each."""
    if len(set(sizes)) == 1:
        return list(zip(*[iter(ids)] * sizes[0], strict=True))
    bounds = list(accumulate(sizes, initial=0))
    return list(map(tuple, map(ids.__getitem__, map(slice, bounds, bounds[1:]))))


def _plain_results(where: list[int], answered: list[Any], todo: list[int]) -> dict[int, tuple[str, ...]]:
    """The answered ids of tool messages at ``where`` with a str ``tool_call_id`` (``""`` too:
    ``read.call_id``)."""
    if set(map(type, answered)) == {str}:
        return dict(zip(where, zip(answered), strict=True))  # zip of one column: 1-tuples
    results: dict[int, tuple[str, ...]] = {}
    for j, value in zip(where, answered, strict=True):
        if type(value) is str:
            results[j] = (value,)
        else:
            todo.append(j)
    return results


def _human_text(where: list[int], contents: list[Any], todo: list[int]) -> None:
    """Human messages whose content is not text may hold tool results: read those on their own."""
    if set(map(type, contents)) != {str}:
        todo += compress(where, map(is_not, map(type, contents), repeat(str)))


def _dict_column(rows: list[Any], name: str, default: Any) -> list[Any]:
    return list(map(dict.get, rows, repeat(name), repeat(default)))


def _attr_column(rows: list[Any], name: str, default: Any) -> list[Any]:
    return list(map(getattr, rows, repeat(name), repeat(default)))


def _object_fields(
    window: list[Any],
    lo: int,
    kinds: list[Kind | None],
    contents: list[Any],
    todo: list[int],
    calls: dict[int, tuple[str, ...]],
    results: dict[int, tuple[str, ...]],
) -> None:
    """``_fields`` of LangChain's messages, their kinds and contents read already
    (``bulk.object_columns``): one loop over the window reads the fields each kind needs, so each
    message is visited once, and the checks run by columns on what it read (``_plain_calls``,
    ``_plain_results``)."""
    ai: list[int] = []
    ai_contents: list[Any] = []
    made: list[Any] = []
    extras: list[Any] = []
    tool: list[int] = []
    answered: list[Any] = []
    for i, message, kind, content in zip(count(lo), window, kinds, contents):
        if kind == "tool":
            tool.append(i)
            answered.append(getattr(message, "tool_call_id", None))
        elif kind == "ai":
            if content is None and getattr(message, "parts", None) is not None:
                todo.append(i)  # content None reads Gemini ``parts``: read whole
            ai.append(i)
            ai_contents.append(content)
            made.append(getattr(message, "tool_calls", None))
            extras.append(getattr(message, "additional_kwargs", {}))
        elif kind == "human" and type(content) is not str:
            todo.append(i)  # content blocks may hold tool results
    if ai:
        calls.update(_plain_calls(ai, ai_contents, made, extras, todo))
    if tool:
        results.update(_plain_results(tool, answered, todo))


def _fields(
    window: list[Any],
    lo: int,
    kinds: list[Kind | None],
    todo: list[int],
    calls: dict[int, tuple[str, ...]],
    results: dict[int, tuple[str, ...]],
    column: Callable[[list[Any], str, Any], list[Any]],
    window_contents: list[Any] | None = None,
) -> None:
    """Read the calls of AI messages and the answered ids of tool results of ``window`` (the
    list's messages from index ``lo``) into ``calls`` and ``results`` with ``column`` (a field
    of each row, by key or by attribute, as ``read_message`` reads that shape); every message
    these columns cannot decide joins ``todo``. ``window_contents``: each message's content,
    read already. Each kind's rows are taken with one mask (``compress``), not by index."""
    at = range(lo, lo + len(kinds))

    def rows_of(kind: str) -> tuple[list[int], list[Any], list[Any] | None]:
        mask = list(map(eq, kinds, repeat(kind)))
        contents = list(compress(window_contents, mask)) if window_contents is not None else None
        return list(compress(at, mask)), list(compress(window, mask)), contents

    if "ai" in kinds:
        ai, rows, contents = rows_of("ai")
        if contents is None:
            contents = column(rows, "content", None)
        if None in contents:  # content None reads Gemini ``parts``: a message holding them is read whole
            empty = list(compress(ai, map(is_, contents, repeat(None))))
            parts = column(list(map(window.__getitem__, [i - lo for i in empty])), "parts", None)
            todo += compress(empty, map(is_not, parts, repeat(None)))
        made = column(rows, "tool_calls", None)
        calls.update(_plain_calls(ai, contents, made, column(rows, "additional_kwargs", {}), todo))
    if "tool" in kinds:
        tool, rows, _ = rows_of("tool")
        results.update(_plain_results(tool, column(rows, "tool_call_id", None), todo))
    if "human" in kinds:
        human, rows, contents = rows_of("human")
        _human_text(human, contents if contents is not None else column(rows, "content", None), todo)


def joined(older: Structure, newer: Structure) -> Structure:
    """One ``Structure`` of two adjacent windows (``older`` ends where ``newer`` starts)."""

    def both(a: dict[int, Any], b: dict[int, Any]) -> dict[int, Any]:
        return {**a, **b} if b else a  # (the maps are never changed: shared when b adds none)

    return Structure(
        older.lo,
        older.kinds + newer.kinds,
        both(older.calls, newer.calls),
        both(older.results, newer.results),
        both(older.leads, newer.leads),
        older.text + newer.text,
    )


def window(table: Structure, lo: int, hi: int) -> Structure:
    """The ``Structure`` of ``table``'s messages from index ``lo`` to before ``hi``, both within
    the table (``table.lo <= lo <= hi <= `` its end); ``table`` itself when that is all of it."""
    end = table.lo + len(table.kinds)
    if lo <= table.lo and hi >= end:
        return table

    def between(column: dict[int, Any]) -> dict[int, Any]:
        # the keys to drop, from either end: a window moved by a turn drops a few, not a copy
        older = list(takewhile(lo.__gt__, column))
        newer = list(takewhile(hi.__le__, reversed(column)))
        if not older and not newer:
            return column
        if 4 * (len(older) + len(newer)) > len(column):
            keys = list(column)
            return dict(islice(column.items(), bisect_left(keys, lo), bisect_left(keys, hi)))
        kept = dict(column)
        for key in chain(older, newer):
            del kept[key]
        return kept

    start, stop = lo - table.lo, hi - table.lo
    return Structure(
        lo,
        table.kinds[start:stop],
        between(table.calls),
        between(table.results),
        between(table.leads),
        table.text[start:stop],
    )


def same_prefix(own: Sequence[Any], other: Sequence[Any]) -> int:
    """How many leading items of ``own`` and ``other`` are the same objects at the same places.

    Bisection on identity finds where they stop being the same objects (a list that extends the
    remembered one, or replaces its newest items, is the same up to one place), and one list
    ``==`` (identity first: C speed, no ``__eq__`` call for the same object) confirms the prefix;
    when it does not (an item replaced in the middle), a scan by identity answers."""
    n = min(len(own), len(other))
    if not n or own[0] is not other[0]:
        return 0
    lo = n
    if own[n - 1] is not other[n - 1]:  # they differ before the end of the shorter one
        lo, hi = 1, n  # own[:lo] starts the same; the answer is in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if own[mid - 1] is other[mid - 1]:
                lo = mid
            else:
                hi = mid - 1
    try:
        if (own if lo == len(own) else own[:lo]) == (other if lo == len(other) else other[:lo]):
            return lo
    except Exception:  # an __eq__ that raises: by identity alone
        pass
    return next(compress(count(), map(is_not, own, other)), n)
