"""Token budgets in the provider's tokens through Agno's real agent loop.

The scripted model reports, as ``ModelResponse.response_usage`` (Agno copies it to the
assistant message's ``metrics``), the input tokens of each request counted by a tokenizer that is
not the reducer's (``tests.usage_models``: bytes/3 + 4 per message, plus the tools' schemas).
The compression manager gets the whole session history, more than the reduced request a figure
was reported for; it pairs each figure with what that request sent. After the first reported
usage no request exceeds ``max_tokens`` in the provider's count, the largest uses >= 0.9x of it,
each message is kept or summarized once, and an unusable figure changes nothing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

import pytest
from agno.models.message import Message

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.agno import ReducingCompressionManager
from agentstate_reducer.summary import SUMMARY_PREFIX
from agentstate_reducer.tokens import heuristic_counter
from tests.agno_script import agent, question, to_openai, turn_of
from tests.usage_agno import UsageModel
from tests.usage_models import Figure, Reporter, provider_tokens

pytestmark = pytest.mark.slow  # each test runs whole conversations through the agent loop

MAX, TARGET = 3000, 2200
TURNS = 24
TOOLS = 120
Counter = Literal["tiktoken", "heuristic"]


class Summarizer:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, messages: list[Any]) -> str:
        with self.lock:
            self.seen += [m.id for m in messages if not str(m.content or "").startswith(SUMMARY_PREFIX)]
            return f"summary of {len(messages)} messages"


def run(
    figure: Figure,
    *,
    counter: Counter = "tiktoken",
    calibrate: bool | None = None,
    sessions: int = 1,
    sync: bool = True,
) -> tuple[Reporter, UsageModel, Summarizer]:
    reporter, summarizer = Reporter(figure=figure, overhead=TOOLS), Summarizer()
    model = UsageModel(reporter=reporter)
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    manager = ReducingCompressionManager(MessageReducer(config=config), summarizer=summarizer)
    bot = agent(model, compression_manager=manager)

    def converse(n: int) -> None:
        for i in range(100 * n, 100 * n + TURNS):
            bot.run(question(i), session_id=f"s{n}")

    async def aconverse() -> None:
        for i in range(TURNS):
            await bot.arun(question(i), session_id="s0")

    if sync:
        threads = [threading.Thread(target=converse, args=(n,)) for n in range(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        asyncio.run(aconverse())
    assert len(model.requests) == 3 * TURNS * sessions
    assert len(summarizer.seen) == len(set(summarizer.seen))  # each message summarized once
    return reporter, model, summarizer


def per_session(requests: list[list[Message]]) -> dict[int, list[int]]:
    """The provider's count of each session's requests, in order (the sessions' threads
    interleave in the reporter's ledger)."""
    out: dict[int, list[int]] = {}
    for request in requests:
        turns = {t // 100 for m in request if (t := turn_of(m)) is not None}
        assert len(turns) == 1
        out.setdefault(turns.pop(), []).append(provider_tokens(to_openai(request), overhead=TOOLS))
    return out


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("sync", [True, False], ids=["run", "arun"])
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter, sync: bool) -> None:
    reporter, _, summarizer = run("true", counter=counter, sync=sync)
    assert summarizer.seen  # the conversation outgrew the budget
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = run("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


def test_sessions_sharing_one_manager_are_calibrated_apart() -> None:
    _, model, _ = run("true", sessions=3)
    counts = per_session(model.requests)
    assert sorted(counts) == [0, 1, 2]
    for session in counts.values():
        assert [c for c in session[1:] if c > MAX] == []
        assert max(session[1:]) >= 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, model, _ = run(figure)
    plain, plain_model, _ = run("true", calibrate=False)
    assert [to_openai(r) for r in model.requests] == [to_openai(r) for r in plain_model.requests]
    assert reporter.counts == plain.counts
