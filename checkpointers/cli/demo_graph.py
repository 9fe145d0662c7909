"""The scripted tool-using agent that ``agentstate-reducer demo`` runs: no API key, no network.

A compiled LangGraph graph ``agent -> tools -> agent`` over ``MessagesState``. The "model" is a
langchain_core chat model whose answer is a pure function of the conversation: after a human
message it calls the ``weather`` tool, after the tool result it answers in text. Every message
gets a deterministic id from the turn number, so two runs store the same bytes and a thread can be
continued by a later process (``turn_input(n)`` for the next ``n``).

It lives in the package (not in tests/) so the installed console script works outside the repo.
This module imports langgraph and langchain_core at import time: the ``demo`` command imports it
when it runs, so the CLI starts without them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec", "Perth", "Tunis", "Hanoi", "Bergen")


def turn_input(turn: int) -> dict[str, list[BaseMessage]]:
    """The graph input of turn ``turn`` (1-based): one human message with a deterministic id."""
    city = CITIES[turn % len(CITIES)]
    return {
        "messages": [
            HumanMessage(f"Turn {turn}: what is the weather in {city} today?", id=f"turn-{turn}-human")
        ]
    }


def _turn_of(messages: list[BaseMessage]) -> tuple[int, str]:
    """The turn number and city of the latest human message (parsed back from its id and text)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            turn = int(str(message.id).split("-")[1]) if message.id else 0
            text = message.content if isinstance(message.content, str) else ""
            city = text.rsplit(" in ", 1)[-1].split(" today", 1)[0] if " in " in text else CITIES[0]
            return turn, city
    return 0, CITIES[0]


@tool
def weather(city: str, day: int) -> str:
    """The hourly weather for a city on a given day (scripted, deterministic)."""
    # About 500 characters of varied numbers, like a real API payload: storage growth is about
    # bytes, and repeated text would let PostgreSQL's TOAST compression hide most of it.
    rng = random.Random(f"{city}/{day}")
    hours = ", ".join(
        f"{h:02d}h {rng.uniform(-5, 35):.1f}C wind {rng.uniform(0, 20):.1f} hum {rng.randint(20, 99)}%"
        for h in range(0, 24, 2)
    )
    return f"{city}, day {day}: {hours}. Source: scripted demo station, not real data."


class ScriptedToolModel(BaseChatModel):
    """A fake chat model: a tool call after a human message, a text answer after a tool result."""

    @property
    def _llm_type(self) -> str:
        return "agentstate-reducer-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn, city = _turn_of(messages)
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            first_hour = str(last.content).split(": ", 1)[-1].split(", ", 1)[0]
            reply = AIMessage(
                f"Turn {turn}: here is today's forecast for {city}, starting at {first_hour}. "
                "Take a light jacket if you go out this evening.",
                id=f"turn-{turn}-answer",
            )
        else:
            reply = AIMessage(
                "",
                id=f"turn-{turn}-call",
                tool_calls=[
                    {
                        "name": "weather",
                        "args": {"city": city, "day": turn},
                        "id": f"call-{turn}",
                        "type": "tool_call",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build_demo_graph(
    checkpointer: Any,
    *,
    on_model_call: Callable[[list[BaseMessage]], Any] | None = None,
    **compile_kwargs: Any,
) -> Any:
    """Compile the demo agent with ``checkpointer`` (any ``BaseCheckpointSaver``); other keyword
    arguments go to ``StateGraph.compile`` (e.g. ``interrupt_before=["tools"]``).
    ``on_model_call(messages)`` gets what each model call is sent (a new list), before the call."""
    model = ScriptedToolModel()

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        if on_model_call is not None:
            on_model_call(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    def run_tools(state: MessagesState) -> dict[str, list[BaseMessage]]:
        # A plain tool node (not ToolNode) so each result gets a deterministic id.
        last = state["messages"][-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        return {
            "messages": [
                ToolMessage(
                    str(weather.invoke(call["args"])),
                    tool_call_id=call["id"],
                    name=call["name"],
                    id=f"{call['id']}-result",
                )
                for call in calls
            ]
        }

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer, **compile_kwargs)
