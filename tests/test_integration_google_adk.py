"""ReducerCallback and ReducerPlugin in real ADK runs: a scripted ``BaseLlm``, real tools, the
real runner; every request the model received is judged by ``tests.provider_rules`` after this
file's own conversion to OpenAI Chat dicts (``tests.adk_script.to_openai``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from typing import Any

import pytest
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.genai import types

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations._common import ReduceRecord, RequestWindow
from agentstate_reducer.integrations.google_adk import ReducerCallback, ReducerPlugin
from agentstate_reducer.messages import read_message
from tests.adk_script import (
    SYSTEM,
    ScriptedLlm,
    SummaryLlm,
    add,
    agent,
    key,
    lookup,
    question,
    to_openai,
    turn_of,
    user,
)
from tests.integration_checks import import_error_without
from tests.provider_rules import request_errors

APP = "app"
MAX, MIN = 20, 10


class Recorder:
    """A summarizer and an ``on_prune`` hook recording the contents they get (by key)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.summarized: list[list[str]] = []
        self.pruned: list[str] = []
        self.fail = fail

    def summarize(self, messages: list[Any]) -> str:
        if self.fail:
            raise RuntimeError("summarizer down")
        self.summarized.append([key(m) for m in messages if not _is_summary(m)])
        return f"{len(messages)} messages about lookups"

    async def asummarize(self, messages: list[Any]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)

    def on_prune(self, messages: list[Any], namespace: Any) -> None:
        self.pruned.extend(key(m) for m in messages if not _is_summary(m))


def limited(rec: Recorder, most: int, least: int) -> MessageReducer:
    config = ReducerConfig(max_messages=most, min_messages=least, on_prune=[rec.on_prune])
    return MessageReducer(config=config)


def _is_summary(m: Any) -> bool:
    return isinstance(m, dict) or (isinstance(m, types.Content) and _text(m).startswith("Summary of"))


async def run_turns(
    runner: InMemoryRunner, turns: range, *, session: str = "s1", sync: bool = False
) -> None:
    if await runner.session_service.get_session(app_name=APP, user_id="u", session_id=session) is None:
        await runner.session_service.create_session(app_name=APP, user_id="u", session_id=session)
    for i in turns:
        if sync:  # Runner.run drives the async run in a thread of its own
            await asyncio.to_thread(_drain, runner, session, user(question(i)))
        else:
            async for _ in runner.run_async(user_id="u", session_id=session, new_message=user(question(i))):
                pass


async def ask(runner: InMemoryRunner, text: str) -> None:
    async for _ in runner.run_async(user_id="u", session_id="s1", new_message=user(text)):
        pass


def _drain(runner: InMemoryRunner, session: str, message: types.Content) -> None:
    for _ in runner.run(user_id="u", session_id=session, new_message=message):
        pass


def assert_requests_valid(model: ScriptedLlm, *, bound: int | None = None) -> None:
    assert model.requests, "the model was never called"
    for n, request in enumerate(model.requests):
        payload = to_openai(request)
        assert request_errors(payload) == [], f"call {n}: {request_errors(payload)}"
        assert SYSTEM in (model.systems[n] or ""), f"call {n}: the system instruction is missing"
        assert request[0].role == "user", f"call {n} opens with {request[0].role}"
        if bound is not None:
            assert len(request) <= bound, f"call {n} sends {len(request)} contents"


