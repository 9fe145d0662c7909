"""The scripted conversation on Agno: a ``Model`` subclass that records every request, real tools,
and the requests as OpenAI Chat dicts (this module's own conversion, not the reducer's).

Turn i: the user asks ``q<i> please ...``; the model calls ``lookup``, then, after its result,
``lookup`` and ``add`` in parallel (two tool calls in one assistant message), then answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse

SYSTEM = "You are a terse assistant."


def lookup(q: str) -> str:
    """Look a question up."""
    return f"found for {q}: " + "lorem ipsum dolor sit amet " * 7


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def question(i: int) -> str:
    return f"q{i} please look this up and add the numbers"


def turn_of(message: Message) -> int | None:
    """The turn a user question belongs to, or None for any other message."""
    text = message.content if message.role == "user" else None
    if isinstance(text, str) and text.startswith("q") and " please " in text:
        return int(text[1 : text.index(" ")])
    return None


def _call(n: int, k: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{n}_{k}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip


def reply(messages: list[Message], n: int) -> ModelResponse:
    """The reply to a request, the ``n``-th call (ids and arguments make every message unique)."""
    last = messages[-1]
    turn = next((t for m in reversed(messages) if (t := turn_of(m)) is not None), 0)
    if last.role != "tool":
        return ModelResponse(role="assistant", tool_calls=[_call(n, 0, "lookup", {"q": f"first {turn}"})])
    # the results since the newest assistant message
    start = max(i for i, m in enumerate(messages) if m.role == "assistant")
    results = [m for m in messages[start + 1 :] if m.role == "tool"]
    if len(results) == 1:
        return ModelResponse(role="assistant", tool_calls=[
            _call(n, 0, "lookup", {"q": f"second {turn}"}), _call(n, 1, "add", {"a": turn, "b": n}),
        ])  # fmt: skip
    return ModelResponse(role="assistant", content=f"answer {turn} (call {n})")


@dataclass
class ScriptedModel(Model):
    """Answers by the script; records a deep copy of every request (thread-safe)."""

    id: str = "scripted"
    name: str = "Scripted"
    provider: str = "scripted"
    requests: list[list[Message]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _answer(self, messages: list[Message]) -> ModelResponse:
        with self._lock:
            self.requests.append([m.model_copy(deep=True) for m in messages])
            n = len(self.requests)
        return reply(messages, n)

    def invoke(self, *args: Any, messages: list[Message], **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    async def ainvoke(self, *args: Any, messages: list[Message], **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    def invoke_stream(self, *args: Any, messages: list[Message], **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._answer(messages)

    async def ainvoke_stream(
        self, *args: Any, messages: list[Message], **kwargs: Any
    ) -> AsyncIterator[ModelResponse]:
        yield self._answer(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


def to_openai(request: list[Message]) -> list[dict[str, Any]]:
    """One request as OpenAI Chat dicts."""
    out: list[dict[str, Any]] = []
    for m in request:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": str(m.content)})
        elif m.role == "assistant" and m.tool_calls:
            calls = [{"id": c["id"], "type": "function", "function": dict(c["function"])}
                     for c in m.tool_calls]  # fmt: skip
            out.append({"role": "assistant", "content": m.content, "tool_calls": calls})
        else:
            text = m.content if isinstance(m.content, str) else str(m.content)
            out.append({"role": m.role, "content": text})
    return out


def agent(model: Model, **kwargs: Any) -> Agent:
    """The scripted agent: the two tools, the system prompt, the whole session as history (Agno
    sends the last 3 runs unless told otherwise)."""
    options: dict[str, Any] = {"db": InMemoryDb(), "add_history_to_context": True, "num_history_runs": 10_000}
    options.update(kwargs)
    return Agent(model=model, tools=[lookup, add], instructions=SYSTEM, telemetry=False, **options)


@dataclass
class SummaryModel(ScriptedModel):
    """The model Agno's own compaction summarizes with: one short text per call, counted."""

    id: str = "scripted-summary"

    def _answer(self, messages: list[Message]) -> ModelResponse:
        with self._lock:
            self.requests.append(list(messages))
            n = len(self.requests)
        return ModelResponse(role="assistant", content=f"Agno summary {n}: lookups and sums so far")

    @property
    def calls(self) -> int:
        return len(self.requests)
