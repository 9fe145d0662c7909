"""The pure planner: which indices of a message list survive. No I/O, no mutation.

One algorithm serves both modes: messages form *units*, each unit has a cost (count mode: its
number of messages; token mode: its tokens), and the newest whole units that fit the budget are
kept, cut at a turn boundary. The contract (README, "The pruning contract"):

1. A tool group (an AI message with tool calls plus every tool result answering one of its call
   ids) is one unit; every other message is a unit of its own. Groups are never split. A result
   belongs to the nearest AI message before it that made the call, so a call id used again by a
   later message starts a new group, and comes before the next user or assistant message that is
   not a tool call, and before an AI message with calls that follows a result (a new block; a
   result after it answers nothing before it). AI messages with calls in a row are one block
   where a result message answers calls of several of them (Anthropic's user message of
   ``tool_result`` blocks), which joins their groups into one unit, or where they lead (below);
   a result answering only the first's calls, after the second, breaks the first's group. Of
   several results for one call the first belongs to it; the others are pruned. A
   message that *leads* (``MessageInfo.leads``: the items of one Responses model turn) joins the
   unit of the AI message right after it; a reasoning item (``LEADS_REQUIRED``) followed by any
   other conversation message is broken, and so is a call of a model turn left unanswered. A
   dangling call does not take the items after it along, unless a reasoning item heads their
   model turn: then the whole turn goes.
2. Pinned messages are never pruned: index 0 when ``preserve_first`` (with its tool results),
   system messages and messages of unknown role. They cost nothing in count mode and are counted
   in token mode. (The injected summary is held out of the list by the reducer before planning.)
3. Orphan tool results (no call in the block before them), second results for a call and
   dangling calls (an AI message whose calls are not all answered, anywhere but at the end) are
   pruned from every output, triggered or not: providers reject all three. A call at the end
   whose results are missing in part or whole is pending, not broken, and stays.
4. The newest units that fit are kept; with ``start_on_human`` the kept history starts at a human
   message. The live turn (the newest human message and what follows) is never dropped whole:
   when it alone is over the budget, its human message and its newest units that fit are kept,
   at least the newest unit, and the plan says it is over the target.
5. A compaction (``MessageInfo.compaction``: an OpenAI Responses ``compaction`` item, an AI
   message with an Anthropic ``compaction`` block) replaces everything before it. In a triggered
   plan the newest one is pinned with its tool results, what precedes it is pruned first (all of
   it but the pinned messages: its content is in the compaction), and the rest is planned by rules
   1-4 as a history starting at the compaction, which stands for a human message under
   ``start_on_human`` when everything after it is kept. Older compactions are ordinary AI
   messages. An untriggered plan keeps them all (a repair prunes only what rule 3 names).

This module is the reference: it walks backwards from the newest message, one message at a time,
and stops once the budget is spent and the live turn's human message is found. The column path
(``agentstate_reducer._columns``, which this module never imports) makes the same decision by
columns for histories of plain structure and is tested equal to it; the reducer plans by columns
where they answer and with ``plan`` otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import add, ne
from typing import Any, Final

from .messages import LEADS_REQUIRED, PINNED_KINDS, MessageInfo, read_message


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's decision: ``kept`` holds the surviving indices in ascending order."""

    kept: Sequence[int]
    triggered: bool
    over_target: bool
    cost_before: int
    cost_after: int
    #: ``kept`` as ``(start, stop)`` runs of consecutive indices, when the planner has them
    runs: Sequence[tuple[int, int]] | None = field(default=None, compare=False, repr=False)
    #: ``(amount, start)``: made by ``_columns.plan`` with costs, which found where the
    #: newest messages worth more than ``amount`` start (``_columns.newest_over``); when triggered,
    #: the decision read the costs of no message older than the newest ones worth more than the
    #: trigger, but of the kept ones. None for any other plan.
    newest: tuple[int, int] | None = field(default=None, compare=False, repr=False)
    #: the index of the newest compaction when the plan left out what it replaced (rule 5): the
    #: messages before it that are pruned are in the compaction already; 0 otherwise
    covered: int = 0

    def split(self, messages: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """``(surviving, pruned)``, each in input order; built from slices, not per-item checks."""
        kept = self.kept
        if len(kept) == len(messages):
            return list(messages), []
        msgs = messages if type(messages) is list else list(messages)
        surviving: list[list[Any]] = []
        pruned: list[list[Any]] = []
        prev = 0
        for lo, hi in self.runs if self.runs is not None else runs_of(kept):
            if lo > prev:
                pruned.append(msgs[prev:lo])
            surviving.append(msgs[lo:hi])
            prev = hi
        if prev < len(msgs):
            pruned.append(msgs[prev:])
        return _joined(surviving), _joined(pruned)


def _joined(pieces: list[list[Any]]) -> list[Any]:
    """The pieces in order, as one list: the longest one grows in place, so its items are not
    copied again (on a long history a copy of each item costs more than moving it)."""
    if not pieces:
        return []
    longest = max(range(len(pieces)), key=lambda i: len(pieces[i]))
    out = pieces[longest]
    out[:0] = chain.from_iterable(pieces[:longest])
    out += chain.from_iterable(pieces[longest + 1 :])
    return out


def runs_of(kept: Sequence[int]) -> list[tuple[int, int]]:
    """Ascending indices as ``(start, stop)`` runs of consecutive ones."""
    if not kept:
        return []
    # a run ends where the next index is not one more
    ends = list(compress(range(1, len(kept)), map(ne, kept[1:], map(add, kept, repeat(1)))))
    starts = [0, *ends]
    return [(kept[a], kept[b - 1] + 1) for a, b in zip(starts, [*ends, len(kept)], strict=True)]


def keep_all(n: int, cost: int) -> Plan:
    return Plan(range(n), False, False, cost, cost)


@dataclass(slots=True)
class _Unit:
    """Messages kept or dropped together, with the cost of keeping them."""

    first: int
    members: list[int]
    is_human: bool
    cost: int = 0
    #: result ids of its tool messages that none of its AI messages has claimed yet: the unit is
    #: decided when an older AI message claims them (a result answering calls of several messages)
    needs: set[str] | None = None
    #: a member cannot be sent (a dangling call, a result whose call is gone): pruned whole
    broken: bool = False


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


#: a budget no history reaches: planning with it only repairs (prunes what cannot be sent)
UNLIMITED: Final = sys.maxsize


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
    triggered: bool = True,
    pinned_kinds: Sequence[int] | None = None,
    compactions: Sequence[int] | None = None,
) -> Plan:
    """Decide what survives a reduction.

    ``cost_of(i)`` is message ``i``'s cost (tokens, or 1 in count mode); ``budget`` is the target
    (``min_messages`` or ``target_tokens``); ``infos`` are ``read_message`` of each message
    when the caller has them already (token mode: the count cache keeps them), so kept messages
    are not read twice. With ``budget=UNLIMITED``, ``start_on_human=False`` and
    ``triggered=False`` it is the repair of an untriggered reduction: every unit that can be sent
    is kept, and only what rule 3 names is pruned. ``pinned_kinds``: the indices of the messages
    of a pinned kind (``PINNED_KINDS``), when the caller found them already; else read here;
    ``compactions`` likewise the indices of the messages holding a compaction.
    """
    n = len(messages)
    read: Callable[[int], MessageInfo] = infos.__getitem__ if infos is not None else _Reader(messages)
    if pinned_kinds is None:
        pinned_kinds = [i for i in range(n) if read(i).kind in PINNED_KINDS]
    pinned = set(pinned_kinds)
    if preserve_first and n:
        pinned.update(first_unit(read, n))
    compacted = newest_compaction(read, n, compactions) if triggered else None
    if compacted is not None:
        pinned.update(first_unit(read, n, compacted))
    pinned_cost = len(pinned) if count_mode else sum(cost_of(i) for i in pinned)
    room = budget - (0 if count_mode else pinned_cost)
    if not compacted:  # None, or a compaction at index 0: nothing before it to leave out
        members, kept_cost = _walk(read, cost_of, n, pinned, room, start_on_human, compacted == 0)
    else:
        # rule 5: what the compaction replaced is left out; the rest is planned as a history
        # that starts at the compaction (the pinned messages before it stay)
        index = [*sorted(p for p in pinned if p < compacted), *range(compacted, n)]
        view_pinned = {j for j, i in enumerate(index) if i in pinned}
        view_read: Callable[[int], MessageInfo] = lambda j: read(index[j])  # noqa: E731
        view_cost: Callable[[int], int] = lambda j: cost_of(index[j])  # noqa: E731
        found, kept_cost = _walk(view_read, view_cost, len(index), view_pinned, room, start_on_human, True)
        members = [index[j] for j in found]
    kept = sorted(pinned.union(members))
    cost_after = kept_cost + pinned_cost
    return Plan(tuple(kept), triggered, kept_cost > room, trigger_cost, cost_after, covered=compacted or 0)


