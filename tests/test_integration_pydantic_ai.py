"""``ReduceHistory`` through Pydantic AI's real agent loop, with a scripted ``FunctionModel``.

Every model call is recorded as the model received it, turned into OpenAI Chat dicts by this
file's own converter (no reducer code) and judged by ``tests.provider_rules.request_errors``.
Each turn is one ``agent.run_sync`` / ``agent.run`` with the previous run's ``all_messages()``,
as Pydantic AI's docs continue a conversation: a ``lookup`` call, then ``lookup`` and ``add`` in
parallel, then a text answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.integrations._common import ReduceRecord, RequestRepair
from agentstate_reducer.integrations.pydantic_ai import ReduceHistory, summary_text
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.integration_checks import import_error_without
from tests.paths import column_path as columns
from tests.provider_rules import request_errors

SYSTEM = "You are brief."
TURNS = 32
RESULT = "r" * 190

# -- the test's own view of a request ------------------------------------------------------------


def _part_key(part: Any) -> tuple[Any, ...]:
    """What a part says, without timestamps: equal parts of one conversation are the same part."""
    content = getattr(part, "content", None)
    args = getattr(part, "args", None)
    return (part.part_kind, json.dumps(content, default=str), json.dumps(args, default=str),
            getattr(part, "tool_call_id", None))  # fmt: skip


def key(message: ModelMessage) -> tuple[Any, ...]:
    """A message by what it holds (every message of the scripted conversation differs)."""
    return (message.kind, *(_part_key(p) for p in message.parts))


def openai_dicts(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat payload of a Pydantic AI request, written here apart from the reducer."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            calls = [
                {"id": p.tool_call_id, "type": "function",
                 "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                for p in m.parts if isinstance(p, ToolCallPart)
            ]  # fmt: skip
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                out.append({"role": "system", "content": p.content})
            elif isinstance(p, UserPromptPart):
                out.append({"role": "user", "content": str(p.content)})
            elif isinstance(p, ToolReturnPart):
                out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": str(p.content)})
            elif isinstance(p, RetryPromptPart):
                if p.tool_name is None:
                    out.append({"role": "user", "content": str(p.content)})
                else:
                    out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": str(p.content)})
    return out


# -- the scripted conversation -------------------------------------------------------------------


def _question(messages: list[ModelMessage]) -> str:
    """The newest user prompt's text (the live turn's question)."""
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in reversed(m.parts):
                if isinstance(p, UserPromptPart) and isinstance(p.content, str) and " please" in p.content:
                    return p.content
    raise AssertionError("no question in the request")


@dataclass
class Script:
    """The model: records every request, then answers by the turn's step."""

    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    received: list[list[ModelMessage]] = field(default_factory=list)

    def respond(self, messages: list[ModelMessage]) -> ModelResponse:
        self.received.append(list(messages))
        self.requests.append(openai_dicts(messages))
        q = _question(messages)
        last = messages[-1]
        results = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if not results:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": q})])
        if len(results) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": q + " more"}),
                                        ToolCallPart("add", {"a": len(q), "b": 2})])  # fmt: skip
        return ModelResponse(parts=[TextPart(f"answer to {q}")])

    def sync_model(self) -> FunctionModel:
        def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return self.respond(messages)

        return FunctionModel(fn)

    def async_model(self) -> FunctionModel:
        async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            await asyncio.sleep(0)
            return self.respond(messages)

        return FunctionModel(fn)


    def stream_model(self) -> FunctionModel:
        """The same answers, streamed: tool calls as ``DeltaToolCall`` chunks, text as text."""

        async def stream(
            messages: list[ModelMessage], info: AgentInfo
        ) -> AsyncIterator[str | DeltaToolCalls]:
            response = self.respond(messages)
            for i, part in enumerate(response.parts):
                if isinstance(part, ToolCallPart):
                    args = part.args_as_json_str()
                    yield {i: DeltaToolCall(part.tool_name, args, tool_call_id=part.tool_call_id)}
                elif isinstance(part, TextPart):
                    yield part.content

        return FunctionModel(stream_function=stream)


