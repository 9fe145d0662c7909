"""The planner on a message table: ``planner.plan``'s decision made by columns.

``plan_by_table`` reads the planner's columns (``Structure``: kinds, call ids, answered ids,
leads) of a window at the newest end of the list, growing it while the decision needs older
messages, and decides on them with string and list operations at C speed instead of Python
code per message. It answers only for a window of plain structure, where every unit is a single
message or an AI message with calls followed by exactly its results:

* no message in the window leads (no Responses items);
* every tool message answers exactly one call, and the tool messages after an AI message with
  calls answer those calls in order (the newest one may be pending: a prefix of its calls);
* no tool message follows a human message or an AI message without calls.

For any other window it returns None and the caller plans with ``planner.plan``, the reference,
which this equals wherever it answers (tests/test_table.py checks it with hypothesis).
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, ne, sub
from typing import Any, Final

from agentstate_reducer._columns.bulk import pinned_indices
from agentstate_reducer._columns.structure import (
    Structure,
    common_lead,
    joined,
    read_structure,
    structure_of_infos,
    window,
)
from agentstate_reducer.messages import PINNED_KINDS, MessageInfo, read_message
from agentstate_reducer.planner import Plan, first_unit, runs_of

#: the messages of the window that the decision does not need read again when it grows
_SLACK: Final = 64
_GROW: Final = object()


_State = tuple[list[Any], list[int], Structure]  # (keys, kind-pinned indices, table)


class TableMemo:
    """The last two lists a reducer planned by columns (a history and its copy reloaded from a
    checkpoint alternate), each with its pinned indices and its table, so that a list starting
    with the same messages (compared with ``==``, identity first) has only its new messages read.
    In count mode the messages are compared: like the reducer's validity memo, it takes a message
    that is the same object as before to have the same structure (kind, call ids, answered ids).
    In token mode their readings are: the count cache hands back a new reading for a message
    changed in place.

    The memo keeps its own copy of each list (``messages`` may be the list handed back to the
    caller, who may change it; the count cache changes its readings' list in place). A plan that
    starts from a remembered list of the same first message takes that list out of the memo
    (``recall``) and makes it its own by replacing its items from the first new one, instead of
    copying a long history again; ``remember`` puts the result back. Both hold a lock, and a list
    is changed only while out of the memo, so a reducer shared by threads never mixes two lists'
    memos."""

    __slots__ = ("_lock", "last")

    def __init__(self) -> None:
        self.last: tuple[_State, ...] = ()
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[TableMemo], tuple[()]]:
        return TableMemo, ()  # a copy (deepcopy, pickle) starts empty: the memo only saves time

    def recall(self, source: list[Any]) -> tuple[list[Any], int, _State | None]:
        """``(keys, known, state)``: ``keys``, a list equal to ``source`` that the memo may keep;
        ``known``, how many leading items of ``source`` the remembered ``state`` holds (see
        ``_known``), or 0 and None."""
        with self._lock:
            same = [s for s in self.last if source and s[0] and s[0][0] is source[0]]
            if same:
                state = same[0]
                known = _known(state, state[0], source)
                if known:  # the remembered list becomes this one's, out of the memo
                    own = state[0]
                    if own[known - 1] is not source[known - 1] or own[known // 2] is not source[known // 2]:
                        own[:] = source  # equal copies (reloaded): the same objects next time
                    else:
                        own[known:] = source[known:]
                    self.last = tuple(s for s in self.last if s is not state)
                    return own, known, state
                return list(source), 0, None
            keys = list(source)
            for state in self.last[:1]:  # the newest list, of another first message
                known = _known(state, keys, state[0])
                if known:
                    return keys, known, state
            return keys, 0, None

    def remember(self, state: _State) -> None:
        with self._lock:
            keys = state[0]
            older = [s for s in self.last[:1] if not (keys and s[0] and s[0][0] is keys[0])]
            self.last = (state, *older)


def _known(state: _State, own: list[Any], other: list[Any]) -> int:
    """How many leading items of the list planned now the remembered ``state`` holds
    (``common_lead``: all they share, or all but the last), or 0; at least the first of the
    state's window, whose table covers the rest. One of ``own`` and ``other`` is the state's
    list, the other the list planned now; ``own`` is one no other code reads or changes
    meanwhile."""
    try:
        k = common_lead(own, other)
    except Exception:  # an element whose == cannot answer
        return 0
    return k if k >= state[2].lo else 0


def _pinned(messages: Sequence[Any], infos: Sequence[MessageInfo] | None) -> list[int]:
    """The indices of pinned kinds, ascending: from the readings when given."""
    if infos is not None:
        kinds = map(attrgetter("kind"), infos)
        return list(compress(range(len(infos)), map(PINNED_KINDS.__contains__, kinds)))
    return pinned_indices(messages)


def plan_by_table(
    messages: Sequence[Any],
    costs: Sequence[int] | None,
    *,
    trigger_cost: int,
    budget: int,
    preserve_first: bool,
    start_on_human: bool,
    infos: Sequence[MessageInfo] | None = None,
    triggered: bool = True,
    memo: TableMemo | None = None,
    slack: int = _SLACK,
) -> Plan | None:
    """``planner.plan`` of ``messages``, or None when the window it needs is not of plain
    structure. ``costs`` are the messages' tokens (token mode) or None (count mode: each
    message costs 1 and pinned messages nothing); ``infos`` their readings when made already;
    ``memo``: the last lists planned (read and updated); ``slack``: how many messages the first
    window reads beyond the budget's worth."""
    n = len(messages)
    keys: list[Any] = []
    known, last = 0, None
    if memo is not None:
        source = messages if infos is None else infos
        keys, known, last = memo.recall(source if type(source) is list else list(source))
    prior: Structure | None = None
    if known:
        assert last is not None
        prior = last[2]
        pinned = [p for p in last[1] if p < known]
        if known < n:
            more = _pinned(messages[known:], infos[known:] if infos is not None else None)
            pinned = pinned + [known + p for p in more]
    else:
        pinned = _pinned(messages, infos)
    kind_pinned = pinned
    if preserve_first and n:
        read = infos.__getitem__ if infos is not None else (lambda i: read_message(messages[i]))
        first = first_unit(read, n)
        if first:
            pinned = sorted({*pinned, *first})
    newest = None
    if costs is None:
        pinned_cost = len(pinned)
        room = budget
        want = room + slack  # conversation messages in the first window
        lo = n - want - sum(1 for p in pinned if p >= n - want)
    else:
        pinned_cost = sum(map(costs.__getitem__, pinned))
        room = budget - pinned_cost
        # the newest messages worth more than the room, then some
        amount = max(room, 0) + pinned_cost
        newest = (amount, newest_over(costs, amount))
        lo = newest[1] - slack
    lo = max(min(lo, n - 1), 0)
    table: Structure | None = None
    if prior is not None:  # the remembered window, cut to what the decision reads first
        table = window(prior, max(prior.lo, min(lo, known)), known)
        if known < n:
            rest = structure_of_infos(infos, known) if infos is not None else read_structure(messages, known)
            table = joined(table, rest)
        lo = min(lo, table.lo)
    while True:
        if table is None or lo < table.lo:
            if infos is not None:
                chunk = structure_of_infos(infos, lo, table.lo if table is not None else None)
            else:
                chunk = read_structure(messages, lo, table.lo if table is not None else None)
            table = chunk if table is None else joined(chunk, table)
        out = _decide(table, n, pinned, costs, room, start_on_human)
        if out is not _GROW:
            break
        if lo == 0:
            return None
        lo = max(0, n - 2 * (n - lo))  # a window of at least one message: it doubles
    if memo is not None:
        memo.remember((keys, kind_pinned, table))
    if not isinstance(out, tuple):
        return None
    members, kept_cost = out
    runs = None
    if type(members) is range and not any(members.start <= p < members.stop for p in pinned):
        # the common plan: pinned messages and one run of the newest: no per-index work
        below = [p for p in pinned if p < members.start]
        above = [p for p in pinned if p >= members.stop]
        runs = [*runs_of(below), (members.start, members.stop), *runs_of(above)]
        kept: tuple[int, ...] = (*below, *members, *above)
    else:
        kept = tuple(sorted([*pinned, *members]) if pinned else members)
    return Plan(kept, triggered, kept_cost > room, trigger_cost, kept_cost + pinned_cost, runs, newest)


