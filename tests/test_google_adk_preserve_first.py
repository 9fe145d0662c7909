"""``ReducerCallback(preserve_first=True)`` in a real ADK run: the first content (the task) opens
every request, the running summary right after it, however long the conversation grows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.genai import types

from agentstate_reducer.integrations.google_adk import ReducerCallback, ReducerPlugin
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.adk_script import ScriptedLlm, agent, key, question, to_openai, user
from tests.provider_rules import request_errors

APP = "app"
MAX, MIN = 8, 4
TASK = "q0 please look this up and add the numbers: the task of this whole session"


def _is_summary(content: types.Content) -> bool:
    parts = content.parts or []
    return len(parts) == 1 and (parts[0].text or "").startswith(SUMMARY_PREFIX)


@pytest.mark.parametrize("kind", ["callback", "plugin"])
def test_the_first_content_stays_pinned_on_a_long_request(kind: str) -> None:
    summarized: list[list[str]] = []
    pruned: list[str] = []

    def summarize(messages: list[Any]) -> str:
        summarized.append([key(m) for m in messages if not _is_summary(m)])
        return f"{len(messages)} earlier messages"

    def on_prune(messages: list[Any], namespace: Any) -> None:
        pruned.extend(key(m) for m in messages if not _is_summary(m))

    options: dict[str, Any] = {"summarizer": summarize, "on_prune": [on_prune], "preserve_first": True}
    model = ScriptedLlm()
    if kind == "callback":
        callback = ReducerCallback(max_messages=MAX, min_messages=MIN, **options)
        runner = InMemoryRunner(agent=agent(model, before_model_callback=callback), app_name=APP)
    else:
        plugin = ReducerPlugin(max_messages=MAX, min_messages=MIN, **options)
        runner = InMemoryRunner(app=App(name=APP, root_agent=agent(model), plugins=[plugin]))

    async def run() -> None:
        await runner.session_service.create_session(app_name=APP, user_id="u", session_id="s")
        for i in range(8):
            message = user(TASK if i == 0 else question(i))
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
                pass

    asyncio.run(run())
    assert len(model.requests) == 8 * 3  # each turn: a call, two parallel calls, the answer
    task = key(user(TASK))
    for n, request in enumerate(model.requests):
        assert key(request[0]) == task, f"call {n} opens with {request[0]}"
        assert request_errors(to_openai(request)) == [], f"call {n}: {request_errors(to_openai(request))}"
        assert len(request) <= MAX + 1, f"call {n} sends {len(request)} contents"
        # this turn's question is sent
        assert key(user(question(n // 3))) in [key(c) for c in request] or n < 3, f"call {n}"
    # the conversation outgrew the limit: a running summary right after the task
    summarized_from = next(n for n, r in enumerate(model.requests) if len(r) > 1 and _is_summary(r[1]))
    assert all(_is_summary(r[1]) for r in model.requests[summarized_from:])
    assert summarized_from < len(model.requests) - 3
    # the task is never pruned or summarized; every pruned message reaches both once
    assert task not in pruned and all(task not in batch for batch in summarized)
    flat = [k for batch in summarized for k in batch]
    assert pruned and len(pruned) == len(set(pruned)) and sorted(pruned) == sorted(flat)