@pytest.mark.parametrize("kind", ["callback-async-summarizer", "plugin-sync-runner"])
def test_thirty_turns_bounded_valid_and_each_message_seen_once(kind: str) -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    model = ScriptedLlm()
    reducer = limited(rec, MAX, MIN)
    if kind.startswith("callback"):
        callback = ReducerCallback(reducer, summarizer=rec.asummarize, on_reduce=records.append)
        runner = InMemoryRunner(agent=agent(model, before_model_callback=callback), app_name=APP)
    else:
        plugin = ReducerPlugin(reducer, summarizer=rec.summarize)  # no on_reduce: no token counts
        runner = InMemoryRunner(app=App(name=APP, root_agent=agent(model), plugins=[plugin]))
    asyncio.run(run_turns(runner, range(30), sync=kind.endswith("sync-runner")))

    assert len(model.requests) == 30 * 3
    assert_requests_valid(model, bound=MAX + 1)
    for n, request in enumerate(model.requests):  # the live turn: this turn's question is sent
        assert any(key(c) == key(user(question(n // 3))) for c in request), f"call {n}"
    # the summarizer and on_prune see each message once, though ADK sends the whole history
    summarized = [k for batch in rec.summarized for k in batch]
    assert len(rec.summarized) >= 5 and len(summarized) == len(set(summarized))
    assert len(rec.pruned) == len(set(rec.pruned)) and set(rec.pruned) == set(summarized)
    assert key(user(question(0))) in rec.pruned
    # after the first prune the running summary opens the request, and stays one stable prefix
    first = next(n for n, r in enumerate(model.requests) if _is_summary(r[0]))
    assert all(_is_summary(r[0]) for r in model.requests[first:])
    if records:
        assert len(records) == len(model.requests) and records[first].summarized
        assert sum(r.summarized for r in records) == len(rec.summarized)
    # the session's events are not edited: every question and answer is stored
    session = asyncio.run(runner.session_service.get_session(app_name=APP, user_id="u", session_id="s1"))
    assert session is not None
    texts = [p.text for e in session.events if e.content for p in e.content.parts or [] if p.text]
    assert [t for t in texts if t.startswith("q")] == [question(i) for i in range(30)]


def test_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    rec = Recorder(fail=True)
    records: list[ReduceRecord] = []
    model = ScriptedLlm()
    reducer = limited(rec, 8, 4)
    callback = ReducerCallback(reducer, summarizer=rec.summarize, on_reduce=records.append)
    runner = InMemoryRunner(agent=agent(model, before_model_callback=callback), app_name=APP)
    asyncio.run(run_turns(runner, range(5)))
    assert len(model.requests) == 15
    assert_requests_valid(model)
    assert rec.pruned == []
    assert [len(r) for r in model.requests] == [1 + 6 * (n // 3) + 2 * (n % 3) for n in range(15)]
    assert any(r.summary_error and "summarizer down" in r.summary_error for r in records)
    assert all(r.pruned == () for r in records)


def ask_approval(ticket: str) -> None:
    """Ask a human to approve a ticket; the answer comes later."""
    return None


def _pending(request: list[types.Content]) -> list[types.Content]:
    return [c for c in request if any(p.function_call and p.function_call.name == "ask_approval"
                                      for p in c.parts or [])]


def _approval(runner: InMemoryRunner) -> types.Content:
    session = asyncio.run(runner.session_service.get_session(app_name=APP, user_id="u", session_id="s1"))
    assert session is not None
    event = next(e for e in session.events if e.long_running_tool_ids)
    call = next(p.function_call for p in event.content.parts if p.function_call)  # type: ignore[union-attr]
    return types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=call.id, name=call.name, response={"status": "approved"}))])  # fmt: skip


def test_a_pending_long_running_call_is_sent_never_pruned_nor_summarized() -> None:
    rec = Recorder()
    model = ScriptedLlm()
    reducer = limited(rec, 8, 4)
    callback = ReducerCallback(reducer, summarizer=rec.summarize)
    tools: list[Any] = [lookup, add, LongRunningFunctionTool(ask_approval)]
    root = agent(model, before_model_callback=callback).model_copy(update={"tools": tools})
    runner = InMemoryRunner(agent=root, app_name=APP)

    async def scenario() -> None:
        await run_turns(runner, range(3))
        await runner.session_service.get_session(app_name=APP, user_id="u", session_id="s1")
        await ask(runner, "q3 please approve t3")
        await run_turns(runner, range(4, 12))

    asyncio.run(scenario())
    pending_from = next(n for n, r in enumerate(model.requests) if _pending(r))
    call = _pending(model.requests[pending_from])[0]
    after = model.requests[pending_from:]
    assert len(after) == 8 * 3  # the call ended its turn; 8 more turns
    for n, request in enumerate(after):
        assert [key(c) for c in _pending(request)] == [key(call)], f"call {n}: the pending call is sent once"
        rest = [c for c in request if key(c) != key(call)]
        assert request_errors(to_openai(rest)) == [], f"call {n}"
        assert len(rest) <= 9
    # ADK sends it without an answer while the conversation goes on; ours prunes around it
    assert key(user("q3 please approve t3")) in rec.pruned
    assert key(call) not in rec.pruned
    assert all(key(call) not in batch for batch in rec.summarized)

    asyncio.run(_resume(runner))
    resumed = model.requests[-1]  # ADK cuts the history back to the call and its answer
    assert [key(c) for c in resumed[-2:-1]] == [key(call)]
    assert request_errors(to_openai(resumed)) == []


async def _resume(runner: InMemoryRunner) -> None:
    message = await asyncio.to_thread(_approval, runner)
    async for _ in runner.run_async(user_id="u", session_id="s1", new_message=message):
        pass


def test_a_resumed_long_running_call_keeps_the_running_summary() -> None:
    rec = Recorder()
    model = ScriptedLlm()
    reducer = limited(rec, 16, 8)
    callback = ReducerCallback(reducer, summarizer=rec.summarize)
    tools: list[Any] = [lookup, add, LongRunningFunctionTool(ask_approval)]
    root = agent(model, before_model_callback=callback).model_copy(update={"tools": tools})
    runner = InMemoryRunner(agent=root, app_name=APP)

    async def scenario() -> None:
        await run_turns(runner, range(4))
        await ask(runner, "q4 please approve t4")
        await run_turns(runner, range(5, 6))  # a turn while the call is pending

    asyncio.run(scenario())
    before = [k for batch in rec.summarized for k in batch]
    assert before and key(user("q4 please approve t4")) not in before
    asyncio.run(_resume(runner))
    resumed = model.requests[-1]  # ADK cuts the history back to the call and its answer
    approve = user("q4 please approve t4")
    assert [key(c) for c in resumed[-3:-1]] == [key(approve), key(_pending(resumed)[0])]
    assert _is_summary(resumed[0])
    assert request_errors(to_openai(resumed)) == []
    # the cut-back history agrees with the one seen up to what the summary covers: nothing is
    # summarized or archived again
    summarized = [k for batch in rec.summarized for k in batch]
    assert len(summarized) == len(set(summarized))
    assert sorted(rec.pruned) == sorted(summarized)


def confirm_approval(ticket: str) -> dict[str, str]:
    """Approve a ticket, once a human confirmed it."""
    return {"status": f"{ticket} approved"}


def test_a_tool_confirmation_pending_then_given_sends_valid_requests() -> None:
    rec = Recorder()
    model = ScriptedLlm()
    callback = ReducerCallback(limited(rec, 8, 4), summarizer=rec.summarize)
    tools: list[Any] = [lookup, add, FunctionTool(confirm_approval, require_confirmation=True)]
    model_agent = agent(model, before_model_callback=callback)
    model_agent.tools = tools
    runner = InMemoryRunner(agent=model_agent, app_name=APP)
    asked: list[types.FunctionCall] = []

    async def scenario() -> None:
        await run_turns(runner, range(3))
        ask_first = user("q3 please approve")
        async for event in runner.run_async(user_id="u", session_id="s1", new_message=ask_first):
            parts = event.content.parts or [] if event.content else []
            asked.extend(p.function_call for p in parts
                         if p.function_call and p.function_call.name == "adk_request_confirmation")
        await run_turns(runner, range(4, 9))  # turns while the confirmation is pending
        assert asked, "ADK asked for no confirmation"
        answer = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            id=asked[0].id, name=asked[0].name, response={"confirmed": True}))])  # fmt: skip
        async for _ in runner.run_async(user_id="u", session_id="s1", new_message=answer):
            pass

    asyncio.run(scenario())
    assert_requests_valid(model)
    assert len(model.requests) == 3 * 3 + 1 + 5 * 3 + 1  # the confirmed call ran, the model answered
    # ADK answers the call with a placeholder while the confirmation is pending; confirmed, it
    # sends the history cut back to the call with its real result last (the call was pruned: it
    # is sent again, with its result); the summarizer and on_prune still see each message once
    confirmed = model.requests[-1]
    calls = [p.function_call.name for p in confirmed[-2].parts or [] if p.function_call]
    assert calls == ["confirm_approval"]
    result = (confirmed[-1].parts or [types.Part()])[0].function_response
    assert result is not None and result.response == {"status": "t3 approved"}
    summarized = [k for batch in rec.summarized for k in batch]
    assert rec.pruned and len(rec.pruned) == len(set(rec.pruned)) == len(summarized) == len(set(summarized))