def newest_compaction(
    read: Callable[[int], MessageInfo], n: int, compactions: Sequence[int] | None = None
) -> int | None:
    """The index of the newest message holding a compaction (``MessageInfo.compaction``), or None;
    ``compactions``: the indices of every such message, when the caller found them already."""
    if compactions is not None:
        return compactions[-1] if compactions else None
    return next((i for i in range(n - 1, -1, -1) if read(i).compaction), None)


def _walk(
    read: Callable[[int], MessageInfo],
    cost_of: Callable[[int], int],
    n: int,
    pinned: set[int],
    room: int,
    start_on_human: bool,
    open_start: bool,
) -> tuple[list[int], int]:
    """The conversation messages to keep (rule 1 and 4) and their cost: the newest units that fit
    ``room``. ``open_start``: the history starts at a compaction, which stands for a human
    message under ``start_on_human`` when every unit after it is kept."""
    # Walk back over units, newest first. A tool result joins the unit of the nearest AI message
    # before it that made its call, when the walk reaches that message; a result answering calls
    # of several AI messages joins them all into one unit, decided when the last of them is
    # reached. Results never claimed are orphans; an AI message whose calls are not all answered
    # is dangling unless it is the newest conversation message (the pending call).
    accepted: list[_Unit] = []  # the newest units that fit, newest first
    spent = 0
    stopped = False
    newest: _Unit | None = None
    live: _Unit | None = None  # the newest human message, looked for past the stop point if need be
    seen_conversation = False
    open_results: dict[str, list[int]] = {}
    shared: dict[int, _Unit] = {}  # results answering several calls -> the unit that claimed them
    duplicates: set[int] = set()  # results answering a call an older result of its group answers
    carried: _Unit | None = None  # the unit of the AI message after a leading one, not decided yet
    carried_seen = False  # whether a conversation message came after the carried unit
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
        # a call leading to the carried unit of a call is judged as of that unit's place: a
        # pending call made of several items (Responses) stays pending
        leading = carried if info.leads else None
        in_run = leading is not None and bool(read(leading.first).call_ids)
        newer = carried_seen if in_run else seen_conversation
        if info.kind == "ai" and info.call_ids:
            unit, complete, alone = _claim(i, info.call_ids, open_results, shared, duplicates, read)
            if not complete and newer:
                unit.broken = True  # dangling: pruned, with whatever results it has
            elif alone and not info.leads and _followed_by_call(read, i, n):
                # a result of its own calls only, after the next AI message's calls: it would
                # answer them across that message (one result message answering calls of both
                # is Anthropic's shape, and stays)
                unit.broken = True
            if open_results and not _continues_block(read, i):
                # a new block starts here: the calls before it were to be answered before it,
                # so the results after it that it does not claim answer nothing (late results)
                _close(open_results, shared)
        else:
            if open_results:
                # results after this message cannot join a call before it: providers want a call's
                # results before the next user or assistant message
                _close(open_results, shared)
            unit = _Unit(i, [i], info.kind == "human")
        decided = [unit]
        if leading is not None:
            if unit.broken and not leading.broken and not _reasoned(read, pinned, i):
                decided = [leading, unit]  # a dangling call does not take the items after it along
            else:
                _merge(unit, leading, shared)
        elif info.leads == LEADS_REQUIRED and seen_conversation:
            unit.broken = True  # a reasoning item whose following item is not there
        carried = None
        if info.kind == "ai" and i:
            k = i - 1  # the conversation message before it: when it leads, this unit waits for it
            while k in pinned:
                k -= 1
            if k >= 0 and read(k).leads:
                carried, carried_seen = decided.pop(), newer
        seen_conversation = True
        for unit in decided:
            if unit.needs or unit.broken:
                continue
            unit.cost = sum(map(cost_of, unit.members))
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

    kept_units = _select(accepted, newest, live, room, start_on_human and not (open_start and not stopped))
    return [m for u in kept_units for m in u.members], sum(u.cost for u in kept_units)


