"""The pruning contract, with exact expected ids, for every message shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig
from tests.convo import SHAPES, SPLIT_CALL_FORMATS, Spec, ids

FORMATS = list(SHAPES)
#: shapes with one message per spec step (token totals below count messages)
ONE_ITEM_FORMATS = [f for f in FORMATS if f not in SPLIT_CALL_FORMATS]

BASE: Spec = [
    ("system", "s"),
    ("human", "h1"), ("ai", "a1"),
    ("human", "h2"), ("call", "c2", ["x2", "y2"]), ("tool", "t2x", "x2"), ("tool", "t2y", "y2"), ("ai", "a2"),
    ("human", "h3"), ("ai", "a3"),
    ("human", "h4"), ("call", "c4", ["x4"]), ("tool", "t4", "x4"), ("ai", "a4"),
]  # fmt: skip


def reduce_ids(fmt: str, spec: Spec, **config: Any) -> tuple[list[str | None], list[str | None], Any]:
    msgs = SHAPES[fmt](spec)
    before = copy.deepcopy(msgs)
    result = MessageReducer(config=ReducerConfig(**config)).reduce(msgs)
    assert msgs == before, "the input list and its messages must not be mutated"
    # the caller's own objects come back, partitioned, each side in input order
    assert sorted(map(id, result.surviving + result.pruned)) == sorted(map(id, msgs))
    order = {id(m): i for i, m in enumerate(msgs)}
    for side in (result.surviving, result.pruned):
        assert [order[id(m)] for m in side] == sorted(order[id(m)] for m in side)
    return ids(result.surviving), ids(result.pruned), result


@pytest.fixture(params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("min_messages", "expected"),
    [
        (5, ["s", "h4", "c4", "t4", "a4"]),  # a3 fits too, but the cut moves to the turn start h4
        (6, ["s", "h3", "a3", "h4", "c4", "t4", "a4"]),
        (8, ["s", "h3", "a3", "h4", "c4", "t4", "a4"]),  # the next unit back is a 3-message tool group
        (12, ["s", "h2", "c2", "t2x", "t2y", "a2", "h3", "a3", "h4", "c4", "t4", "a4"]),
    ],
)
def test_count_mode_keeps_newest_whole_turns(fmt: str, min_messages: int, expected: list[str]) -> None:
    surviving, pruned, result = reduce_ids(fmt, BASE, min_messages=min_messages, max_messages=12)
    assert surviving == expected
    assert pruned == [i for i in ids(SHAPES[fmt](BASE)) if i not in expected]
    assert result.stats.triggered and not result.stats.over_target


def test_not_triggered_keeps_everything(fmt: str) -> None:
    count = len(SHAPES[fmt](BASE))  # 14, 15 in the Responses shape (two items for c2's calls)
    surviving, pruned, result = reduce_ids(fmt, BASE, min_messages=2, max_messages=count)
    assert surviving == ids(SHAPES[fmt](BASE)) and pruned == []
    assert result.stats.triggered is False


def test_live_turn_over_budget_keeps_its_human_and_newest_units(fmt: str) -> None:
    surviving, _, result = reduce_ids(fmt, BASE, min_messages=2, max_messages=5)
    assert surviving == ["s", "h4", "a4"]
    assert result.stats.over_target is False
    surviving, _, result = reduce_ids(fmt, BASE, min_messages=1, max_messages=5)
    assert surviving == ["s", "h4", "a4"]  # at least the newest unit, and the contract says it is over
    assert result.stats.over_target is True


def test_pending_tool_call_at_the_end_is_kept(fmt: str) -> None:
    spec = [*BASE, ("human", "h5"), ("call", "c5", ["x5", "y5"])]
    surviving, _, result = reduce_ids(fmt, spec, min_messages=1, max_messages=5)
    assert surviving == ["s", "h5", "c5"]
    assert result.stats.over_target is True
    # one of two parallel results has arrived: the open group stays whole
    spec = [*spec, ("tool", "t5x", "x5")]
    surviving, _, _ = reduce_ids(fmt, spec, min_messages=3, max_messages=5)
    assert surviving == ["s", "h5", "c5", "t5x"]


def test_orphans_and_dangling_calls_are_pruned(fmt: str) -> None:
    spec: Spec = [
        ("system", "s"),
        ("tool", "orphan0", "nowhere"),
        ("human", "h1"), ("call", "dangling", ["never"]), ("ai", "a1"),
        ("human", "h2"), ("tool", "orphan2", "zz"),
        ("call", "c2", ["x2"]), ("tool", "t2", "x2"), ("ai", "a2"),
    ]  # fmt: skip
    surviving, pruned, _ = reduce_ids(fmt, spec, min_messages=8, max_messages=8)
    assert surviving == ["s", "h1", "a1", "h2", "c2", "t2", "a2"]
    assert pruned == ["orphan0", "dangling", "orphan2"]


def test_result_before_its_call_is_an_orphan(fmt: str) -> None:
    spec: Spec = [
        ("human", "h"),
        ("tool", "early", "x"),
        ("call", "c", ["x"]),
        ("tool", "t", "x"),
        ("ai", "a"),
    ]
    surviving, pruned, _ = reduce_ids(fmt, spec, min_messages=4, max_messages=4)
    assert surviving == ["h", "c", "t", "a"]
    assert pruned == ["early"]


def test_unknown_roles_are_kept(fmt: str) -> None:
    spec = [("system", "s"), ("unknown", "u1"), *BASE[1:]]
    surviving, _, _ = reduce_ids(fmt, spec, min_messages=5, max_messages=10)
    assert surviving == ["s", "u1", "h4", "c4", "t4", "a4"]


def test_preserve_first_pins_index_zero_whatever_its_role(fmt: str) -> None:
    spec = BASE[1:]  # no system prompt: index 0 is the first human message (the task)
    surviving, _, _ = reduce_ids(fmt, spec, min_messages=5, max_messages=10)
    assert surviving == ["h1", "h4", "c4", "t4", "a4"]
    surviving, _, _ = reduce_ids(fmt, spec, min_messages=5, max_messages=10, preserve_first=False)
    assert surviving == ["h4", "c4", "t4", "a4"]


def test_single_turn_tool_loop_keeps_task_and_newest_steps(fmt: str) -> None:
    spec: Spec = [("system", "s"), ("human", "task")]
    for i in range(6):
        spec += [("call", f"c{i}", [f"x{i}"]), ("tool", f"t{i}", f"x{i}")]
    spec.append(("ai", "done"))
    surviving, _, result = reduce_ids(fmt, spec, min_messages=6, max_messages=10)
    assert surviving == ["s", "task", "c4", "t4", "c5", "t5", "done"]  # 6 besides the system prompt
    assert result.stats.over_target is False


def test_start_on_human_can_be_turned_off(fmt: str) -> None:
    surviving, _, _ = reduce_ids(fmt, BASE, min_messages=5, max_messages=10, start_on_human=False)
    assert surviving == ["s", "a3", "h4", "c4", "t4", "a4"]


def counter_10(message: Any) -> int:
    return 10


@pytest.mark.parametrize(
    ("max_tokens", "target", "expected", "over"),
    [
        (130, 60, ["s", "h4", "c4", "t4", "a4"], False),  # 10 for s + 40 for the live turn
        # target defaults to max_tokens: 120 after the system prompt; h1 would make it 130
        (130, None, ["s", "h2", "c2", "t2x", "t2y", "a2", "h3", "a3", "h4", "c4", "t4", "a4"], False),
        (130, 30, ["s", "h4", "a4"], False),
        (130, 0, ["s", "h4", "a4"], True),  # target_tokens=0 is a value, not "unset"
    ],
)
@pytest.mark.parametrize("fmt", ONE_ITEM_FORMATS)
def test_token_mode_budget_counts_pinned_messages(
    fmt: str, max_tokens: int, target: int | None, expected: list[str], over: bool
) -> None:
    surviving, _, result = reduce_ids(
        fmt, BASE, max_tokens=max_tokens, target_tokens=target, token_counter=counter_10
    )
    assert surviving == expected
    assert result.stats.over_target is over
    assert result.stats.tokens_before == 140
    assert result.stats.tokens_after == 10 * len(expected)


def test_token_mode_wins_over_count_mode(fmt: str) -> None:
    # max_messages=12 would trigger on 14 messages; 140 tokens <= 200 does not
    surviving, _, result = reduce_ids(
        fmt, BASE, min_messages=2, max_messages=12, max_tokens=200, token_counter=counter_10
    )
    assert len(surviving) == 14 and result.stats.mode == "tokens" and not result.stats.triggered


def test_reducing_a_reduced_list_changes_nothing(fmt: str) -> None:
    configs: list[dict[str, Any]] = [
        {"min_messages": 5, "max_messages": 6},
        {"min_messages": 1, "max_messages": 2},
    ]
    for cfg in configs:
        reducer = MessageReducer(config=ReducerConfig(**cfg))
        first = reducer.reduce(SHAPES[fmt](BASE))
        again = reducer.reduce(first.surviving)
        assert again.pruned == []
        assert [id(m) for m in again.surviving] == [id(m) for m in first.surviving]


def test_existing_and_new_accept_a_single_message_or_none(fmt: str) -> None:
    msgs = SHAPES[fmt](BASE)
    reducer = MessageReducer(min_messages=5, max_messages=20)
    result = reducer.reduce(existing=msgs[:-1], new=msgs[-1])
    assert ids(result.surviving) == ids(msgs)
    assert result.surviving[-1] is msgs[-1]
    assert ids(reducer.reduce(None, None).surviving) == []
    assert ids(reducer.reduce(new=msgs).surviving) == ids(msgs)


def test_seed_constructor_defaults_never_prune() -> None:
    reducer = MessageReducer()
    assert reducer.min_messages == 0 and reducer.max_messages is None
    msgs = SHAPES["openai_dict"](BASE * 10)
    assert len(reducer.reduce(msgs).surviving) == 140


def test_min_messages_zero_keeps_the_live_turn() -> None:
    # prior art pruned the newest message too (its defect 6)
    msgs = SHAPES["langchain_dict"](BASE)
    result = MessageReducer(min_messages=0, max_messages=4).reduce(msgs)
    assert ids(result.surviving) == ["s", "h4", "a4"]
    assert result.stats.over_target is True


def test_malformed_messages_never_raise_and_are_kept() -> None:
    msgs: list[Any] = [
        {"role": "system", "content": "s", "id": "s"},
        {"content": "no role at all", "id": "norole"},
        {"role": "user", "content": None, "id": "h1"},
        {"role": "assistant", "content": "x", "tool_calls": "oops", "id": "a1"},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": {}}, None, 3], "id": "a2"},
        {"role": "user", "content": "dup", "id": "dup"},
        {"role": "assistant", "content": "dup", "id": "dup"},
        {"role": "tool", "content": "no call id", "id": "t"},
        "a bare string",
        None,
        42,
        {"role": "user", "content": "last", "id": "h9"},
        {"role": "assistant", "content": "answer", "id": "a9"},
    ]
    result = MessageReducer(min_messages=2, max_messages=5).reduce(msgs)
    kept = ids(result.surviving)
    assert kept == ["s", "norole", None, None, None, "h9", "a9"]
    assert result.surviving[2:5] == ["a bare string", None, 42]
    assert ids(result.pruned) == ["h1", "a1", "a2", "dup", "dup", "t"]


def test_summarize_fn_gets_the_pruned_messages() -> None:
    seen: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        seen.append(pruned)
        return f"Summary of {len(pruned)} pruned messages"

    msgs = SHAPES["openai_dict"](BASE)
    reducer = MessageReducer(config=ReducerConfig(min_messages=5, max_messages=10, summarize_fn=summarize))
    result = reducer.reduce(existing=msgs)
    assert result.summary == "Summary of 9 pruned messages"
    assert len(seen) == 1 and [id(m) for m in seen[0]] == [id(m) for m in result.pruned]
    # nothing pruned: no summarizer call
    assert (
        MessageReducer(config=ReducerConfig(max_messages=100, summarize_fn=summarize)).reduce(msgs).summary
        is None
    )
    assert len(seen) == 1


def test_failing_summarizer_keeps_every_message_by_default(caplog: pytest.LogCaptureFixture) -> None:
    def broken(pruned: list[Any]) -> str:
        raise RuntimeError("model down")

    msgs = SHAPES["openai_dict"](BASE)
    result = MessageReducer(
        config=ReducerConfig(min_messages=5, max_messages=10, summarize_fn=broken)
    ).reduce(msgs)
    assert ids(result.surviving) == ids(msgs) and result.pruned == []
    assert result.stats.summary_error == "RuntimeError('model down')"
    assert "summarize_fn failed" in caplog.text
    pruning = ReducerConfig(min_messages=5, max_messages=10, summarize_fn=broken, on_summary_error="prune")
    result = MessageReducer(config=pruning).reduce(msgs)
    assert ids(result.surviving) == ["s", "h4", "c4", "t4", "a4"] and result.summary is None


def test_failing_hook_does_not_break_the_reduction(caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[list[str | None], Any]] = []

    def broken(pruned: list[Any], namespace: Any) -> None:
        raise ValueError("hook down")

    def recorder(pruned: list[Any], namespace: Any) -> None:
        got.append((ids(pruned), namespace))

    cfg = ReducerConfig(min_messages=5, max_messages=10, on_prune=[broken, recorder])
    result = MessageReducer(config=cfg).reduce(SHAPES["langchain_dict"](BASE), namespace=("m", "t1"))
    assert ids(result.surviving) == ["s", "h4", "c4", "t4", "a4"]
    assert got == [(["h1", "a1", "h2", "c2", "t2x", "t2y", "a2", "h3", "a3"], ("m", "t1"))]
    assert "on_prune hook" in caplog.text and "hook down" in caplog.text


async def test_areduce_matches_reduce(fmt: str) -> None:
    calls: list[int] = []

    def summarize(pruned: list[Any]) -> str:
        calls.append(len(pruned))
        return "s"

    reducer = MessageReducer(config=ReducerConfig(min_messages=5, max_messages=10, summarize_fn=summarize))
    msgs = SHAPES[fmt](BASE)
    sync, async_ = reducer.reduce(msgs), await reducer.areduce(msgs)
    assert ids(sync.surviving) == ids(async_.surviving) and ids(sync.pruned) == ids(async_.pruned)
    assert len(sync.pruned) == len(SHAPES[fmt](BASE)) - 5  # all but s, h4, c4, t4, a4
    assert calls == [len(sync.pruned)] * 2
