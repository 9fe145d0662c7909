"""Calibrated budgets on the public API: reading usage, learning the ratio, bad figures, isolation.

docs/tokens.md ("Calibrated budgets") states the behaviour; the entry points' agent loops are in
tests/test_calibration_entry_points.py.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

from agentstate_reducer import (
    Calibration,
    MessageReducer,
    ReducerConfig,
    _columns,
    usage_input_tokens,
)
from agentstate_reducer.cost import estimate
from agentstate_reducer.messages import read_usage
from agentstate_reducer.tokens import heuristic_counter
from agentstate_reducer.tokens.calibration import RATIO_MAX, RATIO_MIN


@pytest.fixture(params=["columns", "reference"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every behaviour on the column path and on the reference planner alike."""
    was = _columns.enabled
    _columns.use(request.param == "columns")
    try:
        yield request.param
    finally:
        _columns.use(was)


def heuristic(**kw: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(token_counter=heuristic_counter(), **kw))


def history(turns: int, usage: Any = None, *, chars: int = 200) -> list[dict[str, Any]]:
    """``turns`` user/assistant pairs; each assistant message reports ``usage(sent)`` (``sent``:
    the heuristic count of the messages before it) in ``usage_metadata`` when ``usage`` is given."""
    counter = heuristic_counter()
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are terse.", "id": "sys"}]
    for t in range(turns):
        out.append({"role": "user", "content": f"q{t} " + "x" * chars, "id": f"u{t}"})
        msg: dict[str, Any] = {"role": "assistant", "content": f"a{t} " + "y" * chars, "id": f"a{t}"}
        if usage is not None:
            sent = sum(counter.count_messages(out))
            msg["usage_metadata"] = {"input_tokens": usage(sent), "output_tokens": 5, "total_tokens": 0}
        out.append(msg)
    return out


# -- reading usage ------------------------------------------------------------------------------


def test_usage_input_tokens_reads_every_providers_usage_objects() -> None:
    from agents.items import ModelResponse as AgentsResponse
    from agents.usage import Usage as AgentsUsage
    from anthropic.types import Usage as AnthropicUsage
    from autogen_core.models import CreateResult
    from autogen_core.models import RequestUsage as AutoGenUsage
    from google.genai.types import GenerateContentResponseUsageMetadata
    from openai.types import CompletionUsage
    from openai.types.responses import ResponseUsage
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
    from pydantic_ai.usage import RequestUsage as PydanticAIUsage

    responses = ResponseUsage(
        input_tokens=1500,
        input_tokens_details=InputTokensDetails(cached_tokens=1024, cache_write_tokens=0),
        output_tokens=9,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=1509,
    )
    anthropic = AnthropicUsage(
        input_tokens=12, output_tokens=3, cache_read_input_tokens=900, cache_creation_input_tokens=100
    )
    autogen = AutoGenUsage(prompt_tokens=77, completion_tokens=1)
    assert (
        usage_input_tokens(CompletionUsage(prompt_tokens=1200, completion_tokens=5, total_tokens=1205))
        == 1200
    )
    assert usage_input_tokens(responses) == 1500  # the cached tokens are part of input_tokens
    assert usage_input_tokens(anthropic) == 1012  # uncached + cache read + cache write
    assert usage_input_tokens(GenerateContentResponseUsageMetadata(prompt_token_count=640)) == 640
    assert usage_input_tokens({"promptTokenCount": 641, "candidatesTokenCount": 2}) == 641
    bedrock = {"inputTokens": 100, "outputTokens": 4, "totalTokens": 104, "cacheReadInputTokens": 50}
    assert usage_input_tokens(bedrock) == 150
    assert usage_input_tokens(autogen) == 77
    assert (
        usage_input_tokens(CreateResult(finish_reason="stop", content="x", usage=autogen, cached=False)) == 77
    )
    assert usage_input_tokens(PydanticAIUsage(input_tokens=33, output_tokens=2)) == 33
    agents_usage = AgentsUsage(requests=1, input_tokens=4000, output_tokens=10, total_tokens=4010)
    assert usage_input_tokens(AgentsResponse(output=[], usage=agents_usage, response_id=None)) == 4000