def _close(open_results: dict[str, list[int]], shared: dict[int, _Unit]) -> None:
    """No older message can claim the open results: they are orphans, and a unit still waiting
    for an older call to claim the rest of a result message it holds is broken."""
    open_results.clear()
    for waiting in shared.values():
        if waiting.needs:
            waiting.broken = True


def _continues_block(read: Callable[[int], MessageInfo], i: int) -> bool:
    """True when the conversation message before the AI message ``i`` is an AI message with
    calls: consecutive calls are one block, and the results after the block may answer any of
    its calls (through a message answering several, or items of one model turn). After a tool
    result, a user message or an AI message without calls, a new block starts at ``i``."""
    k = i - 1
    while k >= 0:
        info = read(k)
        if info.kind not in PINNED_KINDS:
            return info.kind == "ai" and bool(info.call_ids)
        k -= 1
    return False


def _followed_by_call(read: Callable[[int], MessageInfo], i: int, n: int) -> bool:
    """True when the conversation message after ``i`` is an AI message with calls."""
    k = i + 1
    while k < n:
        info = read(k)
        if info.kind not in PINNED_KINDS:
            return info.kind == "ai" and bool(info.call_ids)
        k += 1
    return False


def _reasoned(read: Callable[[int], MessageInfo], pinned: set[int], i: int) -> bool:
    """True when a reasoning item (``LEADS_REQUIRED``) heads the run of leading messages that
    ends at ``i``: the items of that model turn cannot be sent without it, nor it without them."""
    k = i
    while k >= 0:
        if k not in pinned:
            leads = read(k).leads
            if leads == LEADS_REQUIRED:
                return True
            if not leads:
                return False
        k -= 1
    return False


