"""The scripted conversation on Google ADK: a ``BaseLlm`` that records every request, real tools,
and the requests as OpenAI Chat dicts (this module's own conversion, not the reducer's).

Turn i: the user asks ``q<i> please ...``; the model calls ``lookup``, then, after its result,
``lookup`` and ``add`` in parallel (two function_call parts in one content), then answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.genai import types
from pydantic import PrivateAttr

SYSTEM = "You are a terse assistant."


def lookup(q: str, call: int) -> dict[str, str]:
    """Look a question up (``call``: the model call that asked)."""
    return {"result": f"found for {q} ({call}): " + "lorem ipsum dolor sit amet " * 7}


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def question(i: int) -> str:
    return f"q{i} please look this up and add the numbers"


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


class ScriptedLlm(BaseLlm):
    """Answers by the last content of each request; records a deep copy of every request."""

    model: str = "scripted"
    _requests: list[list[types.Content]] = PrivateAttr(default_factory=list)
    _systems: list[str | None] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[list[types.Content]]:
        return self._requests

    @property
    def systems(self) -> list[str | None]:
        return self._systems

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = [c.model_copy(deep=True) for c in llm_request.contents]
        self._requests.append(contents)
        system = llm_request.config.system_instruction if llm_request.config else None
        self._systems.append(system if isinstance(system, str) else None)
        reply = _reply(contents, len(self._requests))
        yield LlmResponse(content=types.Content(role="model", parts=reply))


def _reply(contents: list[types.Content], n: int) -> list[types.Part]:
    """The reply to a request, the ``n``-th call (in the arguments: every message is unique)."""
    last = contents[-1]
    parts = last.parts or []
    responses = [p.function_response for p in parts if p.function_response]
    turn = next((turn_of(c) for c in reversed(contents) if turn_of(c) is not None), 0)
    if not responses:
        text = parts[0].text or ""
        if "approve" in text:  # the long-running tool, or the tool that needs a confirmation
            name = "confirm_approval" if text.endswith("approve") else "ask_approval"
            approval = types.FunctionCall(name=name, args={"ticket": f"t{turn}"})
            return [types.Part(function_call=approval)]
        return [types.Part(function_call=_lookup(f"first {turn}", n))]
    if len(responses) == 1 and responses[0].name == "lookup":
        return [
            types.Part(function_call=_lookup(f"second {turn}", n)),
            types.Part(function_call=types.FunctionCall(name="add", args={"a": turn, "b": 1})),
        ]
    return [types.Part(text=f"answer {turn}: done")]


def _lookup(q: str, n: int) -> types.FunctionCall:
    return types.FunctionCall(name="lookup", args={"q": q, "call": n})


def turn_of(content: types.Content) -> int | None:
    """The turn number of a question content (``q<i> please``)."""
    if content.role != "user" or not content.parts or not content.parts[0].text:
        return None
    text = content.parts[0].text
    if text.startswith("q") and " " in text and text[1 : text.index(" ")].isdigit():
        return int(text[1 : text.index(" ")])
    return None


def agent(model: ScriptedLlm, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name="assistant", model=model, instruction=SYSTEM, tools=[lookup, add], **kwargs)


def to_openai(contents: list[types.Content], system: str | None = SYSTEM) -> list[dict[str, Any]]:
    """OpenAI Chat dicts for one request. A call without an id gets one by its position; a
    response without an id answers the call of its name and order in the content right before."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    previous: list[tuple[str, str]] = []  # (name, id) of the calls of the content before
    for i, content in enumerate(contents):
        parts = content.parts or []
        calls = [p.function_call for p in parts if p.function_call]
        responses = [p.function_response for p in parts if p.function_response]
        text = "".join(p.text for p in parts if p.text)
        if content.role == "model":
            ids = [(c.name or "", c.id or f"m{i}-{k}") for k, c in enumerate(calls)]
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if ids:
                msg["tool_calls"] = [
                    {"id": cid, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(c.args or {})}}
                    for (name, cid), c in zip(ids, calls, strict=True)
                ]  # fmt: skip
            out.append(msg)
            previous = ids
            continue
        unused = list(previous)
        for r in responses:
            match = next((p for p in unused if p[1] == r.id or (not r.id and p[0] == r.name)), None)
            if match is not None:
                unused.remove(match)
            cid = match[1] if match is not None else f"orphan-{i}-{r.name}"
            out.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(r.response)})
        if text or not responses:
            out.append({"role": "user", "content": text})
        previous = []
    return out


def key(content: types.Content) -> str:
    """A content's identity across requests (ADK sends copies): its JSON."""
    return content.model_dump_json(exclude_none=True)


class SummaryLlm(BaseLlm):
    """The scripted model of ADK's own ``LlmEventSummarizer``: counts its calls."""

    model: str = "scripted-summarizer"
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls += 1
        text = f"ADK summary {self.calls}"
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
