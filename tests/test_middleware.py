"""ReducerMiddleware in real ``create_agent`` agents: scripted model, real tools, real graphs.

Every model call is judged by ``tests.agent_script.provider_errors`` (OpenAI's and Anthropic's
documented rules on the payloads langchain-openai and langchain-anthropic build), written
independently of the reducer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, HumanInTheLoopMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import ExecutionInfo, Runtime
from langgraph.types import Command

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import Mode, ReduceRecord, ReducerMiddleware
from agentstate_reducer.planner import UNLIMITED, plan
from agentstate_reducer.summary import SUMMARY_ID, SummaryMemo
from tests.agent_script import TOOLS, ScriptedModel, prefix_reuse, provider_errors, turns
from tests.convo import Spec, langchain_objects
from tests.test_properties import conversations

SYSTEM = "You are a terse assistant."
CFG: RunnableConfig = {"configurable": {"thread_id": "t1"}}


def _summarizer(log: list[list[str]]) -> Callable[[list[Any]], str]:
    def summarize(messages: list[Any]) -> str:
        log.append([m.id for m in messages if m.id != SUMMARY_ID])
        return f"{len(messages)} messages about lookups"

    return summarize


def assert_calls_valid(calls: list[list[BaseMessage]], *, bound: int | None = None) -> None:
    assert calls, "the model was never called"
    for n, call in enumerate(calls):
        assert provider_errors(call) == [], f"call {n}: {provider_errors(call)}"
        assert isinstance(call[0], SystemMessage) and call[0].text.startswith(SYSTEM), f"call {n}"
        assert [m.type for m in call].count("system") == 1, f"call {n}: one system message, first"
        assert call[1].type == "human", f"call {n} starts with {call[1].type} after the system prompt"
        if bound is not None:
            assert len(call) <= bound, f"call {n} sends {len(call)} messages"


def run_turns(agent: Any, n: int, *, config: Any = CFG) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in turns(n):
        out = agent.invoke(t, config)
    return out


# -- state mode, request mode ---------------------------------------------------------------------


@pytest.mark.parametrize("blocks", [False, True], ids=["langchain", "anthropic_blocks"])
def test_state_mode_30_turns_every_call_valid_and_bounded(blocks: bool) -> None:
    model = ScriptedModel(steps=3, blocks=blocks)
    log: list[list[str]] = []
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=10, max_messages=20, summarize_fn=_summarizer(log))
    )
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(reducer)],
    )
    run_turns(agent, 30)
    # a turn is 1 human + 3 tool steps (1 or 2 calls each) + 1 answer: 30 turns -> 150 calls
    assert len(model.calls) == 30 * 4
    # trigger at 21, one step at most (an AI message with its results) added before the next check
    assert_calls_valid(model.calls, bound=1 + 21 + 2)
    assert model.lost_turns == 0, "a call lost the live question"
    stored = agent.get_state(CFG).values["messages"]
    assert len(stored) <= 21 + 3
    assert stored[0].id == SUMMARY_ID  # one running summary, at the front, rolled forward
    assert sum(m.id == SUMMARY_ID for m in stored) == 1
    flat = [i for batch in log for i in batch]
    assert len(flat) == len(set(flat)), "the summarizer saw a message twice"
    assert len(log) >= 10
    # preserve_first=False: the first question is not pinned
    assert all("q0 " not in m.text for m in model.calls[-1])


def test_request_mode_keeps_the_full_history_and_a_stable_prefix() -> None:
    model = ScriptedModel(steps=2)
    log: list[list[str]] = []
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=10, max_messages=20, summarize_fn=_summarizer(log))
    )
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(reducer, mode="request")],
    )
    run_turns(agent, 30)
    assert_calls_valid(model.calls, bound=1 + 20 + 1)  # reduced to <= 20, then the call
    stored = agent.get_state(CFG).values["messages"]
    # every message stays in state: 30 turns of human, call, 1 result, call, 2 results, answer
    assert len(stored) == 30 * 7
    assert not any(m.id == SUMMARY_ID for m in stored)
    flat = [i for batch in log for i in batch]
    assert len(flat) == len(set(flat)), "the summarizer saw a message twice"
    # the memo makes each request the previous one plus the new messages, except after a cut
    assert prefix_reuse(model.calls) > 0.7


async def test_async_state_and_request_modes_without_a_checkpointer() -> None:
    modes: tuple[Mode, ...] = ("state", "request")
    for mode in modes:
        model = ScriptedModel(steps=2)
        seen: list[list[str]] = []

        async def asummarize(messages: list[Any], seen: list[list[str]] = seen) -> str:
            seen.append([m.id for m in messages if m.id != SUMMARY_ID])
            return "summary"

        mw = ReducerMiddleware(
            MessageReducer(min_messages=8, max_messages=16),
            mode=mode,
            summarizer=asummarize,
        )
        agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[mw])
        history: list[Any] = []
        for t in turns(30):
            out = await agent.ainvoke({"messages": [*history, *t["messages"]]})
            history = out["messages"]
        assert_calls_valid(model.calls, bound=1 + 17 + 1 if mode == "request" else 1 + 17 + 3)
        assert model.lost_turns == 0, "a call lost the live question"
        if mode == "state":
            assert len(history) <= 17 + 3
        else:
            assert len(history) == 30 * 7
        flat = [i for batch in seen for i in batch]
        assert flat and len(flat) == len(set(flat)), mode


@pytest.mark.parametrize("mode", ["state", "request"])
async def test_async_with_a_checkpointer_and_astream(mode: Mode) -> None:
    model = ScriptedModel(steps=2)
    log: list[list[str]] = []

    async def asummarize(messages: list[Any]) -> str:
        log.append([m.id for m in messages if m.id != SUMMARY_ID])
        return "summary"

    mw = ReducerMiddleware(MessageReducer(min_messages=8, max_messages=16), mode=mode, summarizer=asummarize)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    for i, t in enumerate(turns(20)):
        if i % 2:
            await agent.ainvoke(t, CFG)
        else:
            async for _ in agent.astream(t, CFG, stream_mode="updates"):
                pass
    assert_calls_valid(model.calls, bound=1 + 17 + 3)
    assert model.lost_turns == 0
    stored = (await agent.aget_state(CFG)).values["messages"]
    assert len(stored) == 20 * 7 if mode == "request" else len(stored) <= 17 + 3
    flat = [i for batch in log for i in batch]
    assert flat and len(flat) == len(set(flat))


def test_importing_the_package_does_not_import_the_middleware() -> None:
    import subprocess
    import sys

    code = "import sys, agentstate_reducer; print('agentstate_reducer.middleware' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_stream_works_and_every_call_is_valid() -> None:
    model = ScriptedModel(steps=2)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12))],
    )
    chunks = 0
    for t in turns(12):
        for _ in agent.stream(t, CFG, stream_mode="updates"):
            chunks += 1
    assert chunks >= 12 * 4
    assert_calls_valid(model.calls, bound=1 + 13 + 3)
    assert model.lost_turns == 0, "a call lost the live question"


def test_preserve_first_pins_the_first_question() -> None:
    model = ScriptedModel(steps=1)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12), preserve_first=True)],
    )
    run_turns(agent, 10)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    assert model.calls[-1][1].text.startswith("q0 ")


# -- trigger and keep forms -------------------------------------------------------------------------


def _records(
    trigger: Any, keep: Any, *, mode: Mode = "state", n: int = 8, **kw: Any
) -> tuple[list[ReduceRecord], ScriptedModel]:
    limit = kw.get("profile_tokens")
    model = ScriptedModel(
        steps=2, usage=kw.get("usage", False), profile={"max_input_tokens": limit} if limit else None
    )
    records: list[ReduceRecord] = []
    mw = ReducerMiddleware(
        MessageReducer(min_messages=5, max_messages=400),
        mode=mode,
        trigger=trigger,
        keep=keep,
        on_reduce=records.append,
        model=model if kw.get("give_model") else None,
    )
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    run_turns(agent, n)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    assert len(records) == len(model.calls)
    return records, model


def _tokens(messages: list[BaseMessage]) -> int:
    return sum(MessageReducer().count_tokens(messages))


def test_messages_trigger_with_tokens_keep() -> None:
    records, _model = _records(("messages", 15), ("tokens", 300))
    fired = [r for r in records if r.triggered]
    assert fired and all(r.messages_before >= 15 for r in fired)
    assert all(r.messages_before < 15 for r in records if not r.triggered)
    # after a triggered reduction the conversation sent is within the kept tokens (or one live unit)
    assert all(r.tokens_after <= 300 or r.messages_after <= 4 for r in fired)


def test_tokens_trigger_with_messages_keep() -> None:
    records, _model = _records(("tokens", 800), ("messages", 6), mode="request")
    fired = [r for r in records if r.triggered]
    assert fired and all(r.tokens_before >= 800 or r.pruned == () for r in fired)
    assert all(r.messages_after <= 6 + 1 for r in fired if r.pruned)


def test_any_of_a_list_and_all_of_a_dict() -> None:
    any_of, _ = _records([("messages", 12), ("tokens", 10**6)], ("messages", 6))
    assert any(r.triggered for r in any_of)
    all_of, _ = _records({"messages": 12, "tokens": 10**6}, ("messages", 6))
    assert not any(r.triggered for r in all_of)  # the token half never holds
    assert all(r.pruned == () for r in all_of)


def test_fraction_reads_the_profile_of_the_request_model() -> None:
    records, _ = _records(("fraction", 0.5), ("fraction", 0.25), mode="request", profile_tokens=1600)
    fired = [r for r in records if r.triggered]
    assert fired and all(r.tokens_before >= 800 for r in fired)
    assert all(r.tokens_after <= 400 or r.messages_after <= 4 for r in fired if r.pruned)


def test_fraction_in_state_mode_uses_model_profile() -> None:
    records, _ = _records(("fraction", 0.5), ("messages", 6), profile_tokens=1600, give_model=True)
    assert any(r.triggered and r.pruned for r in records)


def test_fraction_without_a_profile_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs model="):
        ReducerMiddleware(trigger=("fraction", 0.8))
    with pytest.raises(ValueError, match="max_input_tokens"):
        ReducerMiddleware(trigger=("fraction", 0.8), model=ScriptedModel())
    model = ScriptedModel(steps=1)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[ReducerMiddleware(mode="request", keep=("fraction", 0.5), trigger=("messages", 2))],
    )
    with pytest.raises(ValueError, match="max_input_tokens"):
        agent.invoke(next(turns(1)))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"trigger": ("words", 3)}, ValueError, "unknown kind 'words'"),
        ({"trigger": ("messages", 0)}, ValueError, "must be > 0"),
        ({"trigger": ("messages", 2.5)}, TypeError, "must be an int"),
        ({"trigger": ("tokens", True)}, TypeError, "must be a number"),
        ({"trigger": ("fraction", 1.5), "model": None}, ValueError, r"in \(0, 1\]"),
        ({"trigger": []}, ValueError, "empty list"),
        ({"trigger": {}}, ValueError, "at least one"),
        ({"trigger": "messages"}, TypeError, "tuple"),
        ({"keep": [("messages", 3)]}, TypeError, r"\(kind, value\) tuple"),
        ({"mode": "both"}, ValueError, "'state' or 'request'"),
        ({"preserve_first": 1}, TypeError, "preserve_first must be a bool"),
        ({"summarizer": "gpt"}, TypeError, "summarizer must be"),
        ({"clear_tool_results": {"keep": 1}}, TypeError, "ClearToolUsesEdit"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ReducerMiddleware(**kwargs)


def test_reported_usage_triggers_and_is_ignored_after_a_reduction() -> None:
    # the estimate stays far below 10_000 tokens, the reported total is over it
    mw = ReducerMiddleware(MessageReducer(min_messages=4, max_messages=400), trigger=("tokens", 10_000))
    runtime: Runtime[Any] = Runtime(
        execution_info=ExecutionInfo(checkpoint_id="c", checkpoint_ns="", task_id="k", thread_id="u")
    )
    history: list[Any] = []
    for i in range(6):
        history += [HumanMessage(f"q{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")]
    big = AIMessage(
        "latest",
        id="a-last",
        usage_metadata={"input_tokens": 11_000, "output_tokens": 10, "total_tokens": 11_010},
    )
    state: Any = {"messages": [*history, HumanMessage("q-last", id="h-last"), big]}
    update = mw.before_model(state, runtime)
    assert update is not None, "the reported total did not trigger"
    kept = update["messages"][1:]
    assert len(kept) <= 4 and kept[-1] is big
    # the same newest AI message after the reduction: its total no longer describes the history
    after: Any = {"messages": [*kept, HumanMessage("q-next", id="h-next")]}
    assert mw.before_model(after, runtime) is None
    # without usage the same history never triggers
    plain = ReducerMiddleware(MessageReducer(min_messages=4, max_messages=400), trigger=("tokens", 10_000))
    state["messages"][-1] = AIMessage("latest", id="a-last")
    assert plain.before_model(state, runtime) is None


def test_reported_usage_through_an_agent() -> None:
    # ScriptedModel reports about chars/4 per message: a 600-token trigger fires by usage too
    records, _ = _records(("tokens", 600), ("messages", 6), usage=True)
    assert any(r.triggered and r.pruned for r in records)


# -- summaries, failures, hooks -------------------------------------------------------------------


def test_a_failing_summarizer_keeps_every_message(caplog: pytest.LogCaptureFixture) -> None:
    def broken(messages: list[Any]) -> str:
        raise RuntimeError("summary service down")

    model = ScriptedModel(steps=1)
    records: list[ReduceRecord] = []
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[
            ReducerMiddleware(
                MessageReducer(min_messages=4, max_messages=8), summarizer=broken, on_reduce=records.append
            )
        ],
    )
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
        run_turns(agent, 6)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    assert len(agent.get_state(CFG).values["messages"]) == 6 * 4  # nothing pruned
    assert any(r.summary_error and "summary service down" in r.summary_error for r in records)
    assert "summarize_fn failed" in caplog.text


def test_a_chat_model_summarizer_gets_the_documented_prompt() -> None:
    summary_model = ScriptedModel(steps=0)
    model = ScriptedModel(steps=1)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[
            ReducerMiddleware(MessageReducer(min_messages=4, max_messages=8), summarizer=summary_model)
        ],
    )
    run_turns(agent, 5)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    assert summary_model.calls, "the summary model was never called"
    prompt = summary_model.calls[0][0].text
    assert "running summary" in prompt and "<messages>" in prompt and "q0" in prompt
    stored = agent.get_state(CFG).values["messages"]
    assert stored[0].id == SUMMARY_ID and "answer to q?" in stored[0].text


def test_on_prune_hooks_see_each_pruned_message_once_in_both_modes() -> None:
    modes: tuple[Mode, ...] = ("state", "request")
    for mode in modes:
        seen: list[str] = []

        def hook(pruned: list[Any], namespace: Any, seen: list[str] = seen) -> None:
            seen.extend(m.id for m in pruned)

        config = ReducerConfig(min_messages=6, max_messages=12, on_prune=[hook])
        model = ScriptedModel(steps=2)
        agent = create_agent(
            model,
            TOOLS,
            system_prompt=SYSTEM,
            checkpointer=InMemorySaver(),
            middleware=[ReducerMiddleware(MessageReducer(config=config), mode=mode)],
        )
        run_turns(agent, 10)
        assert seen and len(seen) == len(set(seen)), mode


def test_state_mode_under_a_reducing_saver_summarizes_each_message_once() -> None:
    """With the saver given the middleware's memo; with a memo each, the in-run state still holds
    what the saver summarized, and the middleware summarizes it again (the counterfactual)."""
    from checkpointers import ReducingCheckpointSaver

    def repeats(shared: bool) -> int:
        log: list[list[str]] = []
        config = ReducerConfig(min_messages=10, max_messages=20, summarize_fn=_summarizer(log))
        reducer = MessageReducer(config=config)
        mw = ReducerMiddleware(reducer)
        memo = mw.summary_memo if shared else SummaryMemo()
        saver = ReducingCheckpointSaver(InMemorySaver(), reducer, summary_memo=memo)
        model = ScriptedModel(steps=3)
        agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=saver, middleware=[mw])
        run_turns(agent, 12)
        assert_calls_valid(model.calls, bound=1 + 21 + 2)
        assert model.lost_turns == 0, "a call lost the live question"
        assert log and sum(m.id == SUMMARY_ID for m in agent.get_state(CFG).values["messages"]) == 1
        flat = [i for batch in log for i in batch]
        return len(flat) - len(set(flat))

    assert repeats(shared=True) == 0, "a message was summarized twice"
    assert repeats(shared=False) > 0


# -- validation of broken histories ------------------------------------------------------------------


def _broken_history() -> list[Any]:
    return [
        AIMessage("left over from a crashed run", id="lead"),
        ToolMessage("orphan", tool_call_id="gone", id="orphan"),
        HumanMessage("q0 first", id="h0"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "dangling"}], id="dang"),
        SystemMessage("Policy: be polite.", id="policy"),
        HumanMessage("q1 second", id="h1"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "y"}, "id": "pending"}], id="pend"),
    ]


@pytest.mark.parametrize("mode", ["state", "request"])
def test_validate_repairs_a_broken_history_and_logs_the_ids(
    mode: Mode, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(steps=1)
    records: list[ReduceRecord] = []
    mw = ReducerMiddleware(
        MessageReducer(min_messages=10, max_messages=40),
        mode=mode,
        on_reduce=records.append,
    )
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[mw])
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer.middleware"):
        out = agent.invoke({"messages": [*_broken_history(), HumanMessage("q2 now", id="h2")]})
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    first = model.calls[0]
    # the system prompt first, the state's system message merged after it, pinned
    assert first[0].text == SYSTEM + "\n\nPolicy: be polite."
    assert [m.id for m in first[1:]] == ["h0", "h1", "h2"]
    removed = set(records[0].repaired) | set(records[0].pruned)
    assert {"lead", "orphan", "dang", "pend"} <= removed
    assert "'orphan'" in caplog.text and "'lead'" in caplog.text
    # state mode writes the contract's repair to the state (``pend`` is followed by h2: no longer
    # pending); what comes before the first user turn is trimmed from the request only
    stored = {m.id for m in out["messages"]}
    broken = {"orphan", "dang", "pend"}
    assert "lead" in stored
    assert not broken & stored if mode == "state" else broken <= stored


def test_a_repair_repeated_at_every_call_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Request mode leaves the state alone, so a message before the first user turn is removed
    from every request; the warning names it once per thread."""
    model = ScriptedModel(steps=2)
    mw = ReducerMiddleware(MessageReducer(min_messages=10, max_messages=40), mode="request")
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    start: Any = {"messages": [AIMessage("left over", id="lead"), *next(turns(1))["messages"]]}
    with caplog.at_level(logging.DEBUG, logger="agentstate_reducer.middleware"):
        agent.invoke(start, CFG)
    assert_calls_valid(model.calls)
    assert len(model.calls) == 3
    about_lead = [r for r in caplog.records if "'lead'" in r.getMessage()]
    assert [r.levelno for r in about_lead] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_without_validate_the_broken_parts_reach_the_model() -> None:
    """The counterfactual: what validate=True removes is what the providers reject."""
    model = ScriptedModel(steps=1)
    mw = ReducerMiddleware(MessageReducer(min_messages=10, max_messages=40), mode="request", validate=False)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[mw])
    agent.invoke({"messages": [*_broken_history(), HumanMessage("q2 now", id="h2")]})
    assert provider_errors(model.calls[0]) != []


