"""``ReducerMiddleware`` over generated histories with the defects real runs leave
(``tests.histories``), in langchain_core's own messages, as ``create_agent`` stores them.

Driven through the hooks LangChain calls (``before_model``, then ``wrap_model_call`` for each
model call of a growing history; state mode writes its update back as LangGraph applies it),
and through the real agent loop with a scripted model. For every history: (a) each request the
model receives passes ``tests.provider_rules`` on the payload langchain-openai builds from it;
(b) every message is kept (state mode: the stored history; request mode: the last request) or
pruned to ``on_prune`` hooks, exactly once, and summarized at most once; (c) the messages sent
and stored are the caller's own objects, never mutated.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import ExecutionInfo, Runtime

from agentstate_reducer import ReducerConfig
from agentstate_reducer.middleware import Mode, ReducerMiddleware
from agentstate_reducer.summary import SUMMARY_ID
from tests.agent_script import TOOLS, ScriptedModel
from tests.convo import Spec, langchain_objects
from tests.histories import History, Ledger, calls, histories
from tests.provider_rules import request_errors

SYSTEM = "You are a terse assistant."
RUNTIME: Runtime[Any] = Runtime(
    execution_info=ExecutionInfo(checkpoint_id="c", checkpoint_ns="", task_id="k", thread_id="generated")
)
HISTORIES = histories(30, seed=100)
#: the last user turn after each history: a conversation goes on, so nothing is left pending
FINAL: Spec = [("human", "final")]


def payload(call: list[BaseMessage]) -> list[dict[str, Any]]:
    """What langchain-openai sends for ``call``: no reducer code."""
    return [_convert_message_to_dict(m) for m in call]


def key(message: Any) -> str | None:
    return getattr(message, "id", None)


def growing(history: History) -> list[int]:
    """The lengths of the histories a framework sends at its model calls, the last turn added."""
    whole = History([*history.spec, *FINAL], history.defects, history.defect_ids, history.seed)
    return [len(spec) for spec in calls(whole)]


SETTINGS: dict[str, dict[str, Any]] = {
    "messages": {"min_messages": 6, "max_messages": 12},
    "tokens": {"max_tokens": 14 * 20, "target_tokens": 6 * 20, "token_counter": lambda m: 20},
}


def middleware(ledger: Ledger, mode: Mode, limits: str, summarize: bool) -> ReducerMiddleware:
    return ReducerMiddleware(
        mode=mode,
        summarizer=ledger.summarizer if summarize else None,
        on_prune=[ledger.hook],
        **SETTINGS[limits],
    )


def sent_request(mw: ReducerMiddleware, messages: list[Any]) -> list[BaseMessage]:
    """The messages the model receives for ``messages`` through ``wrap_model_call``."""
    got: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> Any:
        got.append(request)
        return AIMessage("ok")

    request = ModelRequest(
        model=ScriptedModel(),
        messages=messages,
        system_message=SystemMessage(SYSTEM),
        runtime=RUNTIME,
        state={"messages": messages},  # type: ignore[arg-type]
    )
    mw.wrap_model_call(request, handler)
    (sent,) = got
    assert sent.system_message is not None
    return [sent.system_message, *sent.messages]


def drive(mw: ReducerMiddleware, objects: list[Any], lengths: list[int]) -> tuple[list[Any], list[list[Any]]]:
    """Each model call of the growing history through the hooks; the stored history at the end
    and the requests. State mode writes ``before_model``'s update back as LangGraph does."""
    stored: list[Any] = []
    requests: list[list[Any]] = []
    seen = 0
    for n in lengths:
        stored = [*stored, *objects[seen:n]]
        seen = n
        update = mw.before_model({"messages": stored}, RUNTIME)  # type: ignore[typeddict-item]
        if update is not None:
            remove, *survivors = update["messages"]
            assert isinstance(remove, RemoveMessage) and remove.id == REMOVE_ALL_MESSAGES
            stored = survivors
        requests.append(sent_request(mw, stored))
    return stored, requests