def make_agent(model: FunctionModel, capability: AbstractCapability[Any] | None) -> Agent[None, str]:
    agent = Agent(model, system_prompt=SYSTEM, capabilities=[capability] if capability else [])

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"{q}: {RESULT}"

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


@dataclass
class Summarizer:
    """Counts its calls and records the messages it gets (by what they hold)."""

    fail: bool = False
    calls: int = 0
    seen: list[tuple[Any, ...]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, messages: list[Any]) -> str:
        with self.lock:
            self.calls += 1
            self.seen += [key(m) for m in messages if not isinstance(m, dict)]
            n = self.calls
        if self.fail:
            raise RuntimeError("summarizer down")
        return f"the user asked {len(messages)} things (summary {n})"


@dataclass
class Archive:
    """An ``on_prune`` hook recording what it is given and where."""

    pruned: list[tuple[Any, ...]] = field(default_factory=list)
    namespaces: set[Any] = field(default_factory=set)

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        assert not any(isinstance(m, dict) for m in pruned), "a hook got the core's summary dict"
        self.pruned += [key(m) for m in pruned]
        self.namespaces.add(namespace)


def check_requests(script: Script, questions: list[str], *, first_task: str | None) -> None:
    """Every request valid; system prompt, task and live turn in every one."""
    assert script.requests
    for payload in script.requests:
        assert request_errors(payload) == []
        assert payload[0] == {"role": "system", "content": SYSTEM}
        if first_task is not None:
            assert payload[1] == {"role": "user", "content": first_task}
    asked = [_question(r) for r in script.received]
    assert [q for i, q in enumerate(asked) if i == 0 or asked[i - 1] != q] == questions


# -- 30+ turns -----------------------------------------------------------------------------------


def _check_run(script: Script, summarizer: Summarizer, archive: Archive, records: list[ReduceRecord],
               histories: list[list[ModelMessage]], news: list[list[ModelMessage]]) -> None:  # fmt: skip
    questions = [f"q{i} please tell me" for i in range(TURNS)]
    check_requests(script, questions, first_task=questions[0])
    # bounded: the stored history and every request
    assert max(len(h) for h in histories) <= 24 + 1
    assert max(len(r) for r in script.received) <= 24 + 1
    assert summarizer.calls >= 5
    # the summarizer and the archive see each message once
    assert len(summarizer.seen) == len(set(summarizer.seen))
    assert len(archive.pruned) == len(set(archive.pruned)) > 0
    assert set(summarizer.seen) <= set(archive.pruned)
    # one thread: the conversation's id, the same in every run
    assert len(archive.namespaces) == 1
    assert {r.thread_id for r in records} == {next(iter(archive.namespaces))[1]}
    assert any(r.summarized for r in records) and any(r.pruned for r in records)
    summarized = False
    for i, (history, new) in enumerate(zip(histories, news, strict=True)):
        # the stored history: first request pinned, one summary request of its own, this run last
        first = history[0]
        assert isinstance(first, ModelRequest) and [p.part_kind for p in first.parts] == [
            "system-prompt", "user-prompt"]  # fmt: skip
        summaries = [m for m in history if (summary_text(m) or "").startswith(SUMMARY_PREFIX)]
        summarized = summarized or bool(summaries)
        assert len(summaries) == (1 if summarized else 0)
        assert len(new) == 6 and new == history[-6:]
        assert _question(new[:1]) == questions[i]


@pytest.mark.slow
def test_thirty_turns_sync_bound_the_stored_history_and_every_request() -> None:
    script, summarizer, archive = Script(), Summarizer(), Archive()
    records: list[ReduceRecord] = []
    reducer = MessageReducer(config=ReducerConfig(min_messages=12, max_messages=24, on_prune=[archive]))
    capability = ReduceHistory(reducer, summarizer=summarizer, on_reduce=records.append)
    agent = make_agent(script.sync_model(), capability)
    history: list[ModelMessage] = []
    histories, news = [], []
    for i in range(TURNS):
        result = agent.run_sync(f"q{i} please tell me", message_history=history)
        history = result.all_messages()
        histories.append(history)
        news.append(result.new_messages())
        assert result.output == f"answer to q{i} please tell me"
    _check_run(script, summarizer, archive, records, histories, news)