def test_one_plugin_serves_concurrent_sessions() -> None:
    rec = Recorder()
    model = ScriptedLlm()
    plugin = ReducerPlugin(limited(rec, 8, 4), summarizer=rec.asummarize)
    runner = InMemoryRunner(app=App(name=APP, root_agent=agent(model), plugins=[plugin]))

    async def both() -> None:
        a, b = run_turns(runner, range(8), session="a"), run_turns(runner, range(100, 108), session="b")
        await asyncio.gather(a, b)

    asyncio.run(both())
    assert len(model.requests) == 2 * 8 * 3
    assert_requests_valid(model, bound=9)
    for n, request in enumerate(model.requests):
        turns = {t for t in (turn_of(c) for c in request) if t is not None}
        assert turns and (max(turns) < 100 or min(turns) >= 100), f"call {n} mixes the sessions: {turns}"
    summarized = [k for batch in rec.summarized for k in batch]
    # the same key can occur in both sessions only for contents without a turn number
    assert len(rec.pruned) == len(summarized) and len(rec.summarized) >= 4


def _text(content: types.Content) -> str:
    return "".join(p.text or "" for p in content.parts or [])


def test_coexists_with_adk_events_compaction() -> None:
    rec = Recorder()
    model, summary_llm = ScriptedLlm(), SummaryLlm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ADK marks EventsCompactionConfig experimental
        compaction = EventsCompactionConfig(
            compaction_interval=3, overlap_size=1, summarizer=LlmEventSummarizer(llm=summary_llm)
        )
    reducer = limited(rec, MAX, MIN)
    plugin = ReducerPlugin(reducer, summarizer=rec.summarize)
    app = App(name=APP, root_agent=agent(model), plugins=[plugin], events_compaction_config=compaction)
    runner = InMemoryRunner(app=app)
    asyncio.run(run_turns(runner, range(12)))

    assert summary_llm.calls >= 2  # ADK compacted the stored events
    with_adk = [r for r in model.requests if r and r[0].role == "model"]
    assert with_adk, "ADK's compaction summary never reached the model"
    for n, request in enumerate(model.requests):
        adk = [c for c in request if _text(c).startswith("ADK summary")]
        assert request[: len(adk)] == adk, f"call {n}: ADK's summaries are sent first, as ADK built them"
        rest = request[len(adk):]
        assert request_errors(to_openai(rest)) == [], f"call {n}"
        assert len(rest) <= MAX + 1
    assert len(rec.pruned) == len(set(rec.pruned))


