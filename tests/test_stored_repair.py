"""A framework that stores the request it sends: what the request repair removes is pruned.

Pydantic AI writes what ``ReduceHistory`` returns over the run's history, so the request is the
stored history. A call group the model call leaves unanswered (a run that died between two
tools: one of two results) cannot be sent; removing it from the request removes it from the
history, so it must reach the summarizer and ``on_prune`` hooks like any pruned message.
(CrewAI's executor list is the same case: tests/crewai/test_stored_repair_crewai.py.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentstate_reducer.integrations.pydantic_ai import ReduceHistory
from tests import natives
from tests.histories import History
from tests.provider_rules import request_errors

#: a run that died between two tools: ``k1.1`` has no result
PARTIAL: list[tuple[Any, ...]] = [
    ("human", "u0"), ("ai", "a0"), ("human", "u1"), ("call", "c1", ["k1.0", "k1.1"]), ("tool", "t1", "k1.0"),
]  # fmt: skip


def run(history: History, count: natives.Count, *, fail: bool, use_async: bool) -> tuple[Any, list[Any]]:
    received: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return ModelResponse(parts=[TextPart("done")])

    def summarizer(messages: list[Any]) -> str:
        text = count.summarizer(messages)
        if fail:
            raise RuntimeError("summarizer down")
        return text

    capability = ReduceHistory(max_messages=40, min_messages=20, summarizer=summarizer, on_prune=[count.hook])
    agent = Agent(FunctionModel(answer), capabilities=[capability])

    @agent.tool_plain
    def lookup(q: str) -> str:
        return q

    given = natives.to_pydantic_ai(history.spec)
    if use_async:
        result = asyncio.run(agent.run(None, message_history=given))
    else:
        result = agent.run_sync(None, message_history=given)
    return result, received


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_partly_answered_call_group_at_the_end_is_summarized_and_archived(use_async: bool) -> None:
    history = History(PARTIAL, frozenset({"partial"}), frozenset())
    count = natives.Count.of(history, natives.pydantic_ai_ids)
    result, received = run(history, count, fail=False, use_async=use_async)
    assert len(received) == 1 and request_errors(natives.pydantic_ai_chat(received[0])) == []
    stored = result.all_messages()
    assert count.errors(stored) == []
    assert count.ledger.pruned["c1"] == count.ledger.pruned["t1"] == 1
    assert count.ledger.summarized["c1"] == count.ledger.summarized["t1"] == 1
    assert count.ledger.summary_calls == 1


def test_a_failing_summarizer_still_archives_the_removed_group() -> None:
    history = History(PARTIAL, frozenset({"partial"}), frozenset())
    count = natives.Count.of(history, natives.pydantic_ai_ids)
    result, received = run(history, count, fail=True, use_async=False)
    assert request_errors(natives.pydantic_ai_chat(received[0])) == []
    # the group cannot be sent: it leaves the history, into the archive (no summary made)
    assert count.errors(result.all_messages()) == []
    assert count.ledger.pruned["c1"] == count.ledger.pruned["t1"] == 1
