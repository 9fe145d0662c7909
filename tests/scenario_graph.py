"""A deterministic tool-using LangGraph agent for scenario tests, demos and benchmarks.

No network, no randomness: ``ScriptedToolModel`` (a langchain_core ``BaseChatModel``) answers
each human turn ``h<i>`` with ``tool_rounds`` AI messages that call the ``lookup`` tool, then a
final answer. Every message gets a deterministic id, so tests can state exact expected ids:

    turn i:  h<i> (human)  ->  ai<i>-<k> (calls c<i>-<k>-<j>)  ->  t<i>-<k>-<j> (tool)  ...  ->  ai<i>-final

Usage::

    graph = build_graph(saver)                        # add_messages state
    graph = build_graph(saver, state_reducer=r)       # Annotated[list, r.as_langgraph_reducer()]
    run_turns(graph, 10, thread_id="t1")              # turns 0..9 (turn 0 also sends the system prompt)
    await arun_turns(graph, 10, thread_id="t1")

Options of ``build_graph``: ``tool_rounds`` / ``calls_per_round`` shape a turn, ``content_chars``
sizes message texts, ``approve_tools`` makes the tools node ``interrupt()`` for approval
(resume with ``Command(resume=True)``), ``as_subgraph`` runs the agent loop as a compiled subgraph
node ``agent_loop`` of a parent graph that shares the messages key, ``bookkeeping`` ends each turn
with a node that writes only the ``turns`` key (a step that leaves the messages version unchanged).

``contract_violations(messages, max_len=...)`` lists what breaks the pruning contract.
``open_saver(kind, ...)`` / ``aopen_saver(kind, ...)`` open a real, set-up LangGraph saver
(``SYNC_SAVERS`` / ``ASYNC_SAVERS``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from agentstate_reducer import read_message

__all__ = [
    "ASYNC_SAVERS",
    "SYNC_SAVERS",
    "SYSTEM_ID",
    "ScriptedToolModel",
    "aopen_saver",
    "arun_turns",
    "build_graph",
    "contract_violations",
    "human_message",
    "open_saver",
    "run_turns",
    "system_message",
    "thread_config",
    "turn_ids",
]

SYSTEM_ID = "sys"


def _filler(tag: str, chars: int) -> str:
    text = f"{tag}: "
    return text + ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[: max(chars - len(text), 0)]


def system_message(content_chars: int = 60) -> SystemMessage:
    text = _filler("You are a careful assistant that uses the lookup tool", content_chars)
    return SystemMessage(text, id=SYSTEM_ID)


def human_message(turn: int, content_chars: int = 60) -> HumanMessage:
    return HumanMessage(_filler(f"question {turn}", content_chars), id=f"h{turn}")


def turn_ids(turn: int, *, tool_rounds: int = 1, calls_per_round: int = 1) -> list[str]:
    """The ids one turn adds, in order (what ``ScriptedToolModel`` and the tools node produce)."""
    ids = [f"h{turn}"]
    for k in range(tool_rounds):
        ids.append(f"ai{turn}-{k}")
        ids.extend(f"t{turn}-{k}-{j}" for j in range(calls_per_round))
    ids.append(f"ai{turn}-final")
    return ids


class ScriptedToolModel(BaseChatModel):
    """Answers the newest human message ``h<i>``: ``tool_rounds`` tool-calling AI messages, then a
    final answer. Decides from the messages it is given only, so replays and resumes are
    deterministic (even on a reduced history, since a turn is never split by the reducer)."""

    tool_rounds: int = 1
    calls_per_round: int = 1
    content_chars: int = 60

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.next_message(messages))])

    def next_message(self, messages: Sequence[Any]) -> AIMessage:
        last_human = max((i for i, m in enumerate(messages) if read_message(m).kind == "human"), default=None)
        if last_human is None:
            raise ValueError("ScriptedToolModel needs a human message to answer")
        turn = str(read_message(messages[last_human]).id).removeprefix("h")
        rounds = sum(1 for m in messages[last_human + 1 :] if read_message(m).kind == "ai")
        if rounds < self.tool_rounds:
            calls = [
                {"name": "lookup", "args": {"query": f"q{turn}-{rounds}-{j}"}, "id": f"c{turn}-{rounds}-{j}",
                 "type": "tool_call"}
                for j in range(self.calls_per_round)
            ]
            text = _filler(f"looking up {turn}/{rounds}", self.content_chars)
            return AIMessage(text, id=f"ai{turn}-{rounds}", tool_calls=calls)
        return AIMessage(_filler(f"answer {turn}", self.content_chars), id=f"ai{turn}-final")


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int  # written by the optional bookkeeping node only


def _state_type(state_reducer: Any) -> Any:
    if state_reducer is None:
        return AgentState
    # functional form: a class body's annotations would be strings here (postponed evaluation)
    # that LangGraph could not resolve against this function's locals
    ReducedState = TypedDict(  # noqa: UP013
        "ReducedState",
        {"messages": Annotated[list, state_reducer.as_langgraph_reducer()], "turns": int},
        total=False,
    )
    return ReducedState


def _call_id(call: ToolCall) -> str:
    """The id of a scripted call: ScriptedToolModel always sets one."""
    assert call["id"] is not None
    return call["id"]


def _agent_loop(
    state_type: Any, model: ScriptedToolModel, *, approve_tools: bool, content_chars: int, bookkeeping: bool
) -> Any:
    # the nodes' state is Any, neither dict[str, Any] (not a state type to mypy) nor AgentState:
    # LangGraph takes a TypedDict annotation as the node's input schema, and state_type varies
    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)  # routed here only after the model asked for tools
        calls = [(_call_id(c), c) for c in last.tool_calls]
        if approve_tools:
            # LangGraph re-runs this node from the start on resume; interrupt() then returns the answer
            decision = interrupt({"approve": [call_id for call_id, _ in calls]})
            if decision is not True:
                return {"messages": [
                    ToolMessage("denied", tool_call_id=call_id, id="t" + call_id[1:]) for call_id, _ in calls
                ]}
        return {"messages": [
            ToolMessage(_filler(f"result for {c['args']['query']}", content_chars), tool_call_id=call_id,
                        id="t" + call_id[1:])
            for call_id, c in calls
        ]}

    def count_turn(state: Any) -> dict[str, Any]:
        # writes another key only: the step after it checkpoints an unchanged messages version
        return {"turns": state.get("turns", 0) + 1}

    done = "bookkeeping" if bookkeeping else END

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else done

    builder = StateGraph(state_type)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", done])
    builder.add_edge("tools", "agent")
    if bookkeeping:
        builder.add_node("bookkeeping", count_turn)
        builder.add_edge("bookkeeping", END)
    return builder


def build_graph(
    checkpointer: Any,
    *,
    state_reducer: Any = None,
    state_schema: Any = None,
    tool_rounds: int = 1,
    calls_per_round: int = 1,
    content_chars: int = 60,
    approve_tools: bool = False,
    as_subgraph: bool = False,
    bookkeeping: bool = False,
    model: ScriptedToolModel | None = None,
) -> Any:
    """Compile the agent graph with ``checkpointer``.

    ``state_reducer``: a ``MessageReducer`` whose ``as_langgraph_reducer()`` replaces
    ``add_messages`` on the messages key (bounds the in-run state too). ``state_schema``: use this
    state TypedDict instead (it must have a ``messages`` key). ``model``: the model to use (a
    ``ScriptedToolModel`` subclass); it replaces ``tool_rounds`` and ``calls_per_round``.
    """
    if state_reducer is not None and state_schema is not None:
        raise ValueError("pass state_reducer or state_schema, not both")
    if model is None:
        model = ScriptedToolModel(tool_rounds=tool_rounds, calls_per_round=calls_per_round,
                                  content_chars=content_chars)
    state_type = state_schema if state_schema is not None else _state_type(state_reducer)
    loop = _agent_loop(state_type, model, approve_tools=approve_tools, content_chars=content_chars,
                       bookkeeping=bookkeeping)
    if not as_subgraph:
        return loop.compile(checkpointer=checkpointer)
    parent = StateGraph(state_type)
    parent.add_node("agent_loop", loop.compile())  # inherits the parent's checkpointer
    parent.add_edge(START, "agent_loop")
    parent.add_edge("agent_loop", END)
    return parent.compile(checkpointer=checkpointer)


def thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _turn_input(turn: int, content_chars: int, with_system: bool) -> dict[str, Any]:
    msgs: list[Any] = [human_message(turn, content_chars)]
    if with_system:
        msgs.insert(0, system_message(content_chars))
    return {"messages": msgs}


def run_turns(
    graph: Any,
    n: int,
    *,
    thread_id: str = "thread-1",
    start: int = 0,
    content_chars: int = 60,
    with_system: bool | None = None,
    after_turn: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Invoke turns ``start .. start+n-1`` on one thread; return the last invoke's output.
    The first turn also sends the system prompt when ``with_system`` (default: when ``start`` is
    0, i.e. a new thread). ``after_turn(turn, output)`` is called after each invoke (e.g. to
    check persisted state)."""
    first = start == 0 if with_system is None else with_system
    out: dict[str, Any] = {}
    for turn in range(start, start + n):
        turn_input = _turn_input(turn, content_chars, first and turn == start)
        out = graph.invoke(turn_input, thread_config(thread_id))
        if after_turn is not None:
            after_turn(turn, out)
    return out