@pytest.mark.parametrize(
    "usage",
    [
        None,
        {},
        {"input_tokens": 0},
        {"input_tokens": -3},
        {"input_tokens": True},
        {"input_tokens": 2.5},
        {"input_tokens": math.nan},
        {"input_tokens": "100"},
        {"output_tokens": 7},
        "100",
        100,
        1.0,
    ],
)
def test_usage_input_tokens_is_none_for_anything_but_a_usable_figure(usage: Any) -> None:
    assert usage_input_tokens(usage) is None


def test_read_usage_reads_what_stored_assistant_messages_carry() -> None:
    from agno.metrics import MessageMetrics
    from agno.models.message import Message as AgnoMessage
    from google.adk.events import Event
    from google.genai.types import Content, GenerateContentResponseUsageMetadata, Part
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage
    from smolagents.memory import ActionStep
    from smolagents.monitoring import Timing, TokenUsage

    usage = {"input_tokens": 321, "output_tokens": 4, "total_tokens": 325}
    ai = AIMessage("hi", id="a1", usage_metadata=usage)
    assert read_usage(ai) == 321
    assert read_usage(dumpd(ai)) == 321
    assert read_usage(messages_to_dict([ai])[0]) == 321
    assert read_usage(ai.model_dump()) == 321
    openai_meta = AIMessage(
        "hi", response_metadata={"token_usage": {"prompt_tokens": 55, "completion_tokens": 1}}
    )
    assert read_usage(openai_meta) == 55
    anthropic_meta = AIMessage(
        "hi", response_metadata={"usage": {"input_tokens": 5, "cache_read_input_tokens": 50}}
    )
    assert read_usage(anthropic_meta) == 55
    assert read_usage(AIMessage("no usage")) is None
    assert read_usage(HumanMessage("hi")) is None
    assert (
        read_usage(ModelResponse(parts=[TextPart("x")], usage=RequestUsage(input_tokens=88, output_tokens=1)))
        == 88
    )
    step = ActionStep(
        step_number=1, timing=Timing(start_time=0.0), token_usage=TokenUsage(input_tokens=99, output_tokens=2)
    )
    assert read_usage(step) == 99
    assert (
        read_usage(AgnoMessage(role="assistant", content="x", metrics=MessageMetrics(input_tokens=111)))
        == 111
    )
    event = Event(
        author="model",
        content=Content(role="model", parts=[Part(text="x")]),
        usage_metadata=GenerateContentResponseUsageMetadata(prompt_token_count=222),
    )
    assert read_usage(event) == 222


# -- the ratio ----------------------------------------------------------------------------------


def test_the_newest_reported_usage_sets_the_ratio_and_the_plan_uses_it(path: str) -> None:
    messages = history(12, usage=lambda sent: sent * 2)  # a provider counting twice the heuristic
    reducer = heuristic(max_tokens=2000, target_tokens=1500)
    counts = reducer.count_tokens(messages)
    assert reducer.token_ratio(messages) == pytest.approx(2.0)
    result = reducer.reduce(messages)
    assert result.stats.token_ratio == pytest.approx(2.0)
    assert result.stats.tokens_before == sum(math.ceil(2.0 * c) for c in counts)
    assert result.stats.tokens_after is not None and result.stats.tokens_after <= 1500
    kept = sum(counts[messages.index(m)] for m in result.surviving)
    assert 2 * kept <= 1500  # in the provider's tokens, within the target
    uncalibrated = heuristic(max_tokens=2000, target_tokens=1500, calibrate=False).reduce(messages)
    assert uncalibrated.stats.token_ratio is None
    assert len(result.surviving) < len(uncalibrated.surviving)
    assert sorted(m["id"] for m in result.surviving + result.pruned) == sorted(m["id"] for m in messages)


def test_a_model_change_is_followed_at_its_first_reported_usage(path: str) -> None:
    messages = history(10, usage=lambda sent: sent * 2)
    messages[-1] = {**messages[-1], "usage_metadata": {"input_tokens": 0, "output_tokens": 1}}
    reducer = heuristic(max_tokens=100_000)
    assert reducer.token_ratio(messages) == pytest.approx(2.0)  # a zero figure: the older anchor
    counts = reducer.count_tokens(messages)
    messages[-1] = {**messages[-1], "usage_metadata": {"input_tokens": int(sum(counts[:-1]) * 1.5)}}
    assert reducer.token_ratio(messages) == pytest.approx(1.5, abs=0.01)  # the newest anchor wins


