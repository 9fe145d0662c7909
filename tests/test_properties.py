"""Property-based tests: every rule of the pruning contract on generated conversations.

Conversations have tool groups with parallel calls, call ids reused in every turn or twice within
a turn, result messages answering calls of two AI messages (Anthropic's shape), unanswered calls,
results that arrive after the next user message (an interrupted run) or after the model's next
call, second results for a call (a retried tool, a replayed write), orphan results, unknown roles
and system messages, in every supported shape. Validity is judged by ``violations``, written
from the providers' rules and independent of the planner's code.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageInfo, MessageReducer, ReducerConfig, read_message
from agentstate_reducer.messages import LEADS_REQUIRED
from agentstate_reducer.summary import SUMMARY_ID, insert_position
from tests.convo import MULTI_RESULT_FORMATS, PROPERTY_BUILDERS, Spec

PINNED_KINDS = ("system", "unknown", "remove")
STEPS = [
    *("ai", "call", "call", "orphan", "unknown", "system", "dangling", "interrupted"),
    *("late", "retry", "stacked"),
]


@st.composite
def conversations(draw: st.DrawFn, multi: bool = False) -> Spec:
    spec: Spec = []
    n = 0

    def new_id(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    # how tool-call ids are chosen: fresh; the same ids in every turn (some local model servers
    # emit call_0 each time); the same ids for every call step within a turn
    reuse = draw(st.sampled_from(["fresh", "every_turn", "in_turn"]))

    def call_ids(k: int, turn_ids: list[str]) -> list[str]:
        if reuse == "every_turn":
            return [f"call_{j}" for j in range(k)]
        if reuse == "in_turn":
            while len(turn_ids) < k:
                turn_ids.append(new_id("x"))
            return turn_ids[:k]
        return [new_id("x") for _ in range(k)]

    steps = STEPS + (["multi"] if multi else [])
    if draw(st.booleans()):
        spec.append(("system", new_id("s")))
    if draw(st.booleans()):  # a history that starts with a tool call (preserve_first pins it)
        calls = call_ids(draw(st.integers(1, 2)), [])
        spec.append(("call", new_id("c"), calls))
        spec += [("tool", new_id("t"), cid) for cid in calls]
    late: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 8))):
        spec.append(("human", new_id("h")))
        spec += late  # results of an interrupted run, after the next user message
        late = []
        turn_ids: list[str] = []
        after_next: list[tuple[Any, ...]] = []  # results that arrive after the next step
        for _ in range(draw(st.integers(0, 4))):
            step = draw(st.sampled_from(steps))
            held, after_next = after_next, []
            if step in ("late", "retry"):
                calls = call_ids(draw(st.integers(1, 3)), turn_ids)
                spec.append(("call", new_id("c"), calls))
                answers = [("tool", new_id("t"), cid) for cid in draw(st.permutations(calls))]
                again = ("tool", new_id("t"), draw(st.sampled_from(calls)))  # a second result
                if step == "late":  # one result comes after the model's next call
                    after_next.append(answers.pop(draw(st.integers(0, len(answers) - 1))))
                elif draw(st.booleans()):  # the retried result right after the first, or later
                    answers.insert(draw(st.integers(0, len(answers))), again)
                else:
                    after_next.append(again)
                spec += answers
            elif step == "stacked":  # two AI messages with calls in a row, then all the results
                stacked = [*call_ids(1, turn_ids), new_id("x")]
                spec.append(("call", new_id("c"), stacked[:1]))
                spec.append(("call", new_id("c"), stacked[1:]))
                for cid in draw(st.permutations(stacked)):
                    spec.append(("tool", new_id("t"), cid))
            elif step == "call":
                calls = call_ids(draw(st.integers(1, 3)), turn_ids)
                spec.append(("call", new_id("c"), calls))
                for cid in draw(st.permutations(calls)):
                    spec.append(("tool", new_id("t"), cid))
            elif step == "multi":
                first, second = call_ids(2, turn_ids) if reuse != "fresh" else call_ids(2, [])
                spec.append(("call", new_id("c"), [first]))
                spec.append(("call", new_id("c"), [second]))
                spec.append(("tool", new_id("t"), draw(st.permutations([first, second]))))
            elif step == "dangling":
                spec.append(("call", new_id("d"), [new_id("x")]))
            elif step == "interrupted":
                cid = new_id("x")
                spec.append(("call", new_id("d"), [cid]))
                late.append(("tool", new_id("t"), cid))
            elif step == "orphan":
                spec.append(("tool", new_id("o"), new_id("nowhere")))
            else:
                spec.append((step, new_id(step[0])))
            spec += held
        late += after_next  # no next step in this turn: after the next user message
    if draw(st.booleans()):  # a pending call at the end, answered in part or not at all
        calls = call_ids(draw(st.integers(1, 3)), [])
        spec.append(("call", new_id("p"), calls))
        spec += [("tool", new_id("t"), cid) for cid in calls[: draw(st.integers(0, len(calls) - 1))]]
    return spec


def violations(infos: list[MessageInfo]) -> list[str]:
    """What a provider rejects in a history (system and unknown-role messages aside).

    Consecutive assistant messages with calls form one block (Anthropic merges consecutive
    assistant messages); the results after a block answer its calls, the newest call with the
    id, each call once; a result message answering only calls of a message followed by another
    message of the block is out of place (OpenAI, and Anthropic through langchain-anthropic,
    which does not merge them), unless that message leads to the next (a Responses model turn);
    every call must be answered before the next user message, assistant message without calls,
    or assistant message with calls after a result (the next block),
    except those of the last assistant message when only results follow it (or of the last run
    of call items of one Responses model turn, each leading to the next). A reasoning item
    (Responses) must be followed by an assistant item.
    """
    out: list[str] = []
    owner: dict[str, int] = {}  # call id -> position of the newest message in the block making it
    needed: set[tuple[int, str]] = set()
    answered: set[tuple[int, str]] = set()
    last_call: set[int] = set()
    previous: MessageInfo | None = None  # the conversation message before this one
    previous_pos = -1
    results_seen = False  # a result came after the block's last call

    def close() -> None:
        for pos, cid in sorted(needed - answered):
            out.append(f"call {cid} of {infos[pos].id} unanswered before a later message")

    for pos, info in enumerate(infos):
        if info.kind in PINNED_KINDS:
            continue
        before, previous = previous, info
        before_pos, previous_pos = previous_pos, pos
        if before is not None and before.leads == LEADS_REQUIRED and info.kind != "ai":
            out.append(f"reasoning item {before.id} without the item it leads to")
        if info.kind == "tool":
            if not info.result_ids:
                out.append(f"result {info.id} answers nothing")
            owners = {owner[rid] for rid in info.result_ids if rid in owner}
            if len(owners) == 1:
                (at,) = owners
                if not infos[at].leads and any(p > at for p, _ in needed):
                    out.append(f"result {info.id} answers {infos[at].id} across a later call")
            for rid in info.result_ids:
                if rid in owner:
                    if (owner[rid], rid) in answered:
                        out.append(f"result {info.id} answers {rid} a second time")
                    answered.add((owner[rid], rid))
                else:
                    out.append(f"result {info.id} for {rid} has no call in the block before it")
            results_seen = True
        elif info.kind == "ai" and info.call_ids:
            if results_seen:  # a call after results: the block before it is over
                close()
                owner, needed, answered = {}, set(), set()
                results_seen = False
            for cid in info.call_ids:
                owner[cid] = pos
                needed.add((pos, cid))
            joined = before is not None and before.leads and before.call_ids and before_pos in last_call
            last_call = {*last_call, pos} if joined else {pos}
        else:
            close()
            owner, needed, answered = {}, set(), set()
            results_seen = False
    needed = {(pos, cid) for pos, cid in needed if pos not in last_call}  # the pending call at the end
    close()
    return out


def _ids(messages: list[Any]) -> list[str | None]:
    return [read_message(m).id for m in messages]


def _check_contract(msgs: list[Any], cfg: ReducerConfig) -> None:
    before = copy.deepcopy(msgs)
    reducer = MessageReducer(config=cfg)
    result = reducer.reduce(msgs)
    assert msgs == before  # not mutated

    # 5. surviving and pruned partition the input, each in input order
    pos = {id(m): i for i, m in enumerate(msgs)}
    kept_pos = [pos[id(m)] for m in result.surviving]
    pruned_pos = [pos[id(m)] for m in result.pruned]
    assert kept_pos == sorted(kept_pos) and pruned_pos == sorted(pruned_pos)
    assert sorted(kept_pos + pruned_pos) == list(range(len(msgs)))

    infos = [read_message(m) for m in msgs]
    kept_infos = [infos[i] for i in kept_pos]

    # 3. every output can be sent, triggered or not; system and unknown messages are never pruned
    assert violations(kept_infos) == []
    for i, info in enumerate(infos):
        if info.kind in ("system", "unknown"):
            assert i in kept_pos, f"pinned {info.id} was pruned"

    if not result.stats.triggered:
        # untriggered: only what cannot be sent is pruned, and a sendable history is untouched
        assert result.stats.repaired == bool(result.pruned)
        if violations(infos) == []:
            assert result.pruned == []
    else:
        # the live turn: the newest human message survives
        humans = [i for i, info in enumerate(infos) if info.kind == "human"]
        if humans:
            assert humans[-1] in kept_pos

        # the kept history (after pinned messages) starts with a human message
        pinned_idx = {i for i, info in enumerate(infos) if info.kind in ("system", "unknown")}
        if cfg.preserve_first and infos:
            pinned_idx.add(0)
            if infos[0].kind == "ai":  # a call at index 0 is pinned with its results
                for j in range(1, len(infos)):
                    if infos[j].kind in ("human", "ai"):
                        break
                    if infos[j].kind == "tool" and set(infos[j].result_ids) <= set(infos[0].call_ids):
                        pinned_idx.add(j)
        first_free = next((i for i in kept_pos if i not in pinned_idx), None)
        if first_free is not None and any(h not in pinned_idx for h in humans):
            assert infos[first_free].kind == "human"

        # within budget unless the result says it is over the target
        if not result.stats.over_target:
            if cfg.max_tokens is None:
                assert len([i for i in kept_pos if i not in pinned_idx]) <= cfg.min_messages
            else:
                assert result.stats.tokens_after is not None
                assert result.stats.tokens_after <= (cfg.effective_target_tokens or 0)

    # deterministic, and idempotent under its trigger: planned afresh and through the reducer's
    # memo of its last output
    again = MessageReducer(config=cfg).reduce(msgs)
    assert [id(m) for m in again.surviving] == [id(m) for m in result.surviving]
    fresh = MessageReducer(config=cfg).reduce(result.surviving)
    assert [id(m) for m in fresh.surviving] == [id(m) for m in result.surviving]
    memo = reducer.reduce(result.surviving)
    assert [id(m) for m in memo.surviving] == [id(m) for m in result.surviving]


def _check_appending(msgs: list[Any], cut: int, cfg: ReducerConfig) -> None:
    """reduce(previous output, new) through the reducer's memo equals planning afresh."""
    reducer = MessageReducer(config=cfg)
    first = reducer.reduce(msgs[:cut])
    through_memo = reducer.reduce(first.surviving, msgs[cut:])
    afresh = MessageReducer(config=cfg).reduce([*first.surviving, *msgs[cut:]])
    assert _ids(through_memo.surviving) == _ids(afresh.surviving)
    assert violations([read_message(m) for m in through_memo.surviving]) == []


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def shaped(draw: st.DrawFn) -> tuple[str, list[Any]]:
    fmt = draw(st.sampled_from(list(PROPERTY_BUILDERS)))
    return fmt, PROPERTY_BUILDERS[fmt](draw(conversations(multi=fmt in MULTI_RESULT_FORMATS)))


