"""Token budgets in the provider's tokens for the Agents SDK's ``ReducingSession``.

The SDK's real models run over a scripted API (``tests.usage_openai_agents``) whose responses
report the input tokens of each request counted by a tokenizer that is not the reducer's
(``tests.usage_models``: bytes/3 + 4 per message, plus the tools' schemas). The session sees no
model call; ``UsageHooks(session)`` feeds its calibration. After the first reported usage, no
state the session stores exceeds ``max_tokens`` in the provider's count (a request holds that
state, the run's new input and what its tool loop adds), the largest stored state uses >= 0.8x
of it, and a bad figure changes nothing.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Literal

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.openai_agents import ReducingSession
from agentstate_reducer.integrations.openai_agents_usage import UsageHooks
from agentstate_reducer.tokens import heuristic_counter
from tests.openai_agents_script import APIS, Api, Reply, chat_payload
from tests.usage_models import Figure, Reporter, provider_tokens
from tests.usage_openai_agents import UsageAPI

MAX, TARGET = 3000, 2200
RUNS = 30
TOOLS = 120
INSTRUCTIONS = "Be brief."
Counter = Literal["tiktoken", "heuristic"]


@function_tool
def lookup(q: str) -> str:
    """Look q up."""
    return f"{q}: " + "the record reads lorem ipsum dolor sit amet " * 12


def converse(
    figure: Figure, api: Api = "responses", *, counter: Counter = "tiktoken", calibrate: bool | None = None,
    hooks: bool = True,
) -> tuple[Reporter, list[int]]:  # fmt: skip
    """``RUNS`` runs of one session; the reporter and the provider's count of each stored state."""
    set_tracing_disabled(True)
    reporter = Reporter(figure=figure, overhead=TOOLS)
    scripted = UsageAPI(reporter=reporter)
    agent = Agent(name="a", instructions=INSTRUCTIONS, model=scripted.model(api), tools=[lookup])
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    stored: list[int] = []

    async def run(folder: str) -> None:
        inner = SQLiteSession("s", f"{folder}/chats.db")
        session = ReducingSession(inner, MessageReducer(config=config))
        run_hooks = UsageHooks(session) if hooks else None
        for n in range(RUNS):
            call = Reply(calls=((f"c{n}", "lookup", {"q": f"question {n}"}),))
            scripted.extend([call, Reply(text=f"answer {n}")])
            result = await Runner.run(agent, f"question {n} please", session=session, hooks=run_hooks)
            assert result.final_output == f"answer {n}"
            items = await inner.get_items()
            body = {"instructions": INSTRUCTIONS, "input": items}
            stored.append(provider_tokens(chat_payload("responses", body), overhead=TOOLS))
        inner.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(folder))
    assert len(reporter.counts) == 2 * RUNS
    return reporter, stored


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("api", APIS)
def test_every_stored_state_after_the_first_usage_fits_the_providers_count(
    api: Api, counter: Counter
) -> None:
    _, stored = converse("true", api, counter=counter)
    assert [s for s in stored[1:] if s > MAX] == []
    assert max(stored[1:]) >= 0.8 * MAX


@pytest.mark.slow
@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_the_hooks_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    _, stored = converse("true", counter=counter, hooks=False)
    assert [s for s in stored[1:] if s > MAX] or max(stored[1:]) < 0.8 * MAX


@pytest.mark.slow
@pytest.mark.parametrize("figure", ["missing", "zero", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, stored = converse(figure)
    plain, plain_stored = converse("true", hooks=False)
    assert stored == plain_stored and reporter.counts == plain.counts

def test_usage_hooks_take_a_reducing_session() -> None:
    with pytest.raises(TypeError, match="UsageHooks feeds a ReducingSession's calibration, got dict"):
        UsageHooks({})  # type: ignore[arg-type]