def test_core_adapter_reads_adk_contents() -> None:
    call = types.Content(role="model", parts=[
        types.Part(function_call=types.FunctionCall(name="lookup", args={"q": "x"})),
        types.Part(function_call=types.FunctionCall(name="add", args={"a": 1, "b": 2})),
        types.Part(function_call=types.FunctionCall(id="c9", name="lookup", args={"q": "y"})),
    ])  # fmt: skip
    result = types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(name="lookup", response={"r": 1})),
        types.Part(function_response=types.FunctionResponse(name="add", response={"r": 3})),
        types.Part(function_response=types.FunctionResponse(id="c9", name="lookup", response={"r": 2})),
    ])  # fmt: skip
    assert read_message(call).call_ids == ("lookup#0", "add#0", "c9")
    assert read_message(result).result_ids == ("lookup#0", "add#0", "c9")
    assert read_message(user("hi")).kind == "human"
    # the reducer keeps the call with its results (the column path and the reference path)
    history = [user("a"), call, result, user("b"), types.Content(role="model", parts=[types.Part(text="ok")])]
    config = ReducerConfig(max_messages=4, min_messages=2, preserve_first=False)
    out = MessageReducer(config=config).reduce(history)
    assert [id(m) for m in out.surviving] == [id(m) for m in history[3:]]
    assert [id(m) for m in out.pruned] == [id(m) for m in history[:3]]  # the call with its results