async def arun_turns(
    graph: Any,
    n: int,
    *,
    thread_id: str = "thread-1",
    start: int = 0,
    content_chars: int = 60,
    with_system: bool | None = None,
) -> dict[str, Any]:
    """``run_turns`` with ``ainvoke``."""
    first = start == 0 if with_system is None else with_system
    out: dict[str, Any] = {}
    for turn in range(start, start + n):
        turn_input = _turn_input(turn, content_chars, first and turn == start)
        out = await graph.ainvoke(turn_input, thread_config(thread_id))
    return out


def contract_violations(messages: Sequence[Any], *, max_len: int | None = None) -> list[str]:
    """What in ``messages`` breaks the pruning contract: it must start with the system prompt then
    a human message, every tool result must follow the AI message that called it, every tool call
    must be answered (except the newest message's, pending), and the length be at most ``max_len``."""
    problems: list[str] = []
    infos = [read_message(m) for m in messages]
    if not infos or infos[0].kind != "system":
        problems.append(f"does not start with a system message: {[i.kind for i in infos[:2]]}")
    elif len(infos) > 1 and infos[1].kind != "human":
        problems.append(f"message after the system prompt is {infos[1].kind} {infos[1].id}, not human")
    if max_len is not None and len(infos) > max_len:
        problems.append(f"{len(infos)} messages > {max_len}")
    called: set[str] = set()
    answered: set[str] = set()
    for i, info in enumerate(infos):
        if info.kind == "ai":
            called.update(info.call_ids)
        for rid in info.result_ids:
            if rid not in called:
                problems.append(f"orphan tool result {info.id} at {i} (call {rid})")
            answered.add(rid)
    pending = set(infos[-1].call_ids) if infos and infos[-1].kind == "ai" else set()
    unanswered = called - answered - pending
    if unanswered:
        problems.append(f"unanswered tool calls {sorted(unanswered)}")
    ids = [i.id for i in infos]
    if len(set(ids)) != len(ids):
        problems.append("duplicate message ids")
    return problems


