"""Token budgets in the provider's tokens through the Agent Framework's real agent loop.

The scripted client reports, as ``ChatResponse.usage_details["input_token_count"]``, the input
tokens of each request counted by a tokenizer that is not the reducer's (``tests.usage_models``:
bytes/3 + 4 per message, plus the tools' schemas). The stored messages carry no usage; given
as the agent's chat middleware too, ``ReducerCompactionStrategy`` reads each call's usage and
pairs it with the request it bounded. After the first reported usage no request exceeds
``max_tokens`` in the provider's count, the largest uses >= 0.9x of it, each message is kept or
summarized once, and an unusable figure changes nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
from agent_framework import Message

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from agentstate_reducer.tokens import heuristic_counter
from tests.af_script import Summarizer, make_agent, question, to_openai
from tests.usage_agent_framework import UsageClient
from tests.usage_models import Figure, Reporter

MAX, TARGET = 3000, 2200
TURNS = 30
TOOLS = 120
Counter = Literal["tiktoken", "heuristic"]


def identity(m: Message) -> str:
    dumped = [c.to_dict(exclude_none=True) for c in m.contents]
    return m.role + json.dumps(dumped, sort_keys=True, default=str)


def run(
    figure: Figure,
    *,
    counter: Counter = "tiktoken",
    calibrate: bool | None = None,
    middleware: bool = True,
    conversations: int = 1,
    stream: bool = False,
) -> tuple[Reporter, UsageClient, Summarizer]:
    reporter, summarizer = Reporter(figure=figure, overhead=TOOLS), Summarizer()
    client = UsageClient(reporter=reporter)
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    strategy = ReducerCompactionStrategy(MessageReducer(config=config), summarizer=summarizer)
    extra: dict[str, Any] = {"middleware": [strategy]} if middleware else {}
    agent = make_agent(client, compaction_strategy=strategy, **extra)
    sessions = [agent.create_session() for _ in range(conversations)]

    async def converse(session: Any, offset: int) -> None:
        for i in range(TURNS):
            # each conversation opens with its own first question
            asked = question(offset + i)
            if stream:
                response = await agent.run(asked, session=session, stream=True).get_final_response()
            else:
                response = await agent.run(asked, session=session)
            assert response.text.startswith(f"a{offset + i} ")

    async def all_of_them() -> None:
        await asyncio.gather(*(converse(s, 1000 * n) for n, s in enumerate(sessions)))

    asyncio.run(all_of_them())
    assert len(client.requests) == 3 * TURNS * conversations
    summarized = [identity(m) for batch in summarizer.seen for m in batch]
    assert len(summarized) == len(set(summarized))  # each message summarized once
    return reporter, client, summarizer


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_every_request_after_the_first_usage_fits_the_providers_count(counter: Counter, stream: bool) -> None:
    reporter, _, summarizer = run("true", counter=counter, stream=stream)
    assert summarizer.calls  # the conversation outgrew the budget
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_the_middleware_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    reporter, _, _ = run("true", counter=counter, middleware=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


def test_conversations_sharing_one_strategy_are_calibrated_apart() -> None:
    reporter, client, _ = run("true", conversations=3)
    # the requests of the three interleaved conversations, each after its own first usage
    per: dict[int, list[int]] = {}
    for request, count in zip(client.requests, reporter.counts, strict=True):
        first = next(m.text for m in request.messages if m.role == "user" and "please" in (m.text or ""))
        per.setdefault(int(first[1:].split()[0]) // 1000, []).append(count)
    assert sorted(per) == [0, 1, 2]
    for counts in per.values():
        assert [c for c in counts[1:] if c > MAX] == []
        assert max(counts[1:]) >= 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    reporter, client, _ = run(figure)
    plain, plain_client, _ = run("true", middleware=False)
    assert [to_openai(r) for r in client.requests] == [to_openai(r) for r in plain_client.requests]
    assert reporter.counts == plain.counts
