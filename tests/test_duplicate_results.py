"""One result message answering a call twice cannot be sent: AutoGen's
``FunctionExecutionResultMessage`` and Agent Framework's tool message holding two results with one
``call_id`` are repaired as Anthropic's and Bedrock's result messages are (contract rule 6), by the
planner, on both paths, fresh and warm; and through the real AutoGen and Agent Framework agent
loops the scripted model never receives a call answered twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from agent_framework import ChatResponse, Content, Message
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    RequestUsage,
    UserMessage,
)

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from agentstate_reducer.integrations.autogen import ReducingChatCompletionContext
from tests import af_script, autogen_script
from tests.convo import anthropic_dicts, bedrock_dicts
from tests.paths import column_path
from tests.provider_rules import request_errors
from tests.test_properties import violations

#: a step: ("human", text) | ("ai", text) | ("call", [call ids]) | ("tool", [answered call ids])
Steps = list[tuple[str, Any]]


def _autogen(steps: Steps) -> list[Any]:
    out: list[Any] = []
    for kind, value in steps:
        if kind == "human":
            out.append(UserMessage(content=value, source="user"))
        elif kind == "ai":
            out.append(AssistantMessage(content=value, source="helper"))
        elif kind == "call":
            calls = [FunctionCall(id=c, arguments="{}", name="lookup") for c in value]
            out.append(AssistantMessage(content=calls, source="helper"))
        else:
            results = [
                FunctionExecutionResult(call_id=c, content=f"r{k}", name="lookup")
                for k, c in enumerate(value)
            ]
            out.append(FunctionExecutionResultMessage(content=results))
    return out


def _agent_framework(steps: Steps) -> list[Any]:
    out: list[Any] = []
    for kind, value in steps:
        if kind == "human":
            out.append(Message(role="user", contents=[value]))
        elif kind == "ai":
            out.append(Message(role="assistant", contents=[value]))
        elif kind == "call":
            calls = [Content.from_function_call(call_id=c, name="lookup", arguments={}) for c in value]
            out.append(Message(role="assistant", contents=calls))
        else:
            results = [Content.from_function_result(call_id=c, result=f"r{k}") for k, c in enumerate(value)]
            out.append(Message(role="tool", contents=results))
    return out


def _spec(steps: Steps) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for k, (kind, value) in enumerate(steps):
        out.append((kind, f"m{k}", value) if kind in ("call", "tool") else (kind, f"m{k}"))
    return out


SHAPES: dict[str, Callable[[Steps], list[Any]]] = {
    "autogen": _autogen,
    "autogen_dump": lambda steps: [m.model_dump() for m in _autogen(steps)],
    "agent_framework": _agent_framework,
    "agent_framework_dict": lambda steps: [m.to_dict() for m in _agent_framework(steps)],
    # the shapes whose repair these follow
    "anthropic_dict": lambda steps: anthropic_dicts(_spec(steps)),
    "bedrock_dicts": lambda steps: bedrock_dicts(_spec(steps)),
}

#: ``(steps, the indices kept)``: a message answering a call twice is pruned, and its call with it
#: (or left pending when it ends the history)
CASES: dict[str, tuple[Steps, list[int]]] = {
    "one call answered twice": (
        [("human", "q"), ("call", ["c1"]), ("tool", ["c1", "c1"]), ("ai", "done"), ("human", "q2")],
        [0, 3, 4],
    ),
    "parallel calls, one answered twice": (
        [("human", "q"), ("call", ["c1", "c2"]), ("tool", ["c1", "c2", "c1"]), ("ai", "done")],
        [0, 3],
    ),
    "the turn before stays": (
        [
            ("human", "q"),
            ("call", ["c0"]),
            ("tool", ["c0"]),
            ("call", ["c1"]),
            ("tool", ["c1", "c1"]),
            ("ai", "a"),
        ],
        [0, 1, 2, 5],
    ),
    "at the end the call is pending": (
        [("human", "q"), ("call", ["c1"]), ("tool", ["c1", "c1"])],
        [0, 1],
    ),
}


def _twice(steps: Steps) -> int:
    """The index of the result message answering a call twice."""
    return next(k for k, (kind, value) in enumerate(steps) if kind == "tool" and len(set(value)) < len(value))



def _kept(out: Any, msgs: Sequence[Any]) -> list[int]:
    where = {id(m): i for i, m in enumerate(msgs)}
    return [where[id(m)] for m in out.surviving]


CONFIGS = [
    MessageReducer().config,
    ReducerConfig(min_messages=50, max_messages=100),
    ReducerConfig(max_tokens=1_000_000, token_counter=lambda m: 7),
]


@pytest.mark.parametrize("on", [True, False], ids=["columns", "reference"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_a_result_message_answering_a_call_twice_is_repaired(fmt: str, case: str, on: bool) -> None:
    steps, kept = CASES[case]
    msgs = SHAPES[fmt](steps)
    at = _twice(steps)
    assert len(set(read_message(msgs[at]).result_ids)) < len(steps[at][1])  # read as it is, not folded
    with column_path(on):
        for cfg in CONFIGS:
            out = MessageReducer(config=cfg).reduce(msgs)
            assert _kept(out, msgs) == kept
            assert len(out.surviving) + len(out.pruned) == len(msgs)  # each message once
            assert out.stats.repaired and not out.stats.triggered
            assert violations([read_message(m) for m in out.surviving]) == []


@pytest.mark.parametrize("on", [True, False], ids=["columns", "reference"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_appended_to_a_checked_history_it_is_repaired_too(fmt: str, case: str, on: bool) -> None:
    """The reducer's memo of its last output checks only the new messages, and still finds it."""
    steps, kept = CASES[case]
    at = _twice(steps)
    head, tail = SHAPES[fmt](steps[:at]), SHAPES[fmt](steps[at:])
    with column_path(on):
        for cfg in CONFIGS:
            reducer = MessageReducer(config=cfg)
            first = reducer.reduce(head)
            assert first.surviving == head and not first.pruned
            out = reducer.reduce(first.surviving, tail)
            assert _kept(out, head + tail) == kept
            assert out.stats.repaired