@pytest.mark.slow
async def test_thirty_turns_async_with_an_async_summarizer() -> None:
    script, summarizer, archive = Script(), Summarizer(), Archive()
    records: list[ReduceRecord] = []

    async def asummarize(messages: list[Any]) -> str:
        await asyncio.sleep(0)
        return summarizer(messages)

    reducer = MessageReducer(config=ReducerConfig(min_messages=12, max_messages=24, on_prune=[archive]))
    capability = ReduceHistory(reducer, summarizer=asummarize, on_reduce=records.append)
    agent = make_agent(script.async_model(), capability)
    history: list[ModelMessage] = []
    histories, news = [], []
    for i in range(TURNS):
        result = await agent.run(f"q{i} please tell me", message_history=history)
        history = result.all_messages()
        histories.append(history)
        news.append(result.new_messages())
    _check_run(script, summarizer, archive, records, histories, news)


async def test_streamed_runs_are_bounded_the_same() -> None:
    script, summarizer = Script(), Summarizer()
    capability = ReduceHistory(min_messages=6, max_messages=12, summarizer=summarizer)
    agent = make_agent(script.stream_model(), capability)
    history: list[ModelMessage] = []
    questions = [f"q{i} please tell me" for i in range(12)]
    for q in questions:
        async with agent.run_stream(q, message_history=history) as result:
            assert await result.get_output() == f"answer to {q}"
        history = result.all_messages()
        assert len(history) <= 13
    assert summarizer.calls >= 2
    check_requests(script, questions, first_task=questions[0])


def test_without_the_capability_the_history_grows() -> None:
    script = Script()
    agent = make_agent(script.sync_model(), None)
    history: list[ModelMessage] = []
    for i in range(8):
        history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
    assert len(history) == 8 * 6
    assert len(script.received[-1]) == 8 * 6 - 1


def test_one_capability_serves_threads_at_once() -> None:
    capability = ReduceHistory(min_messages=8, max_messages=16, summarizer=Summarizer())
    scripts = [Script() for _ in range(3)]
    errors: list[BaseException] = []

    def talk(script: Script) -> None:
        try:
            agent = make_agent(script.sync_model(), capability)
            history: list[ModelMessage] = []
            for i in range(10):
                history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
            assert len(history) <= 17
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=talk, args=(s,)) for s in scripts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for script in scripts:
        check_requests(script, [f"q{i} please tell me" for i in range(10)], first_task="q0 please tell me")


# -- what Pydantic AI does with the result -------------------------------------------------------


def test_the_summary_merged_by_a_new_run_is_taken_out_again() -> None:
    """A new run merges the stored history's consecutive requests (first request, summary, next
    question); the capability splits the summary out before reducing, so the first request does
    not grow with each summary."""
    script = Script()
    capability = ReduceHistory(min_messages=6, max_messages=12, summarizer=Summarizer())
    agent = make_agent(script.sync_model(), capability)
    history: list[ModelMessage] = []
    for i in range(10):
        history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
        assert [p.part_kind for p in history[0].parts] == ["system-prompt", "user-prompt"]
    assert (summary_text(history[1]) or "").startswith(SUMMARY_PREFIX)
    # the model got them merged, as Pydantic AI sends consecutive requests: one user turn
    first = script.received[-1][0]
    kinds = [p.part_kind for p in first.parts]
    assert kinds[:2] == ["system-prompt", "user-prompt"] and kinds.count("user-prompt") >= 2


def test_without_a_summary_the_first_request_stays_the_system_prompt_and_the_task() -> None:
    """The pinned first request and the first kept turn's request are merged by each new run;
    the capability cuts them apart again, so the first request does not collect questions."""
    script = Script()
    agent = make_agent(script.sync_model(), ReduceHistory(min_messages=6, max_messages=12))
    history: list[ModelMessage] = []
    for i in range(10):
        history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
        assert [p.part_kind for p in history[0].parts] == ["system-prompt", "user-prompt"]
        assert len(history) <= 13
    check_requests(script, [f"q{i} please tell me" for i in range(10)], first_task="q0 please tell me")


