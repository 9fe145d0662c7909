"""``ReduceHistory`` over generated histories, through Pydantic AI's real agent loop.

Each model call of a generated history is one ``agent.run_sync(None, message_history=...)`` (or
``agent.run``) with the previous run's ``all_messages()`` plus the history's new messages, in
Pydantic AI's own types (``tests.natives.to_pydantic_ai``); the scripted ``FunctionModel``
records what it receives and answers with the history's next answer (a text or its calls), which
Pydantic AI stores as the run's response (``tests.natives.answered_calls``). State mode: the
stored history is ``all_messages()``, so the ledger's "kept" is the last one. Checked: every
request passes ``tests.provider_rules``, every message of the history is kept or reached the
summarizer and ``on_prune`` exactly once, and the caller's messages are its own objects, never
mutated.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from agentstate_reducer.integrations.pydantic_ai import ReduceHistory
from tests import natives
from tests.histories import History, histories
from tests.provider_rules import request_errors

HISTORIES = histories(24, seed=300)


def converse(history: History, *, use_async: bool) -> tuple[natives.Count, list[str], list[Any]]:
    """Every model call of ``history``, the model answering with the history's own answers;
    the ledger, the problems found and the stored history."""
    count = natives.Count.of(history, natives.pydantic_ai_ids)
    received: list[list[ModelMessage]] = []
    answers: list[ModelResponse] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return copy.deepcopy(answers[len(received) - 1])

    capability = ReduceHistory(
        max_messages=8, min_messages=4, summarizer=count.summarizer, on_prune=[count.hook]
    )
    # the history's results come from outside the run: its calls are external tools (deferred)
    lookup = ToolDefinition(name="lookup", parameters_json_schema={"type": "object", "properties": {}})
    agent = Agent(
        FunctionModel(answer),
        capabilities=[capability],
        toolsets=[ExternalToolset([lookup])],
        output_type=[str, DeferredToolRequests],
    )
    problems: list[str] = []
    stored: list[Any] = []
    given: list[Any] = []
    turns, rest = natives.answered_calls(history, natives.to_pydantic_ai)
    for new, response in turns:
        given += new
        answers.append(response)
        snapshot = copy.deepcopy(new)
        history_now = [*stored, *new]
        if use_async:
            result = asyncio.run(agent.run(None, message_history=history_now))
        else:
            result = agent.run_sync(None, message_history=history_now)
        stored = result.all_messages()
        n = len(received)
        errors = request_errors(natives.pydantic_ai_chat(received[-1]))
        if isinstance(received[-1][-1], ModelRequest) and not received[-1][-1].parts:
            # Pydantic AI dropped every result after the model's last answer as an orphan and
            # sends an empty request: nothing new for the model, with or without the reducer
            errors = [e for e in errors if e != "anthropic: the request does not end with a user message"]
        problems += [f"call {n}: {e}" for e in errors]
        if new != snapshot:
            problems.append(f"call {n}: the caller's messages were mutated")
    # Pydantic AI stamps the run's messages (run_id, timestamps) on copies of its own: the
    # caller's objects are checked unmutated above, not found by identity in all_messages()
    stored = [*stored, *rest]
    return count, problems, stored


@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History) -> None:
    count, problems, stored = converse(history, use_async=False)
    assert problems == []
    assert count.errors(stored) == []


@pytest.mark.parametrize("history", HISTORIES[:6], ids=lambda h: f"seed{h.seed}")
def test_generated_history_async_run(history: History) -> None:
    count, problems, stored = converse(history, use_async=True)
    assert problems == []
    assert count.errors(stored) == []


def test_a_prompt_merged_with_an_orphan_result_stays_the_users_turn() -> None:
    """Pydantic AI merges a user prompt request and a result request after it into one request;
    the result answers no call (a replay): it goes, the prompt stays and is answered."""
    spec: list[tuple[Any, ...]] = [
        ("human", "u0"), ("call", "c0", ["k0"]), ("tool", "t0", "k0"), ("ai", "a0"),
        ("human", "u1"), ("tool", "x1.replay", "k0"),
    ]  # fmt: skip
    history = History(spec, frozenset({"replayed"}), frozenset({"x1.replay"}))
    count = natives.Count.of(history, natives.pydantic_ai_ids)
    received: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return ModelResponse(parts=[TextPart("ok")])

    capability = ReduceHistory(
        max_messages=8, min_messages=4, summarizer=count.summarizer, on_prune=[count.hook]
    )
    agent = Agent(FunctionModel(answer), capabilities=[capability], output_type=[str, DeferredToolRequests])
    agent.run_sync(None, message_history=natives.to_pydantic_ai(spec))
    assert request_errors(natives.pydantic_ai_chat(received[0])) == []
    assert [i for m in received[0] for i in natives.pydantic_ai_ids(m)] == ["u0", "c0", "t0", "a0", "u1"]
