"""Every output can be sent to a provider: reused call ids, result messages answering calls of
several AI messages, and broken histories reduced without a trigger (exact ids, every shape)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from checkpointers.saver import ReducingCheckpointSaver
from tests.convo import LANGGRAPH_FORMATS, SHAPES, Spec, anthropic_dicts, ids, responses_items
from tests.test_properties import violations

FORMATS = list(SHAPES)


def _valid(messages: list[Any]) -> bool:
    return violations([read_message(m) for m in messages]) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_call_id_reused_in_every_turn_with_the_first_message_a_call(fmt: str) -> None:
    """A local model server naming every call ``call_0``: the call at index 0 owns only the
    results before the next call reusing the id, so later turns are pruned normally."""
    reducer = MessageReducer(min_messages=4, max_messages=8)
    history = SHAPES[fmt]([("call", "a0", ["call_0"]), ("tool", "t0", "call_0")])
    longest = 0
    for turn in range(1, 201):
        new = SHAPES[fmt](
            [
                ("human", f"h{turn}"),
                ("call", f"c{turn}", ["call_0"]),
                ("tool", f"t{turn}", "call_0"),
                ("ai", f"f{turn}"),
            ]
        )
        history = reducer.reduce(history, new).surviving
        assert _valid(history), ids(history)
        longest = max(longest, len(history))
    assert ids(history)[:2] == ["a0", "t0"]  # the pinned first unit, with its own result only
    assert ids(history)[-4:] == ["h200", "c200", "t200", "f200"]
    assert longest <= 8 + 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_call_id_reused_twice_within_a_turn(fmt: str) -> None:
    spec: Spec = [
        ("human", "h1"),
        ("call", "c1", ["call_0"]),
        ("tool", "t1", "call_0"),
        ("call", "c2", ["call_0"]),  # never answered: its id's result above is c1's
        ("human", "h2"),
        ("call", "c3", ["call_0"]),
        ("tool", "t3", "call_0"),
    ]
    out = MessageReducer().reduce(SHAPES[fmt](spec))
    assert ids(out.surviving) == ["h1", "c1", "t1", "h2", "c3", "t3"]
    assert ids(out.pruned) == ["c2"]
    assert out.stats.repaired and not out.stats.triggered


def test_one_result_message_answering_two_ai_messages_is_one_unit() -> None:
    spec: Spec = [
        ("human", "q"),
        ("call", "a1", ["c1"]),
        ("call", "a2", ["c2"]),
        ("tool", "r", ["c1", "c2"]),
        ("ai", "done"),
    ]
    msgs = anthropic_dicts(spec)
    # room for the whole live turn: everything stays, the first call included
    whole = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=4)).reduce(msgs)
    assert ids(whole.surviving) == ["q", "a1", "a2", "r", "done"]
    # room for less: the unit of both calls and their result goes whole
    cut = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, preserve_first=False))
    out = cut.reduce(msgs)
    assert ids(out.surviving) == ["q", "done"]
    assert ids(out.pruned) == ["a1", "a2", "r"]


def test_multi_answer_minimized_by_hypothesis() -> None:
    spec: Spec = [
        ("human", "h1"),
        ("human", "h2"),
        ("ai", "a3"),
        ("call", "c4", ["c0"]),
        ("call", "c5", ["c1"]),
        ("tool", "m6", ["c0", "c1"]),
    ]
    for cfg in (ReducerConfig(), ReducerConfig(min_messages=3, max_messages=4)):
        out = MessageReducer(config=cfg).reduce(anthropic_dicts(spec))
        assert _valid(out.surviving), ids(out.surviving)
        kept = set(ids(out.surviving))
        assert {"c4", "c5", "m6"} <= kept or not {"c4", "c5", "m6"} & kept


def test_a_result_whose_other_call_is_missing_is_pruned_with_its_unit() -> None:
    spec: Spec = [("human", "h1"), ("call", "a1", ["c1"]), ("tool", "r", ["c1", "gone"]), ("ai", "f")]
    out = MessageReducer().reduce(anthropic_dicts(spec))
    assert ids(out.surviving) == ["h1", "f"]
    assert ids(out.pruned) == ["a1", "r"]


BROKEN: dict[str, tuple[Spec, list[str]]] = {
    # a run died before the tool answered, then the user wrote again
    "interrupted call": (
        [("human", "h1"), ("call", "c1", ["x1"]), ("human", "h2"), ("ai", "a2")],
        ["h1", "h2", "a2"],
    ),
    # two writers: the result landed after the other writer's user message
    "late result": (
        [("human", "h1"), ("call", "c1", ["x1"]), ("human", "h2"), ("tool", "t1", "x1"), ("ai", "a2")],
        ["h1", "h2", "a2"],
    ),
    "orphan result": ([("human", "h1"), ("tool", "o1", "nowhere"), ("ai", "a1")], ["h1", "a1"]),
    # a result that arrived after the model's next call: the call it answers was left unanswered
    # before that call, so its group is broken, and the late result answers nothing after it
    "result after the next call": (
        [
            ("human", "h1"),
            ("call", "c1", ["x1", "x2"]),
            ("tool", "t1", "x1"),
            ("call", "c2", ["x3"]),
            ("tool", "t3", "x3"),
            ("tool", "t2", "x2"),
        ],
        ["h1", "c2", "t3"],
    ),
    "result after the next call, then an answer": (
        [
            ("human", "h1"),
            ("call", "c1", ["x1", "x2"]),
            ("tool", "t1", "x1"),
            ("call", "c2", ["x3"]),
            ("tool", "t2", "x2"),
            ("tool", "t3", "x3"),
            ("ai", "a1"),
        ],
        ["h1", "c2", "t3", "a1"],
    ),
    # a retried tool or a replayed write: the first result stays, the second is pruned
    "second result": (
        [("human", "h1"), ("call", "c1", ["x1"]), ("tool", "t1", "x1"), ("tool", "t2", "x1"), ("ai", "a1")],
        ["h1", "c1", "t1", "a1"],
    ),
    "second result among parallel ones": (
        [
            ("human", "h1"),
            ("call", "c1", ["x1", "x2"]),
            ("tool", "t1", "x1"),
            ("tool", "t2", "x1"),
            ("tool", "t3", "x2"),
        ],
        ["h1", "c1", "t1", "t3"],
    ),
    "second result after the next call": (
        [
            ("human", "h1"),
            ("call", "c1", ["x1"]),
            ("tool", "t1", "x1"),
            ("call", "c2", ["x2"]),
            ("tool", "t2", "x2"),
            ("tool", "t3", "x1"),
            ("ai", "a1"),
        ],
        ["h1", "c1", "t1", "c2", "t2", "a1"],
    ),
    "second result of a first call": (
        [("call", "c1", ["x1"]), ("tool", "t1", "x1"), ("tool", "t2", "x1"), ("human", "h1")],
        ["c1", "t1", "h1"],
    ),
    # a trailing call answered in part is pending, not broken
    "pending call": (
        [("human", "h1"), ("call", "c1", ["x1", "x2"]), ("tool", "t1", "x1")],
        ["h1", "c1", "t1"],
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("fmt", FORMATS)
def test_untriggered_reduce_repairs_a_broken_history(fmt: str, case: str) -> None:
    spec, expected = BROKEN[case]
    msgs = SHAPES[fmt](spec)
    for cfg in (
        ReducerConfig(),
        ReducerConfig(min_messages=50, max_messages=100),
        ReducerConfig(min_messages=50, max_messages=100, preserve_first=False),
        ReducerConfig(max_tokens=100_000, token_counter=lambda m: 7),
    ):
        out = MessageReducer(config=cfg).reduce(msgs)
        assert ids(out.surviving) == expected
        assert _valid(out.surviving)
        assert not out.stats.triggered
        assert out.stats.repaired == (len(expected) < len(ids(msgs)))


APPENDED = [c for c in BROKEN if c.startswith(("result after", "second result")) and "first call" not in c]


@pytest.mark.parametrize("case", APPENDED)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_broken_tail_appended_to_a_checked_history_is_repaired(fmt: str, case: str) -> None:
    """The reducer's memo of its last output checks only the new messages: a late or second
    result among them is still found."""
    spec, expected = BROKEN[case]
    cut = next(k for k, step in enumerate(spec) if step[0] == "tool") + 1  # after the first result
    for cfg in (
        ReducerConfig(min_messages=50, max_messages=100),
        ReducerConfig(max_tokens=100_000, token_counter=lambda m: 7),
    ):
        reducer = MessageReducer(config=cfg)
        first = reducer.reduce(SHAPES[fmt](spec[:cut]))
        assert ids(first.surviving) == [step[1] for step in spec[:cut]]
        out = reducer.reduce(first.surviving, SHAPES[fmt](spec[cut:]))
        assert ids(out.surviving) == expected
        assert out.stats.repaired and not out.stats.triggered
        again = reducer.reduce(out.surviving)  # the repaired output, kept whole
        assert ids(again.surviving) == expected and not again.pruned


@pytest.mark.parametrize("fmt", FORMATS)
def test_appending_after_a_pending_call_is_checked(fmt: str) -> None:
    """The memo of the previous output checks only the new messages, and still catches a user
    message that arrives before the pending call was answered."""
    reducer = MessageReducer(min_messages=50, max_messages=100)
    first = reducer.reduce(SHAPES[fmt]([("human", "h1"), ("call", "c1", ["x1"])]))
    assert ids(first.surviving) == ["h1", "c1"]
    answered = reducer.reduce(first.surviving, SHAPES[fmt]([("tool", "t1", "x1")]))
    assert ids(answered.surviving) == ["h1", "c1", "t1"] and not answered.pruned
    pending = reducer.reduce(answered.surviving, SHAPES[fmt]([("call", "c2", ["x2"])]))
    broken = reducer.reduce(pending.surviving, SHAPES[fmt]([("human", "h2")]))
    assert ids(broken.surviving) == ["h1", "c1", "t1", "h2"]
    assert ids(broken.pruned) == ["c2"]


@pytest.mark.parametrize("fmt", LANGGRAPH_FORMATS)
def test_state_annotation_output_is_repaired(fmt: str) -> None:
    merge = MessageReducer(min_messages=50, max_messages=100).as_langgraph_reducer()
    existing = SHAPES[fmt]([("human", "h1"), ("call", "c1", ["x1"])])
    out = merge(existing, SHAPES[fmt]([("human", "h2")]))
    assert ids(out) == ["h1", "h2"]


@pytest.mark.parametrize("fmt", LANGGRAPH_FORMATS)
def test_state_annotation_repairs_late_and_second_results(fmt: str) -> None:
    """Updates onto the state the annotation returned last (its trusted path): a step whose
    result for an earlier call comes after the model's next call, and a retried tool's second
    result (a new message id, the same call id)."""
    for tokens in (False, True):
        cfg = ReducerConfig(max_tokens=100_000, token_counter=lambda m: 7) if tokens else ReducerConfig()
        merge = MessageReducer(config=cfg).as_langgraph_reducer()
        state = merge([], SHAPES[fmt]([("human", "h1"), ("call", "c1", ["x1", "x2"]), ("tool", "t1", "x1")]))
        late = merge(state, SHAPES[fmt]([("call", "c2", ["x3"]), ("tool", "t3", "x3"), ("tool", "t2", "x2")]))
        assert ids(late) == ["h1", "c2", "t3"]
        retried = merge(late, SHAPES[fmt]([("tool", "t4", "x3")]))
        assert ids(retried) == ["h1", "c2", "t3"]
        assert _valid(retried)


def test_saver_put_stores_a_repaired_history() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    saver = ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=50, max_messages=100))
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"]["messages"] = [
        HumanMessage("q", id="h1"),
        AIMessage("", id="c1", tool_calls=[{"name": "f", "args": {}, "id": "x1"}]),
        HumanMessage("again", id="h2"),
    ]
    checkpoint["channel_versions"]["messages"] = 1
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saved = saver.put(config, checkpoint, {"source": "input", "step": -1, "parents": {}}, {"messages": 1})
    stored = saver.get_tuple(saved)
    assert stored is not None
    assert ids(stored.checkpoint["channel_values"]["messages"]) == ["h1", "h2"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_result_across_a_later_call_is_repaired(fmt: str) -> None:
    """Two AI messages with calls in a row, each answered by its own result after the second:
    the first one's result would answer it across the second (OpenAI rejects it, and so does
    Anthropic through langchain-anthropic, which does not merge them), so its group is pruned.
    Responses call items of one model turn lead to each other: they stay."""
    spec: Spec = [
        ("human", "h1"),
        ("call", "c1", ["x1"]),
        ("call", "c2", ["x2"]),
        ("tool", "t1", "x1"),
        ("tool", "t2", "x2"),
        ("ai", "a1"),
    ]
    whole = fmt == "responses_items"
    for cfg in (ReducerConfig(), ReducerConfig(max_tokens=100_000, token_counter=lambda m: 7)):
        out = MessageReducer(config=cfg).reduce(SHAPES[fmt](spec))
        assert ids(out.surviving) == (ids(SHAPES[fmt](spec)) if whole else ["h1", "c2", "t2", "a1"])
        assert _valid(out.surviving)
        assert out.stats.repaired == (not whole) and not out.stats.triggered


def test_appending_after_a_model_turn_reusing_a_call_id_is_checked() -> None:
    """Two call items of one Responses model turn with the same call id, answered once: pending
    at the end, broken once a user message follows, through the memo of the last output too."""
    spec: Spec = [
        ("human", "h1"),
        ("call", "c1", ["call_0"]),
        ("call", "c2", ["call_0", "call_1"]),
        ("tool", "t1", "call_0"),
        ("tool", "t2", "call_1"),
    ]
    reducer = MessageReducer()
    first = reducer.reduce(responses_items(spec))
    assert ids(first.surviving) == ["h1", "c1", "c2", "t1", "t2"]  # a pending model turn
    out = reducer.reduce(first.surviving, responses_items([("human", "h2")]))
    assert ids(out.surviving) == ["h1", "c2", "t1", "t2", "h2"]
    assert _valid(out.surviving)
