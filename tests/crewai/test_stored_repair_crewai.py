"""CrewAI stores the request it sends: what the request repair removes is pruned, not lost.

``ReducerHook`` writes the request into the executor's own list, the history the agent keeps.
A call group the model call leaves unanswered (one of two results) cannot be sent; it leaves the
list, so it must reach the summarizer and ``on_prune`` hooks like any pruned message. Through the
hook CrewAI calls, with a real ``LLMCallHookContext`` of a real agent's executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from crewai.hooks import LLMCallHookContext, clear_all_global_hooks

from agentstate_reducer.integrations.crewai import ReducerHook
from tests.convo import openai_dicts
from tests.crewai.scripted import ScriptedLLM, as_openai, crew_for
from tests.histories import History, Ledger, text_id
from tests.provider_rules import request_errors

PARTIAL: list[tuple[Any, ...]] = [
    ("system", "sys"), ("human", "u0"), ("ai", "a0"), ("human", "u1"),
    ("call", "c1", ["k1.0", "k1.1"]), ("tool", "t1", "k1.0"),
]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_global_hooks() -> Iterator[None]:
    clear_all_global_hooks()
    yield
    clear_all_global_hooks()


def message_id(message: Any) -> str | None:
    """The spec id a message carries in its text (a call step has none: its id is its own)."""
    return text_id(message.get("content")) or message.get("id")


@pytest.mark.parametrize("fail", [False, True], ids=["summarizer", "failing-summarizer"])
def test_a_partly_answered_call_group_at_the_end_is_summarized_and_archived(fail: bool) -> None:
    history = History(PARTIAL, frozenset({"partial"}), frozenset())
    ledger = Ledger(history, key=message_id)

    def summarizer(messages: list[Any]) -> str:
        text = ledger.summarizer(messages)
        if fail:
            raise RuntimeError("summarizer down")
        return text

    llm = ScriptedLLM(model="scripted", turns=0)
    crew, agent = crew_for(llm)
    crew.kickoff()  # builds the agent's executor
    executor = agent.agent_executor
    messages = openai_dicts(history.spec)
    given = list(messages)
    executor.messages = messages
    hook = ReducerHook(max_messages=40, min_messages=20, summarizer=summarizer, on_prune=[ledger.hook])
    hook(LLMCallHookContext(executor=executor))

    assert executor.messages is messages  # edited in place
    assert request_errors(as_openai(messages)) == []
    assert all(any(m is g for g in given) for m in messages if text_id(m.get("content")))
    assert ledger.errors(message_id(m) for m in messages) == []
    assert ledger.pruned["c1"] == ledger.pruned["t1"] == 1
    if not fail:
        assert ledger.summarized["c1"] == ledger.summarized["t1"] == 1