def test_a_human_in_the_loop_edit_is_repaired(caplog: pytest.LogCaptureFixture) -> None:
    """State edited from outside (update_state, as a UI does) to hold an unanswered call."""
    model = ScriptedModel(steps=1)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(MessageReducer(min_messages=10, max_messages=40), mode="request")],
    )
    run_turns(agent, 2)
    agent.update_state(
        CFG,
        {
            "messages": [
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "z"}, "id": "edited"}], id="edit")
            ]
        },
    )
    agent.invoke({"messages": [{"role": "user", "content": "q9 again"}]}, CFG)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    assert all("edited" not in str(getattr(m, "tool_calls", "")) for m in model.calls[-1])


# -- interrupts, other middleware, subagents ------------------------------------------------------


@pytest.mark.parametrize("mode", ["state", "request"])
def test_human_in_the_loop_interrupt_and_resume(mode: Mode) -> None:
    model = ScriptedModel(steps=2)
    mw = ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12), mode=mode)
    hitl = HumanInTheLoopMiddleware(interrupt_on={"add": True})
    agent = create_agent(
        model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw, hitl]
    )
    interrupts = 0
    for t in turns(8):
        out = agent.invoke(t, CFG)
        while out.get("__interrupt__"):
            interrupts += 1
            out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CFG)
    assert interrupts == 8  # step 1 of each turn calls add
    assert_calls_valid(model.calls, bound=1 + 13 + 3)
    assert model.lost_turns == 0, "a call lost the live question"
    stored = agent.get_state(CFG).values["messages"]
    assert stored[-1].type == "ai" and stored[-1].text.startswith("answer to q7")


