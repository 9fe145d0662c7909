"""The planner by columns (``agentstate_reducer._columns.table``) equals the reference planner wherever it
answers, and answers for every history of plain structure (hypothesis)."""

from __future__ import annotations

import copy
import pickle
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer._columns.table import TableState, newest_over, plan_by_table
from agentstate_reducer.messages import read_message
from agentstate_reducer.planner import UNLIMITED, Plan, plan, runs_of
from tests.convo import BUILDERS, MULTI_RESULT_FORMATS, PROPERTY_BUILDERS, Spec
from tests.test_properties import conversations

#: shapes whose tool results are one message per call (the plain structure the table plans)
PLAIN_SHAPES = ["langchain_dict", "openai_dict", "langchain_object"]


@st.composite
def plain_conversations(draw: st.DrawFn) -> Spec:
    """Sendable histories: turns of human / AI / AI calls answered in order, system and unknown
    messages anywhere, a pending call at the end; call ids reused across turns or not."""
    spec: Spec = []
    n = 0

    def new_id(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    reuse = draw(st.booleans())
    if draw(st.booleans()):
        spec.append(("system", new_id("s")))
    if draw(st.booleans()):  # a history that starts with a call (preserve_first pins it)
        calls = [new_id("x") for _ in range(draw(st.integers(1, 2)))]
        spec.append(("call", new_id("c"), calls))
        spec += [("tool", new_id("t"), cid) for cid in calls]
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 5)) > 0:
            spec.append(("human", new_id("h")))
        for _ in range(draw(st.integers(0, 3))):
            step = draw(st.sampled_from(["ai", "call", "call", "system", "unknown"]))
            if step == "call":
                k = draw(st.integers(1, 3))
                calls = [f"k{j}" if reuse else new_id("x") for j in range(k)]
                spec.append(("call", new_id("c"), calls))
                spec += [("tool", new_id("t"), cid) for cid in calls]
                if draw(st.integers(0, 4)) == 0:
                    spec.append(("system", new_id("s")))
            else:
                spec.append((step, new_id(step[0])))
    if draw(st.booleans()):  # a pending call: answered in part or not at all
        calls = [new_id("p") for _ in range(draw(st.integers(1, 3)))]
        spec.append(("call", new_id("c"), calls))
        spec += [("tool", new_id("t"), cid) for cid in calls[: draw(st.integers(0, len(calls) - 1))]]
    return spec


@st.composite
def loose_conversations(draw: st.DrawFn) -> Spec:
    """Any order of messages over a pool of four call ids: calls answered in full, in part, out
    of order or not at all, results of no call or of an older call, before or after other
    messages, system and unknown messages between them."""
    spec: Spec = []
    pool = ["a", "b", "c", "d"]
    for n in range(draw(st.integers(0, 14))):
        step = draw(st.sampled_from(["human", "ai", "call", "call", "tool", "system", "unknown"]))
        if step == "call":
            calls = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
            spec.append(("call", f"c{n}", calls))
            answers = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            spec += [("tool", f"t{n}_{cid}", cid) for cid in answers]
        elif step == "tool":
            spec.append(("tool", f"t{n}", draw(st.sampled_from([*pool, "zz"]))))
        else:
            spec.append((step, f"{step[0]}{n}"))
    return spec


def _costs(msgs: list[Any]) -> list[int]:
    return [len(str(read_message(m).content or "")) % 7 + (i % 3) for i, m in enumerate(msgs)]


def _both(
    msgs: list[Any], token: bool, budget: int, preserve_first: bool, start_on_human: bool, slack: int
) -> tuple[Plan | None, Plan]:
    costs = _costs(msgs) if token else None
    repair = budget == UNLIMITED
    trigger = sum(costs) if costs is not None else len(msgs)
    reference = plan(
        msgs,
        costs.__getitem__ if costs is not None else (lambda i: 1),
        trigger_cost=trigger,
        budget=budget,
        count_mode=not token,
        preserve_first=preserve_first,
        start_on_human=start_on_human and not repair,
        triggered=not repair,
    )
    infos = [read_message(m) for m in msgs] if token else None
    fast, _ = plan_by_table(
        msgs,
        costs,
        trigger_cost=trigger,
        budget=budget,
        preserve_first=preserve_first,
        start_on_human=start_on_human and not repair,
        infos=infos,
        triggered=not repair,
        slack=slack,
    )
    if fast is not None:
        assert fast == reference
    return fast, reference