@pytest.mark.parametrize(
    ("factor", "ratio"),
    [(0.2, None), (RATIO_MIN, RATIO_MIN), (0.8, 0.8), (3.0, 3.0), (RATIO_MAX, RATIO_MAX), (50.0, None)],
)
def test_a_figure_far_under_or_over_the_count_is_ignored(
    factor: float, ratio: float | None
) -> None:
    messages = history(10, usage=lambda sent: math.ceil(sent * factor))
    got = heuristic(max_tokens=1000).token_ratio(messages)
    assert got == (None if ratio is None else pytest.approx(ratio, rel=0.01))


def test_a_figure_under_the_bound_plans_exactly_as_without_usage(path: str) -> None:
    """A wrong figure (the uncached part of a prompt alone) never lets the budget grow."""
    bad = history(12, usage=lambda sent: 3)
    none = history(12)
    reducer = heuristic(max_tokens=2000, target_tokens=1500)
    assert [m["id"] for m in reducer.reduce(bad).surviving] == [
        m["id"] for m in reducer.reduce(none).surviving
    ]


def test_a_users_token_counter_is_exact_unless_calibrate_is_true(path: str) -> None:
    messages = history(12, usage=lambda sent: sent * 2)

    def own(m: Any) -> int:
        return len(str(m.get("content") or "")) // 4 + 4

    assert (
        MessageReducer(config=ReducerConfig(max_tokens=2000, token_counter=own)).token_ratio(messages) is None
    )
    opted = MessageReducer(
        config=ReducerConfig(max_tokens=2000, target_tokens=1500, token_counter=own, calibrate=True)
    )
    assert opted.token_ratio(messages) is not None
    assert opted.reduce(messages).stats.token_ratio is not None


def test_calibrate_must_be_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match=r"calibrate must be a bool or None, got 'yes'"):
        ReducerConfig(max_tokens=10, calibrate="yes")  # type: ignore[arg-type]


# -- an explicit Calibration --------------------------------------------------------------------


def test_a_calibration_is_fed_with_what_was_sent_and_the_usage_reported(path: str) -> None:
    messages = history(12)
    reducer = heuristic(max_tokens=2000, target_tokens=1500)
    sent = messages[:-1]
    cal = Calibration()
    assert cal.anchor is None and reducer.token_ratio(messages, calibration=cal) is None
    figure = 3 * sum(reducer.count_tokens(sent))
    assert cal.observe(sent, {"prompt_tokens": figure, "completion_tokens": 9}, model="m1")
    assert cal.anchor is not None and cal.anchor.input_tokens == figure and cal.anchor.model == "m1"
    assert reducer.token_ratio(messages, calibration=cal) == pytest.approx(3.0)
    for bad in (None, 0, -1, True, {"prompt_tokens": 0}, {"completion_tokens": 5}):
        assert not cal.observe(sent, bad)  # a streamed chunk without usage keeps the anchor
    assert reducer.token_ratio(messages, calibration=cal) == pytest.approx(3.0)
    assert reducer.reduce(messages, calibration=cal).stats.token_ratio == pytest.approx(3.0)
    cal.clear()
    assert reducer.reduce(messages, calibration=cal).stats.token_ratio is None


def test_a_given_calibration_is_the_only_source(path: str) -> None:
    """A request-mode caller knows the history holds more than was sent: its history is not read."""
    messages = history(12, usage=lambda sent: sent * 2)
    reducer = heuristic(max_tokens=2000)
    assert reducer.token_ratio(messages) == pytest.approx(2.0)
    assert reducer.token_ratio(messages, calibration=Calibration()) is None


def test_a_calibration_that_is_not_one_is_refused_before_anything_happens() -> None:
    with pytest.raises(TypeError, match=r"calibration must be an agentstate_reducer.Calibration .* got dict"):
        heuristic(max_tokens=100).reduce(history(2), calibration={"prompt_tokens": 5})  # type: ignore[arg-type]


