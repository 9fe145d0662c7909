"""A scripted Agent Framework chat client for the tests and the benchmark (no network).

``ScriptClient`` subclasses the framework's ``BaseChatClient`` with its function-invocation layer,
as a provider's client does, and records every request it gets (the messages and the
instructions). Turn i of the scripted conversation: the user asks "q<i> please ..."; the model
calls ``lookup``, then after its result ``lookup`` and ``add`` in parallel, then answers "a<i> (...)".
A request whose system message asks for a summary (the framework's ``SummarizationStrategy``) is
answered with a summary. ``to_openai`` converts a request to OpenAI Chat dicts with this file's
own code, for ``tests.provider_rules.request_errors``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)

INSTRUCTIONS = "You are a terse research assistant."
RESULT = "r" * 190


@tool
def lookup(q: str) -> str:
    """Look a question up."""
    return f"{q}: {RESULT}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def question(i: int) -> str:
    return f"q{i} please look this up and add the numbers"


@dataclass
class Request:
    """What the model received at one call."""

    messages: list[Message]
    instructions: str | None


@dataclass
class Summarizer:
    """A plain summarizer counting its calls and recording the messages it got."""

    calls: int = 0
    seen: list[list[Message]] = field(default_factory=list)
    fail: bool = False

    def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        self.seen.append(list(messages))
        if self.fail:
            raise RuntimeError("summarizer down")
        return f"summary #{self.calls} of {len(messages)} messages"


class ScriptClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """The scripted model: its answer depends only on the end of the request."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[Request] = []
        self.summaries = 0

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse[Any]:
        msgs = list(messages)
        if msgs and msgs[0].role == "system" and "summar" in (msgs[0].text or "").lower():
            self.summaries += 1
            text = f"framework summary {self.summaries}"
            return ChatResponse(messages=[Message(role="assistant", contents=[text])])
        self.requests.append(Request(msgs, options.get("instructions")))
        k = len(self.requests)
        turn = _turn(msgs)
        tail = 0
        for m in reversed(msgs):
            if m.role != "tool":
                break
            tail += sum(1 for c in m.contents if c.type == "function_result")
        if msgs[-1].role == "user" or tail == 0:
            call = Content.from_function_call(call_id=f"call{k}", name="lookup", arguments={"q": f"t{turn}"})
            contents = [call]
        elif tail == 1:
            contents = [
                Content.from_function_call(call_id=f"call{k}a", name="lookup", arguments={"q": f"t{turn}b"}),
                Content.from_function_call(call_id=f"call{k}b", name="add", arguments={"a": turn, "b": 2}),
            ]
        else:
            contents = [Content.from_text(f"a{turn} ({_asked(msgs)[:6]})")]
        return ChatResponse(messages=[Message(role="assistant", contents=contents)])


def _turn(msgs: Sequence[Message]) -> int:
    for m in reversed(msgs):
        found = re.search(r"q(\d+) please", m.text or "") if m.role == "user" else None
        if found:
            return int(found.group(1))
    return -1


def _asked(msgs: Sequence[Message]) -> str:
    users = [m.text for m in msgs if m.role == "user" and re.search(r"q\d+ please", m.text)]
    return users[-1] if users else ""


def make_agent(client: BaseChatClient[Any], **kwargs: Any) -> Agent[Any]:
    return Agent(client=client, instructions=INSTRUCTIONS, tools=[lookup, add], **kwargs)


def to_openai(request: Request) -> list[dict[str, Any]]:
    """The request as OpenAI Chat messages: the instructions first, as the providers' clients
    send them."""
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for m in request.messages:
        texts = [c.text for c in m.contents if c.type == "text" and c.text]
        calls = [c for c in m.contents if c.type == "function_call"]
        results = [c for c in m.contents if c.type == "function_result"]
        if m.role in ("system", "user") and not results:
            out.append({"role": m.role, "content": "\n".join(texts)})
        elif m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ]
            out.append(entry)
        for r in results:
            out.append({"role": "tool", "tool_call_id": r.call_id, "content": str(r.result)})
    return out