budgets = st.one_of(st.integers(-3, 40), st.just(UNLIMITED))
#: what ``_both`` plans with, besides the history
PLANNING: dict[str, st.SearchStrategy[Any]] = {
    "token": st.booleans(),
    "budget": budgets,
    "preserve_first": st.booleans(),
    "start_on_human": st.booleans(),
    "slack": st.integers(0, 3),
}


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(PLAIN_SHAPES),
    spec=plain_conversations(),
    **PLANNING,
)
def test_the_table_plans_every_plain_history_as_the_reference_does(
    fmt: str, spec: Spec, token: bool, budget: int, preserve_first: bool, start_on_human: bool, slack: int
) -> None:
    fast, _ = _both(BUILDERS[fmt](spec), token, budget, preserve_first, start_on_human, slack)
    assert fast is not None


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    fmt=st.sampled_from(PLAIN_SHAPES),
    spec=loose_conversations(),
    **PLANNING,
)
def test_the_table_equals_the_reference_on_loose_histories(
    fmt: str, spec: Spec, token: bool, budget: int, preserve_first: bool, start_on_human: bool, slack: int
) -> None:
    _both(BUILDERS[fmt](spec), token, budget, preserve_first, start_on_human, slack)


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(list(PROPERTY_BUILDERS)),
    data=st.data(),
    **PLANNING,
)
def test_the_table_equals_the_reference_wherever_it_answers(
    fmt: str,
    data: st.DataObject,
    token: bool,
    budget: int,
    preserve_first: bool,
    start_on_human: bool,
    slack: int,
) -> None:
    """Every shape, broken histories included (orphans, dangling and interleaved calls, results
    after the next user message, results answering two calls, Responses items)."""
    spec = data.draw(conversations(multi=fmt in MULTI_RESULT_FORMATS))
    _both(PROPERTY_BUILDERS[fmt](spec), token, budget, preserve_first, start_on_human, slack)


INTERLEAVED: Spec = [
    ("human", "h1"),
    ("call", "c1", ["x", "y"]),
    ("tool", "t1", "x"),
    ("call", "c2", ["z"]),
    ("tool", "t2", "y"),
    ("tool", "t3", "z"),
]


def _equal_or_left(msgs: list[Any]) -> None:
    """Equal to the reference at every budget (a small window may not reach the odd part), and
    left to the reference when the whole history is planned."""
    for budget in [*range(len(msgs) + 1), UNLIMITED]:
        for token in (False, True):
            for start_on_human in (False, True):
                fast, _ = _both(msgs, token, budget, True, start_on_human, 0)
                if budget == UNLIMITED:
                    assert fast is None


def test_interleaved_calls_are_left_to_the_reference() -> None:
    """Results of two calls answered out of step (a result after the other AI message) are one
    flat sequence equal to the calls, but not one run per call: the table must not answer,
    with the newest message a human one or a pending call."""
    for tail in ([("human", "h2")], [("call", "c3", ["p", "q"]), ("tool", "t4", "p")]):
        for fmt in PLAIN_SHAPES:
            _equal_or_left(BUILDERS[fmt]([*INTERLEAVED, *tail]))


def test_results_answering_one_call_each_out_of_step_are_left_to_the_reference() -> None:
    """One call per AI message, each followed by one result, but the results answer each other's
    call: counted by letters the window looks plain, so the ids must be compared."""
    swapped = [("call", "c1", ["a"]), ("tool", "t1", "b"), ("call", "c2", ["b"]), ("tool", "t2", "a")]
    for tail in ([("ai", "a1"), ("human", "h2")], [("call", "c3", ["p"])]):
        for fmt in PLAIN_SHAPES:
            _equal_or_left(BUILDERS[fmt]([("human", "h1"), *swapped, *tail]))