def test_clear_tool_results_clears_the_request_only_and_keeps_pairs() -> None:
    model = ScriptedModel(steps=3)
    records: list[ReduceRecord] = []
    edit = ClearToolUsesEdit(trigger=200, keep=2, placeholder="[cleared]")
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[
            ReducerMiddleware(
                MessageReducer(min_messages=10, max_messages=30),
                mode="request",
                clear_tool_results=edit,
                on_reduce=records.append,
            )
        ],
    )
    run_turns(agent, 6)
    assert_calls_valid(model.calls)
    assert model.lost_turns == 0, "a call lost the live question"
    last = model.calls[-1]
    results = [m for m in last if m.type == "tool"]
    assert [m.text for m in results[-2:]] != ["[cleared]", "[cleared]"]
    assert sum(m.text == "[cleared]" for m in results) >= len(results) - 2 - 1
    assert any(r.cleared for r in records)
    stored = agent.get_state(CFG).values["messages"]
    assert not any(m.type == "tool" and m.text == "[cleared]" for m in stored)


def test_clear_tool_results_keeps_langchains_meaning_for_inputs_and_excluded_tools() -> None:
    model = ScriptedModel(steps=3)
    edit = ClearToolUsesEdit(trigger=200, keep=1, clear_tool_inputs=True, exclude_tools=["add"])
    mw = ReducerMiddleware(
        MessageReducer(min_messages=10, max_messages=30), mode="request", clear_tool_results=edit
    )
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    run_turns(agent, 4)
    assert_calls_valid(model.calls)
    last = model.calls[-1]
    results = [m for m in last if isinstance(m, ToolMessage)]
    assert all(m.text != "[cleared]" for m in results if m.name == "add")
    cleared = {m.tool_call_id for m in results if m.text == "[cleared]"}
    assert cleared
    for m in last:
        for call in getattr(m, "tool_calls", None) or []:
            assert (call["args"] == {}) == (call["id"] in cleared), call


