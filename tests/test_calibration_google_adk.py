"""Token budgets in the provider's tokens through Google ADK's real agent loop.

The scripted model reports, as ``LlmResponse.usage_metadata.prompt_token_count``, the input
tokens of each request counted by a tokenizer that is not the reducer's (``tests.usage_models``:
bytes/3 + 4 per message, the system instruction included, plus the tools' schemas). ADK keeps
that figure on the session's events, not on the contents the callback bounds; the callback pairs
it with the request it sent. After the first reported usage no request exceeds ``max_tokens`` in
the provider's count, the largest uses >= 0.9x of it, the summarizer and ``on_prune`` hooks see
each message once, and an unusable figure changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from google.adk.apps import App
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.google_adk import ReducerCallback, ReducerPlugin
from agentstate_reducer.tokens import heuristic_counter
from tests.adk_script import agent, key, question, user
from tests.test_integration_google_adk import APP, Recorder, run_turns
from tests.usage_google_adk import UsageLlm
from tests.usage_models import Figure, Reporter

MAX, TARGET = 3000, 2200
TURNS = 16
TOOLS = 120
Counter = Literal["tiktoken", "heuristic"]


def converse(
    figure: Figure, *, counter: Counter = "tiktoken", calibrate: bool | None = None, plugin: bool = False,
    sessions: tuple[str, ...] = ("s1",),
) -> tuple[Reporter, UsageLlm, Recorder]:  # fmt: skip
    """``TURNS`` turns in each session (interleaved); checks each message reaches the
    summarizer and hooks at most once and the live question is in every request."""
    reporter, rec = Reporter(figure=figure, overhead=TOOLS), Recorder()
    model = UsageLlm().use(reporter)
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, on_prune=[rec.on_prune], calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    reducer = MessageReducer(config=config)
    if plugin:
        plugins: list[BasePlugin] = [ReducerPlugin(reducer, summarizer=rec.summarize)]
        runner = InMemoryRunner(app=App(name=APP, root_agent=agent(model), plugins=plugins))
    else:
        callback = ReducerCallback(reducer, summarizer=rec.asummarize)
        runner = InMemoryRunner(agent=agent(model, before_model_callback=callback), app_name=APP)

    async def run() -> None:
        for turn in range(TURNS):
            for session in sessions:
                await run_turns(runner, range(turn, turn + 1), session=session)

    asyncio.run(run())
    assert len(model.requests) == 3 * TURNS * len(sessions)
    for n, request in enumerate(model.requests):
        assert any(key(c) == key(user(question(n // (3 * len(sessions))))) for c in request), n
    if len(sessions) == 1:  # the sessions' messages are equal: each is one session's once
        summarized = [k for batch in rec.summarized for k in batch]
        assert len(summarized) == len(set(summarized)) and len(rec.pruned) == len(set(rec.pruned))
    return reporter, model, rec


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("plugin", [False, True], ids=["callback", "plugin"])
def test_every_request_after_the_first_usage_fits_the_providers_count(
    counter: Counter, plugin: bool
) -> None:
    reporter, _, rec = converse("true", counter=counter, plugin=plugin)
    assert rec.pruned  # the conversation outgrew the budget
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = converse("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


def test_sessions_sharing_one_callback_calibrate_apart() -> None:
    reporter, _, _ = converse("true", sessions=("s1", "s2"))
    # the first request of each session is uncalibrated; both fit after their own first usage
    assert [c for c in reporter.counts[2:] if c > MAX] == []


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, model, _ = converse(figure)
    plain, plain_model, _ = converse("true", calibrate=False)
    keys = [[key(c) for c in r] for r in model.requests]
    assert keys == [[key(c) for c in r] for r in plain_model.requests]
    assert reporter.counts == plain.counts

