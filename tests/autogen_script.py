"""The scripted AutoGen conversation of the tests and the benchmark, written apart from the reducer.

Turn i: the user asks ``q<i> please ...``; the model calls ``lookup``, then (after its result)
``lookup`` and ``add`` in parallel, then (after both results) answers in text. ``ScriptedClient``
is a ``ChatCompletionClient`` that plays these responses in order and records the messages of
every ``create`` / ``create_stream`` call; ``openai_chat`` turns one recorded request into OpenAI
Chat Completions dicts with this file's own code, for ``tests.provider_rules.request_errors``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

SYSTEM_PROMPT = "You are a careful assistant. Use the tools."
MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
)
_USAGE = RequestUsage(prompt_tokens=0, completion_tokens=0)


def lookup(q: str) -> str:
    """Look ``q`` up (about 200 characters)."""
    return f"lookup({q}): " + "the record says the value is stable and documented. " * 4


def add(a: int, b: int) -> str:
    """Add two numbers (about 200 characters)."""
    return f"{a} + {b} = {a + b}. " + "the sum was checked twice against the ledger entry. " * 4


def question(i: int) -> str:
    return f"q{i} please look up item {i} and add it to the running total"


def turn_responses(i: int) -> list[CreateResult]:
    """The model's three responses of turn ``i``: one call, two parallel calls, the answer."""
    first = [FunctionCall(id=f"call-{i}-a", arguments=json.dumps({"q": f"item {i}"}), name="lookup")]
    both = [
        FunctionCall(id=f"call-{i}-b", arguments=json.dumps({"q": f"total {i}"}), name="lookup"),
        FunctionCall(id=f"call-{i}-c", arguments=json.dumps({"a": i, "b": 10}), name="add"),
    ]
    return [
        CreateResult(finish_reason="function_calls", content=first, usage=_USAGE, cached=False),
        CreateResult(finish_reason="function_calls", content=both, usage=_USAGE, cached=False),
        CreateResult(finish_reason="stop", content=f"answer {i}: item {i} added", usage=_USAGE, cached=False),
    ]


def message_chars(message: LLMMessage) -> int:
    return len(json.dumps(message.model_dump(), default=str))


class ScriptedClient(ChatCompletionClient):
    """Plays ``responses`` in order; ``requests`` holds the messages of every call, as received.
    ``count_tokens`` is characters / 4 of each message's JSON (TokenLimitedChatCompletionContext
    counts with it)."""

    def __init__(self, responses: Sequence[CreateResult]) -> None:
        self.responses = list(responses)
        self.requests: list[list[LLMMessage]] = []

    def _next(self, messages: Sequence[LLMMessage]) -> CreateResult:
        self.requests.append(list(messages))
        if len(self.requests) > len(self.responses):
            raise AssertionError(f"the script has {len(self.responses)} responses; call {len(self.requests)}")
        return self.responses[len(self.requests) - 1]

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        return self._next(messages)

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        result = self._next(messages)
        if isinstance(result.content, str):
            yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return _USAGE

    def total_usage(self) -> RequestUsage:
        return _USAGE

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        return sum(message_chars(m) for m in messages) // 4

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()
    ) -> int:
        return 128_000 - self.count_tokens(messages)

    @property
    def capabilities(self) -> Any:
        return MODEL_INFO

    @property
    def model_info(self) -> ModelInfo:
        return MODEL_INFO


def openai_chat(request: Sequence[LLMMessage]) -> list[dict[str, Any]]:
    """One AutoGen request as OpenAI Chat dicts, as autogen-ext's OpenAI client sends it: a
    ``FunctionExecutionResultMessage`` is one ``tool`` message per result."""
    out: list[dict[str, Any]] = []
    for m in request:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.content})
        elif isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.content, "name": m.source})
        elif isinstance(m, AssistantMessage):
            if isinstance(m.content, str):
                out.append({"role": "assistant", "content": m.content})
            else:
                calls = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.content
                ]
                out.append({"role": "assistant", "content": m.thought, "tool_calls": calls})
        elif isinstance(m, FunctionExecutionResultMessage):
            out.extend({"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in m.content)
        else:
            raise AssertionError(f"not an AutoGen LLMMessage: {m!r}")
    return out
