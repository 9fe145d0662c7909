"""The pure planner: which indices of a message list survive. No I/O, no mutation, O(n).

One algorithm serves both modes: messages are grouped into *units*, each unit has a cost (count
mode: its number of messages; token mode: its tokens), and the newest whole units that fit the
budget are kept, cut at a turn boundary. The contract (README, "The pruning contract"):

1. A tool group (an AI message with tool calls plus every tool result answering one of its call
   ids) is one unit; every other message is a unit of its own. Groups are never split.
2. Pinned units are never pruned: index 0 when ``preserve_first``, system messages, messages
   of unknown role, and the indices the caller passes in ``pinned`` (the injected summary
   message). They cost nothing in count mode and are counted in token mode.
3. Orphan tool results (their call is not before them) and dangling calls (an AI message whose
   calls are not all answered, anywhere but at the end) are pruned whenever a reduction runs:
   providers reject both.
4. The newest units that fit are kept; with ``start_on_human`` the kept history starts at a human
   message. The live turn (the newest human message and what follows) is never dropped whole:
   when it alone is over the budget, its human message and its newest units that fit are kept,
   at least the newest unit, and the plan says it is over the target.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .messages import MessageInfo

_PINNED_KINDS = frozenset({"system", "unknown", "remove"})


@dataclass(frozen=True, slots=True)
class Unit:
    indices: tuple[int, ...]
    pinned: bool
    droppable: bool  # orphan tool result or dangling call: pruned whenever a reduction runs
    is_human: bool


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's decision. ``keep[i]`` says whether message ``i`` survives."""

    keep: tuple[bool, ...]
    triggered: bool
    over_target: bool
    cost_before: int
    cost_after: int


class _UnionFind:
    def __init__(self) -> None:
        self.parent: list[int] = []

    def add(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # keep the older unit as root so a group is identified by its first message
            ra, rb = min(ra, rb), max(ra, rb)
            self.parent[rb] = ra
        return ra


def build_units(
    infos: Sequence[MessageInfo], *, preserve_first: bool, pinned: Collection[int] = ()
) -> list[Unit]:
    """Group messages into units in one pass through a call-id -> unit map. Units come out in
    order of their first message. ``pinned``: indices the caller pins besides the kinds above."""
    uf = _UnionFind()
    unit_of: list[int] = []
    call_owner: dict[str, int] = {}
    calls_of: dict[int, set[str]] = {}
    answered: set[str] = set()
    orphan: set[int] = set()
    for info in infos:
        u = uf.add()
        unit_of.append(u)
        if info.kind == "ai" and info.call_ids:
            calls_of[u] = set(info.call_ids)
            for cid in info.call_ids:
                owner = call_owner.get(cid)
                if owner is not None:  # duplicate call id: never separate the two messages
                    u = uf.union(owner, u)
                call_owner[cid] = u
        elif info.kind == "tool":
            owners = [call_owner[r] for r in info.result_ids if r in call_owner]
            if not owners:
                orphan.add(u)
                continue
            for owner in owners:
                uf.union(owner, u)
            answered.update(r for r in info.result_ids if r in call_owner)

    members: dict[int, list[int]] = {}
    for i, u in enumerate(unit_of):
        members.setdefault(uf.find(u), []).append(i)
    incomplete: set[int] = set()
    for u, calls in calls_of.items():
        if not calls <= answered:
            incomplete.add(uf.find(u))

    roots = sorted(members)  # roots are the oldest unit of each group, so this is message order
    last_conversation = max(
        (r for r in roots if r not in orphan and not _pinned(members[r], infos, preserve_first, pinned)),
        default=None,
    )
    units: list[Unit] = []
    for r in roots:
        idx = members[r]
        first = infos[idx[0]]
        # a dangling call anywhere but at the end (the pending call of the live turn) is pruned
        dangling = r in incomplete and r != last_conversation
        droppable = r in orphan or dangling
        is_pinned = not droppable and _pinned(idx, infos, preserve_first, pinned)
        units.append(Unit(tuple(idx), is_pinned, droppable, is_human=first.kind == "human" and len(idx) == 1))
    return units


def _pinned(
    indices: list[int], infos: Sequence[MessageInfo], preserve_first: bool, pinned: Collection[int]
) -> bool:
    return (
        (preserve_first and indices[0] == 0)
        or any(infos[i].kind in _PINNED_KINDS for i in indices)
        or any(i in pinned for i in indices)
    )


def plan(
    infos: Sequence[MessageInfo],
    costs: Sequence[int],
    *,
    trigger_cost: int,
    triggered: bool,
    budget: int,
    count_mode: bool,
    preserve_first: bool,
    start_on_human: bool,
    pinned: Collection[int] = (),
) -> Plan:
    """Decide what survives.

    ``costs[i]`` is message ``i``'s cost (tokens, or 1 in count mode); ``budget`` is the target
    (``min_messages`` or ``target_tokens``). In count mode pinned messages cost nothing against the
    budget; in token mode they are counted in it. ``pinned``: extra indices to pin (the reducer
    pins its injected summary message this way, so the planner stays unaware of summaries).
    """
    n = len(infos)
    if not triggered:
        return Plan((True,) * n, False, False, trigger_cost, trigger_cost)

    units = build_units(infos, preserve_first=preserve_first, pinned=pinned)
    pinned_cost = 0 if count_mode else sum(costs[i] for u in units if u.pinned for i in u.indices)
    room = budget - pinned_cost
    cands = [u for u in units if not u.pinned and not u.droppable]
    ucost = [sum(costs[i] for i in u.indices) for u in cands]

    start = _fitting_suffix(ucost, 0, room)
    live = max((j for j, u in enumerate(cands) if u.is_human), default=None)
    kept: list[int]
    if live is not None and start > live:
        # the live turn alone is over the budget: its human message plus its newest units that fit
        tail_start = _fitting_suffix(ucost, live + 1, room - ucost[live])
        tail_start = min(tail_start, len(cands) - 1) if len(cands) > live + 1 else len(cands)
        kept = [live, *range(tail_start, len(cands))]
    else:
        if live is not None and start_on_human:
            start = next(j for j in range(start, len(cands)) if cands[j].is_human)
        elif start >= len(cands) and cands:
            start = len(cands) - 1  # never drop everything: keep at least the newest unit
        kept = list(range(start, len(cands)))

    keep = [False] * n
    for u in units:
        if u.pinned:
            for i in u.indices:
                keep[i] = True
    for j in kept:
        for i in cands[j].indices:
            keep[i] = True
    kept_cost = sum(ucost[j] for j in kept)
    after = sum(costs[i] for i in range(n) if keep[i])
    return Plan(tuple(keep), True, kept_cost > room, trigger_cost, after)


def _fitting_suffix(costs: Sequence[int], lo: int, room: int) -> int:
    """First index of the longest suffix of ``costs[lo:]`` whose sum fits ``room``."""
    acc = 0
    start = len(costs)
    for j in range(len(costs) - 1, lo - 1, -1):
        acc += costs[j]
        if acc > room:
            break
        start = j
    return start