def test_threads_sharing_a_reducer_never_mix_conversations() -> None:
    reducer = heuristic(max_tokens=2000, target_tokens=1500)
    messages = history(14)
    sent = messages[:-1]
    counted = sum(reducer.count_tokens(sent))
    factors = [0.6, 1.0, 1.7, 2.5, 3.9] * 4
    expected = {}
    for f in set(factors):
        cal = Calibration()
        cal.observe(sent, int(counted * f))
        expected[f] = [
            m["id"]
            for m in heuristic(max_tokens=2000, target_tokens=1500)
            .reduce(messages, calibration=cal)
            .surviving
        ]
    assert len({tuple(v) for v in expected.values()}) > 2  # the factors plan differently
    got: dict[int, list[list[str]]] = {}
    barrier = threading.Barrier(len(factors))

    def run(i: int, f: float) -> None:
        cal = Calibration()
        cal.observe(sent, int(counted * f))
        barrier.wait()
        got[i] = [[m["id"] for m in reducer.reduce(messages, calibration=cal).surviving] for _ in range(20)]

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(factors)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, f in enumerate(factors):
        assert all(ids == expected[f] for ids in got[i])


def test_asyncio_tasks_sharing_a_reducer_never_mix_conversations() -> None:
    reducer = heuristic(max_tokens=2000, target_tokens=1500)
    messages = history(14)
    sent = messages[:-1]
    counted = sum(reducer.count_tokens(sent))

    async def one(f: float) -> tuple[float, list[str]]:
        cal = Calibration()
        cal.observe(sent, int(counted * f))
        await asyncio.sleep(0)
        result = await reducer.areduce(messages, calibration=cal)
        return f, [m["id"] for m in result.surviving]

    async def main() -> list[tuple[float, list[str]]]:
        return await asyncio.gather(*(one(f) for f in [0.6, 3.9, 1.0, 2.5] * 5))

    for f, ids in asyncio.run(main()):
        cal = Calibration()
        cal.observe(sent, int(counted * f))
        assert ids == [
            m["id"]
            for m in heuristic(max_tokens=2000, target_tokens=1500)
            .reduce(messages, calibration=cal)
            .surviving
        ]


# -- whatever the figures -----------------------------------------------------------------------

figures = st.one_of(
    st.none(), st.integers(-10, 200_000), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3)
)


@settings(max_examples=150, deadline=None)
@given(
    turns=st.integers(0, 16),
    usages=st.lists(figures, min_size=16, max_size=16),
    target=st.integers(0, 3000),
)
def test_no_usage_figure_breaks_a_reduction_or_loses_a_message(
    turns: int, usages: list[Any], target: int
) -> None:
    messages = history(turns)
    for i, u in enumerate(usages[:turns]):
        messages[2 + 2 * i] = {**messages[2 + 2 * i], "usage_metadata": {"input_tokens": u}}
    results = []
    for on in (True, False):
        was = _columns.enabled
        _columns.use(on)
        try:
            reducer = heuristic(max_tokens=target, target_tokens=target)
            results.append(reducer.reduce(messages))
        finally:
            _columns.use(was)
    result, reference = results
    assert [m["id"] for m in result.surviving] == [m["id"] for m in reference.surviving]
    ids = [m["id"] for m in messages]
    assert sorted(m["id"] for m in result.surviving + result.pruned) == sorted(ids)  # each exactly once
    ratio = result.stats.token_ratio
    assert ratio is None or RATIO_MIN <= ratio <= RATIO_MAX
    stats = result.stats
    assert stats.tokens_after is not None
    assert stats.tokens_after <= target or stats.over_target or not stats.triggered
    # never fewer tokens than the counter's own: a bad figure never makes the budget hold more
    # than RATIO_MIN lets it
    own = sum(heuristic_counter().count_messages(result.surviving))
    assert stats.tokens_after >= math.floor(own * RATIO_MIN)


# -- the cost model -----------------------------------------------------------------------------


def test_the_cost_model_counts_as_token_mode_does() -> None:
    messages = history(8, usage=lambda sent: sent * 2)
    counts = heuristic_counter().count_messages(messages)
    report = estimate([messages])
    assert report.input_tokens == sum(math.ceil(2.0 * c) for c in counts)
    assert estimate([messages], calibrate=False).input_tokens == sum(counts)
    with pytest.raises(TypeError, match="calibrate must be a bool or None"):
        estimate([messages], calibrate=1)  # type: ignore[arg-type]


def test_the_docstring_examples_run() -> None:
    import doctest

    from agentstate_reducer.messages import usage
    from agentstate_reducer.tokens import calibration

    for module in (calibration, usage):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed
