"""Generated histories (``tests.histories``) in each framework's own message types, and back.

Each ``to_<framework>(spec)`` builds the messages the framework's agent loop stores for a spec:
the results of one step in one message where the framework keeps them so (Pydantic AI's
``ModelRequest``, ADK's function-response content, AutoGen's ``FunctionExecutionResultMessage``,
Agent Framework's tool ``Message``), one message per result elsewhere. A call step carries its
spec text, so every message says which spec messages it holds: ``ids_of`` reads them back (a
merged results message holds several). ``openai_chat(messages)`` turns what a model received into
OpenAI Chat dicts for ``tests.provider_rules``, written apart from the reducer's adapter.
Imports every framework but CrewAI (whose environment converts its own OpenAI dicts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_framework import Content as AfContent
from agent_framework import Message as AfMessage
from agno.models.message import Message as AgnoMessage
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)
from google.genai import types
from llama_index.core.base.llms.types import ChatMessage
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from tests.convo import Spec
from tests.histories import History, Ledger, calls, text_id
from tests.provider_rules import request_errors


def text(mid: str) -> str:
    """The text of spec message ``mid`` (``tests.convo``'s form, read back by ``text_id``)."""
    return f"message {mid} " + "x" * 20


def _steps(spec: Spec, merge: bool, *, duplicates: bool = False) -> list[list[tuple[Any, ...]]]:
    """The spec in stored messages: consecutive results in one when ``merge``; a second result
    for a call (a retried tool) in a message of its own unless ``duplicates``."""
    out: list[list[tuple[Any, ...]]] = []
    for step in spec:
        group = out[-1] if out else []
        if (
            merge
            and step[0] == "tool"
            and group
            and group[0][0] == "tool"
            and (duplicates or all(s[2] != step[2] for s in group))
        ):
            out[-1].append(step)
        else:
            out.append([step])
    return out


def _ids(texts: Iterable[Any]) -> list[str]:
    return [i for i in (text_id(t) for t in texts) if i is not None]


# -- Pydantic AI ---------------------------------------------------------------------------------


def to_pydantic_ai(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for group in _steps(spec, merge=True):
        kind, mid, *rest = group[0]
        if kind == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(text(mid))]))
        elif kind == "human":
            out.append(ModelRequest(parts=[UserPromptPart(text(mid))]))
        elif kind == "ai":
            out.append(ModelResponse(parts=[TextPart(text(mid))]))
        elif kind == "call":
            calls = [ToolCallPart("lookup", {"q": c}, tool_call_id=c) for c in rest[0]]
            out.append(ModelResponse(parts=[TextPart(text(mid)), *calls]))
        else:
            out.append(
                ModelRequest(parts=[ToolReturnPart("lookup", text(s[1]), tool_call_id=s[2]) for s in group])
            )
    return out


def pydantic_ai_ids(message: Any) -> list[str]:
    return _ids(getattr(p, "content", None) for p in message.parts)


def pydantic_ai_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            said = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            d: dict[str, Any] = {"role": "assistant", "content": said or None}
            calls = [_call(p.tool_call_id) for p in m.parts if isinstance(p, ToolCallPart)]
            if calls:
                d["tool_calls"] = calls
            out.append(d)
            continue
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                out.append({"role": "system", "content": p.content})
            elif isinstance(p, UserPromptPart):
                out.append({"role": "user", "content": str(p.content)})
            elif isinstance(p, ToolReturnPart):
                out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": str(p.content)})
    return out


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


# -- Google ADK ----------------------------------------------------------------------------------


