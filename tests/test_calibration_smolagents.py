"""Token budgets in the provider's tokens through smolagents' real agent loop.

The scripted model reports, as ``ChatMessage.token_usage``, the input tokens of each request
counted by a tokenizer that is not the reducer's (``tests.usage_models``: bytes/3 + 4 per
message, plus the tools' schemas); smolagents copies it to each ``ActionStep`` of the memory that
``ReduceMemory`` bounds, where the core reads it. After the first reported usage no request
exceeds ``max_tokens`` in the provider's count, the largest uses >= 0.9x of it, each step is kept
or summarized once, and an unusable figure changes nothing.
"""

from __future__ import annotations

from typing import Literal

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.smolagents import ReduceMemory
from agentstate_reducer.tokens import heuristic_counter
from tests.smolagents_script import Summarizer, converse, openai_dicts, tool_agent
from tests.usage_models import Figure, Reporter
from tests.usage_smolagents import UsageModel

MAX, TARGET = 3000, 2200
TASKS = 14
TOOLS = 120
Counter = Literal["tiktoken", "heuristic"]


def run(
    figure: Figure, *, counter: Counter = "tiktoken", calibrate: bool | None = None
) -> tuple[Reporter, UsageModel, Summarizer]:
    reporter, summarizer = Reporter(figure=figure, overhead=TOOLS), Summarizer()
    model = UsageModel(reporter=reporter)
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    reduce = ReduceMemory(MessageReducer(config=config), summarizer=summarizer)
    agent = tool_agent(model, step_callbacks=[reduce])
    assert converse(agent, TASKS) == [f"a{i}" for i in range(TASKS)]
    assert len(summarizer.seen) == len({id(s) for s in summarizer.seen})  # each step once
    assert not any(s in agent.memory.steps for s in summarizer.seen if type(s).__name__ == "ActionStep")
    return reporter, model, summarizer


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter) -> None:
    reporter, _, summarizer = run("true", counter=counter)
    assert summarizer.calls  # the conversation outgrew the budget
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = run("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, model, _ = run(figure)
    plain, plain_model, _ = run("true", calibrate=False)
    assert [openai_dicts(r) for r in model.requests] == [openai_dicts(r) for r in plain_model.requests]
    assert reporter.counts == plain.counts
