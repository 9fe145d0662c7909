"""Token budgets in the provider's tokens through Pydantic AI's real agent loop.

The scripted model reports, as ``ModelResponse.usage``, the input tokens of each request counted
by a tokenizer that is not the reducer's (``tests.usage_models``: bytes/3 + 4 per message, plus
the tools' schemas); ``ReduceHistory(max_tokens=..., target_tokens=...)`` must keep every
request after the first reported usage within ``max_tokens`` of that count, use the budget (the
largest request >= 0.9x ``max_tokens``), and lose nothing: each message stays in the history or
reaches the archive once. A bad figure (missing, zero, negative) changes nothing: the requests
are those of a run without usage.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic_ai.messages import ModelMessage

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.pydantic_ai import ReduceHistory, summary_text
from agentstate_reducer.summary import SUMMARY_PREFIX
from agentstate_reducer.tokens import heuristic_counter
from tests.test_integration_pydantic_ai import Archive, Script, Summarizer, key, make_agent, openai_dicts
from tests.usage_models import Figure, Reporter
from tests.usage_pydantic_ai import reporting_model

MAX, TARGET = 4000, 3000
TURNS = 24
#: the reducer's counters: tiktoken's cl100k_base (the tests' offline copy) and the heuristic
Counter = Literal["tiktoken", "heuristic"]
COUNTERS: tuple[Counter, ...] = ("tiktoken", "heuristic")
#: the two tools' schemas, which a provider counts in every request's input tokens
TOOLS = 120


def _is_summary(message: Any) -> bool:
    return (summary_text(message) or "").startswith(SUMMARY_PREFIX)


def converse(
    figure: Figure, *, counter: Counter = "tiktoken", calibrate: bool | None = None
) -> tuple[Reporter, Script]:
    """``TURNS`` runs of one conversation; checks that each message is kept or archived once."""
    reporter, script, archive = Reporter(figure=figure, overhead=TOOLS), Script(), Archive()
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, on_prune=[archive], calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    assert MessageReducer(config=config).calibrates is not False or calibrate is False
    capability = ReduceHistory(MessageReducer(config=config), summarizer=Summarizer())
    agent = make_agent(reporting_model(lambda m, info: script.respond(m), reporter, openai_dicts), capability)
    history: list[ModelMessage] = []
    produced: set[tuple[Any, ...]] = set()
    for i in range(TURNS):
        result = agent.run_sync(f"q{i} please tell me", message_history=history)
        assert result.output == f"answer to q{i} please tell me"
        history = result.all_messages()
        produced |= {key(m) for m in history if not _is_summary(m)}
    kept = [key(m) for m in history if not _is_summary(m)]
    archived = [k for k in archive.pruned if k in produced]  # an earlier summary aside
    assert len(kept) == len(set(kept)) and len(archived) == len(set(archived))
    assert set(kept).isdisjoint(archived) and set(kept) | set(archived) == produced
    return reporter, script


@pytest.mark.parametrize("counter", COUNTERS)
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter) -> None:
    reporter, _ = converse("true", counter=counter)
    assert len(reporter.counts) == 3 * TURNS
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", COUNTERS)
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    # the same conversation planned in the counter's own tokens: what calibration fixes
    reporter, _ = converse("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, script = converse(figure)
    plain, plain_script = converse("true", calibrate=False)
    # Pydantic AI draws its tool call ids at random: the requests compared by size
    assert [len(r) for r in script.requests] == [len(r) for r in plain_script.requests]
    assert reporter.counts == plain.counts
