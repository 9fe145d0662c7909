"""Token budgets in the provider's tokens through CrewAI's real agent loop.

The scripted LLM reports the input tokens of each request counted by a tokenizer that is not the
reducer's (``tests.usage_models``: bytes/3 + 4 per message, plus the tools' schemas) as CrewAI's
providers do: added to the LLM's running usage and on ``LLMCallCompletedEvent``. The executor's
messages carry none; ``ReducerHook`` reads the growth of the LLM's running total since the
executor's previous call. After the first reported usage no request exceeds ``max_tokens`` in
the provider's count, the largest uses >= 0.9x of it, each message is kept or summarized once,
and an unusable figure changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest
from crewai.hooks import clear_all_global_hooks

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.crewai import ReducerHook
from agentstate_reducer.tokens import heuristic_counter
from tests.crewai.scripted import crew_for
from tests.crewai.test_integration_crewai import Recorder, is_summary, key
from tests.crewai.usage import UsageLLM
from tests.usage_models import Figure, Reporter

MAX, TARGET = 3000, 2200
ROUNDS = 24
TOOLS = 120
Counter = Literal["default", "heuristic"]


@pytest.fixture(autouse=True)
def _no_global_hooks() -> Iterator[None]:
    clear_all_global_hooks()
    yield
    clear_all_global_hooks()


def converse(
    figure: Figure, *, counter: Counter = "default", calibrate: bool | None = None
) -> tuple[Reporter, UsageLLM, Recorder]:
    """One task of ``ROUNDS`` rounds; checks each message is kept or summarized once."""
    reporter, rec = Reporter(figure=figure, overhead=TOOLS), Recorder()
    llm = UsageLLM(model="scripted", turns=ROUNDS, reporter=reporter)
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, on_prune=[rec.on_prune], calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    hook = ReducerHook(MessageReducer(config=config), summarizer=rec.summarize)
    crew, _ = crew_for(llm)
    with hook.scoped():
        crew.kickoff()
    assert len(reporter.counts) == 2 * ROUNDS + 1
    summarized = [k for batch in rec.summarized for k in batch]
    assert len(summarized) == len(set(summarized)) and len(rec.pruned) == len(set(rec.pruned))
    last = [key(m) for m in llm.received[-1] if not is_summary(m)]
    assert set(last).isdisjoint(rec.pruned)
    return reporter, llm, rec


# CrewAI's environment has no tiktoken: the default counter is the heuristic there
@pytest.mark.parametrize("counter", ["default", "heuristic"])
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter) -> None:
    reporter, _, rec = converse("true", counter=counter)
    assert rec.pruned  # the task outgrew the budget
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["default", "heuristic"])
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = converse("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, llm, _ = converse(figure)
    plain, plain_llm, _ = converse("true", calibrate=False)
    assert llm.received == plain_llm.received and reporter.counts == plain.counts