def test_late_and_second_results_are_left_to_the_reference() -> None:
    """A result after the model's next call, or a second result for a call: the table leaves
    them to the reference (which prunes them) at every budget that reaches them."""
    late = [("human", "h1"), ("call", "c1", ["x", "y"]), ("tool", "t1", "x"), ("call", "c2", ["z"])]
    again_w = ("tool", "t2", "w")
    cases: list[Spec] = [
        [*late, ("tool", "t3", "z"), ("tool", "t2", "y")],
        [("human", "h1"), ("call", "c1", ["x"]), ("tool", "t1", "x"), ("tool", "t2", "x"), ("ai", "a1")],
        [("human", "h1"), ("call", "c1", ["x", "y"]), ("tool", "t1", "x"), ("tool", "t2", "x")],
        [("call", "c0", ["w"]), ("tool", "t0", "w"), ("call", "c1", ["x"]), ("tool", "t1", "x"), again_w],
        [("call", "c0", ["w"]), ("tool", "t0", "w"), ("tool", "t1", "w"), ("human", "h1")],
    ]
    for spec in cases:
        for fmt in PLAIN_SHAPES:
            _equal_or_left(BUILDERS[fmt](spec))


@settings(max_examples=300, deadline=None)
@given(
    costs=st.lists(st.sampled_from((0, 0, 0, 1, 7)), max_size=3000),
    at=st.floats(0, 1),
    off=st.integers(-1, 1),
)
def test_newest_over_finds_where_the_newest_messages_worth_more_start(
    costs: list[int], at: float, off: int
) -> None:
    """Amounts that equal, or nearly, what the newest messages from some place are worth (long
    runs of free messages make such places many, where a search may stop one off)."""
    _check_newest_over(costs, sum(costs[int(at * len(costs)) :]) + off)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 3000), ones=st.lists(st.floats(0, 1), max_size=6))
def test_newest_over_at_every_amount_of_a_mostly_free_history(n: int, ones: list[float]) -> None:
    """Long runs of free messages, every amount: each place the search halves at is where the
    newest messages are worth exactly some amount."""
    costs = [0] * n
    for at in ones:
        if n:
            costs[int(at * (n - 1))] = 1
    for amount in range(-1, sum(costs) + 1):
        _check_newest_over(costs, amount)


def _check_newest_over(costs: list[int], amount: int) -> None:
    newest = list(accumulate(reversed(costs)))  # newest[j]: the cost of the newest j + 1
    over = [len(costs) - 1 - j for j, cost in enumerate(newest) if cost > amount]
    assert newest_over(costs, amount) == (over[0] if over else 0)


def test_a_result_message_answering_nothing_is_left_to_the_reference() -> None:
    """A tool message with no call id is an orphan even inside a tool group whose other result
    answers two calls: counted by ids the group looks whole, so the table must not answer."""
    msgs: list[Any] = [
        {"role": "user", "content": "q", "id": "h1"},
        {"role": "assistant", "content": "", "id": "c1", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "y", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ]},
        {"role": "user", "id": "t1", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "1"},
            {"type": "tool_result", "tool_use_id": "y", "content": "2"},
        ]},
        {"role": "tool", "content": "no call id", "id": "t2"},
        {"role": "user", "content": "q2", "id": "h2"},
    ]  # fmt: skip
    assert [read_message(m).kind for m in msgs] == ["human", "ai", "tool", "tool", "human"]
    _equal_or_left(msgs)


@settings(max_examples=200, deadline=None)
@given(
    fmt=st.sampled_from(PLAIN_SHAPES),
    spec=plain_conversations(),
    data=st.data(),
    token=st.booleans(),
    budget=budgets,
    slack=st.integers(0, 3),
)
def test_a_remembered_table_plans_a_longer_list_as_a_fresh_table_does(
    fmt: str, spec: Spec, data: st.DataObject, token: bool, budget: int, slack: int
) -> None:
    """A list that starts with the last one planned (or with all of it but its last message)
    reads only its new messages; a message replaced since is not taken from the table."""
    msgs = BUILDERS[fmt](spec)
    cut = data.draw(st.integers(0, len(msgs)))
    remembered: list[TableState | None] = [None]

    def planned(part: list[Any], infos: list[Any] | None, with_memo: bool) -> Plan | None:
        costs = _costs(part) if token else None
        got, state = plan_by_table(
            part,
            costs,
            trigger_cost=0,
            budget=budget,
            preserve_first=True,
            start_on_human=budget != UNLIMITED,
            infos=infos,
            triggered=budget != UNLIMITED,
            prior=remembered[0] if with_memo else None,
            slack=slack,
        )
        if with_memo:
            remembered[0] = state
        return got

    first = msgs[:cut]
    replaced = data.draw(st.booleans())
    if msgs and replaced:  # a last message that the next list replaces
        first = [*first, msgs[data.draw(st.integers(0, len(msgs) - 1))]]
    planned(first, [read_message(m) for m in first] if token else None, True)
    edited = bool(cut) and data.draw(st.booleans())
    if edited:  # a message the memo holds replaced by an orphan result (a new object)
        msgs = list(msgs)
        msgs[data.draw(st.integers(0, cut - 1))] = BUILDERS[fmt]([("tool", "tz", "nowhere")])[0]
    infos = [read_message(m) for m in msgs] if token else None
    costs = _costs(msgs) if token else None
    reference = plan(
        msgs,
        costs.__getitem__ if costs is not None else (lambda i: 1),
        trigger_cost=0,
        budget=budget,
        count_mode=not token,
        preserve_first=True,
        start_on_human=budget != UNLIMITED,
        infos=infos,
        triggered=budget != UNLIMITED,
    )
    without_memo = planned(msgs, infos, False)
    with_memo = planned(msgs, infos, True)
    # either plan is the reference's, or the window it read was not plain (an edit made an
    # orphan: a bigger window may see it where a smaller one does not)
    assert with_memo in (None, reference)
    assert without_memo in (None, reference)
    if not edited:  # a plain history: planned with the memo's columns
        assert with_memo == reference