def newest_over(costs: Sequence[int], amount: int) -> int:
    """The largest ``s`` with ``sum(costs[s:]) > amount``, or 0 when there is none: where the
    newest messages worth more than ``amount`` start. Sums chunks from the newest end, doubling
    them, then halves the chunk that holds it: it reads about three times what it finds."""
    s = len(costs)
    over = 0  # sum(costs[s:]), at most amount
    step = 64
    while s > 0:
        lo = max(0, s - step)
        chunk = sum(costs[lo:s])
        if over + chunk > amount:  # within the chunk: halve it to 64, then count the newest
            while s - lo > 64:
                mid = (lo + s) // 2
                upper = sum(costs[mid:s])
                if over + upper > amount:
                    lo = mid
                else:
                    over += upper
                    s = mid
            return s - bisect_right(list(accumulate(reversed(costs[lo:s]))), amount - over) - 1
        over += chunk
        s = lo
        step *= 2
    return 0


def _decide(
    table: Structure,
    n: int,
    pinned: list[int],
    costs: Sequence[int] | None,
    room: int,
    start_on_human: bool,
) -> tuple[Sequence[int], int] | object | None:
    """``(kept conversation indices, their cost)``, ``_GROW`` when older messages are needed,
    or None when the window is not of plain structure."""
    if table.leads:
        return None
    lo = table.lo
    text = table.text
    inside = pinned[bisect_left(pinned, lo) :]
    conv: Sequence[int]
    if inside:  # pinned messages are left out of the walk (the first unit is not ``p`` yet)
        letters = list(text)
        for p in inside:
            letters[p - lo] = "p"
        if letters.count("p") != len(inside):
            return None  # a pinned kind the pinned indices do not name: the reference decides
        mask = list(map(ne, letters, repeat("p")))
        conv = list(compress(range(lo, n), mask))
        text = "".join(compress(letters, mask))
    elif "p" in text:
        return None
    else:
        conv = range(lo, n)
    size = len(text)
    # the tool results at the window's start belong to a unit starting before it; an AI message
    # there may be led to by an older message: both are left to a bigger window
    start = size - len(text.lstrip("t"))
    if start and not lo:
        return None  # results of no call: the reference prunes them
    if lo and start < size and text[start] in "ac":
        start = _unit_at(text, start + 1)
    body = text[start:]
    first = conv[start] if start < size else n
    calls = _from(table.calls, first, inside)
    results = _from(table.results, first, inside)
    if set(map(len, results)) - {1}:
        return None
    # every tool result follows the call it answers, in order: the results of each call are the
    # run of tool results after it, and all of them, in order, are all the calls made
    if calls and max(map(len, calls)) == 1:
        # one call per message: the results answer the calls but a pending newest one, in
        # order, and as many "t" (one per result) follow a "c": each call is followed by its own
        pending = body.endswith("c")
        paired = len(calls) - pending
        if calls[:paired] != results or body.count("ct") != paired:
            return None
    elif calls:
        pieces = body.split("c")[1:]  # what follows each call: its results, then other messages
        runs = list(map(sub, map(len, pieces), map(len, map(str.lstrip, pieces, repeat("t")))))
        if sum(runs) != len(results):
            return None  # a result outside the runs: after a human or AI message without calls
        wanted = list(map(len, calls))
        pending = not pieces[-1].strip("t")  # the newest call, with only results after it
        if pending and runs[-1] < wanted[-1]:
            if runs[:-1] != wanted[:-1]:
                return None
            flat_calls = list(chain.from_iterable(calls))[: len(results)]
        elif runs != wanted:
            return None
        else:
            flat_calls = list(chain.from_iterable(calls))
        if flat_calls != list(chain.from_iterable(results)):
            return None
    elif results:
        return None
    # Units: each message but a tool result starts one; ``prefix[k]`` is the cost of the
    # conversation messages before position k, and a unit start at or after position k costs,
    # with everything after it, at most ``total - prefix[k]``.
    if costs is None:
        prefix: Sequence[int] = range(size + 1)
    else:
        in_window = costs[lo:n] if type(conv) is range else map(costs.__getitem__, conv)
        prefix = list(accumulate(in_window, initial=0))
    total = prefix[size]
    # the newest units that fit: a suffix, from the first unit whose suffix cost is within room
    accepted = _unit_at(text, max(bisect_left(prefix, total - room), start))
    if lo and (accepted == start or "h" not in body):
        return _GROW  # the unit that stops the walk, or the live turn, is older
    live_at = text.rfind("h", start)
    if live_at < 0:  # no human message in the whole history
        if accepted == size:  # never drop everything: the newest unit
            accepted = len(text.rstrip("t")) - 1 if size > start else size
        return conv[accepted:], total - prefix[accepted]
    if live_at < accepted:
        # the live turn alone is over the budget: its human message and its newest units that fit
        live_end = _unit_at(text, live_at + 1)
        live_cost = prefix[live_end] - prefix[live_at]
        tail = _unit_at(text, max(bisect_left(prefix, total - (room - live_cost)), accepted))
        if tail == size and live_end != size:
            tail = len(text.rstrip("t")) - 1  # at least the newest unit
        members = [*conv[live_at:live_end], *conv[tail:]]
        return members, live_cost + total - prefix[tail]
    keep_from = text.find("h", accepted) if start_on_human else accepted
    return conv[keep_from:], total - prefix[keep_from]


_UNIT_START: Final = re.compile("[^t]")


def _unit_at(text: str, pos: int) -> int:
    """The first unit start at or after ``pos`` (a message that is no tool result), or the end."""
    found = _UNIT_START.search(text, pos)
    return found.start() if found is not None else len(text)


def _from(column: dict[int, tuple[str, ...]], first: int, pinned: list[int]) -> list[tuple[str, ...]]:
    """The values of ``column`` (ascending indices) from index ``first`` on, pinned ones left out."""
    keys = list(column)
    values = list(column.values())[bisect_left(keys, first) :]
    if pinned and keys and pinned[-1] >= first:
        skip = set(pinned)
        values = [v for i, v in zip(keys[len(keys) - len(values) :], values, strict=True) if i not in skip]
    return values
