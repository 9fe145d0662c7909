"""The planner on a message table: ``planner.plan``'s decision made by columns.

``plan_by_table`` reads the planner's columns (``Structure``: kinds, call ids, answered ids,
leads) of a window at the newest end of the list, growing it while the decision needs older
messages, and decides on them with string and list operations at C speed instead of Python
code per message. It answers only for a window of plain structure, where every unit is a single
message or an AI message with calls followed by exactly its results:

* no message in the window leads (no Responses items);
* every tool message answers exactly one call, and the tool messages after an AI message with
  calls answer those calls in order (the newest one may be pending: a prefix of its calls);
* no tool message follows a human message or an AI message without calls;
* when triggered, no message of the whole list holds a compaction (``TableState.compactions``).

For any other window it returns None and the caller plans with ``planner.plan``, the reference,
which this equals wherever it answers (tests/test_table.py checks it with hypothesis).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, ne, sub
from typing import Any, Final, NamedTuple, cast

from agentstate_reducer._columns.bulk import ObjectColumns, compaction_indices, object_columns, pinned_indices
from agentstate_reducer._columns.structure import (
    Structure,
    joined,
    read_structure,
    same_prefix,
    structure_of_infos,
    window,
)
from agentstate_reducer.messages import PINNED_KINDS, MessageInfo, read_message
from agentstate_reducer.planner import Plan, first_unit, runs_of

#: the messages of the window that the decision does not need read again when it grows
_SLACK: Final = 64
_GROW: Final = object()


class TableState(NamedTuple):
    """The planner's table of a window of a list (``memo.Remembered.table``): ``keys``, what
    the table was read from (the messages in count mode, their readings in token mode: the count
    cache hands back a new reading for a message changed in place; the list planned, kept as it
    is: whoever remembers the state owns it, see ``reducer._remember``), the indices of pinned
    kinds, and the table. A later list whose first ``known`` keys are these objects, with ``known`` at
    least the window's start, has only its new messages read. Never changed once made."""

    keys: list[Any]
    kind_pinned: list[int]
    table: Structure
    #: the indices of the messages holding a compaction (``MessageInfo.compaction``); None when
    #: not read (only a triggered plan needs them)
    compactions: list[int] | None
    #: what the decision found of plain structure, for a longer list to check only what follows
    checked: Checked | None = None


class Checked(NamedTuple):
    """The conversation messages (pinned ones left out) from index ``first``, a unit start, to
    before ``end`` are of plain structure: each call is followed by its results, in order, but
    for the newest call, whose ``open`` ids (in order) have no result yet. Every later unit
    start keeps that true of what follows it; ``pinned`` are the pinned indices in between."""

    first: int
    end: int
    open: tuple[str, ...]
    pinned: tuple[int, ...]


def known_of(state: TableState | None, keys: Sequence[Any]) -> int:
    """How many leading ``keys`` the remembered ``state`` holds (``memo.same_prefix``), or 0
    when that does not reach the window's start (its table covers the rest)."""
    if state is None:
        return 0
    k = same_prefix(state.keys, keys)
    return k if k >= state.table.lo else 0


def _pinned(
    messages: Sequence[Any], infos: Sequence[MessageInfo] | None, columns: ObjectColumns | None = None
) -> list[int]:
    """The indices of pinned kinds, ascending: from the readings when given."""
    if infos is not None:
        kinds = map(attrgetter("kind"), infos)
        return list(compress(range(len(infos)), map(PINNED_KINDS.__contains__, kinds)))
    return pinned_indices(messages, columns)


def _compactions(
    messages: Sequence[Any], infos: Sequence[MessageInfo] | None, columns: ObjectColumns | None = None
) -> list[int]:
    """The indices of the messages holding a compaction, ascending: from the readings when given."""
    if infos is not None:
        return list(compress(range(len(infos)), map(attrgetter("compaction"), infos)))
    return compaction_indices(messages, columns)


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
    prior: TableState | None = None,
    slack: int = _SLACK,
) -> tuple[Plan | None, TableState]:
    """``planner.plan`` of ``messages``, or None when the window it needs is not of plain
    structure. ``costs`` are the messages' tokens (token mode) or None (count mode: each
    message costs 1 and pinned messages nothing); ``infos`` their readings when made already;
    ``prior``: a remembered table of a list that may start with these (``known_of``);
    ``slack``: how many messages the first window reads beyond the budget's worth. Returns the
    plan (None: not of plain structure) and the table read, for the memo (its ``kind_pinned``
    are the indices of pinned kinds and ``compactions`` those of the compactions, which the
    reference planner can take from it)."""
    n = len(messages)
    keys = messages if infos is None else infos
    known = known_of(prior, keys)
    last: Structure | None = None
    columns: ObjectColumns | None = None
    if known:
        assert prior is not None
        last = prior.table
        pinned = [p for p in prior.kind_pinned if p < known]
        if known < n:
            more = _pinned(messages[known:], infos[known:] if infos is not None else None)
            pinned = pinned + [known + p for p in more]
    else:
        # a list never seen: its types and contents are read once, for every pass below
        columns = object_columns(messages) if infos is None else None
        pinned = _pinned(messages, infos, columns)
    compactions: list[int] | None = None  # read for a triggered plan (rule 5), or where remembered
    if known and prior is not None and prior.compactions is not None:
        compactions = [c for c in prior.compactions if c < known]
        if known < n:
            found = _compactions(messages[known:], infos[known:] if infos is not None else None)
            compactions += [known + c for c in found]
    elif triggered:
        compactions = _compactions(messages, infos, columns)
    kind_pinned = pinned
    if preserve_first and n:
        read = infos.__getitem__ if infos is not None else (lambda i: read_message(messages[i]))
        first = first_unit(read, n)
        if first:
            pinned = sorted({*pinned, *first})
    earlier = None  # what a remembered decision checked of the messages this list shares
    if known and prior is not None and prior.checked is not None and prior.checked.end <= known:
        earlier = prior.checked
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
    if last is not None:  # the remembered window, cut to what the decision reads first
        table = window(last, max(last.lo, min(lo, known)), known)
        if known < n:
            rest = structure_of_infos(infos, known) if infos is not None else read_structure(messages, known)
            table = joined(table, rest)
        lo = min(lo, table.lo)
    while True:
        if table is None or lo < table.lo:
            if infos is not None:
                chunk = structure_of_infos(infos, lo, table.lo if table is not None else None)
            else:
                chunk = read_structure(messages, lo, table.lo if table is not None else None, columns)
            table = chunk if table is None else joined(chunk, table)
        out = _decide(table, n, pinned, costs, room, start_on_human, earlier)
        if out is not _GROW or lo == 0:
            break
        lo = max(0, n - 2 * (n - lo))  # a window of at least one message: it doubles
    checked = None
    if isinstance(out, _Decided):
        checked = out.checked
        out = (out.members, out.cost)
    state = TableState(keys if type(keys) is list else list(keys), kind_pinned, table, compactions, checked)
    if not isinstance(out, tuple) or (triggered and compactions):
        # not of plain structure, older than the whole list, or a compaction replaces what
        # precedes it (planner rule 5): the reference decides
        return None, state
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
    return Plan(kept, triggered, kept_cost > room, trigger_cost, kept_cost + pinned_cost, runs, newest), state


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


class _Decided(NamedTuple):
    """``_decide``'s answer: the kept conversation indices, their cost, and what it checked."""

    members: Sequence[int]
    cost: int
    checked: Checked


def _continues(
    table: Structure, earlier: Checked, first: int, n: int, pinned: list[int]
) -> tuple[str, ...] | None:
    """The open call ids at ``n`` when the conversation messages from ``first`` on are of plain
    structure, read from ``earlier`` (which holds from a unit start at or before ``first``) and
    the messages after it only; None when that cannot be told so (the full check decides)."""
    end = earlier.end
    if not earlier.first <= first <= end or end < table.lo:
        return None
    if tuple(pinned[bisect_left(pinned, earlier.first) : bisect_left(pinned, end)]) != earlier.pinned:
        return None
    open_ids = earlier.open
    text, lo, calls, results = table.text, table.lo, table.calls, table.results
    skip = set(pinned[bisect_left(pinned, end) :])
    for i in range(end, n):
        if i in skip:
            continue
        letter = text[i - lo]
        if letter == "t":
            answered = results[i]
            if len(answered) != 1 or not open_ids or answered[0] != open_ids[0]:
                return None
            open_ids = open_ids[1:]
        elif open_ids or letter == "p":
            return None  # a call left unanswered before the next message; a pinned kind unnamed
        elif letter == "c":
            open_ids = calls[i]
    return open_ids


def _decide(
    table: Structure,
    n: int,
    pinned: list[int],
    costs: Sequence[int] | None,
    room: int,
    start_on_human: bool,
    earlier: Checked | None = None,
) -> _Decided | object | None:
    """The kept conversation indices, their cost and what was checked, ``_GROW`` when older
    messages are needed, or None when the window is not of plain structure. ``earlier``: what a
    remembered decision checked of a list this one extends: only the messages after it are
    checked again."""
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
    open_ids = _continues(table, earlier, first, n, pinned) if earlier is not None else None
    if open_ids is None:
        open_ids = _check_pairs(table, body, first, inside)
        if open_ids is None:
            return None
    checked = Checked(first, n, open_ids, tuple(pinned[bisect_left(pinned, first) :]))
    decided = _keep(text, conv, lo, n, start, body, costs, room, start_on_human)
    if decided is None or decided is _GROW:
        return decided
    members, cost = cast("tuple[Sequence[int], int]", decided)
    return _Decided(members, cost, checked)


def _check_pairs(table: Structure, body: str, first: int, inside: list[int]) -> tuple[str, ...] | None:
    """The open call ids at the end when the conversation messages from ``first`` (``body``, a
    unit start) are of plain structure, else None."""
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
        return calls[-1] if pending else ()
    if calls:
        pieces = body.split("c")[1:]  # what follows each call: its results, then other messages
        runs = list(map(sub, map(len, pieces), map(len, map(str.lstrip, pieces, repeat("t")))))
        if sum(runs) != len(results):
            return None  # a result outside the runs: after a human or AI message without calls
        wanted = list(map(len, calls))
        pending = not pieces[-1].strip("t")  # the newest call, with only results after it
        open_ids: tuple[str, ...] = ()
        if pending and runs[-1] < wanted[-1]:
            if runs[:-1] != wanted[:-1]:
                return None
            flat_calls = list(chain.from_iterable(calls))[: len(results)]
            open_ids = calls[-1][runs[-1] :]
        elif runs != wanted:
            return None
        else:
            flat_calls = list(chain.from_iterable(calls))
        if flat_calls != list(chain.from_iterable(results)):
            return None
        return open_ids
    if results:
        return None
    return ()


def _keep(
    text: str,
    conv: Sequence[int],
    lo: int,
    n: int,
    start: int,
    body: str,
    costs: Sequence[int] | None,
    room: int,
    start_on_human: bool,
) -> tuple[Sequence[int], int] | object | None:
    """The newest units that fit ``room`` in a window of plain structure (``_decide``)."""
    size = len(text)
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
