"""Request mode: a late or replayed result for a call the running summary covers is summarized once.

A framework in request mode sends its whole stored history at every model call; the running
summary stands for the oldest messages (``_common.RequestWindow``). A result sent again late in
the history (a replayed write), or the late result of a call a dead run left half answered,
answering a call the summary already covers, must not bring that call back: it would be
summarized and archived a second time. Through each request-mode entry
point: ADK's ``ReducerCallback`` (a real ``CallbackContext`` and ``LlmRequest``), Agno's
``ReducingCompressionManager.compress`` and LlamaIndex's ``ReducingMemory(mode="request").aget``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models import LlmRequest
from google.adk.sessions import InMemorySessionService, Session

from agentstate_reducer.integrations.agno import ReducingCompressionManager
from agentstate_reducer.integrations.google_adk import ReducerCallback
from agentstate_reducer.integrations.llama_index import ReducingMemory
from tests import natives
from tests.histories import History, calls
from tests.provider_rules import request_errors

#: the call ``k1`` and its result, summarized long before the same result comes again (``x5``)
REPLAY: list[tuple[Any, ...]] = [
    ("human", "u0"), ("ai", "a0"), ("human", "u1"), ("call", "c1", ["k1"]), ("tool", "t1", "k1"),
    ("ai", "a1"), ("human", "u2"), ("ai", "a2"), ("human", "u3"), ("ai", "a3"), ("human", "u4"),
    ("ai", "a4"), ("human", "u5"), ("tool", "x5.replay", "k1"), ("ai", "a5"), ("human", "u6"),
    ("ai", "a6"), ("human", "u7"), ("ai", "a7"),
]  # fmt: skip
#: a run that died between two tools (``k1.b`` unanswered), its late result long after (``x4``)
LATE: list[tuple[Any, ...]] = [
    ("human", "u0"), ("ai", "a0"), ("human", "u1"), ("call", "c1", ["k1.a", "k1.b"]), ("tool", "t1", "k1.a"),
    ("human", "u2"), ("ai", "a2"), ("human", "u3"), ("ai", "a3"), ("human", "u4"),
    ("tool", "x4.late", "k1.b"), ("ai", "a4"), ("human", "u5"), ("ai", "a5"), ("human", "u6"),
    ("ai", "a6"), ("human", "u7"), ("ai", "a7"),
]  # fmt: skip
HISTORIES = {
    "replayed": History(REPLAY, frozenset({"replayed"}), frozenset({"x5.replay"})),
    "late": History(LATE, frozenset({"partial", "late"}), frozenset({"x4.late"})),
}
LIMITS: dict[str, Any] = {"max_messages": 6, "min_messages": 3}

Run = Callable[[History, natives.Count], tuple[list[list[dict[str, Any]]], list[Any]]]


def adk_context() -> CallbackContext:
    agent = LlmAgent(name="agent", model="gemini-2.0-flash")
    session = Session(id="s1", app_name="app", user_id="u")
    invocation = InvocationContext(
        session_service=InMemorySessionService(), invocation_id="i1", agent=agent, session=session
    )
    return CallbackContext(invocation)


def run_adk(history: History, count: natives.Count) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """Each model call as ADK makes it: new contents built from the session's events."""
    callback = ReducerCallback(summarizer=count.summarizer, on_prune=[count.hook], **LIMITS)
    context = adk_context()
    requests, last = [], []

    async def calls_() -> None:
        nonlocal last
        for spec in calls(history):
            request = LlmRequest(contents=natives.to_adk(spec))
            await callback(callback_context=context, llm_request=request)
            requests.append(natives.adk_chat(request.contents))
            last = list(request.contents)

    asyncio.run(calls_())
    return requests, last


def run_agno(history: History, count: natives.Count) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """Each run as Agno builds its list: the system message, then copies of the stored session."""
    manager = ReducingCompressionManager(summarizer=count.summarizer, on_prune=[count.hook], **LIMITS)
    requests, last = [], []
    stored = natives.to_agno([("system", "sys"), *history.spec])  # the session's messages
    for spec in calls(history):
        messages = [copy.deepcopy(m) for m in stored[: len(spec) + 1]]  # Agno's copies of them
        manager.compress(messages)
        requests.append(natives.agno_chat(messages))
        last = [m for m in messages if m.role != "system"]
    return requests, last


def run_llama_index(history: History, count: natives.Count) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """Each model call as a LlamaIndex agent makes it: the new messages put, then ``aget``."""
    memory = ReducingMemory.from_defaults(
        session_id="s1", mode="request", summarizer=count.summarizer, on_prune=[count.hook], **LIMITS
    )
    requests, last = [], []

    async def calls_() -> None:
        nonlocal last
        put = 0
        for spec in calls(history):
            await memory.aput_messages(natives.to_llama_index(spec[put:]))
            put = len(spec)
            got = await memory.aget()
            requests.append(natives.llama_index_chat(got))
            last = got

    asyncio.run(calls_())
    return requests, last


RUNS: dict[str, tuple[Run, Callable[[Any], list[str]]]] = {
    "adk": (run_adk, natives.adk_ids),
    "agno": (run_agno, natives.agno_ids),
    "llama_index": (run_llama_index, natives.llama_index_ids),
}


CASES = [pytest.param(f, d, id=f"{f}-{d}") for f in sorted(RUNS) for d in sorted(HISTORIES)]


@pytest.mark.parametrize(("framework", "defect"), CASES)
def test_a_result_for_a_summarized_call_does_not_bring_the_call_back(framework: str, defect: str) -> None:
    run, ids_of = RUNS[framework]
    history = HISTORIES[defect]
    count = natives.Count.of(history, ids_of)
    requests, last = run(history, count)
    # the last call is the whole history, which ends with the model's answer: no model call
    assert [e for r in requests[:-1] for e in request_errors(r)] == []
    assert count.ledger.summarized["c1"] == 1 and count.ledger.summarized["t1"] == 1
    assert count.ledger.pruned["c1"] == 1 and count.ledger.pruned["t1"] == 1
    assert count.request_errors(last) == []