def test_clearing_first_can_spare_whole_turns() -> None:
    """With clearing, the token trigger is measured on the cleared request: fewer turns pruned."""

    def pruned(edit: ClearToolUsesEdit | None) -> int:
        model = ScriptedModel(steps=3)
        records: list[ReduceRecord] = []
        agent = create_agent(
            model,
            TOOLS,
            system_prompt=SYSTEM,
            checkpointer=InMemorySaver(),
            middleware=[
                ReducerMiddleware(
                    mode="request",
                    trigger=("tokens", 1500),
                    keep=("tokens", 700),
                    clear_tool_results=edit,
                    on_reduce=records.append,
                )
            ],
        )
        run_turns(agent, 6)
        assert_calls_valid(model.calls)
        assert model.lost_turns == 0, "a call lost the live question"
        return sum(len(r.pruned) for r in records)

    assert pruned(ClearToolUsesEdit(trigger=300, keep=1)) < pruned(None)


def test_with_model_retry_middleware_every_attempt_is_valid() -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    modes: tuple[Mode, ...] = ("state", "request")
    for mode in modes:
        model = ScriptedModel(steps=2, fail_every=5)
        mw = ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12), mode=mode)
        agent = create_agent(
            model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw, retry]
        )
        run_turns(agent, 8, config={"configurable": {"thread_id": f"retry-{mode}"}})
        assert len(model.calls) > 8 * 3  # the failed attempts were retried
        assert_calls_valid(model.calls, bound=1 + 13 + 3)
        assert model.lost_turns == 0, "a call lost the live question"


