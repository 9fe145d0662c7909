"""Calibration with a large system prompt and tool schemas: learned as an offset, not a ratio.

A provider counts the tools and the system prompt it is sent besides the messages. Folded into
one ratio, 3,000 tokens of tool schemas beside a short history push the ratio over its bound,
and the reported figure was ignored: the budget fell back to the counter's own counts and
requests went over it. Two reported requests of different sizes give the line ``reported =
ratio * counted + offset``; token mode then plans with the offset counted against the budget.

The scripted provider (``tests.usage_models``) counts each message ``ceil(bytes / 3) + 4`` plus
``TOOLS`` tokens a request; a conversation of tool-calling turns is reduced before each model
call, learning from the figure it reported either through a ``Calibration`` or from the history
(each AI message carrying the usage of the request that produced it).
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from agentstate_reducer import Calibration, MessageReducer, ReducerConfig
from agentstate_reducer.cost import estimate
from agentstate_reducer.tokens import heuristic_counter
from tests.provider_rules import request_errors
from tests.usage_models import provider_tokens

TOOLS = 3000
MAX, TARGET = 5000, 4000
TURNS = 30
Source = Literal["calibration", "history"]


def _text(tag: str, n: int) -> str:
    return f"{tag} {n}: " + "the agent searched flights to paris and found three options. " * 6


def _turn(n: int) -> list[dict[str, Any]]:
    """A user question, then the model's call; its result comes from the tool."""
    return [{"role": "user", "content": _text("question", n)}]


def converse(source: Source, *, counter: Literal["tiktoken", "heuristic"] = "tiktoken",
             tools: int = TOOLS) -> list[int]:  # fmt: skip
    """``TURNS`` turns of a user question, a tool call, its result and an answer, reduced before
    each of the two model calls a turn makes; the provider's count of every request."""
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=MAX, target_tokens=TARGET, preserve_first=False,
        token_counter=heuristic_counter() if counter == "heuristic" else None,
        calibrate=True if counter == "heuristic" else None))  # fmt: skip
    cal = Calibration() if source == "calibration" else None
    history: list[dict[str, Any]] = []
    counts: list[int] = []

    def call_model(reply: dict[str, Any]) -> None:
        nonlocal history
        history = reducer.reduce(history, calibration=cal).surviving
        assert request_errors(history) == []
        reported = provider_tokens(history, overhead=tools)
        counts.append(reported)
        if cal is not None:
            cal.observe(history, {"prompt_tokens": reported})
        else:
            reply = {**reply, "usage_metadata": {"input_tokens": reported, "output_tokens": 9}}
        history = [*history, reply]

    for n in range(TURNS):
        history = [*history, *_turn(n)]
        call = {"id": f"c{n}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        call_model({"role": "assistant", "content": "", "tool_calls": [call]})
        history = [*history, {"role": "tool", "tool_call_id": f"c{n}", "content": _text("result", n)}]
        call_model({"role": "assistant", "content": _text("answer", n)})
    return counts


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("source", ["calibration", "history"])
def test_a_large_tool_schema_is_learned_and_the_budget_holds(source: Source, counter: str) -> None:
    counts = converse(source, counter=counter)  # type: ignore[arg-type]
    after = counts[1:]
    assert [c for c in after if c > MAX] == []
    assert max(after) >= 0.9 * MAX  # not over-pruned


def test_the_offset_and_ratio_are_what_the_provider_counts() -> None:
    sent = [{"role": "user", "content": "x" * 400}]  # 104 tokens by the heuristic counter
    more = [*sent, {"role": "assistant", "content": "y" * 800}]  # 204 more
    cal = Calibration()
    assert cal.observe(sent, 104 * 2 + TOOLS)
    reducer = MessageReducer(config=ReducerConfig(max_tokens=MAX, token_counter=heuristic_counter(),
                                                  calibrate=True))  # fmt: skip
    # one figure: what the request held besides the messages is folded into the ratio, which is
    # over its bound here: ignored, the counter's own counts stand
    assert reducer.token_scale(sent, calibration=cal) is None
    assert cal.observe(more, (104 + 204) * 2 + TOOLS)
    scale = reducer.token_scale(more, calibration=cal)
    assert scale is not None and scale.ratio == 2.0 and scale.offset == TOOLS
    assert reducer.calibrated_tokens(more, calibration=cal) == (104 + 204) * 2 + TOOLS


def test_an_offset_leaving_no_room_under_the_target_is_ignored() -> None:
    sent = [{"role": "user", "content": "x" * 400}]
    more = [*sent, {"role": "assistant", "content": "y" * 800}]
    cal = Calibration()
    cal.observe(sent, 104 + 10**6)
    cal.observe(more, 308 + 10**6)
    reducer = MessageReducer(config=ReducerConfig(max_tokens=MAX, token_counter=heuristic_counter(),
                                                  calibrate=True))  # fmt: skip
    assert reducer.token_scale(more, calibration=cal) is None
    result = reducer.reduce(more, calibration=cal)
    assert result.surviving == more and result.stats.tokens_before == 308


def test_a_new_model_starts_the_line_again() -> None:
    sent = [{"role": "user", "content": "x" * 400}]
    more = [*sent, {"role": "assistant", "content": "y" * 800}]
    cal = Calibration()
    cal.observe(sent, 104 * 2 + TOOLS, model="a")
    cal.observe(more, 308 * 3, model="b")  # another model, no tools: three tokens a token
    reducer = MessageReducer(config=ReducerConfig(max_tokens=MAX, token_counter=heuristic_counter(),
                                                  calibrate=True))  # fmt: skip
    assert reducer.token_scale(more, calibration=cal) == (3.0, 0)


@pytest.mark.parametrize("source", ["calibration", "history"])
def test_small_tools_keep_the_budget_too(source: Source) -> None:
    counts = converse(source, tools=120)
    assert [c for c in counts[1:] if c > MAX] == []
    assert max(counts[1:]) >= 0.9 * MAX


def test_the_cost_model_counts_the_offset_as_token_mode_does() -> None:
    counter = heuristic_counter()
    history: list[dict[str, Any]] = [{"role": "user", "content": "x" * 400}]
    history.append({"role": "assistant", "content": "y" * 800,
                    "usage_metadata": {"input_tokens": 2 * counter(history[0]) + TOOLS}})  # fmt: skip
    history.append({"role": "user", "content": "z" * 1200})
    before = sum(counter(m) for m in history)
    history.append({"role": "assistant", "content": "done",
                    "usage_metadata": {"input_tokens": 2 * before + TOOLS}})  # fmt: skip
    expected = sum(2 * counter(m) for m in history) + TOOLS
    report = estimate([history], token_counter=counter, calibrate=True)
    assert report.input_tokens == expected
    reducer = MessageReducer(config=ReducerConfig(max_tokens=MAX, token_counter=counter, calibrate=True))
    assert reducer.calibrated_tokens(history) == expected