def to_adk(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for group in _steps(spec, merge=True):
        kind, mid, *rest = group[0]
        if kind in ("human", "system"):
            out.append(types.Content(role="user", parts=[types.Part(text=text(mid))]))
        elif kind == "ai":
            out.append(types.Content(role="model", parts=[types.Part(text=text(mid))]))
        elif kind == "call":
            calls = [
                types.Part(function_call=types.FunctionCall(id=c, name="lookup", args={"q": c}))
                for c in rest[0]
            ]
            out.append(types.Content(role="model", parts=[types.Part(text=text(mid)), *calls]))
        else:
            answers = [types.FunctionResponse(id=s[2], name="lookup", response={"r": text(s[1])})
                       for s in group]  # fmt: skip
            out.append(types.Content(role="user", parts=[types.Part(function_response=a) for a in answers]))
    return out


def adk_ids(content: Any) -> list[str]:
    parts = content.parts or []
    return _ids(
        p.text if p.text else (p.function_response.response if p.function_response else None) for p in parts
    )


def adk_chat(contents: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in contents:
        parts = c.parts or []
        said = "".join(p.text or "" for p in parts)
        calls = [_call(p.function_call.id) for p in parts if p.function_call]
        results = [p.function_response for p in parts if p.function_response]
        if c.role == "model":
            d: dict[str, Any] = {"role": "assistant", "content": said or None}
            if calls:
                d["tool_calls"] = calls
            out.append(d)
        elif results:
            out += [
                {"role": "tool", "tool_call_id": r.id, "content": json.dumps(r.response)} for r in results
            ]
        else:
            out.append({"role": "user", "content": said})
    return out


# -- Agno ----------------------------------------------------------------------------------------


def to_agno(spec: Spec, *, from_history: bool = True) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            calls = [_call(c) for c in rest[0]]
            m = AgnoMessage(id=mid, role="assistant", content=text(mid), tool_calls=calls)
        elif kind == "tool":
            m = AgnoMessage(id=mid, role="tool", content=text(mid), tool_call_id=rest[0])
        else:
            role = {"human": "user", "ai": "assistant", "system": "system"}[kind]
            m = AgnoMessage(id=mid, role=role, content=text(mid))
        m.from_history = from_history and kind != "system"
        out.append(m)
    return out


def agno_ids(message: Any) -> list[str]:
    return _ids([message.content])


def agno_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [_call(c["id"]) for c in m.tool_calls]
        if m.role == "tool":
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


# -- LlamaIndex ----------------------------------------------------------------------------------


def to_llama_index(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "call":
            calls = [_call(c) for c in rest[0]]
            out.append(
                ChatMessage(role="assistant", content=text(mid), additional_kwargs={"tool_calls": calls})
            )
        elif kind == "tool":
            kwargs = {"tool_call_id": rest[0], "name": "lookup"}
            out.append(ChatMessage(role="tool", content=text(mid), additional_kwargs=kwargs))
        else:
            role = {"human": "user", "ai": "assistant", "system": "system"}[kind]
            out.append(ChatMessage(role=role, content=text(mid)))
    return out


def llama_index_ids(message: Any) -> list[str]:
    return _ids([message.content])


def llama_index_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        role = str(m.role.value)
        d: dict[str, Any] = {"role": role, "content": m.content}
        calls = m.additional_kwargs.get("tool_calls")
        if calls:
            d["tool_calls"] = [_call(c["id"]) for c in calls]
        if role == "tool":
            d["tool_call_id"] = m.additional_kwargs.get("tool_call_id")
        out.append(d)
    return out


# -- AutoGen -------------------------------------------------------------------------------------


def to_autogen(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for group in _steps(spec, merge=True):
        kind, mid, *rest = group[0]
        if kind == "system":
            out.append(SystemMessage(content=text(mid)))
        elif kind == "human":
            out.append(UserMessage(content=text(mid), source="user"))
        elif kind == "ai":
            out.append(AssistantMessage(content=text(mid), source="assistant"))
        elif kind == "call":
            calls = [FunctionCall(id=c, arguments="{}", name="lookup") for c in rest[0]]
            out.append(AssistantMessage(content=calls, thought=text(mid), source="assistant"))
        else:
            results = [
                FunctionExecutionResult(content=text(s[1]), call_id=s[2], name="lookup") for s in group
            ]
            out.append(FunctionExecutionResultMessage(content=results))
    return out


def autogen_ids(message: Any) -> list[str]:
    if isinstance(message, FunctionExecutionResultMessage):
        return _ids(r.content for r in message.content)
    if isinstance(message, AssistantMessage) and isinstance(message.content, list):
        return _ids([message.thought])
    return _ids([message.content])


def autogen_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.content})
        elif isinstance(m, UserMessage):
            out.append({"role": "user", "content": str(m.content)})
        elif isinstance(m, AssistantMessage):
            if isinstance(m.content, list):
                out.append(
                    {
                        "role": "assistant",
                        "content": m.thought,
                        "tool_calls": [_call(c.id) for c in m.content],
                    }
                )
            else:
                out.append({"role": "assistant", "content": m.content})
        else:
            out += [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in m.content]
    return out


# -- Agent Framework -----------------------------------------------------------------------------


def to_agent_framework(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for group in _steps(spec, merge=True):
        kind, mid, *rest = group[0]
        if kind == "call":
            calls = [
                AfContent.from_function_call(call_id=c, name="lookup", arguments={"q": c}) for c in rest[0]
            ]
            out.append(AfMessage(role="assistant", contents=[AfContent.from_text(text(mid)), *calls]))
        elif kind == "tool":
            results = [AfContent.from_function_result(call_id=s[2], result=text(s[1])) for s in group]
            out.append(AfMessage(role="tool", contents=results))
        else:
            role = {"human": "user", "ai": "assistant", "system": "system"}[kind]
            out.append(AfMessage(role=role, contents=[text(mid)]))
    return out


def agent_framework_ids(message: Any) -> list[str]:
    return _ids(getattr(c, "text", None) or getattr(c, "result", None) for c in message.contents)


def agent_framework_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        said = "".join(getattr(c, "text", None) or "" for c in m.contents if c.type == "text")
        if m.role == "tool":
            out += [
                {"role": "tool", "tool_call_id": c.call_id, "content": str(c.result)}
                for c in m.contents
                if c.type == "function_result"
            ]
            continue
        d: dict[str, Any] = {"role": str(m.role), "content": said or None}
        calls = [_call(c.call_id) for c in m.contents if c.type == "function_call"]
        if calls:
            d["tool_calls"] = calls
        out.append(d)
    return out


# -- counting ------------------------------------------------------------------------------------


@dataclass
class Count:
    """A ``Ledger`` for messages that may hold several spec messages: ``hook`` and
    ``summarizer`` count every spec message in what they get, through ``ids_of``."""

    ledger: Ledger
    ids_of: Callable[[Any], list[str]]

    @classmethod
    def of(cls, history: History, ids_of: Callable[[Any], list[str]]) -> Count:
        return cls(Ledger(history, key=lambda m: None), ids_of)

    def hook(self, messages: Sequence[Any], namespace: Any = None) -> None:
        self.ledger.pruned_ids(i for m in messages for i in self.ids_of(m))

    def summarizer(self, messages: Sequence[Any]) -> str:
        self.ledger.summary_calls += 1
        ids = [i for m in messages for i in self.ids_of(m)]
        self.ledger.summarized.update(ids)
        return "covers " + " ".join(ids)

    async def asummarizer(self, messages: Sequence[Any]) -> str:
        return self.summarizer(messages)

    def errors(self, kept: Sequence[Any]) -> list[str]:
        return self.ledger.errors(i for m in kept for i in self.ids_of(m))

    def request_errors(self, last_request: Sequence[Any]) -> list[str]:
        """``errors`` in request mode, where the framework keeps every message: kept is the last
        request and what follows its last message in the history (a trailing call the last
        request left out, still pending in the framework's history)."""
        ids = [i for m in last_request for i in self.ids_of(m)]
        order = self.ledger.history.ids
        after = order[max((order.index(i) for i in ids if i in order), default=-1) + 1 :]
        return self.ledger.errors([*ids, *(i for i in after if not self.ledger.pruned[i])])


# -- driving -------------------------------------------------------------------------------------


def model_calls(history: History, convert: Callable[[Spec], list[Any]]) -> list[tuple[Spec, list[Any]]]:
    """The model calls of ``history`` (``tests.histories.calls``): each call's spec and the
    messages new since the previous call, all of them objects of one conversion of the whole
    spec (so the caller's objects can be told by identity)."""
    whole = convert(history.spec)
    out: list[tuple[Spec, list[Any]]] = []
    put = 0
    for prefix in calls(history):
        n = len(convert(prefix))
        out.append((prefix, whole[put:n]))
        put = n
    return out


def is_model_call(spec: Spec) -> bool:
    """A spec the model answers next (the whole history ends with the model's own answer)."""
    return spec[-1][0] in ("human", "tool")


def dump(message: Any) -> Any:
    """What a message holds, to tell whether it was mutated."""
    for name in ("model_dump", "to_dict"):
        method = getattr(message, name, None)
        if callable(method):
            return method()
    return repr(message)


def foreign(messages: Iterable[Any], given: Sequence[Any], ids_of: Callable[[Any], list[str]]) -> list[Any]:
    """The messages holding spec messages that are not the caller's own objects (``given``)."""
    own = {id(m) for m in given}
    return [m for m in messages if ids_of(m) and id(m) not in own]


def answered_calls(
    history: History, convert: Callable[[Spec], list[Any]]
) -> tuple[list[tuple[list[Any], Any]], list[Any]]:
    """``history`` for a framework that stores the model's answers itself: each model call as the
    messages new since the previous one and the answer the model gives (the history's next
    ``ai`` or ``call`` message), then the messages after the last answer. The model is called
    where a user message or a result is followed by its answer; messages that no answer
    follows (a late result after a user message, say) go with the next call."""
    spec = history.spec
    whole = convert(spec)
    out: list[tuple[list[Any], Any]] = []
    put = 0
    for p in range(1, len(spec)):
        if spec[p][0] in ("ai", "call") and spec[p - 1][0] in ("human", "tool"):
            n = len(convert(spec[:p]))
            out.append((whole[put:n], whole[n]))
            put = n + 1
    return out, whole[put:]


#: the one rule a request may break when the model has nothing new to answer
_ENDS_WITH_USER = "anthropic: the request does not end with a user message"


def request_problems(payload: list[dict[str, Any]], spec: Spec, history: History) -> list[str]:
    """``tests.provider_rules.request_errors`` of one model call's request; when the call's last
    message is one a repair may drop (a late, duplicate or orphan result, the second half of a
    split step) or a result of a half-answered step, the request may end with the model's own
    last answer: nothing came after it that can be sent, and a repair invents no user message."""
    errors = request_errors(payload)
    if spec[-1][1] in history.defect_ids or _half_answered(spec):
        errors = [e for e in errors if e != _ENDS_WITH_USER]
    return errors


def _half_answered(spec: Spec) -> bool:
    """The spec ends with a result of a call step that not every result answers (a run that
    died between two tools): the repair leaves that step out of the request."""
    if spec[-1][0] != "tool":
        return False
    step = next((s for s in reversed(spec) if s[0] == "call" and spec[-1][2] in s[2]), None)
    answered = {s[2] for s in spec if s[0] == "tool"}
    return step is not None and not set(step[2]) <= answered