@SETTINGS
@given(
    convo=shaped(),
    min_messages=st.integers(0, 12),
    extra=st.integers(0, 30),
    preserve_first=st.booleans(),
)
def test_count_mode_contract(
    convo: tuple[str, list[Any]], min_messages: int, extra: int, preserve_first: bool
) -> None:
    cfg = ReducerConfig(
        min_messages=min_messages, max_messages=min_messages + extra, preserve_first=preserve_first
    )
    _check_contract(convo[1], cfg)


def _count_chars(message: Any) -> int:
    return len(str(read_message(message).content or "")) // 4 + 3


@pytest.mark.slow
@SETTINGS
@given(
    convo=shaped(),
    target=st.integers(0, 300),
    extra=st.integers(0, 400),
    preserve_first=st.booleans(),
)
def test_token_mode_contract(
    convo: tuple[str, list[Any]], target: int, extra: int, preserve_first: bool
) -> None:
    cfg = ReducerConfig(
        max_tokens=target + extra,
        target_tokens=target,
        token_counter=_count_chars,
        preserve_first=preserve_first,
    )
    _check_contract(convo[1], cfg)


@pytest.mark.slow
@SETTINGS
@given(convo=shaped(), preserve_first=st.booleans())
def test_untriggered_contract(convo: tuple[str, list[Any]], preserve_first: bool) -> None:
    """No limits at all: the output is still sendable, and only what cannot be sent is pruned."""
    _check_contract(convo[1], ReducerConfig(preserve_first=preserve_first))


