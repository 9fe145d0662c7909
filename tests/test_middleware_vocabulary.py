"""``ReducerMiddleware`` takes the words every integration takes: the ``ReducerConfig`` fields
(``min_messages``, ``max_messages``, ``max_tokens``, ``target_tokens``, ...), ``summarizer=``, a
``MessageReducer`` or ``config=ReducerConfig(...)``; a misspelt one is named with a hint."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from agentstate_reducer.summary import SUMMARY_ID
from tests.agent_script import TOOLS, ScriptedModel, turns

SYSTEM = "You are a terse assistant."
CFG: RunnableConfig = {"configurable": {"thread_id": "vocabulary"}}


def _stored_after(mw: ReducerMiddleware, n_turns: int = 12) -> tuple[list[Any], ScriptedModel]:
    model = ScriptedModel(steps=2)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    for t in turns(n_turns):
        agent.invoke(t, CFG)
    return agent.get_state(CFG).values["messages"], model


@pytest.mark.parametrize(
    "given",
    [
        {"min_messages": 6, "max_messages": 12},
        {"config": ReducerConfig(min_messages=6, max_messages=12)},
        {"reducer": MessageReducer(min_messages=6, max_messages=12)},
    ],
    ids=["fields", "config", "reducer"],
)
def test_the_limits_given_three_ways_bound_the_agent_alike(given: dict[str, Any]) -> None:
    mw = ReducerMiddleware(**given)
    assert repr(mw) == "ReducerMiddleware(mode='state', trigger=('messages', 13), keep=('messages', 6))"
    stored, model = _stored_after(mw)
    reference, _ = _stored_after(ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12)))
    assert [(m.type, m.text) for m in stored] == [(m.type, m.text) for m in reference]
    assert len(stored) <= 13
    # a turn is human, call, result, call, 2 results, answer: 12 turns is 84 messages unbounded
    assert max(len(call) for call in model.calls) <= 1 + 13 + 2


def test_token_limits_and_summarizer_given_directly() -> None:
    seen: list[int] = []

    def summarize(messages: list[Any]) -> str:
        seen.append(len(messages))
        return f"{len(messages)} earlier messages"

    mw = ReducerMiddleware(
        max_tokens=600, target_tokens=300, token_counter=lambda m: 20, summarizer=summarize
    )
    assert repr(mw) == "ReducerMiddleware(mode='state', trigger=('tokens', 601), keep=('tokens', 300))"
    stored, _ = _stored_after(mw)
    assert seen, "the summarizer given as summarizer= was never called"
    assert stored[0].id == SUMMARY_ID
    assert 20 * len(stored) <= 600 + 20 * 3  # one step may follow a check


def test_the_defaults_without_limits_are_the_integrations() -> None:
    assert repr(ReducerMiddleware()) == (
        "ReducerMiddleware(mode='state', trigger=('messages', 41), keep=('messages', 20))"
    )
    # one limit given: the other is ReducerConfig's default, as for every integration
    assert repr(ReducerMiddleware(max_messages=30)) == (
        "ReducerMiddleware(mode='state', trigger=('messages', 31), keep=('messages', 10))"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_mesages": 20}, "unknown keyword argument(s) 'max_mesages' (did you mean 'max_messages'?)"),
        ({"target_token": 20}, "(did you mean 'target_tokens'?)"),
        ({"trigerr": ("messages", 20)}, "unknown keyword argument 'trigerr' (did you mean 'trigger'?)"),
        ({"sumarizer": len}, "(did you mean 'summarizer'?)"),
        ({"reducer": MessageReducer(), "max_messages": 20}, "not both"),
        ({"config": ReducerConfig(), "max_messages": 20}, "one of them (got config= and ['max_messages'])"),
        ({"config": ReducerConfig(), "reducer": MessageReducer()}, "got config= and a reducer"),
        ({"config": {"max_messages": 20}}, "config must be an agentstate_reducer.ReducerConfig, got dict"),
        ({"trigger": ("messages", 30), "max_messages": 20}, "pass trigger= or max_messages=, not both"),
        ({"keep": ("tokens", 300), "target_tokens": 200}, "pass keep= or target_tokens=, not both"),
        ({"summarizer": len, "summarize_fn": len}, "pass summarizer= or summarize_fn=, not both"),
        ({"reducer": MessageReducer}, "pass an instance, MessageReducer(...)"),
        ({"validate": "yes"}, "validate must be a bool, got 'yes'"),
        ({"config": ReducerConfig(), "preserve_first": 1}, "ReducerMiddleware: preserve_first must be"),
    ],
)
def test_a_wrong_word_is_named_before_anything_runs(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=re.escape(match)):
        ReducerMiddleware(**kwargs)


def test_bad_field_values_are_the_configs_errors() -> None:
    with pytest.raises(ValueError, match=re.escape("min_messages (30) must be <= max_messages (20)")):
        ReducerMiddleware(min_messages=30, max_messages=20)
