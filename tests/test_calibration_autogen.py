"""Token budgets in the provider's tokens through AutoGen's ``AssistantAgent`` loop.

The scripted client reports, as ``CreateResult.usage.prompt_tokens`` and in its running
``actual_usage()``, the input tokens of each request counted by a tokenizer that is not the
reducer's (``tests.usage_models``: bytes/3 + 4 per message, plus the tools' schemas). The model
context sees no usage; given ``model_client=``, it reads the growth of the client's running
total. After the first reported usage no request exceeds ``max_tokens`` in the provider's count,
the largest uses >= 0.9x of it, each message is kept or summarized once, and an unusable figure
changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from autogen_agentchat.agents import AssistantAgent

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.autogen import SUMMARY_SOURCE, ReducingChatCompletionContext
from agentstate_reducer.tokens import heuristic_counter
from tests.autogen_script import SYSTEM_PROMPT, add, lookup, question, turn_responses
from tests.usage_autogen import UsageClient
from tests.usage_models import Figure, Reporter

MAX, TARGET = 3000, 2200
TURNS = 24
TOOLS = 120
Counter = Literal["tiktoken", "heuristic"]


def converse(
    figure: Figure, *, counter: Counter = "tiktoken", calibrate: bool | None = None, client_given: bool = True
) -> tuple[Reporter, UsageClient, list[str]]:
    reporter, summarized = Reporter(figure=figure, overhead=TOOLS), list[str]()
    client = UsageClient([r for i in range(TURNS) for r in turn_responses(i)], reporter)

    def summarize(messages: list[Any]) -> str:
        kept = [m for m in messages if getattr(m, "source", None) != SUMMARY_SOURCE]
        summarized.extend(m.model_dump_json() for m in kept)
        return f"{len(messages)} earlier messages"

    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    context = ReducingChatCompletionContext(
        MessageReducer(config=config), summarizer=summarize, model_client=client if client_given else None
    )
    agent = AssistantAgent("helper", client, tools=[lookup, add], system_message=SYSTEM_PROMPT,
                           model_context=context, max_tool_iterations=3)  # fmt: skip

    async def run() -> None:
        for i in range(TURNS):
            result = await agent.run(task=question(i))
            assert result.messages[-1].to_text() == f"answer {i}: item {i} added"

    asyncio.run(run())
    assert len(reporter.counts) == 3 * TURNS
    return reporter, client, summarized


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter) -> None:
    reporter, _, summarized = converse("true", counter=counter)
    assert summarized and len(summarized) == len(set(summarized))
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_the_client_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = converse("true", counter=counter, client_given=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


@pytest.mark.slow
@pytest.mark.parametrize("figure", ["missing", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    # AutoGen has no "missing": its clients report RequestUsage(0, 0) then
    reporter, client, _ = converse(figure)
    plain, plain_client, _ = converse("true", client_given=False)
    assert client.requests == plain_client.requests and reporter.counts == plain.counts

def test_model_client_must_report_usage() -> None:
    with pytest.raises(TypeError, match="model_client must be the agent's ChatCompletionClient"):
        ReducingChatCompletionContext(max_messages=10, model_client=object())
