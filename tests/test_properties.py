"""Property-based tests: every rule of the pruning contract on generated conversations.

Conversations have tool groups with parallel calls, unanswered calls, orphan results, unknown
roles, malformed messages and system messages, in every supported shape.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from tests.convo import BUILDERS, Spec


@st.composite
def conversations(draw: st.DrawFn) -> Spec:
    spec: Spec = []
    n = 0

    def new_id(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    if draw(st.booleans()):
        spec.append(("system", new_id("s")))
    for _ in range(draw(st.integers(0, 8))):
        spec.append(("human", new_id("h")))
        for _ in range(draw(st.integers(0, 4))):
            step = draw(st.sampled_from(["ai", "call", "call", "orphan", "unknown", "system", "dangling"]))
            if step == "call":
                calls = [new_id("x") for _ in range(draw(st.integers(1, 3)))]
                spec.append(("call", new_id("c"), calls))
                for cid in draw(st.permutations(calls)):
                    spec.append(("tool", new_id("t"), cid))
            elif step == "dangling":
                spec.append(("call", new_id("d"), [new_id("x")]))
            elif step == "orphan":
                spec.append(("tool", new_id("o"), new_id("nowhere")))
            else:
                spec.append((step, new_id(step[0])))
    return spec


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
    kept = set(kept_pos)
    if not result.stats.triggered:
        assert result.pruned == []
        return

    # pinned: system and unknown messages, and index 0 unless it is an orphan or dangling call
    for i, info in enumerate(infos):
        if info.kind in ("system", "unknown"):
            assert i in kept, f"pinned {info.id} was pruned"

    # 4. no tool result without its call before it, no call without all its results (unless it is
    # the pending call at the end of the kept history)
    seen_calls: set[str] = set()
    kept_infos = [infos[i] for i in kept_pos]
    for info in kept_infos:
        if info.kind == "ai":
            seen_calls.update(info.call_ids)
        if info.kind == "tool":
            assert info.result_ids and all(r in seen_calls for r in info.result_ids), f"orphan {info.id}"
    answered = {r for info in kept_infos if info.kind == "tool" for r in info.result_ids}
    conversation = [info for info in kept_infos if info.kind in ("human", "ai", "tool")]
    last_ai = max((j for j, info in enumerate(conversation) if info.kind == "ai"), default=None)
    for j, info in enumerate(conversation):
        if info.kind == "ai" and info.call_ids and not set(info.call_ids) <= answered:
            assert j == last_ai and all(c.kind == "tool" for c in conversation[j + 1 :]), (
                f"dangling {info.id}"
            )

    # 3. the live turn: the newest human message survives
    humans = [i for i, info in enumerate(infos) if info.kind == "human"]
    if humans:
        assert humans[-1] in kept

    # 2. the kept history (after pinned messages) starts with a human message
    pinned_idx = {i for i, info in enumerate(infos) if info.kind in ("system", "unknown")}
    if cfg.preserve_first:
        pinned_idx.add(0)
    first_free = next((i for i in kept_pos if i not in pinned_idx), None)
    if first_free is not None and any(h not in pinned_idx for h in humans):
        assert infos[first_free].kind == "human"

    # 1. within budget unless the result says it is over the target
    if not result.stats.over_target:
        if cfg.max_tokens is None:
            assert len([i for i in kept_pos if i not in pinned_idx]) <= cfg.min_messages
        else:
            assert result.stats.tokens_after is not None
            assert result.stats.tokens_after <= (cfg.effective_target_tokens or 0)

    # deterministic, and idempotent under its trigger
    again = reducer.reduce(msgs)
    assert [id(m) for m in again.surviving] == [id(m) for m in result.surviving]
    twice = reducer.reduce(result.surviving)
    assert [id(m) for m in twice.surviving] == [id(m) for m in result.surviving]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    spec=conversations(),
    fmt=st.sampled_from(list(BUILDERS)),
    min_messages=st.integers(0, 12),
    extra=st.integers(0, 10),
    preserve_first=st.booleans(),
)
def test_count_mode_contract(
    spec: Spec, fmt: str, min_messages: int, extra: int, preserve_first: bool
) -> None:
    cfg = ReducerConfig(
        min_messages=min_messages, max_messages=min_messages + extra, preserve_first=preserve_first
    )
    _check_contract(BUILDERS[fmt](spec), cfg)


def _count_chars(message: Any) -> int:
    return len(str(read_message(message).content or "")) // 4 + 3


@SETTINGS
@given(
    spec=conversations(),
    fmt=st.sampled_from(list(BUILDERS)),
    target=st.integers(0, 300),
    extra=st.integers(0, 200),
    preserve_first=st.booleans(),
)
def test_token_mode_contract(spec: Spec, fmt: str, target: int, extra: int, preserve_first: bool) -> None:
    cfg = ReducerConfig(
        max_tokens=target + extra,
        target_tokens=target,
        token_counter=_count_chars,
        preserve_first=preserve_first,
    )
    _check_contract(BUILDERS[fmt](spec), cfg)