def _merge(unit: _Unit, other: _Unit, shared: dict[int, _Unit]) -> None:
    """Add ``other``'s messages to ``unit`` (a leading message and the unit it leads to)."""
    unit.members = sorted({*unit.members, *other.members})
    if other.needs:
        unit.needs = (unit.needs or set()) | other.needs
    unit.broken = unit.broken or other.broken
    for j, owner in list(shared.items()):
        if owner is other:
            shared[j] = unit


def _claim(
    i: int,
    call_ids: tuple[str, ...],
    open_results: dict[str, list[int]],
    shared: dict[int, _Unit],
    duplicates: set[int],
    read: Callable[[int], MessageInfo],
) -> tuple[_Unit, bool, bool]:
    """The unit of the AI message ``i``, whether every call of it has a result, and whether a
    result it claims answers its own calls only (not those of a newer AI message too).

    It claims the open results of its calls (rule 1: the nearest AI message before a result
    owns it) and joins the units of results it shares with newer AI messages. A call answered
    by several result messages keeps the oldest (the one that came first); the others are
    duplicates, in no unit: pruned, and a unit holding one (a result message answering several
    calls) is broken. ``duplicates`` collects them.
    """
    unit = _Unit(i, [i], False)
    claimed: dict[str, list[int]] = {}
    for cid in dict.fromkeys(call_ids):
        results = open_results.pop(cid, None)
        if results:
            claimed[cid] = results
            for j in results[:-1]:  # walk order, newest first: all but the last are duplicates
                duplicates.add(j)
                holder = shared.get(j)
                if holder is not None:
                    holder.broken = True  # it holds a result message that answers a call twice
    joined: list[_Unit] = []
    complete = len(claimed) == len(set(call_ids))
    alone = False
    for results in claimed.values():
        first = results[-1]
        if first in duplicates:  # the one result message answers another call twice
            complete = False
            continue
        other = shared.get(first)
        if other is None:
            unit.members.append(first)
            rids = read(first).result_ids
            alone = alone or set(rids).issubset(call_ids)
            if len(rids) > 1:
                shared[first] = unit
                unit.needs = unit.needs or set()
                unit.needs.update(rids)
        elif other is not unit and all(other is not u for u in joined):
            joined.append(other)
    for other in joined:
        unit.members += other.members
        if other.needs:
            unit.needs = (unit.needs or set()) | other.needs
        unit.broken = unit.broken or other.broken
        for j in other.members:
            if shared.get(j) is other:
                shared[j] = unit
    if unit.needs:
        unit.needs.difference_update(call_ids)
    if len(unit.members) > 2:
        unit.members = sorted(set(unit.members))
    return unit, complete, alone