def test_works_inside_a_subagent_tool() -> None:
    from langchain_core.tools import tool

    inner_model = ScriptedModel(steps=1)
    inner = create_agent(
        inner_model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[ReducerMiddleware(MessageReducer(min_messages=4, max_messages=8))],
    )

    @tool
    def research(q: str) -> str:
        """Ask the research subagent."""
        out = inner.invoke({"messages": [{"role": "user", "content": f"q-sub {q}"}]})
        return str(out["messages"][-1].text)

    outer_model = ScriptedModel(steps=1, call_tool="research")
    agent = create_agent(
        outer_model,
        [research],
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[ReducerMiddleware(MessageReducer(min_messages=6, max_messages=12))],
    )
    run_turns(agent, 3)
    assert_calls_valid(outer_model.calls)
    assert_calls_valid(inner_model.calls)


def test_summary_memo_argument_is_checked() -> None:
    with pytest.raises(TypeError, match="SummaryMemo"):
        ReducerMiddleware(summary_memo={})  # type: ignore[arg-type]
    memo = SummaryMemo()
    assert ReducerMiddleware(summary_memo=memo).summary_memo is memo


def _call(*ids: str) -> list[dict[str, Any]]:
    return [{"name": "lookup", "args": {"q": i}, "id": i} for i in ids]