@pytest.mark.parametrize("mode", ["state", "request"])
@pytest.mark.parametrize(("limits", "summarize"), [("messages", True), ("tokens", False)])
def test_generated_histories_through_the_hooks(mode: Mode, limits: str, summarize: bool) -> None:
    for history in HISTORIES:
        objects = langchain_objects([*history.spec, *FINAL])
        before = [m.model_dump() for m in objects]
        ledger = Ledger(history, key)
        stored, requests = drive(middleware(ledger, mode, limits, summarize), objects, growing(history))

        where = f"seed {history.seed} ({sorted(history.defects)})"
        for n, request in enumerate(requests):
            assert request_errors(payload(request)) == [], f"{where}, call {n}"
        kept = stored if mode == "state" else requests[-1][1:]
        assert ledger.errors([key(m) for m in kept]) == [], where
        if mode == "request":
            assert len(stored) == len(objects)  # the state keeps everything
        # (c) the caller's own objects, not mutated; only the running summary is new
        own = {id(m) for m in objects}
        for message in [*stored, *itertools.chain.from_iterable(r[1:] for r in requests)]:
            assert id(message) in own or message.id == SUMMARY_ID, f"{where}: {message!r} is a copy"
        assert [m.model_dump() for m in objects] == before, f"{where}: a message was mutated"
        if summarize and ledger.pruned:
            assert ledger.summary_calls > 0
    assert {d for h in HISTORIES for d in h.defects} == {
        "partial",
        "dangling",
        "late",
        "duplicate",
        "orphan",
        "split",
        "replayed",
    }


def _loaded_agent(mode: Mode, ledger: Ledger) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(steps=2)
    mw = ReducerMiddleware(
        config=ReducerConfig(min_messages=6, max_messages=12, on_prune=[ledger.hook]),
        mode=mode,
        summarizer=ledger.summarizer,
    )
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    return agent, model


@pytest.mark.parametrize("mode", ["state", "request"])
def test_generated_histories_through_the_agent_loop(mode: Mode) -> None:
    """A stored history with defects, then two more turns of the real agent with tool calls."""
    for history in HISTORIES[:8]:
        objects = langchain_objects(history.spec)
        before = [m.model_dump() for m in objects]
        ledger = Ledger(history, key)
        agent, model = _loaded_agent(mode, ledger)
        config: Any = {"configurable": {"thread_id": f"seed-{history.seed}"}}
        agent.invoke({"messages": [*objects, HumanMessage("q0 please look it up")]}, config)
        agent.invoke({"messages": [HumanMessage("q1 please look it up")]}, config)

        where = f"seed {history.seed} ({sorted(history.defects)})"
        assert len(model.calls) == 2 * 3  # two tool steps and an answer per turn
        for n, call in enumerate(model.calls):
            assert request_errors(payload(call)) == [], f"{where}, call {n}"
        stored = agent.get_state(config).values["messages"]
        kept = stored if mode == "state" else model.calls[-1][1:]
        assert ledger.errors([key(m) for m in kept]) == [], where
        assert [m.model_dump() for m in objects] == before, f"{where}: a message was mutated"


def test_a_request_never_ends_with_an_answer_the_repair_left_last() -> None:
    """A result that came after the model's next message goes with its call; the answer between
    them is left last, and the model is being called: it is not sent (Anthropic would continue
    it as a prefill), the state keeps it."""
    spec: Spec = [("human", "u0"), ("call", "c0", ["k0", "k1"]), ("tool", "t0", "k0"), ("ai", "between"),
                  ("tool", "t1", "k1")]  # fmt: skip
    for mode in ("state", "request"):
        ledger = Ledger(History(spec, frozenset({"split"}), frozenset({"t1"})), key)
        mw = middleware(ledger, mode, "messages", summarize=False)
        stored, (request,) = drive(mw, langchain_objects(spec), [len(spec)])
        assert [m.id for m in request[1:]] == ["u0"], mode
        assert request_errors(payload(request)) == []
        assert "between" in [m.id for m in stored], mode
