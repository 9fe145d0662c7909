"""The pure planner: which indices of a message list survive. No I/O, no mutation.

One algorithm serves both modes: messages form *units*, each unit has a cost (count mode: its
number of messages; token mode: its tokens), and the newest whole units that fit the budget are
kept, cut at a turn boundary. The contract (README, "The pruning contract"):

1. A tool group (an AI message with tool calls plus every tool result answering one of its call
   ids) is one unit; every other message is a unit of its own. Groups are never split. A result
   belongs to the nearest AI message before it that made the call.
2. Pinned messages are never pruned: index 0 when ``preserve_first`` (with its tool results),
   system messages and messages of unknown role. They cost nothing in count mode and are counted
   in token mode. (The injected summary is held out of the list by the reducer before planning.)
3. Orphan tool results (no call before them) and dangling calls (an AI message whose calls are not
   all answered, anywhere but at the end) are pruned whenever a reduction runs: providers reject
   both.
4. The newest units that fit are kept; with ``start_on_human`` the kept history starts at a human
   message. The live turn (the newest human message and what follows) is never dropped whole:
   when it alone is over the budget, its human message and its newest units that fit are kept,
   at least the newest unit, and the plan says it is over the target.

Cost: the planner walks backwards from the newest message and stops once the budget is spent and
the live turn's human message is found, so its Python-level work grows with what is *kept*. The
only full pass over the list is the search for pinned messages, which runs at C speed for
LangChain message classes (``pinned_indices``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .messages import MessageInfo, pinned_indices, read_message


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's decision: ``kept`` holds the surviving indices in ascending order."""

    kept: tuple[int, ...]
    triggered: bool
    over_target: bool
    cost_before: int
    cost_after: int

    def split(self, messages: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """``(surviving, pruned)``, each in input order; built from slices, not per-item checks."""
        if not self.triggered:
            return list(messages), []
        surviving = [messages[i] for i in self.kept]
        pruned: list[Any] = []
        prev = 0
        for i in self.kept:
            pruned += messages[prev:i]
            prev = i + 1
        pruned += messages[prev:]
        return surviving, pruned


def keep_all(n: int, cost: int) -> Plan:
    return Plan(tuple(range(n)), False, False, cost, cost)


@dataclass(slots=True)
class _Unit:
    first: int
    members: list[int]
    cost: int
    is_human: bool


class _Reader:
    """Reads messages on demand, each at most once."""

    __slots__ = ("cache", "messages")

    def __init__(self, messages: Sequence[Any]) -> None:
        self.messages = messages
        self.cache: dict[int, MessageInfo] = {}

    def __call__(self, i: int) -> MessageInfo:
        info = self.cache.get(i)
        if info is None:
            info = self.cache[i] = read_message(self.messages[i])
        return info


def plan(
    messages: Sequence[Any],
    cost_of: Callable[[int], int],
    *,
    trigger_cost: int,
    budget: int,
    count_mode: bool,
    preserve_first: bool,
    start_on_human: bool,
    infos: Sequence[MessageInfo] | None = None,
) -> Plan:
    """Decide what survives a triggered reduction.

    ``cost_of(i)`` is message ``i``'s cost (tokens, or 1 in count mode); ``budget`` is the target
    (``min_messages`` or ``target_tokens``); ``infos`` are ``read_message`` of each message
    when the caller has them already (token mode: the count cache keeps them), so kept messages
    are not read twice.
    """
    n = len(messages)
    read: Callable[[int], MessageInfo] = infos.__getitem__ if infos is not None else _Reader(messages)
    pinned = set(pinned_indices(messages))
    if preserve_first and n:
        pinned.update(_first_unit(read, n))
    pinned_cost = len(pinned) if count_mode else sum(cost_of(i) for i in pinned)
    room = budget - (0 if count_mode else pinned_cost)

    # Walk back over units, newest first. A tool result joins the unit of the nearest AI message
    # before it that made its call, when the walk reaches that message; results never claimed are
    # orphans, and an AI message whose calls are not all answered is dangling unless it is the
    # newest unit (the pending call of the live turn).
    accepted: list[_Unit] = []  # the newest units that fit, newest first
    spent = 0
    stopped = False
    newest: _Unit | None = None
    live: _Unit | None = None  # the newest human message, looked for past the stop point if need be
    open_results: dict[str, list[int]] = {}
    claimed: set[int] = set()
    i = n
    while i > 0:
        i -= 1
        if i in pinned:
            continue
        info = read(i)
        if info.kind == "tool":
            for r in info.result_ids:
                open_results.setdefault(r, []).append(i)
            continue
        if info.kind == "ai" and info.call_ids:
            members = [i]
            complete = True
            for cid in info.call_ids:
                got = [j for j in open_results.pop(cid, ()) if j not in claimed]
                complete = complete and bool(got)
                claimed.update(got)
                members += got
            if not complete and newest is not None:
                continue  # dangling: pruned, with whatever results it has
            if len(members) > 2:
                members = sorted(set(members))
            unit = _Unit(i, members, sum(map(cost_of, members)), False)
        else:
            unit = _Unit(i, [i], cost_of(i), info.kind == "human")
        if newest is None:
            newest = unit
        if not stopped:
            if spent + unit.cost <= room:
                accepted.append(unit)
                spent += unit.cost
            else:
                stopped = True
        if unit.is_human and live is None:
            live = unit
        if stopped and live is not None:
            break

    kept_units = _select(accepted, newest, live, room, start_on_human)
    kept = sorted(pinned.union(m for u in kept_units for m in u.members))
    kept_cost = sum(u.cost for u in kept_units)
    return Plan(tuple(kept), True, kept_cost > room, trigger_cost, kept_cost + pinned_cost)


def _first_unit(read: Callable[[int], MessageInfo], n: int) -> list[int]:
    """What ``preserve_first`` pins: index 0, with its tool results when it is a tool call.

    An orphan tool result at index 0, or a call whose results are not all there, is not pinned:
    providers reject both. Finding the results of a call at index 0 takes a full scan.
    """
    first = read(0)
    if first.kind == "tool":
        return []
    if first.kind != "ai" or not first.call_ids:
        return [0]
    wanted = set(first.call_ids)
    results = [j for j in range(1, n) if read(j).kind == "tool" and wanted.intersection(read(j).result_ids)]
    answered = {r for j in results for r in read(j).result_ids}
    return [0, *results] if wanted <= answered else []


def _select(
    accepted: list[_Unit], newest: _Unit | None, live: _Unit | None, room: int, start_on_human: bool
) -> list[_Unit]:
    """From the newest units that fit (newest first), the ones to keep."""
    if live is not None and all(u is not live for u in accepted):
        # The live turn alone is over the budget: keep its human message and its newest units
        # that fit next to it, at least the newest unit. Every accepted unit is newer than it.
        tail: list[_Unit] = []
        spent = live.cost
        for u in accepted:
            if spent + u.cost > room:
                break
            tail.append(u)
            spent += u.cost
        if not tail and newest is not None and newest is not live:
            tail = [newest]
        return [live, *tail]
    if not accepted:
        return [newest] if newest is not None else []  # never drop everything
    if live is not None and start_on_human:
        oldest_human = max(j for j, u in enumerate(accepted) if u.is_human)
        return accepted[: oldest_human + 1]
    return accepted