def _late_and_second_results() -> list[Any]:
    """A result that came after the model's next call (``t2`` for ``c1``'s ``x2``, after ``c2``)
    and a retried tool's second result (``t4b``)."""
    return [
        HumanMessage("q0 first", id="h0"),
        AIMessage("", tool_calls=_call("x1", "x2"), id="c1"),
        ToolMessage("r1", tool_call_id="x1", id="t1"),
        AIMessage("", tool_calls=_call("x3"), id="c2"),
        ToolMessage("r3", tool_call_id="x3", id="t3"),
        ToolMessage("r2, late", tool_call_id="x2", id="t2"),
        AIMessage("", tool_calls=_call("x4"), id="c3"),
        ToolMessage("r4", tool_call_id="x4", id="t4"),
        ToolMessage("r4, retried", tool_call_id="x4", id="t4b"),
        AIMessage("done", id="a0"),
    ]


@pytest.mark.parametrize("mode", ["state", "request"])
def test_late_and_second_results_never_reach_the_model(mode: Mode) -> None:
    """The first call's group is broken by the late result (pruned whole, the late result with
    it); of the two results for x4 the first stays. State mode writes that repair to the state
    (its hooks see the pruned messages once); request mode leaves the state as it was."""
    model = ScriptedModel(steps=1)
    pruned: list[str] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=10, max_messages=40, on_prune=[lambda ms, ns: pruned.extend(m.id for m in ms)]
        )
    )
    records: list[ReduceRecord] = []
    mw = ReducerMiddleware(reducer, mode=mode, on_reduce=records.append)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, checkpointer=InMemorySaver(), middleware=[mw])
    history = [*_late_and_second_results(), HumanMessage("q1 now", id="h1")]
    unrepaired = provider_errors([SystemMessage(SYSTEM), *history])
    assert any("x2" in e for e in unrepaired) and any("x4" in e for e in unrepaired)  # what is rejected
    agent.invoke({"messages": history}, CFG)
    assert_calls_valid(model.calls)
    assert len(model.calls) == 2
    assert [m.id for m in model.calls[0][1:]] == ["h0", "c2", "t3", "c3", "t4", "a0", "h1"]
    broken = {"c1", "t1", "t2", "t4b"}
    assert set(records[0].repaired) == broken and records[0].pruned == ()
    agent.invoke(next(turns(1, start=2)), CFG)  # two more calls: nothing is pruned twice
    assert sorted(pruned) == sorted(broken)
    stored = {m.id for m in agent.get_state(CFG).values["messages"]}
    assert not broken & stored if mode == "state" else broken <= stored