# --- through the agent loops ---

_USAGE = RequestUsage(prompt_tokens=0, completion_tokens=0)


def test_autogen_never_sends_a_call_answered_twice() -> None:
    """A model naming both of its parallel calls ``call_0`` (some local servers do): AutoGen runs
    both and stores one ``FunctionExecutionResultMessage`` answering ``call_0`` twice."""
    both = [
        FunctionCall(id="call_0", arguments=json.dumps({"q": "x"}), name="lookup"),
        FunctionCall(id="call_0", arguments=json.dumps({"a": 1, "b": 2}), name="add"),
    ]
    client = autogen_script.ScriptedClient(
        [
            CreateResult(finish_reason="function_calls", content=both, usage=_USAGE, cached=False),
            CreateResult(finish_reason="stop", content="answer 0", usage=_USAGE, cached=False),
            CreateResult(finish_reason="stop", content="answer 1", usage=_USAGE, cached=False),
        ]
    )
    context = ReducingChatCompletionContext(MessageReducer())
    agent = AssistantAgent(
        "helper",
        client,
        tools=[autogen_script.lookup, autogen_script.add],
        system_message=autogen_script.SYSTEM_PROMPT,
        model_context=context,
        max_tool_iterations=3,
    )

    async def run() -> None:
        for task in ("q0 please", "q1 please"):
            await agent.run(task=task)

    asyncio.run(run())
    assert len(client.requests) == 3
    for request in client.requests:
        assert request_errors(autogen_script.openai_chat(request)) == []
        assert not any(isinstance(m, FunctionExecutionResultMessage) for m in request)
    assert [m.content for m in client.requests[-1] if isinstance(m, UserMessage)] == [
        "q0 please",
        "q1 please",
    ]


class _TwiceNamed(af_script.ScriptClient):
    """The scripted Agent Framework model, naming both of its first two parallel calls ``call_0``."""

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse[Any]:
        self.requests.append(af_script.Request(list(messages), options.get("instructions")))
        if len(self.requests) == 1:
            contents = [
                Content.from_function_call(call_id="call_0", name="lookup", arguments={"q": "x"}),
                Content.from_function_call(call_id="call_0", name="add", arguments={"a": 1, "b": 2}),
            ]
        else:
            contents = [Content.from_text(f"answer {len(self.requests)}")]
        return ChatResponse(messages=[Message(role="assistant", contents=contents)])


def test_agent_framework_never_sends_a_call_answered_twice() -> None:
    client = _TwiceNamed()
    agent = af_script.make_agent(client, compaction_strategy=ReducerCompactionStrategy())
    session = agent.create_session()

    async def run() -> None:
        for task in ("q0 please", "q1 please"):
            await agent.run(task, session=session)

    asyncio.run(run())
    assert len(client.requests) == 3
    for request in client.requests:
        assert request_errors(af_script.to_openai(request)) == []
        assert not any(m.role == "tool" for m in request.messages)
    assert [m.text for m in client.requests[-1].messages if m.role == "user"] == ["q0 please", "q1 please"]