def test_reference_path_same_answers() -> None:
    code = (
        "import sys; sys.path.insert(0, '.');"
        "from tests.test_integration_google_adk import test_core_adapter_reads_adk_contents as t; t()"
    )
    env = {**os.environ, "AGENTSTATE_REDUCER_REFERENCE": "1"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"reducer": "r"}, TypeError, "reducer must be an agentstate_reducer.MessageReducer"),
        ({"reducer": MessageReducer(), "max_messages": 5}, TypeError, "not both"),
        ({"preserve_first": 1}, TypeError, "preserve_first must be a bool"),
        ({"summarizer": "s"}, TypeError, "summarizer must be a callable"),
        ({"validate": "yes"}, TypeError, "validate must be a bool"),
        ({"on_reduce": 3}, TypeError, "on_reduce must be callable"),
        ({"min_messages": 30, "max_messages": 20}, ValueError, "min_messages"),
        ({"max_mesages": 20}, TypeError, "max_mesages"),
    ],
)
@pytest.mark.parametrize("cls", [ReducerCallback, ReducerPlugin])
def test_bad_arguments(cls: type, kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        cls(**kwargs)


def test_plugin_name() -> None:
    assert ReducerPlugin().name == "agentstate_reducer"
    assert ReducerPlugin(name="bound").name == "bound"
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        ReducerPlugin(name="")
    assert ReducerCallback().reducer.config.preserve_first is False
    assert ReducerPlugin(preserve_first=True).reducer.config.preserve_first is True


def test_import_agentstate_reducer_loads_no_adk() -> None:
    code = "import sys, agentstate_reducer; assert not [m for m in sys.modules if m.startswith('google.adk')]"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_adk_names_the_extra() -> None:
    text = import_error_without(("google.adk",), "agentstate_reducer.integrations.google_adk")
    assert 'pip install ".[google-adk]"' in text and "'google-adk'" in text


def test_request_window_finds_covered_messages_moved_or_left_out() -> None:
    pruned: list[str] = []
    config = ReducerConfig(
        max_messages=6, min_messages=3, preserve_first=False, inject_summary=True,
        summarize_fn=lambda ms: f"{len(ms)} earlier",
        on_prune=[lambda ms, ns: pruned.extend(m["content"] for m in ms)],
    )  # fmt: skip
    reducer, window = MessageReducer(config=config), RequestWindow(preserve_first=False)

    def call(history: list[dict[str, str]]) -> list[str]:
        view = window.view("k", history)
        result = reducer.reduce(view.messages)
        window.record(view, result)
        return [m["content"] for m in result.surviving]

    def msgs(*names: str) -> list[dict[str, str]]:
        return [{"role": "user" if n.startswith("u") else "assistant", "content": n} for n in names]

    full = msgs("u0", "a0", "u1", "a1", "u2", "a2", "u3", "a3")
    sent = call(full)
    covered = ["u0", "a0", "u1", "a1", "u2", "a2"]
    assert pruned == covered and sent[1:] == ["u3", "a3"] and sent[0].startswith("Summary")
    # one call without the newest covered messages and a new one (a cut-back history)
    cut = [m for m in full if m["content"] not in covered[2:]] + msgs("u9")
    assert call(cut)[1:] == ["u3", "a3", "u9"] and pruned == covered
    # the whole history again, a covered message moved down: nothing covered is pruned again
    again = msgs("u0", "a0", "u1", "a1", "u2", "u3", "a2", "a3", "u4")
    assert call(again)[1:] == ["u3", "a3", "u4"] and pruned == covered
    # a history holding none of the covered messages is a new one: no summary
    assert call(msgs("unew", "new")) == ["unew", "new"]