def test_keep_over_the_trigger_is_refused_at_construction() -> None:
    def refused(match: str, *args: Any, **kwargs: Any) -> None:
        with pytest.raises(ValueError, match=re.escape(match)):
            ReducerMiddleware(*args, **kwargs)

    refused(
        "keep ('messages', 50) must be <= trigger ('messages', 10)",
        trigger=("messages", 10),
        keep=("messages", 50),
    )
    refused(
        "keep ('tokens', 3000) must be <= trigger ('tokens', 2000)",
        trigger=[("messages", 90), ("tokens", 2000)],
        keep=("tokens", 3000),
    )
    refused("keep ('messages', 50) must be <= the reducer's max_messages (40)", keep=("messages", 50))
    refused("the reducer's min_messages (20) must be <= trigger ('messages', 10)", trigger=("messages", 10))
    token_reducer = MessageReducer(config=ReducerConfig(max_tokens=1000))
    over = ("tokens", 1500)
    refused("keep ('tokens', 1500) must be <= the reducer's max_tokens (1000)", token_reducer, keep=over)
    windowed = ScriptedModel(profile={"max_input_tokens": 10_000})
    refused(
        "keep ('tokens', 6000) must be <= trigger ('fraction', 0.5)",
        trigger=("fraction", 0.5),
        keep=("tokens", 6000),
        model=windowed,
    )
    # equal is allowed, as min_messages == max_messages is; different units are not compared
    assert ReducerMiddleware(trigger=("messages", 10), keep=("messages", 10))
    assert ReducerMiddleware(trigger=("tokens", 100), keep=("messages", 50))