def test_requests_holding_tool_returns_and_a_prompt_through_the_agent() -> None:
    """A tool's ``ctx.enqueue`` lands a user prompt in the request of its tool return."""
    script, summarizer = Script(), Summarizer()
    capability = ReduceHistory(min_messages=6, max_messages=12, summarizer=summarizer)
    agent = Agent(script.sync_model(), system_prompt=SYSTEM, capabilities=[capability])

    @agent.tool
    def lookup(ctx: RunContext[None], q: str) -> str:
        ctx.enqueue("a note from the tool")
        return f"{q}: {RESULT}"

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    history: list[ModelMessage] = []
    questions = [f"q{i} please tell me" for i in range(12)]
    for q in questions:
        history = agent.run_sync(q, message_history=history).all_messages()
    mixed = [m for m in history if {"tool-return", "user-prompt"} <= {p.part_kind for p in m.parts}]
    assert mixed and all(read_message(m).kind == "tool" for m in mixed)
    assert summarizer.calls >= 2 and len(summarizer.seen) == len(set(summarizer.seen))
    assert len(history) <= 13
    check_requests(script, questions, first_task=questions[0])


def test_without_preserve_first_pydantic_ai_does_not_add_the_system_prompt_back() -> None:
    """The system prompt lives in the first request and is added to an empty history only:
    pruning that request loses it, which is why ``preserve_first`` defaults to True."""
    script = Script()
    capability = ReduceHistory(min_messages=6, max_messages=12, preserve_first=False)
    agent = make_agent(script.sync_model(), capability)
    history: list[ModelMessage] = []
    for i in range(6):
        history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
    assert script.requests[0][0] == {"role": "system", "content": SYSTEM}
    assert all(m["role"] != "system" for m in script.requests[-1])
    assert all(request_errors(r) == [] for r in script.requests)


def test_a_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    script, records = Script(), list[ReduceRecord]()
    summarizer = Summarizer(fail=True)
    agent = make_agent(script.sync_model(), ReduceHistory(
        min_messages=6, max_messages=12, summarizer=summarizer, on_reduce=records.append))  # fmt: skip
    history: list[ModelMessage] = []
    for i in range(4):
        result = agent.run_sync(f"q{i} please tell me", message_history=history)
        history = result.all_messages()
    assert summarizer.calls >= 1
    assert len(history) == 4 * 6  # nothing lost
    failed = [r for r in records if r.summary_error is not None]
    assert failed and all(r.pruned == () and r.messages_after == r.messages_before for r in failed)
    assert "summarizer down" in (failed[0].summary_error or "")
    check_requests(script, [f"q{i} please tell me" for i in range(4)], first_task="q0 please tell me")


# -- reading Pydantic AI's messages --------------------------------------------------------------


