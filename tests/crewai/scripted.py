"""The scripted conversation through CrewAI's real agent loop, shared by the tests and the benchmark.

``ScriptedLLM`` is a ``crewai.BaseLLM`` (native tool calls: ``supports_function_calling``) that
records every request it gets. CrewAI clears an executor's messages at the start of every task
and kickoff, so the one history that grows from call to call is one task's loop: the model runs
``turns`` rounds, each a ``lookup`` call and then, after its result, ``lookup`` and ``add`` in
parallel, and answers in text (which ends the task) after the last. A round is a turn of the
scripted conversation; the task prompt is its first question.

A request whose system message is CrewAI's summarizer prompt (``respect_context_window``) is
counted in ``summarize_requests`` and answered with a summary, outside the script.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from crewai import Agent, BaseLLM, Crew, Task
from crewai.tools import tool
from pydantic import Field

#: how CrewAI's own summarization request starts (crewai/translations/en.json)
CREWAI_SUMMARIZER = "You are a precise assistant that creates structured summaries"

ROLE = "Researcher"
TASK = "Answer the questions q0..qN: look each one up and add the numbers."


@tool("lookup")
def lookup(q: str) -> str:
    """Look a question up."""
    return f"found for {q}: " + ("lorem ipsum dolor sit amet " * 7)[: 200 - 12 - len(q)]


@tool("add")
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


class ScriptedLLM(BaseLLM):
    """The scripted model: ``turns`` rounds of tool calls, then a text answer."""

    turns: int = 30
    #: the tool call ids' prefix (runs sharing one summarizer keep theirs apart)
    prefix: str = "t"
    window: int = 8192
    #: every request of the agent's loop, deep copies of what the model got
    received: list[list[dict[str, Any]]] = Field(default_factory=list)
    #: ``id()`` of each message of each request, to tell the executor's objects apart
    identities: list[list[int]] = Field(default_factory=list)
    #: the tool call ids of each response, in order
    issued: list[list[str]] = Field(default_factory=list)
    summarize_requests: int = 0

    def _respond(self, messages: Any) -> Any:
        assert isinstance(messages, list), messages
        first = messages[0].get("content") if messages else None
        if isinstance(first, str) and first.startswith(CREWAI_SUMMARIZER):
            self.summarize_requests += 1
            return f"<summary>CrewAI summary {self.summarize_requests}</summary>"
        self.received.append(copy.deepcopy(messages))
        self.identities.append([id(m) for m in messages])
        step = len(self.received) - 1
        turn, second = divmod(step, 2)
        if turn >= self.turns:
            self.issued.append([])
            return f"answered {self.turns} questions"
        calls: list[tuple[str, str, dict[str, Any]]]
        if not second:
            calls = [(f"{self.prefix}{turn}-a", "lookup", {"q": f"q{turn} please look this up"})]
        else:
            calls = [
                (f"{self.prefix}{turn}-b", "lookup", {"q": f"q{turn} please, more"}),
                (f"{self.prefix}{turn}-c", "add", {"a": turn, "b": 1}),
            ]
        self.issued.append([c[0] for c in calls])
        return [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in calls
        ]

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        return self._respond(messages)

    async def acall(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        return self._respond(messages)

    def supports_function_calling(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return self.window

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        if isinstance(messages, str):
            return (len(messages) + 3) // 4
        return (sum(len(json.dumps(m, default=str)) for m in messages) + 3) // 4


def crew_for(
    llm: ScriptedLLM, *, role: str = ROLE, respect_context_window: bool = False
) -> tuple[Crew, Agent]:
    """One agent with ``lookup`` and ``add``, one task, one crew."""
    agent = Agent(
        role=role,
        goal="answer every question",
        backstory="a careful researcher",
        llm=llm,
        tools=[lookup, add],
        respect_context_window=respect_context_window,
        max_iter=4 * llm.turns + 10,
        cache=False,
        verbose=False,
    )
    task = Task(description=TASK, expected_output="the answers", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False), agent


def as_openai(request: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request as OpenAI Chat dicts: role, content, tool_calls, tool_call_id (nothing else)."""
    out: list[dict[str, Any]] = []
    for m in request:
        d: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        if m.get("tool_calls"):
            d["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": dict(c["function"])} for c in m["tool_calls"]
            ]
        if m["role"] == "tool":
            d["tool_call_id"] = m["tool_call_id"]
        out.append(d)
    return out
