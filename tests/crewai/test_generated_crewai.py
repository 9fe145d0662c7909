"""``ReducerHook`` over generated histories, as CrewAI's agent loop calls it.

CrewAI calls the hook before every model call with the executor's own list of OpenAI-format dicts,
which the executor both sends and keeps (state mode). Each model call of a generated history
(``tests.histories.calls``) appends the history's new messages to a real executor's list (dicts
as CrewAI writes them: role, content, tool_calls, tool_call_id) and runs the hook through a real
``LLMCallHookContext``. Checked: every request passes ``tests.provider_rules``, every message is
kept or reached the summarizer and ``on_prune`` exactly once, and the list holds the caller's own
dicts, never mutated. One crew also runs through CrewAI's real loop with the hook registered.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from crewai.hooks import LLMCallHookContext, clear_all_global_hooks

from agentstate_reducer.integrations.crewai import ReducerHook
from tests.convo import Spec
from tests.crewai.scripted import ScriptedLLM, as_openai, crew_for
from tests.histories import History, Ledger, calls, histories, text_id
from tests.provider_rules import request_errors

HISTORIES = histories(24, seed=800)
SYSTEM = {"role": "system", "content": "You are Researcher."}


@pytest.fixture(autouse=True)
def _no_global_hooks() -> Iterator[None]:
    clear_all_global_hooks()
    yield
    clear_all_global_hooks()


def crewai_dicts(spec: Spec) -> list[dict[str, Any]]:
    """The spec as CrewAI's executor writes its messages (no ids)."""
    out: list[dict[str, Any]] = []
    for kind, mid, *rest in spec:
        text = f"message {mid} " + "x" * 20
        if kind == "call":
            calls_ = [
                {
                    "id": c,
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": c})},
                }
                for c in rest[0]
            ]
            out.append({"role": "assistant", "content": text, "tool_calls": calls_})
        elif kind == "tool":
            out.append({"role": "tool", "tool_call_id": rest[0], "name": "lookup", "content": text})
        else:
            out.append(
                {"role": {"human": "user", "ai": "assistant", "system": "system"}[kind], "content": text}
            )
    return out


def message_id(message: Any) -> str | None:
    return text_id(message.get("content"))


def half_answered(spec: Spec) -> bool:
    if spec[-1][0] != "tool":
        return False
    step = next((s for s in reversed(spec) if s[0] == "call" and spec[-1][2] in s[2]), None)
    return step is not None and not set(step[2]) <= {s[2] for s in spec if s[0] == "tool"}


@pytest.fixture(scope="module")
def executor() -> Any:
    llm = ScriptedLLM(model="scripted", turns=0)
    crew, agent = crew_for(llm)
    crew.kickoff()  # builds the agent's executor
    return agent.agent_executor


@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History, executor: Any) -> None:
    ledger = Ledger(history, key=message_id)
    hook = ReducerHook(max_messages=8, min_messages=4, summarizer=ledger.summarizer, on_prune=[ledger.hook])
    whole = crewai_dicts(history.spec)
    messages: list[dict[str, Any]] = [SYSTEM]
    executor.messages = messages
    problems: list[str] = []
    put = 0
    for n, spec in enumerate(calls(history)):
        messages.extend(whole[put : len(spec)])
        put = len(spec)
        snapshot = copy.deepcopy(whole)
        hook(LLMCallHookContext(executor=executor))
        errors = request_errors(as_openai(messages))
        if spec[-1][1] in history.defect_ids or half_answered(spec) or spec[-1][0] == "ai":
            # nothing the model can answer came after its own last message
            errors = [e for e in errors if e != "anthropic: the request does not end with a user message"]
        problems += [f"call {n}: {e}" for e in errors]
        own = {id(m) for m in whole}
        problems += [
            f"call {n}: not the caller's {m!r}" for m in messages if message_id(m) and id(m) not in own
        ]
        if whole != snapshot:
            problems.append(f"call {n}: the caller's messages were mutated")
    assert executor.messages is messages
    assert problems == []
    assert ledger.errors(message_id(m) for m in messages) == []


def test_a_crew_run_through_the_real_loop_is_sendable_and_each_message_once() -> None:
    summarized: list[str] = []
    pruned: list[str] = []

    def key(m: dict[str, Any]) -> str:
        calls_ = [c["id"] for c in m.get("tool_calls") or []]
        return json.dumps([m.get("role"), m.get("tool_call_id"), calls_, m.get("content")], default=str)

    def summarizer(messages: list[Any]) -> str:
        summarized.extend(key(m) for m in messages if not str(m.get("content")).startswith("Summary"))
        return f"{len(messages)} messages"

    def archive(messages: list[Any], namespace: Any) -> None:
        pruned.extend(key(m) for m in messages if not str(m.get("content")).startswith("Summary"))

    llm = ScriptedLLM(model="scripted", turns=12)
    crew, agent = crew_for(llm)
    hook = ReducerHook(max_messages=8, min_messages=4, summarizer=summarizer, on_prune=[archive]).register()
    crew.kickoff()
    hook.unregister()
    assert [e for r in llm.received for e in request_errors(as_openai(r))] == []
    assert summarized and sorted(summarized) == sorted(pruned) and len(set(pruned)) == len(pruned)
    kept = {key(m) for m in agent.agent_executor.messages}
    assert not kept & set(pruned)