def test_a_result_of_no_call_before_a_pending_call_with_its_id_is_pruned() -> None:
    """An orphan result whose id the pending call at the end makes again: no run holds it, so
    the table must not take it as answered (the reference prunes it)."""
    call = {"id": "d", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs: list[Any] = [
        {"role": "user", "content": "first", "id": "h0"},
        {"role": "user", "content": "q", "id": "h1"},
        {"role": "tool", "content": "orphan", "tool_call_id": "d", "id": "t2"},
        {"role": "assistant", "content": "a", "id": "a3"},
        {"role": "assistant", "content": None, "id": "c4", "tool_calls": [call]},
    ]
    for budget in [*range(len(msgs) + 1), UNLIMITED]:
        for token in (False, True):
            _both(msgs, token, budget, True, True, 0)
    result = MessageReducer(max_messages=10).reduce(msgs)
    assert [m["id"] for m in result.surviving] == ["h0", "h1", "a3", "c4"]
    assert result.stats.repaired


def test_a_pinned_kind_the_pinned_indices_miss_is_left_to_the_reference() -> None:
    """A serialized system message that also has a ``role`` key is pinned by its reading."""
    odd = {
        "role": "user",
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "SystemMessage"],
        "kwargs": {"content": "odd"},
    }
    msgs: list[Any] = [
        {"role": "user", "content": "q1"},
        {"role": "system", "content": "s"},
        odd,
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
    ]
    assert read_message(odd).kind == "system"
    for budget in [*range(len(msgs) + 1), UNLIMITED]:
        _both(msgs, False, budget, False, False, 0)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 40),
    picks=st.lists(st.booleans(), max_size=40),
    with_runs=st.booleans(),
    as_tuple=st.booleans(),
)
def test_a_plan_splits_a_list_into_its_kept_and_pruned_messages(
    n: int, picks: list[bool], with_runs: bool, as_tuple: bool
) -> None:
    msgs = [object() for _ in range(n)]
    kept = tuple(i for i in range(n) if i < len(picks) and picks[i])
    p = Plan(kept, True, False, n, len(kept), runs_of(kept) if with_runs else None)
    given_list = tuple(msgs) if as_tuple else list(msgs)
    surviving, pruned = p.split(given_list)
    assert type(surviving) is list and type(pruned) is list
    assert [id(m) for m in surviving] == [id(msgs[i]) for i in kept]
    assert [id(m) for m in pruned] == [id(msgs[i]) for i in range(n) if i not in kept]
    assert list(given_list) == msgs  # the given list is left as it was


def test_a_copied_or_pickled_reducer_reduces_as_the_original() -> None:
    msgs = BUILDERS["langchain_object"]([("human", f"h{i}") for i in range(6)])
    reducer = MessageReducer(config=ReducerConfig(max_messages=3, min_messages=2))
    kept = reducer.reduce(msgs).surviving
    for other in (copy.deepcopy(reducer), pickle.loads(pickle.dumps(reducer))):
        assert [m.id for m in other.reduce(msgs).surviving] == [m.id for m in kept]