@pytest.mark.slow
@SETTINGS
@given(
    convo=shaped(),
    data=st.data(),
    min_messages=st.integers(0, 12),
    extra=st.integers(0, 30),
    preserve_first=st.booleans(),
)
def test_appending_to_a_checked_history(
    convo: tuple[str, list[Any]], data: st.DataObject, min_messages: int, extra: int, preserve_first: bool
) -> None:
    msgs = convo[1]
    cut = data.draw(st.integers(0, len(msgs)))
    for cfg in (
        ReducerConfig(
            min_messages=min_messages, max_messages=min_messages + extra, preserve_first=preserve_first
        ),
        ReducerConfig(preserve_first=preserve_first),
    ):
        _check_appending(msgs, cut, cfg)


def _summarize(messages: list[Any]) -> str:
    return "summary of " + " ".join(str(read_message(m).id) for m in messages)


@SETTINGS
@given(
    convo=shaped(),
    min_messages=st.integers(0, 12),
    extra=st.integers(0, 10),
    preserve_first=st.booleans(),
    rounds=st.integers(1, 3),
)
def test_inject_summary_contract(
    convo: tuple[str, list[Any]], min_messages: int, extra: int, preserve_first: bool, rounds: int
) -> None:
    """One summary, placed after the pinned lead; reducing the output again keeps it as it is."""
    cfg = ReducerConfig(
        min_messages=min_messages,
        max_messages=min_messages + extra,
        preserve_first=preserve_first,
        summarize_fn=_summarize,
        inject_summary=True,
    )
    history = convo[1]
    for _ in range(rounds):  # a summary already in the history rolls forward
        out = MessageReducer(config=cfg).reduce(history).surviving
        summaries = [j for j, m in enumerate(out) if read_message(m).id == SUMMARY_ID]
        assert len(summaries) <= 1
        if summaries:
            rest = out[: summaries[0]] + out[summaries[0] + 1 :]
            assert summaries[0] == insert_position(rest, preserve_first=preserve_first)
        without_summary = [read_message(m) for j, m in enumerate(out) if j not in summaries]
        assert violations(without_summary) == []
        again = MessageReducer(config=cfg).reduce(out)
        assert _ids(again.surviving) == _ids(out), "not idempotent"
        history = [*out, *history[len(history) // 2 :]]
