"""Every model request of an Agents SDK run within the session's token budget, tool loop included.

A run sends the stored history, its new input and the items its own tool loop adds; the last
grow within the run, where the session stores nothing. ``UsageHooks`` as the run's hooks feeds
the session's calibration, and its ``call_model_input_filter`` bounds each request with it. The
SDK's real ``Runner`` and models run over a scripted API (``tests.usage_openai_agents``) that
reports each request's input tokens counted by another tokenizer (``tests.usage_models``:
bytes/3 + 4 per message, plus the tools' schemas). After the first reported usage no request is
over ``max_tokens`` in that count, the largest uses >= 0.9x of it, every request keeps its calls
with their outputs, and every item of the conversation is stored, archived or summarized
exactly once.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any, Literal

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.openai_agents import ReducingSession
from agentstate_reducer.integrations.openai_agents_usage import UsageHooks
from tests.openai_agents_script import APIS, Api, Reply, chat_payload
from tests.provider_rules import request_errors
from tests.usage_models import Reporter
from tests.usage_openai_agents import UsageAPI

MAX, TARGET = 3000, 2200
RUNS = 8
CALLS = 6  # tool calls per run: each run adds about 1,400 provider tokens
TOOLS = 120
INSTRUCTIONS = "Be brief."
HEADER = "Summary of the earlier conversation"
Kept = Literal["archive", "summary"]


@function_tool
def lookup(q: str) -> str:
    """Look q up."""
    return f"{q}: " + "the record reads lorem ipsum dolor sit amet " * 12


def _key(item: Mapping[str, Any]) -> Hashable:
    """What names an item of this conversation: a call or output by its call id, a message by
    its role and text."""
    if item.get("type") in ("function_call", "function_call_output"):
        return (item["type"], item["call_id"])
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(str(part.get("text", "")) for part in content)
    return (item.get("role"), content)


def _is_summary(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and str(item.get("content", "")).startswith(HEADER)


def converse(api: Api, kept: Kept) -> tuple[Reporter, UsageAPI, Counter[Hashable]]:
    """``RUNS`` runs of ``CALLS`` tool calls each; the reporter, the scripted API and how often
    each item of the conversation is stored, archived or summarized."""
    set_tracing_disabled(True)
    reporter = Reporter(figure="true", overhead=TOOLS)
    scripted = UsageAPI(reporter=reporter)
    agent = Agent(name="a", instructions=INSTRUCTIONS, model=scripted.model(api), tools=[lookup])
    handled: list[Any] = []

    def archive(pruned: list[Any], namespace: Any) -> None:
        handled.extend(pruned)

    def summarize(pruned: list[Any]) -> str:
        handled.extend(item for item in pruned if not _is_summary(item))
        return f"{len(pruned)} items"

    if kept == "archive":
        config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, on_prune=[archive])
    else:
        config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, summarize_fn=summarize,
                               inject_summary=True)  # fmt: skip

    async def run(folder: str) -> list[Any]:
        inner = SQLiteSession("s", f"{folder}/chats.db")
        session = ReducingSession(inner, MessageReducer(config=config))
        hooks = UsageHooks(session)
        run_config = RunConfig(call_model_input_filter=hooks.call_model_input_filter)
        for n in range(RUNS):
            calls = [Reply(calls=((f"c{n}_{k}", "lookup", {"q": f"q{n}.{k}"}),)) for k in range(CALLS)]
            scripted.extend([*calls, Reply(text=f"answer {n}")])
            result = await Runner.run(agent, f"question {n} please", session=session, hooks=hooks,
                                      run_config=run_config)  # fmt: skip
            assert result.final_output == f"answer {n}"
        stored = await inner.get_items()
        inner.close()
        return stored

    with tempfile.TemporaryDirectory() as folder:
        stored = asyncio.run(run(folder))
    seen = Counter(_key(item) for item in [*stored, *handled] if not _is_summary(item))
    return reporter, scripted, seen


def _conversation() -> Counter[Hashable]:
    """Every item the runs add, once."""
    out: Counter[Hashable] = Counter()
    for n in range(RUNS):
        out[("user", f"question {n} please")] += 1
        for k in range(CALLS):
            out[("function_call", f"c{n}_{k}")] += 1
            out[("function_call_output", f"c{n}_{k}")] += 1
        out[("assistant", f"answer {n}")] += 1
    return out


@pytest.mark.parametrize("kept", ["archive", "summary"])
@pytest.mark.parametrize("api", APIS)
def test_no_request_of_a_run_goes_over_the_budget(api: Api, kept: Kept) -> None:
    reporter, scripted, seen = converse(api, kept)
    assert len(reporter.counts) == RUNS * (CALLS + 1)
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX
    assert [e for body in scripted.requests for e in request_errors(chat_payload(api, body))] == []
    assert seen == _conversation()