SYNC_SAVERS = ("memory", "sqlite", "postgres")
ASYNC_SAVERS = ("memory", "aiosqlite", "apostgres")


_SAVER_NAMES = {"memory": "InMemorySaver", "sqlite": "SqliteSaver", "postgres": "PostgresSaver",
                "aiosqlite": "AsyncSqliteSaver", "apostgres": "AsyncPostgresSaver"}


def saver_params(kinds: Sequence[str]) -> list[Any]:
    """``kinds`` (of ``SYNC_SAVERS`` / ``ASYNC_SAVERS``) as test parameters named by the saver,
    the PostgreSQL ones marked ``postgres``."""
    return [
        pytest.param(k, id=_SAVER_NAMES[k], marks=pytest.mark.postgres if "postgres" in k else ())
        for k in kinds
    ]


@contextmanager
def open_saver(kind: str, *, path: Path | None = None, pg_url: str | None = None) -> Iterator[Any]:
    """A set-up sync saver: ``memory`` (InMemorySaver), ``sqlite`` (SqliteSaver on the file
    ``path``) or ``postgres`` (PostgresSaver on ``pg_url``)."""
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        if path is None:
            raise ValueError("sqlite needs path= (a file: the point is a real on-disk database)")
        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.setup()
            yield saver
    elif kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        if pg_url is None:
            raise ValueError("postgres needs pg_url=")
        with PostgresSaver.from_conn_string(pg_url) as saver:
            saver.setup()
            yield saver
    else:
        raise ValueError(f"unknown sync saver {kind!r}; one of {SYNC_SAVERS}")


@asynccontextmanager
async def aopen_saver(
    kind: str, *, path: Path | None = None, pg_url: str | None = None
) -> AsyncIterator[Any]:
    """A set-up async saver: ``memory``, ``aiosqlite`` (AsyncSqliteSaver on ``path``) or
    ``apostgres`` (AsyncPostgresSaver on ``pg_url``)."""
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif kind == "aiosqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        if path is None:
            raise ValueError("aiosqlite needs path=")
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            yield saver
    elif kind == "apostgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        if pg_url is None:
            raise ValueError("apostgres needs pg_url=")
        async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
            await saver.setup()
            yield saver
    else:
        raise ValueError(f"unknown async saver {kind!r}; one of {ASYNC_SAVERS}")
