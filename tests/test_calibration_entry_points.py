"""Budgets in the provider's tokens through every LangGraph entry point, with real agent loops.

A scripted provider counts each request with its own tokenizer (``tests.calibration_script``:
bytes/3, word-piece) and reports the count as usage. With ``ReducerConfig(max_tokens=4000,
target_tokens=3000)`` and nothing else: after the first reported usage, no request (state
annotation, middleware) and no stored state (saver) is over 4,000 of the provider's tokens, and
the largest request uses at least 90% of the budget (calibration does not over-prune).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import Calibration, MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from checkpointers import ReducingCheckpointSaver
from tests.calibration_script import TOKENIZERS, UsageToolModel, lookup_tool
from tests.scenario_graph import _filler, build_graph, open_saver, run_turns, thread_config

MAX, TARGET, CHARS, TURNS = 4000, 3000, 400, 24


def config() -> ReducerConfig:
    return ReducerConfig(max_tokens=MAX, target_tokens=TARGET)


def assert_within_budget(requests: list[int]) -> None:
    """After the first request (whose usage is the first reported), none is over ``MAX``; the
    conversation reached the budget and the largest request uses >= 90% of it."""
    assert len(requests) >= 2 * TURNS
    over = [(i, n) for i, n in enumerate(requests) if i > 0 and n > MAX]
    assert over == [], f"{len(over)} of {len(requests)} requests over {MAX} provider tokens: {over[:5]}"
    assert max(requests) >= 0.9 * MAX, f"largest request {max(requests)}: over-pruned"


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
def test_state_annotation_keeps_every_request_within_the_provider_budget(tokenizer: str) -> None:
    model = UsageToolModel(tokenizer=tokenizer, content_chars=CHARS)
    reducer = MessageReducer(config=config())
    graph = build_graph(InMemorySaver(), state_reducer=reducer, model=model, content_chars=CHARS)
    out = run_turns(graph, TURNS, content_chars=CHARS)
    assert_within_budget(model.requests)
    assert model.count(out["messages"]) <= MAX


def test_state_annotation_without_usage_plans_with_the_counter_alone() -> None:
    """No usage reported: nothing to calibrate; the reduction is the counter's, as before."""
    model = UsageToolModel(tokenizer="bytes3", content_chars=CHARS, report=False)
    reducer = MessageReducer(config=config())
    graph = build_graph(InMemorySaver(), state_reducer=reducer, model=model, content_chars=CHARS)
    out = run_turns(graph, TURNS, content_chars=CHARS)
    counts = reducer.count_tokens(out["messages"])
    assert sum(counts) <= MAX
    assert reducer.token_ratio(out["messages"]) is None


def test_reduce_with_a_calibration_keeps_every_request_within_the_provider_budget() -> None:
    """OpenAI-style dicts carry no usage: the caller feeds what it sent and ``prompt_tokens``."""

    def provider(messages: list[dict[str, Any]]) -> int:  # bytes/3 + 4 per message
        return sum(len(str(m["content"]).encode()) // 3 + 4 for m in messages)

    reducer = MessageReducer(config=config())
    cal = Calibration()
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief.", "id": "sys"}]
    requests: list[int] = []
    for turn in range(3 * TURNS):
        history.append({"role": "user", "content": _filler(f"question {turn}", CHARS), "id": f"u{turn}"})
        sent = reducer.reduce(history, calibration=cal).surviving
        requests.append(provider(sent))
        assert cal.observe(sent, {"prompt_tokens": requests[-1], "completion_tokens": 20})
        answer = {"role": "assistant", "content": _filler(f"answer {turn}", CHARS), "id": f"a{turn}"}
        history = [*sent, answer]
    assert_within_budget(requests)
    assert history[0]["id"] == "sys"  # the system prompt stays


def _agent_requests(mode: str, tokenizer: str, *, use_async: bool = False) -> tuple[list[int], list[Any]]:
    model = UsageToolModel(tokenizer=tokenizer, content_chars=CHARS)
    mw = ReducerMiddleware(config=config(), mode=mode)  # type: ignore[arg-type]
    agent = create_agent(
        model, [lookup_tool(CHARS)], system_prompt="You are a careful assistant.", middleware=[mw],
        checkpointer=InMemorySaver(),
    )
    out: dict[str, Any] = {}
    for turn in range(TURNS):
        question: Any = {"messages": [HumanMessage(_filler(f"question {turn}", CHARS), id=f"h{turn}")]}
        if use_async:
            out = asyncio.run(agent.ainvoke(question, thread_config("t1")))
        else:
            out = agent.invoke(question, thread_config("t1"))
    return model.requests, out["messages"]


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("mode", ["state", "request"])
def test_middleware_keeps_every_request_within_the_provider_budget(mode: str, tokenizer: str) -> None:
    requests, state = _agent_requests(mode, tokenizer)
    assert_within_budget(requests)
    if mode == "request":  # the state keeps everything; only what is sent is reduced
        assert [m.id for m in state if m.type == "human"] == [f"h{t}" for t in range(TURNS)]


@pytest.mark.parametrize("mode", ["state", "request"])
def test_async_middleware_keeps_every_request_within_the_provider_budget(mode: str) -> None:
    requests, _ = _agent_requests(mode, "bytes3", use_async=True)
    assert_within_budget(requests)


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
def test_saver_stores_no_state_over_the_provider_budget(tmp_path: Path, tokenizer: str) -> None:
    model = UsageToolModel(tokenizer=tokenizer, content_chars=CHARS)
    with open_saver("sqlite", path=tmp_path / "calibration.sqlite") as inner:
        saver = ReducingCheckpointSaver(inner, MessageReducer(config=config()))
        graph = build_graph(saver, model=model, content_chars=CHARS)
        stored: list[int] = []
        usage_seen = False

        def check(turn: int, output: dict[str, Any]) -> None:
            nonlocal usage_seen
            for item in inner.list(thread_config("thread-1"), limit=8):
                messages = item.checkpoint["channel_values"].get("messages") or []
                if usage_seen:
                    stored.append(model.count(messages))
            usage_seen = usage_seen or bool(model.requests)

        run_turns(graph, TURNS, content_chars=CHARS, after_turn=check)
    assert stored
    over = [n for n in stored if n > MAX]
    assert over == [], f"{len(over)} of {len(stored)} stored states over {MAX} provider tokens"
    assert max(stored) >= 0.9 * MAX, f"largest stored state {max(stored)}: over-pruned"
