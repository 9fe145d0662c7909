"""The scripted smolagents conversation of the tests and the benchmark.

``ScriptedModel`` is a ``smolagents.models.Model`` whose ``generate`` records every request as
it received it and answers from the request alone (so one model may serve several agents at
once): under the newest ``New task:`` message ``q<i> please ...``, the first call of the task
asks ``lookup`` once, the second asks ``lookup`` and ``add`` in parallel, the third gives the
answer with smolagents' ``final_answer`` tool. ``code=True`` scripts a ``CodeAgent`` the same
way (code blocks calling the tools). One task is one ``agent.run(..., reset=False)``.

``openai_dicts`` is this file's own view of a request (no reducer code): the messages as a
provider with native tool calls gets them, a ``tool-call`` message as an assistant message
with ``tool_calls`` (the ids are in its text) and the ``tool-response`` right after it as one
tool message per call; a ``tool-response`` with no call right before it answers no call.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from smolagents import CodeAgent, MultiStepAgent, ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel

RESULT = "r" * 180
_TASK = re.compile(r"New task:\nq(\d+) please")


def question(i: int) -> str:
    return f"q{i} please look this up and add it"


@tool
def lookup(q: str) -> str:
    """Looks a question up.

    Args:
        q: the question.
    """
    return f"about {q}: {RESULT}"


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def text_of(message: ChatMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if p.get("type") == "text")


def role_of(message: ChatMessage) -> str:
    role = message.role
    return str(role.value if isinstance(role, MessageRole) else role)


def place(messages: Sequence[ChatMessage]) -> tuple[int, int] | None:
    """``(i, n)``: the newest task's number and how many tool-call messages follow it."""
    for k in range(len(messages) - 1, -1, -1):
        m = messages[k]
        match = _TASK.match(text_of(m)) if role_of(m) == "user" else None
        if match:
            rounds = sum(1 for later in messages[k + 1 :] if role_of(later) == "tool-call")
            return int(match.group(1)), rounds
    return None


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> ChatMessageToolCall:
    return ChatMessageToolCall(
        id=call_id, type="function", function=ChatMessageToolCallFunction(name=name, arguments=arguments)
    )


class ScriptedModel(Model):
    """The scripted model: records ``requests`` (the message lists received) and ``places``."""

    def __init__(self, *, code: bool = False) -> None:
        super().__init__(model_id="scripted")
        self.code = code
        self.requests: list[list[ChatMessage]] = []
        self.places: list[tuple[int, int] | None] = []
        self._lock = threading.Lock()

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        where = place(messages)
        with self._lock:
            self.requests.append(list(messages))
            self.places.append(where)
        i, n = where if where is not None else (0, 2)
        if self.code:
            return ChatMessage(role=MessageRole.ASSISTANT, content=self._code(i, n))
        if n == 0:
            calls = [_call(f"c{i}-0", "lookup", {"q": f"q{i} first"})]
        elif n == 1:
            calls = [
                _call(f"c{i}-1a", "lookup", {"q": f"q{i} second"}),
                _call(f"c{i}-1b", "add", {"a": i, "b": 1}),
            ]
        else:
            calls = [_call(f"c{i}-2", "final_answer", {"answer": f"a{i}"})]
        return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=calls)

    @staticmethod
    def _code(i: int, n: int) -> str:
        if n == 0:
            body = f"print(lookup(q='q{i} first'))"
        elif n == 1:
            body = f"print(lookup(q='q{i} second'))\nprint(add(a={i}, b=1))"
        else:
            body = f"final_answer('a{i}')"
        return f"Thought: step {n}.\n<code>\n{body}\n</code>"


def tool_agent(model: Model, **kwargs: Any) -> ToolCallingAgent:
    return ToolCallingAgent(tools=[lookup, add], model=model, verbosity_level=LogLevel.OFF, **kwargs)


def code_agent(model: Model, **kwargs: Any) -> CodeAgent:
    return CodeAgent(tools=[lookup, add], model=model, verbosity_level=LogLevel.OFF, **kwargs)


class RequestAgent(ToolCallingAgent):
    """A ``ToolCallingAgent`` whose requests come from ``reduce.messages`` (request mode)."""

    def __init__(self, reduce: Any, **kwargs: Any) -> None:
        self.reduce = reduce
        super().__init__(**kwargs)

    def write_memory_to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        messages: list[ChatMessage] = self.reduce.messages(self, summary_mode=summary_mode)
        return messages


def request_agent(model: Model, reduce: Any, **kwargs: Any) -> RequestAgent:
    return RequestAgent(reduce, tools=[lookup, add], model=model, verbosity_level=LogLevel.OFF, **kwargs)


def converse(agent: MultiStepAgent, turns: int, *, first: int = 0) -> list[Any]:
    """``turns`` tasks in one conversation (``reset=False`` after the first); the answers."""
    return [agent.run(question(i), reset=i == first) for i in range(first, first + turns)]


@dataclass
class Summarizer:
    """A summarizer counting its calls and keeping the steps it got (by identity)."""

    seen: list[Any] = field(default_factory=list)
    calls: int = 0
    fail: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, steps: list[Any]) -> str:
        with self.lock:
            self.calls += 1
            self.seen.extend(steps)
        if self.fail:
            raise RuntimeError("summarizer down")
        return f"{len(steps)} earlier steps"


# -- this file's own view of a request -----------------------------------------------------------


def _calls_in(text: str) -> list[dict[str, Any]]:
    """The calls of a ``tool-call`` message: its text is "Calling tools:\\n" and a Python list."""
    head, _, body = text.partition("\n")
    assert head == "Calling tools:", text
    calls = ast.literal_eval(body)
    return [
        {"id": c["id"], "type": "function",
         "function": {"name": c["function"]["name"], "arguments": json.dumps(c["function"]["arguments"])}}
        for c in calls
    ]  # fmt: skip


def openai_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat payload of a smolagents request with native tool calls (see the module)."""
    out: list[dict[str, Any]] = []
    open_ids: list[str] = []  # the calls of the tool-call message right before
    for m in messages:
        role, text = role_of(m), text_of(m)
        if role == "tool-call":
            calls = _calls_in(text)
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
                last["tool_calls"] = calls
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": calls})
            open_ids = [c["id"] for c in calls]
            continue
        if role == "tool-response":
            if open_ids:
                out.extend({"role": "tool", "tool_call_id": cid, "content": text} for cid in open_ids)
                open_ids = []
            elif out and out[-1]["role"] == "tool":  # an error after the observations
                out[-1]["content"] += "\n" + text
            else:
                out.append({"role": "tool", "tool_call_id": "answers-no-call", "content": text})
            continue
        open_ids = []
        out.append({"role": role, "content": text})
    return out


Conversion = Callable[[Sequence[ChatMessage]], list[dict[str, Any]]]