def _legacy_retry(content: str, **fields: Any) -> ModelRequest:
    """A request with the deprecated ``RetryPromptPart`` (an older stored history holds them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PydanticAIDeprecationWarning
        return ModelRequest(parts=[RetryPromptPart(content, **fields)])


def _call(name: str, call_id: str) -> ToolCallPart:
    return ToolCallPart(name, {"x": 1}, tool_call_id=call_id)


def req(*parts: Any) -> ModelRequest:
    return ModelRequest(parts=list(parts))


def resp(*parts: Any) -> ModelResponse:
    return ModelResponse(parts=list(parts))


def ret(call_id: str, content: str = "r", **fields: Any) -> ToolReturnPart:
    return ToolReturnPart("f", content, tool_call_id=call_id, **fields)


_FEEDBACK = RetryFeedbackPart("not valid", retry=RetryInfo(cause="validation_error"))
_NATIVE = [NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="w"),
           NativeToolReturnPart("web_search", {"hits": []}, tool_call_id="w")]  # fmt: skip

READINGS: list[tuple[str, ModelMessage, str, tuple[str, ...], tuple[str, ...]]] = [
    ("system and task", req(SystemPromptPart("s"), UserPromptPart("task")), "human", (), ()),
    ("system only", req(SystemPromptPart("later note")), "system", (), ()),
    ("user prompt", req(UserPromptPart("hi")), "human", (), ()),
    ("tool returns", req(ret("a"), ret("b")), "tool", (), ("a", "b")),
    ("returns and a prompt", req(ret("a"), UserPromptPart("and now?")), "tool", (), ("a",)),
    ("legacy retry of a call", _legacy_retry("bad", tool_name="f", tool_call_id="a"), "tool", (), ("a",)),
    ("legacy retry without a tool", _legacy_retry("try again"), "human", (), ()),
    ("retried call", req(ret("a", "bad args", outcome="retried")), "tool", (), ("a",)),
    ("retry feedback", req(_FEEDBACK), "human", (), ()),
    ("text", resp(TextPart("t")), "ai", (), ()),
    ("thinking and text", resp(ThinkingPart("hmm"), TextPart("t")), "ai", (), ()),
    ("parallel calls", resp(TextPart("t"), _call("f", "a"), _call("g", "b")), "ai", ("a", "b"), ()),
    ("native call and return", resp(*_NATIVE, TextPart("found")), "ai", (), ()),
    ("empty request", req(), "unknown", (), ()),
]


@pytest.mark.parametrize(("message", "kind", "calls", "results"), [r[1:] for r in READINGS],
                         ids=[r[0] for r in READINGS])  # fmt: skip
def test_the_core_reads_pydantic_ai_messages(
    message: ModelMessage, kind: str, calls: tuple[str, ...], results: tuple[str, ...]
) -> None:
    info = read_message(message)
    read = (info.kind, info.call_ids, info.result_ids, info.id, info.role)
    assert read == (kind, calls, results, None, None)


def test_message_text_is_counted() -> None:
    info = read_message(ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart(["look", "here"])]))
    assert info.content == "sys\nlook\nhere"
    assert read_message(resp(ThinkingPart("hmm"), TextPart("t"), _call("f", "a"))).content == "hmm\nt"


def test_a_request_with_results_and_a_prompt_stays_with_its_call() -> None:
    """Unitized as a tool result (as an Anthropic user message with tool_result blocks): kept or
    pruned with the response whose calls it answers, never a turn of its own."""
    mixed = req(ret("a"), UserPromptPart("and now?"))
    history: list[ModelMessage] = [req(SystemPromptPart("s"), UserPromptPart("task"))]
    for i in range(6):
        history += [resp(_call("f", f"c{i}")), req(ret(f"c{i}"))]
        history += [resp(TextPart(f"t{i}")), req(UserPromptPart(f"u{i}"))]
    call = resp(_call("f", "a"))
    history += [call, mixed, resp(TextPart("end")), req(UserPromptPart("last"))]
    for keep in range(2, 12):
        result = MessageReducer(min_messages=keep, max_messages=keep + 1).reduce(history)
        kept = [m for m in result.surviving if m is call or m is mixed]
        assert kept in ([], [call, mixed])
        assert request_errors(openai_dicts([m for m in result.surviving if not isinstance(m, dict)])) == []


def _conversation(turns: int) -> list[ModelMessage]:
    script = Script()
    agent = make_agent(script.sync_model(), None)
    history: list[ModelMessage] = []
    for i in range(turns):
        history = agent.run_sync(f"q{i} please tell me", message_history=history).all_messages()
    extra = req(ret("nowhere", "late"), UserPromptPart("more please"))
    return [*history, ModelResponse(parts=[ThinkingPart("hm"), TextPart("t")]), extra]



@pytest.mark.parametrize("limits", [(6, 12), (10, 20), (0, 8)])
def test_the_fast_path_reduces_as_the_reference(limits: tuple[int, int]) -> None:
    history = _conversation(6)
    runs: list[Any] = []
    for on in (True, False):
        with columns(on):
            reducer = MessageReducer(min_messages=limits[0], max_messages=limits[1])
            again = reducer.reduce(history)
            runs.append([reducer.reduce(history), again, reducer.reduce(history[:-1], history[-1:])])
    fast, reference = runs
    for a, b in zip(fast, reference, strict=True):
        assert [id(m) for m in a.surviving] == [id(m) for m in b.surviving]
        assert [id(m) for m in a.pruned] == [id(m) for m in b.pruned]
        assert a.stats == b.stats
    assert fast[0].pruned


@pytest.mark.slow
def test_the_reference_path_runs_the_agent_the_same(tmp_path: Any) -> None:
    """The whole file once more with AGENTSTATE_REDUCER_REFERENCE=1 (read at import)."""
    chosen = "thirty_turns_sync or reads or stays_with or first_request_stays"
    args = ["-q", "-p", "no:langsmith_plugin", "-p", "no:cacheprovider", __file__, "-k", chosen]
    code = f"import sys, pytest; sys.exit(pytest.main({args!r}))"
    env_run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env={**_env(), "AGENTSTATE_REDUCER_REFERENCE": "1"}, cwd=_root(),
    )  # fmt: skip
    assert env_run.returncode == 0, env_run.stdout[-3000:] + env_run.stderr[-3000:]
    assert " passed" in env_run.stdout


def _root() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": _root()}


# -- construction and imports --------------------------------------------------------------------

BAD: list[tuple[Callable[[], Any], type[Exception], str]] = [
    (lambda: ReduceHistory("reducer"), TypeError, "must be an agentstate_reducer.MessageReducer"),  # type: ignore[arg-type]
    (lambda: ReduceHistory(MessageReducer(), max_messages=9), TypeError, "not both"),
    (lambda: ReduceHistory(summarizer="text"), TypeError, "summarizer must be a callable"),  # type: ignore[arg-type]
    (lambda: ReduceHistory(on_reduce=3), TypeError, "on_reduce must be callable"),  # type: ignore[arg-type]
    (lambda: ReduceHistory(validate="yes"), TypeError, "validate must be a bool"),  # type: ignore[arg-type]
    (lambda: ReduceHistory(preserve_first=1), TypeError, "preserve_first must be a bool"),  # type: ignore[arg-type]
    (lambda: ReduceHistory(min_messages=30, max_messages=20), ValueError, "min_messages"),
    (lambda: ReduceHistory(max_mesages=20), TypeError, "max_mesages"),
]


@pytest.mark.parametrize(("make", "error", "text"), BAD, ids=[b[2] for b in BAD])
def test_bad_arguments_fail_at_construction(
    make: Callable[[], Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        make()


def test_importing_the_core_does_not_import_pydantic_ai() -> None:
    code = (
        "import sys, agentstate_reducer, agentstate_reducer.messages, agentstate_reducer.integrations;"
        "agentstate_reducer.read_message(object());"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'pydantic_ai'], 'pydantic_ai imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), cwd=_root())


def test_without_pydantic_ai_the_import_error_names_the_extra() -> None:
    text = import_error_without(("pydantic_ai",), "agentstate_reducer.integrations.pydantic_ai")
    assert 'pip install ".[pydantic-ai]"' in text and "pydantic-ai-slim" in text


# -- the shared pieces this integration found wanting ----------------------------------------------


def test_the_request_repair_keeps_a_conversation_a_pinned_user_message_opens() -> None:
    """With ``preserve_first`` the first message may be the user's (Pydantic AI's first request):
    it opens the request, so the turns after it stay."""
    call = {"role": "assistant", "tool_calls": [{"id": "x", "type": "function",
                                                  "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "x", "content": "r"}
    history = [{"role": "user", "content": "task"}, call, result,
               {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]  # fmt: skip
    sent, removed = RequestRepair(preserve_first=True)(history)
    assert sent is history and removed == []
    # opened by the model after the system prompt: cut to the user message, as before
    system, hello = {"role": "system", "content": "s"}, {"role": "assistant", "content": "hi"}
    for preserve_first in (True, False):
        sent, removed = RequestRepair(preserve_first=preserve_first)([system, hello, history[4]])
        assert sent == [system, history[4]] and removed == [hello]


def test_reducer_keyword_arguments_are_reducer_config_fields() -> None:
    archive = Archive()
    capability = ReduceHistory(
        min_messages=4, max_messages=8, on_prune=[archive], cascade_tool_messages=False
    )
    (hook,) = capability.reducer.config.on_prune  # the archive, given pydantic-ai's messages
    hook([], ("memories", "c"))
    assert archive.namespaces == {("memories", "c")}
    assert capability.reducer.config.preserve_first is True
    assert capability.reducer.config.cascade_tool_messages is False
