"""The OpenAI Agents SDK's real models over a scripted OpenAI API: no network, no key.

``ScriptedAPI`` is an ``AsyncOpenAI`` client whose HTTP transport answers ``/responses`` and
``/chat/completions`` from a script and records the JSON body of every request: the exact
payload the API would receive from the SDK's ``OpenAIResponsesModel`` or
``OpenAIChatCompletionsModel``. ``chat_payload`` turns a request of either API into OpenAI Chat
dicts for ``tests.provider_rules`` (this module's own conversion, not the reducer's), and
``responses_item_errors`` checks the Responses input items against the keys each item type takes.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from agents import Model, OpenAIChatCompletionsModel, OpenAIResponsesModel
from openai import AsyncOpenAI

Api = Literal["responses", "chat"]
APIS: tuple[Api, ...] = ("responses", "chat")


@dataclass(frozen=True)
class Reply:
    """One model reply: an answer text, or function calls ``(call_id, name, arguments)``."""

    text: str | None = None
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()


@dataclass
class ScriptedAPI:
    """An ``AsyncOpenAI`` client answering from ``replies`` and recording each request body."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def extend(self, replies: Sequence[Reply]) -> None:
        self.replies.extend(replies)

    def client(self) -> AsyncOpenAI:
        transport = httpx2.MockTransport(self._handle)
        return AsyncOpenAI(
            api_key="test-key",
            base_url="http://scripted.test/v1",
            http_client=httpx2.AsyncClient(transport=transport),
            max_retries=0,
        )

    def model(self, api: Api) -> Model:
        """The SDK's own model class for ``api`` over this client."""
        if api == "responses":
            return OpenAIResponsesModel("gpt-test", self.client())
        return OpenAIChatCompletionsModel("gpt-test", self.client())

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.paths.append(request.url.path)
        if not self.replies:
            return httpx2.Response(500, json={"error": {"message": "the script has no reply left"}})
        reply = self.replies.popleft()
        n = len(self.requests)
        if request.url.path.endswith("/responses"):
            return httpx2.Response(200, json=_response(body["model"], n, reply))
        return httpx2.Response(200, json=_completion(body["model"], n, reply))


def _response(model: str, n: int, reply: Reply) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {"type": "function_call", "id": f"fc_{n}_{k}", "call_id": call_id, "name": name,
         "arguments": json.dumps(args), "status": "completed"}
        for k, (call_id, name, args) in enumerate(reply.calls)
    ]  # fmt: skip
    if reply.text is not None:
        text = {"type": "output_text", "text": reply.text, "annotations": []}
        output.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                       "content": [text]})  # fmt: skip
    return {
        "id": f"resp_{n}", "object": "response", "created_at": 0, "model": model, "status": "completed",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip


def _completion(model: str, n: int, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in reply.calls
        ]
    return {
        "id": f"chatcmpl_{n}", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.calls else "stop",
                     "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip


# -- judging what was sent ------------------------------------------------------------------------

#: the keys each Responses input item type takes (the API's input item params)
_ITEM_KEYS: dict[str, frozenset[str]] = {
    "easy": frozenset({"role", "content", "type", "phase"}),
    "message": frozenset({"type", "id", "role", "content", "status", "phase"}),
    "function_call": frozenset({"type", "id", "call_id", "name", "arguments", "status", "namespace"}),
    "function_call_output": frozenset({"type", "id", "call_id", "output", "status"}),
    "reasoning": frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}),
}


def responses_item_errors(items: Sequence[Any]) -> list[str]:
    """Keys a Responses input item of its type does not take, and ids the API would not
    recognise (an item ``id`` is one the API issued: ``msg_...``, ``fc_...``, ``rs_...``)."""
    out: list[str] = []
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind is None or (kind == "message" and "id" not in item and item.get("role") != "assistant"):
            allowed = _ITEM_KEYS["easy"]
        else:
            allowed = _ITEM_KEYS.get(kind, frozenset(item))
        extra = sorted(set(item) - allowed)
        if extra:
            out.append(f"responses: item {i} ({kind or item.get('role')}) has keys it does not take: {extra}")
        item_id = item.get("id")
        if item_id is not None and not str(item_id).startswith(("msg_", "fc_", "rs_", "__fake_id__")):
            out.append(f"responses: item {i} has an id the API did not issue: {item_id!r}")
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def chat_payload(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request ``body`` of ``api`` as OpenAI Chat dicts: a Chat Completions request's own
    messages; a Responses request's instructions and input items, function calls joined to the
    assistant message before them (reasoning items carry no message)."""
    if api == "chat":
        return [dict(m) for m in body["messages"]]
    out: list[dict[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": body["instructions"]})
    assistant: dict[str, Any] | None = None
    for item in body["input"]:
        kind = item.get("type")
        if kind == "reasoning":
            continue
        if kind == "function_call":
            if assistant is None:
                assistant = {"role": "assistant", "content": None, "tool_calls": []}
                out.append(assistant)
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}  # fmt: skip
            assistant.setdefault("tool_calls", []).append(call)
            continue
        if kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(item["output"])})
            assistant = None
            continue
        role = item["role"]
        message = {"role": role, "content": _text(item.get("content"))}
        out.append(message)
        assistant = message if role == "assistant" else None
    return out
