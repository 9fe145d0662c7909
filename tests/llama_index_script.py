"""The scripted LlamaIndex conversation of the tests and the benchmark, written apart from the reducer.

Turn i: the user asks ``q<i> please ...``; the model calls ``lookup``, then (after its result)
``lookup`` and ``add`` in parallel, then (after both results) answers in text. ``ScriptedLLM`` is
a ``FunctionCallingLLM`` that plays these responses in order (the tool calls in
``additional_kwargs["tool_calls"]`` as OpenAI-style dicts, as function-calling LLMs write them)
and records the messages of every ``chat`` / ``achat`` call; ``openai_chat`` turns one recorded
request into OpenAI Chat Completions dicts with this file's own code, for
``tests.provider_rules.request_errors``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.tools import BaseTool, FunctionTool, ToolSelection

SYSTEM_PROMPT = "You are a careful assistant. Use the tools."


def lookup(q: str) -> str:
    """Look ``q`` up (about 200 characters)."""
    return f"lookup({q}): " + "the record says the value is stable and documented. " * 4


def add(a: int, b: int) -> str:
    """Add two numbers (about 200 characters)."""
    return f"{a} + {b} = {a + b}. " + "the sum was checked twice against the ledger entry. " * 4


TOOLS: list[BaseTool | Callable[..., Any]] = [
    FunctionTool.from_defaults(lookup),
    FunctionTool.from_defaults(add),
]


def question(i: int) -> str:
    return f"q{i} please look up item {i} and add it to the running total"


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def turn_responses(i: int, tag: str = "") -> list[ChatMessage]:
    """The model's three messages of turn ``i``: one call, two parallel calls, the answer
    (``tag`` makes the call ids of several conversations distinct)."""
    first = [_call(f"call{tag}-{i}-a", "lookup", {"q": f"item {i}"})]
    both = [
        _call(f"call{tag}-{i}-b", "lookup", {"q": f"total {i}"}),
        _call(f"call{tag}-{i}-c", "add", {"a": i, "b": 10}),
    ]
    return [
        ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": first}),
        ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": both}),
        ChatMessage(role="assistant", content=f"answer {i}: item {i} added"),
    ]


def script(turns: int, tag: str = "") -> list[ChatMessage]:
    return [m for i in range(turns) for m in turn_responses(i, tag)]


def _copy(message: ChatMessage) -> ChatMessage:
    return message.model_copy(deep=True)


class ScriptedLLM(FunctionCallingLLM):
    """Plays ``responses`` in order; ``requests`` holds the messages of every call, as received
    (deep copies: the agent may edit a message after the call)."""

    _responses: list[ChatMessage] = PrivateAttr(default_factory=list)
    _requests: list[list[ChatMessage]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, responses: Sequence[ChatMessage], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._responses = list(responses)

    @property
    def requests(self) -> list[list[ChatMessage]]:
        return self._requests

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, is_function_calling_model=True, model_name="scripted")

    def _next(self, messages: Sequence[ChatMessage]) -> ChatResponse:
        with self._lock:
            self._requests.append([_copy(m) for m in messages])
            n = len(self._requests)
        if n > len(self._responses):
            raise AssertionError(f"the script has {len(self._responses)} responses; call {n}")
        return ChatResponse(message=_copy(self._responses[n - 1]))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._next(messages)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._next(messages)

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            if isinstance(user_msg, str):
                user_msg = ChatMessage(role="user", content=user_msg)
            messages.append(user_msg)
        return {"messages": messages}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("tool_calls") or []
        if not calls and error_on_no_tool_call:
            raise ValueError("no tool call in the response")
        return [
            ToolSelection(
                tool_id=c["id"],
                tool_name=c["function"]["name"],
                tool_kwargs=json.loads(c["function"]["arguments"]),
            )
            for c in calls
        ]

    # the agent loop uses chat (streamed or not); completions are not scripted
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("ScriptedLLM plays chat responses only")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("ScriptedLLM plays chat responses only")

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        response = self._next(messages)

        def gen() -> ChatResponseGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "")

        return gen()

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        response = self._next(messages)

        async def gen() -> ChatResponseAsyncGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "")

        return gen()

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise NotImplementedError("ScriptedLLM plays chat responses only")

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        raise NotImplementedError("ScriptedLLM plays chat responses only")


def _text(message: ChatMessage) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def openai_chat(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """One request as OpenAI Chat Completions dicts (calls in ``additional_kwargs`` or as
    ``ToolCallBlock`` blocks)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.role.value
        blocks = [b for b in m.blocks if isinstance(b, ToolCallBlock)]
        if role == "assistant" and (m.additional_kwargs.get("tool_calls") or blocks):
            calls = [
                {"id": c["id"], "type": "function", "function": dict(c["function"])}
                for c in m.additional_kwargs.get("tool_calls") or []
            ]
            calls += [
                {
                    "id": b.tool_call_id,
                    "type": "function",
                    "function": {"name": b.tool_name, "arguments": json.dumps(b.tool_kwargs)},
                }
                for b in blocks
            ]
            out.append({"role": "assistant", "content": _text(m) or None, "tool_calls": calls})
        elif role == "tool":
            call_id = m.additional_kwargs["tool_call_id"]
            out.append({"role": "tool", "tool_call_id": call_id, "content": _text(m)})
        else:
            out.append({"role": role, "content": _text(m)})
    return out