def first_unit(read: Callable[[int], MessageInfo], n: int, start: int = 0) -> list[int]:
    """What ``preserve_first`` pins: index 0, with its tool results when it is a tool call
    (``start``: the same for the message there, the newest compaction).

    Its results are the ones right after it, before the next user or AI message, the first
    result for each call (a second one is a duplicate, left to the walk, which prunes it). An
    orphan tool result at index 0, a call whose results are not all there before the next AI
    message, or one sharing a result message with a later call (they form one unit, planned by
    the walk) is not pinned; nor is a reasoning item, which cannot be sent without the item
    after it.

    A message that leads (a Responses item) is pinned alone, whatever AI item follows it: what
    follows index 0 in a reduced list is not what followed it when it was written (the newest
    compaction, the kept part of a later turn), so joining it to that item would prune a pinned
    message when the reduced list is reduced again (rules 2 and 7). The walk never joins a
    pinned message to the unit after it.
    """
    first = read(start)
    if first.kind == "tool" or first.leads == LEADS_REQUIRED:
        return []
    if first.kind != "ai" or not first.call_ids:
        return [start]
    wanted = set(first.call_ids)
    results: list[int] = []
    answered: set[str] = set()
    for j in range(start + 1, n):
        info = read(j)
        if info.kind == "tool" and wanted.intersection(info.result_ids):
            rids = info.result_ids
            if not wanted.issuperset(rids):
                return []
            if answered.intersection(rids):  # a second result for a call: not pinned
                if not answered.issuperset(rids):
                    return []  # it answers another call too: the walk decides
                continue
            results.append(j)
            answered.update(rids)
        elif info.kind in ("human", "ai"):
            # after its results, a new block; before them, a call its results would come after
            break
    return [start, *results] if wanted <= answered else []


@dataclass(frozen=True, slots=True)
class Tail:
    """How a valid history ends, enough to check messages appended to it without re-reading it:
    the call ids of its trailing tool group (empty when it ends in another message) and those of
    them still unanswered (a pending call)."""

    calls: frozenset[str] = frozenset()
    unanswered: frozenset[str] = frozenset()
    #: it ends in a message that cannot be sent without an AI message after it (a reasoning item)
    open_lead: bool = False
    #: two items of its trailing model turn make the same call id: the ids cannot tell which of
    #: them a result answers, so nothing appended is checked from the tail
    reused: bool = False


def tail_of(messages: Sequence[Any]) -> Tail:
    """The ``Tail`` of a history that can be sent as it is; reads from the end, only its last group."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        info = read_message(messages[i])
        if info.kind == "tool":
            answered.update(info.result_ids)
        elif info.kind in ("human", "ai"):
            calls = set(info.call_ids)
            made = len(info.call_ids)
            open_lead = info.leads == LEADS_REQUIRED
            # the AI messages leading to it are one model turn (Responses): their calls too
            for j in range(i - 1, -1, -1):
                before = read_message(messages[j])
                if before.kind in PINNED_KINDS:
                    continue
                if before.kind != "ai" or not before.leads or info.kind != "ai":
                    break
                calls.update(before.call_ids)
                made += len(before.call_ids)
            unanswered = frozenset(calls.difference(answered))
            return Tail(frozenset(calls), unanswered, open_lead, made != len(calls))
    return Tail()


def extend_tail(tail: Tail, infos: Iterable[MessageInfo]) -> Tail | None:
    """The ``Tail`` after appending messages read as ``infos`` to a valid history ending in ``tail``.

    None when the result may not be sendable (a result for a call outside the trailing group, a
    message after an unanswered call): then the whole history must be planned. Never None for a
    history the planner would prune, so a non-None answer means nothing needs pruning.
    """
    if tail.reused:
        return None
    calls, unanswered, open_lead = tail.calls, tail.unanswered, tail.open_lead
    for info in infos:
        kind = info.kind
        if kind == "tool":
            rids = info.result_ids
            if open_lead or not rids or not unanswered.issuperset(rids):
                return None  # an orphan, a late result or a second result for a call
            if len(rids) > 1 and len(set(rids)) < len(rids):
                return None  # one result message answering a call twice
            unanswered = unanswered.difference(rids)
        elif kind == "human" or kind == "ai":
            if unanswered or (open_lead and kind == "human"):
                return None
            calls = unanswered = frozenset(info.call_ids)
            open_lead = info.leads == LEADS_REQUIRED
    return Tail(calls, unanswered, open_lead)


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
