"""Reducing a reduced list again keeps every pinned message (contract rules 2 and 7).

``preserve_first`` pins index 0 of the list being reduced. In a reduced list, what follows index 0
is not what followed it when it was written (the newest compaction, the kept part of a later
turn): an assistant item first (OpenAI Responses) right before a compaction item was pruned by
the next reduction. Checked in every shape built from one spec, on both paths, fresh and warm.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.messages import LEADS_REQUIRED
from agentstate_reducer.tokens import heuristic_counter
from tests.convo import PROPERTY_BUILDERS, SHAPES, Spec, ids
from tests.paths import column_path
from tests.test_properties import violations

SPEC: Spec = [
    ("ai", "a0"),
    ("human", "h1"),
    ("ai", "a1"),
    ("human", "h2"),
    ("compaction", "k"),
    ("human", "h3"),
    ("ai", "a3"),
]


@pytest.mark.parametrize("on", [True, False], ids=["columns", "reference"])
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_an_assistant_item_first_stays_before_a_compaction(fmt: str, on: bool) -> None:
    cfg = ReducerConfig(min_messages=2, max_messages=3, preserve_first=True)
    with column_path(on):
        out = MessageReducer(config=cfg).reduce(SHAPES[fmt](SPEC))
        assert ids(out.surviving) == ["a0", "k", "h3", "a3"]
        again = MessageReducer(config=cfg).reduce(out.surviving)
        assert ids(again.surviving) == ["a0", "k", "h3", "a3"] and again.pruned == []


@pytest.mark.parametrize("on", [True, False], ids=["columns", "reference"])
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_an_assistant_item_first_stays_before_the_kept_part_of_a_later_turn(fmt: str, on: bool) -> None:
    """Without ``start_on_human`` the kept part may start with a call: in a Responses list the
    assistant item first then sits right before a call item of another turn."""
    spec: Spec = [
        ("ai", "a0"),
        ("human", "h1"),
        ("ai", "a1"),
        ("human", "h2"),
        ("call", "c1", ["x1"]),
        ("tool", "t1", "x1"),
        ("human", "h3"),
        ("ai", "a3"),
    ]
    cfg = ReducerConfig(min_messages=4, max_messages=4, preserve_first=True, start_on_human=False)
    with column_path(on):
        out = MessageReducer(config=cfg).reduce(SHAPES[fmt](spec))
        assert ids(out.surviving) == ["a0", "c1", "t1", "h3", "a3"]
        again = MessageReducer(config=cfg).reduce(out.surviving)
        assert ids(again.surviving) == ids(out.surviving) and again.pruned == []


def test_an_assistant_item_first_right_before_a_compaction_is_pinned_at_once() -> None:
    """Pinned from the first reduction on: index 0 is pinned whatever follows it."""
    spec: Spec = [("ai", "a0"), ("compaction", "k1"), ("human", "h1"), ("ai", "a1"), ("human", "h2")]
    spec += [("compaction", "k2"), ("human", "h3"), ("ai", "a3")]
    cfg = ReducerConfig(min_messages=2, max_messages=4, preserve_first=True)
    out = MessageReducer(config=cfg).reduce(SHAPES["responses_items"](spec))
    assert ids(out.surviving) == ["a0", "k2", "h3", "a3"]


# --- the property -------------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn, fmt: str) -> Spec:
    """Turns of user messages, answers and tool calls (parallel ones, ids reused across turns),
    an assistant message, a user message, a call or a system message first, compactions between
    turns, now and then a system or unknown-role message; a pending call at the end."""
    spec: Spec = []
    n = 0

    def mid(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    def group(ids: list[str]) -> Spec:
        return [("call", mid("c"), ids), *[("tool", mid("t"), c) for c in draw(st.permutations(ids))]]

    def call_ids() -> list[str]:
        return draw(
            st.lists(st.sampled_from(["call_0", "call_1", "x", "y"]), min_size=1, max_size=2, unique=True)
        )

    first = draw(st.sampled_from(["ai", "human", "call", "system"]))
    spec += group(call_ids()) if first == "call" else [(first, mid(first[0]))]
    for turn in range(draw(st.integers(1, 5))):
        if turn and draw(st.booleans()):
            spec.append(("compaction", mid("k")))
        if draw(st.integers(0, 5)) == 0:
            spec.append((draw(st.sampled_from(["system", "unknown"])), mid("p")))
        spec.append(("human", mid("h")))
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                spec += group(call_ids())
            else:
                spec.append(("ai", mid("a")))
    if draw(st.booleans()):
        spec.append(("call", mid("p"), call_ids()))
    return spec


def _pinned(messages: list[Any], preserve_first: bool) -> list[int]:
    """What rule 2 pins in ``messages``, judged from their readings: system and unknown-role
    messages, and with ``preserve_first`` index 0 when it can be sent alone (neither a tool
    result, a reasoning item nor a tool call)."""
    infos = [read_message(m) for m in messages]
    out = [i for i, info in enumerate(infos) if info.kind in ("system", "unknown")]
    if preserve_first and infos and infos[0].kind in ("human", "ai"):
        if not infos[0].call_ids and infos[0].leads != LEADS_REQUIRED:
            out.append(0)
    return sorted(set(out))


#: limits a reduced list may still be over (pinned messages count toward the trigger), so the
#: second reduction is triggered too
POLICIES: list[dict[str, Any]] = [
    {"min_messages": 2, "max_messages": 3},
    {"min_messages": 4, "max_messages": 4, "start_on_human": False},
    {"min_messages": 0, "max_messages": 1},
    {"min_messages": 3, "max_messages": 8},
    {"max_tokens": 120, "target_tokens": 120},
    {"max_tokens": 200, "target_tokens": 150, "start_on_human": False},
]


@pytest.mark.parametrize("fmt", list(PROPERTY_BUILDERS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reducing_a_reduced_list_again_keeps_every_pinned_message(fmt: str, data: st.DataObject) -> None:
    msgs = PROPERTY_BUILDERS[fmt](data.draw(histories(fmt)))
    for policy, on in itertools.product(POLICIES, (True, False)):
        cfg = ReducerConfig(token_counter=heuristic_counter(), preserve_first=True, **policy)
        with column_path(on):
            reducer = MessageReducer(config=cfg)
            out = reducer.reduce(msgs).surviving
            assert violations([read_message(m) for m in out]) == []
            pinned = [id(out[i]) for i in _pinned(out, True)]
            for again in (MessageReducer(config=cfg).reduce(out), reducer.reduce(out)):  # fresh, warm
                kept = [id(m) for m in again.surviving]
                assert all(p in kept for p in pinned), (policy, ids(again.pruned))
                assert kept == [id(m) for m in out], (policy, ids(again.pruned))  # rule 7: nothing changes