def test_repr_shows_the_effective_trigger_and_keep() -> None:
    default = "ReducerMiddleware(mode='state', trigger=('messages', 41), keep=('messages', 20))"
    assert repr(ReducerMiddleware()) == default
    assert repr(ReducerMiddleware(trigger=("messages", 10), keep=("messages", 5), mode="request")) == (
        "ReducerMiddleware(mode='request', trigger=('messages', 10), keep=('messages', 5))"
    )
    trigger = [("messages", 30), {"tokens": 6000, "messages": 10}]
    either = ReducerMiddleware(trigger=trigger, keep=("tokens", 20))
    assert repr(either) == (
        "ReducerMiddleware(mode='state', trigger=[('messages', 30), {'tokens': 6000, 'messages': 10}], "
        "keep=('tokens', 20))"
    )
    never = ReducerMiddleware(MessageReducer())
    assert repr(never) == "ReducerMiddleware(mode='state', trigger=None, keep=('messages', 0))"


# -- the request repair is the planner's --------------------------------------------------------------


def _sent(mw: ReducerMiddleware, messages: list[Any]) -> ModelRequest[Any]:
    """The request ``mw`` hands to the model for ``messages`` (no ``before_model`` ran)."""
    sent: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> Any:
        sent.append(request)
        return AIMessage("ok")

    request = ModelRequest(model=ScriptedModel(), messages=messages, system_message=SystemMessage(SYSTEM))
    mw.wrap_model_call(request, handler)
    return sent[0]


def _planner_keeps(messages: list[Any]) -> list[Any]:
    """The reference planner's untriggered plan of the request followed by a user turn, from its
    first user message on: what the middleware documents its repair to be."""
    planned = [*messages, HumanMessage("the next turn")]
    kept = plan(
        planned,
        lambda i: 1,
        trigger_cost=len(planned),
        budget=UNLIMITED,
        count_mode=True,
        preserve_first=False,
        start_on_human=False,
        triggered=False,
    ).kept
    survivors = [planned[i] for i in kept][:-1]
    first = next((j for j, m in enumerate(survivors) if m.type == "human"), 0)
    request = survivors[first:]
    # nor does it end with an answer: a model is called after a user message or tool results
    end = len(request)
    while end > 0 and request[end - 1].type == "ai" and not request[end - 1].tool_calls:
        end -= 1
    return request[:end] if end > 0 else request


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=conversations(), preserve_first=st.booleans())
def test_a_repaired_request_is_what_the_planner_keeps(spec: Spec, preserve_first: bool) -> None:
    """Any history, broken in any of the ways the property tests generate, with or without a pending
    call at the end: the request sent is the planner's untriggered plan of it (system messages
    merged out first), so it never carries an orphan, late or second result or an unanswered call."""
    messages = langchain_objects(spec)
    mw = ReducerMiddleware(MessageReducer(min_messages=0, max_messages=None), preserve_first=preserve_first)
    request = _sent(mw, messages)
    conversation = [m for m in messages if m.type != "system"]
    assert [m.id for m in request.messages] == [m.id for m in _planner_keeps(conversation)]
    assert all(a is b for a, b in zip(request.messages, _planner_keeps(conversation), strict=True))
    assert request.system_message is not None and request.system_message.text.startswith(SYSTEM)
    if any(m.type == "human" for m in messages) and not any(m.type == "chat" for m in messages):
        assert provider_errors([request.system_message, *request.messages]) == []


def test_a_call_before_trailing_unknown_role_messages_is_not_sent() -> None:
    """A call answered by nothing, followed only by messages of a role the planner pins: no later
    result can answer it before the model call, so it goes like any other unanswered call."""
    from langchain_core.messages import ChatMessage

    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "x"}], id="c")
    messages = [HumanMessage("q0", id="h0"), call, ChatMessage(role="critic", content="looks fine", id="u")]
    request = _sent(ReducerMiddleware(), messages)
    assert [m.id for m in request.messages] == ["h0", "u"]


def test_the_old_import_path_names_the_same_objects() -> None:
    import agentstate_reducer.integrations.langchain as new
    import agentstate_reducer.middleware as old

    assert set(old.__all__) == set(new.__all__)
    assert all(getattr(old, name) is getattr(new, name) for name in new.__all__)


def test_the_middleware_modules_doctests() -> None:
    import doctest
    import importlib

    names = ("langchain", "langchain._triggers", "_bounded", "_common")
    for name in names:
        module = importlib.import_module(f"agentstate_reducer.integrations.{name}")
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, (name, result)
