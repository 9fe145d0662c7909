"""Every model request judged by the providers' documented rules, written apart from the reducer.

Framework tests turn what their scripted model received into OpenAI Chat Completions dicts
(``role``, ``content``, ``tool_calls``, ``tool_call_id``), each in its own way and without the
reducer's code, and call ``request_errors``: the OpenAI rules on that payload, and the Anthropic
rules on the Messages payload it becomes (``anthropic_payload``). Imports nothing but the standard
library, so every test environment (the CrewAI one included) can use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any


def openai_errors(payload: list[dict[str, Any]]) -> list[str]:
    """Chat Completions: system/developer messages aside (allowed anywhere), the first message is
    the user's; a
    ``tool`` message answers a ``tool_calls`` id of the assistant message right before the run of
    tool messages it is in; every such id is answered before the next non-tool message; a request
    does not end with unanswered calls."""
    out: list[str] = []
    pending: set[str] = set()
    seen_other = False
    for i, m in enumerate(payload):
        role = m["role"]
        if role in ("system", "developer"):
            continue
        if not seen_other and role != "user":
            out.append(f"openai: the first message after the system prompt is {role}, not user")
        seen_other = True
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                out.append(f"openai: tool message {m.get('tool_call_id')} at {i} answers no preceding call")
            pending.discard(str(m.get("tool_call_id")))
            continue
        if pending:
            out.append(f"openai: calls {sorted(pending)} unanswered before message {i}")
        pending = {c["id"] for c in m.get("tool_calls") or []} if role == "assistant" else set()
    if pending:
        out.append(f"openai: calls {sorted(pending)} unanswered at the end of the request")
    if not seen_other:
        out.append("openai: no conversation message")
    return out


def _blocks(content: Any, kind: str) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def anthropic_errors(system: Any, payload: list[dict[str, Any]]) -> list[str]:
    """Messages API: the system prompt is a parameter (no system role in ``messages``); the first
    message is the user's; each assistant ``tool_use`` is answered by a ``tool_result`` in the
    very next (user) message, and each ``tool_result`` answers a ``tool_use`` of the assistant
    message right before it; the request ends with a user message."""
    out: list[str] = []
    if not payload:
        return ["anthropic: no messages"]
    if payload[0]["role"] != "user":
        out.append(f"anthropic: first message is {payload[0]['role']}, not user")
    previous_uses: set[str] = set()
    for i, m in enumerate(payload):
        if m["role"] not in ("user", "assistant"):
            out.append(f"anthropic: role {m['role']} at {i}")
        results = {b.get("tool_use_id") for b in _blocks(m["content"], "tool_result")}
        if m["role"] == "user":
            for r in sorted(results - previous_uses, key=str):
                out.append(f"anthropic: tool_result {r} at {i} answers no tool_use of the message before")
        if previous_uses - results:
            out.append(f"anthropic: tool_use {sorted(previous_uses - results)} not answered at {i}")
        previous_uses = (
            {b["id"] for b in _blocks(m["content"], "tool_use")} if m["role"] == "assistant" else set()
        )
    if payload[-1]["role"] != "user":
        out.append("anthropic: the request does not end with a user message")
    return out


def anthropic_payload(payload: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The Messages API form of an OpenAI Chat payload: system messages become the system
    parameter, assistant ``tool_calls`` become ``tool_use`` blocks, ``tool`` messages become
    ``tool_result`` blocks of a user message, and consecutive messages of one role are merged (as
    the SDK integrations send them)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in payload:
        role = m["role"]
        if role in ("system", "developer"):
            system.append(str(m.get("content") or ""))
            continue
        blocks: list[dict[str, Any]] = []
        content = m.get("content")
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks += [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
        if role == "assistant":
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": {}}
                for c in m.get("tool_calls") or []
            ]
        if role == "tool":
            role = "user"
            blocks = [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": str(content)}]
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(system), out


def request_errors(payload: list[dict[str, Any]]) -> list[str]:
    """Everything OpenAI or Anthropic would reject in one request given as OpenAI Chat dicts."""
    return openai_errors(payload) + anthropic_errors(*anthropic_payload(payload))


def prefix_share(requests: Sequence[Sequence[Hashable]]) -> float:
    """Share of requests (after the first) that start with the whole previous request: what a
    provider's prompt cache can serve. Each request is a sequence of hashable message keys."""
    if len(requests) < 2:
        return 0.0
    hits = sum(
        1
        for prev, cur in itertools.pairwise(requests)
        if len(cur) >= len(prev) and list(cur[: len(prev)]) == list(prev)
    )
    return hits / (len(requests) - 1)
