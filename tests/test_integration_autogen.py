"""ReducingChatCompletionContext through AutoGen's real AssistantAgent loop, with a scripted client.

Every request the model receives is converted to OpenAI Chat dicts here (tests/autogen_script.py)
and judged by tests/provider_rules.py. AutoGen's model messages are read by the core adapter
(agentstate_reducer/messages/autogen.py): checked here on both paths (columns and reference).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_ext.models.replay import ReplayChatCompletionClient

from agentstate_reducer import MessageReducer, ReducerConfig, _columns
from agentstate_reducer._columns.bulk import pinned_indices, read_plain
from agentstate_reducer._columns.structure import read_structure
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.autogen import SUMMARY_SOURCE, ReducingChatCompletionContext
from agentstate_reducer.messages import read_message, tool_call_payloads
from agentstate_reducer.tokens import heuristic_counter
from tests.autogen_script import (
    SYSTEM_PROMPT,
    ScriptedClient,
    add,
    lookup,
    openai_chat,
    question,
    turn_responses,
)
from tests.integration_checks import import_error_without
from tests.provider_rules import request_errors

ROOT = Path(__file__).resolve().parents[1]
MESSAGE_CLASSES = (SystemMessage, UserMessage, AssistantMessage, FunctionExecutionResultMessage)
TURNS = 32
MAX, MIN = 24, 12


def script(turns: int, start: int = 0) -> ScriptedClient:
    return ScriptedClient([r for i in range(start, start + turns) for r in turn_responses(i)])


def make_agent(
    client: ScriptedClient, context: ChatCompletionContext, *, stream: bool = False
) -> AssistantAgent:
    return AssistantAgent(
        "helper",
        client,
        tools=[lookup, add],
        system_message=SYSTEM_PROMPT,
        model_context=context,
        max_tool_iterations=3,  # call -> results -> parallel calls -> results -> answer
        model_client_stream=stream,
    )


async def run_turns(agent: AssistantAgent, turns: range) -> None:
    for i in turns:
        result = await agent.run(task=question(i))
        assert result.messages[-1].to_text() == f"answer {i}: item {i} added"


def is_summary(m: Any) -> bool:
    return isinstance(m, UserMessage) and m.source == SUMMARY_SOURCE


class Recorder:
    """A summarizer (sync or async) and an on_prune hook recording the objects they get."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []
        self.summarized: list[Any] = []
        self.pruned: list[Any] = []
        self.calls = 0
        self.fail = False

    def summarize(self, messages: list[Any]) -> str:
        if self.fail:
            raise RuntimeError("summarizer down")
        self.calls += 1
        self.inputs.append(list(messages))
        self.summarized += [m for m in messages if not is_summary(m)]
        return f"summary #{self.calls} of {len(messages)} messages"

    async def asummarize(self, messages: list[Any]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)

    def on_prune(self, pruned: list[Any], namespace: Any) -> None:
        self.pruned += pruned


def hooked_reducer(rec: Recorder) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=MIN, max_messages=MAX, on_prune=[rec.on_prune]))


async def stored(context: ChatCompletionContext) -> list[LLMMessage]:
    """The context's stored history, as its saved state holds it."""
    return ChatCompletionContextState.model_validate(await context.save_state()).messages


def dumped(message: Any) -> str:
    return str(message.model_dump_json())


def conversation(request: list[LLMMessage]) -> list[LLMMessage]:
    return [m for m in request if not isinstance(m, SystemMessage)]


def check_requests(client: ScriptedClient, turns: range) -> None:
    """Every call valid, the system prompt first, the live turn in, the parallel calls whole."""
    assert len(client.requests) == 3 * len(turns)
    for n, request in enumerate(client.requests):
        i = turns[n // 3]
        assert request_errors(openai_chat(request)) == [], (n, openai_chat(request))
        assert isinstance(request[0], SystemMessage) and request[0].content == SYSTEM_PROMPT
        assert sum(isinstance(m, SystemMessage) for m in request) == 1
        live = [m for m in request if isinstance(m, UserMessage) and m.content == question(i)]
        assert len(live) == 1, n
        if n % 3 == 2:  # the answer's call: the turn's parallel calls and both results last
            calls, results = request[-2], request[-1]
            assert isinstance(calls, AssistantMessage) and isinstance(calls.content, list)
            assert [c.id for c in calls.content] == [f"call-{i}-b", f"call-{i}-c"]
            assert isinstance(results, FunctionExecutionResultMessage)
            assert [r.call_id for r in results.content] == [f"call-{i}-b", f"call-{i}-c"]


def distinct(objects: list[Any]) -> bool:
    return len({id(m) for m in objects}) == len(objects)


# -- the agent loop ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["create", "create_stream"])
@pytest.mark.parametrize("kind", ["sync", "async"], ids=["sync-summarizer", "async-summarizer"])
async def test_thirty_turns_stay_bounded_and_valid(stream: bool, kind: str) -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    summarizer = rec.summarize if kind == "sync" else rec.asummarize
    reducer = hooked_reducer(rec)
    context = ReducingChatCompletionContext(reducer, summarizer=summarizer, on_reduce=records.append)
    client = script(TURNS)
    await run_turns(make_agent(client, context, stream=stream), range(TURNS))

    check_requests(client, range(TURNS))
    sizes = [len(conversation(r)) for r in client.requests]
    assert max(sizes) <= MAX + 1  # the running summary besides the limit
    assert max(sizes[-30:]) < 40 and sizes[-1] < len(client.requests)  # bounded, not growing
    saved = (await context.save_state())["messages"]
    assert len(saved) <= MAX + 1
    assert not any(m["type"] == "SystemMessage" for m in saved)  # AssistantAgent keeps it outside

    # the summary rolls forward in the stored history and leads every request after the first prune
    first = next(n for n, r in enumerate(records) if r.pruned)
    for request in client.requests[first + 1 :]:
        assert is_summary(request[1])
        assert sum(is_summary(m) for m in request) == 1
    assert rec.calls >= 3
    kept = await stored(context)
    assert is_summary(kept[0]) and f"summary #{rec.calls} of" in str(kept[0].content)

    # each pruned message reaches the summarizer and the hook once
    assert rec.pruned and distinct(rec.pruned) and distinct(rec.summarized)
    # AutoGen messages only: the summary it rolls forward is the history's own UserMessage
    assert all(isinstance(m, MESSAGE_CLASSES) for batch in rec.inputs for m in batch)
    assert all(is_summary(batch[0]) and not any(map(is_summary, batch[1:])) for batch in rec.inputs[1:])
    assert {id(m) for m in rec.summarized} <= {id(m) for m in rec.pruned}
    assert not {dumped(m) for m in rec.pruned if isinstance(m, MESSAGE_CLASSES)} & set(map(dumped, kept))
    assert sum(1 for r in records if r.summarized) == rec.calls
    assert all(r.mode == "state" and r.summary_error is None and r.repaired == () for r in records)


async def test_the_reducers_own_summarizer_gets_autogen_messages() -> None:
    rec = Recorder()
    config = ReducerConfig(min_messages=MIN, max_messages=MAX, summarize_fn=rec.summarize)
    context = ReducingChatCompletionContext(MessageReducer(config=config))
    client = script(16)
    await run_turns(make_agent(client, context), range(16))
    check_requests(client, range(16))
    assert rec.calls >= 2 and is_summary(client.requests[-1][1])
    assert all(isinstance(m, MESSAGE_CLASSES) for batch in rec.inputs for m in batch)
    assert is_summary(rec.inputs[1][0])


async def test_the_first_task_goes_the_system_prompt_stays() -> None:
    """preserve_first=False: AssistantAgent sends its system message from outside the context."""
    context = ReducingChatCompletionContext(min_messages=MIN, max_messages=MAX)
    client = script(12)
    await run_turns(make_agent(client, context), range(12))
    last = client.requests[-1]
    assert last[0] == SystemMessage(content=SYSTEM_PROMPT)
    assert not any(isinstance(m, UserMessage) and m.content == question(0) for m in last)
    assert not any(is_summary(m) for m in last)  # no summarizer, no summary
    check_requests(client, range(12))


async def test_a_stored_system_message_is_pinned() -> None:
    context = ReducingChatCompletionContext(
        min_messages=MIN, max_messages=MAX, initial_messages=[SystemMessage(content="house rules")]
    )
    client = script(10)
    await run_turns(make_agent(client, context), range(10))
    assert all(r[1] == SystemMessage(content="house rules") for r in client.requests)
    assert request_errors(openai_chat(client.requests[-1])) == []


async def test_a_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    context = ReducingChatCompletionContext(
        min_messages=MIN, max_messages=MAX, summarizer=rec.summarize, on_reduce=records.append
    )
    client = script(14)
    agent = make_agent(client, context)
    rec.fail = True
    await run_turns(agent, range(10))
    failed = [r for r in records if r.summary_error is not None]
    assert failed and all(r.pruned == () and r.messages_after == r.messages_before for r in failed)
    assert len(await stored(context)) == 10 * 6  # nothing lost: every message of every turn
    rec.fail = False
    await run_turns(agent, range(10, 14))
    check_requests(client, range(14))
    assert rec.calls >= 1 and len(await stored(context)) <= MAX + 1
    # the messages kept while it failed are summarized once it works
    assert any(isinstance(m, UserMessage) and m.content == question(0) for m in rec.summarized)


# -- state and config ----------------------------------------------------------------------------


async def test_saved_state_continues_in_a_new_context_with_its_summary() -> None:
    rec = Recorder()
    context = ReducingChatCompletionContext(min_messages=MIN, max_messages=MAX, summarizer=rec.summarize)
    await run_turns(make_agent(script(20), context), range(20))
    state = json.loads(json.dumps(await context.save_state()))  # JSON all the way
    assert len(state["messages"]) <= MAX + 1
    assert state["messages"][0]["source"] == SUMMARY_SOURCE
    calls_before = rec.calls

    seen: list[list[Any]] = []

    def summarize_again(messages: list[Any]) -> str:
        seen.append(messages)
        return "rolled forward"

    fresh = ReducingChatCompletionContext(min_messages=MIN, max_messages=MAX, summarizer=summarize_again)
    await fresh.load_state(state)
    client = script(8, start=20)
    await run_turns(make_agent(client, fresh), range(20, 28))
    check_requests(client, range(20, 28))
    assert all(is_summary(r[1]) for r in client.requests)
    assert seen  # the loaded summary is the running summary: the summarizer gets it to roll forward
    assert is_summary(seen[0][0]) and f"summary #{calls_before} of" in str(seen[0][0].content)
    assert all(len(conversation(r)) <= MAX + 1 for r in client.requests)
    kept = await stored(fresh)
    assert is_summary(kept[0]) and "rolled forward" in str(kept[0].content)


async def test_agent_state_round_trip() -> None:
    """AssistantAgent.save_state holds the context's bounded history."""
    context = ReducingChatCompletionContext(
        min_messages=MIN, max_messages=MAX, summarizer=Recorder().summarize
    )
    agent = make_agent(script(12), context)
    await run_turns(agent, range(12))
    state = await agent.save_state()
    other_context = ReducingChatCompletionContext(
        min_messages=MIN, max_messages=MAX, summarizer=Recorder().summarize
    )
    client = script(2, start=12)
    other = make_agent(client, other_context)
    await other.load_state(state)
    assert await stored(other_context) == await stored(context)
    await run_turns(other, range(12, 14))
    check_requests(client, range(12, 14))


async def test_clear_forgets_the_history_and_the_summary() -> None:
    context = ReducingChatCompletionContext(
        min_messages=MIN, max_messages=MAX, summarizer=Recorder().summarize
    )
    agent = make_agent(script(12), context)
    await run_turns(agent, range(10))
    await agent.on_reset(cancellation_token=None)  # type: ignore[arg-type]
    assert await context.get_messages() == []
    await run_turns(agent, range(10, 12))
    assert len(await stored(context)) == 12


def test_component_config_round_trip(caplog: pytest.LogCaptureFixture) -> None:
    context = ReducingChatCompletionContext(
        min_messages=5,
        max_messages=9,
        cascade_tool_messages=False,
        summary_timeout=2.5,
        validate=False,
        thread_id="user-7",
        initial_messages=[UserMessage(content="hi", source="user")],
    )
    model = context.dump_component()
    assert model.provider == "agentstate_reducer.integrations.autogen.ReducingChatCompletionContext"
    assert model.component_type == "chat_completion_context"
    loaded = ChatCompletionContext.load_component(json.loads(model.model_dump_json()))
    assert isinstance(loaded, ReducingChatCompletionContext)
    c = loaded.reducer.config
    assert (c.min_messages, c.max_messages, c.cascade_tool_messages, c.summary_timeout) == (5, 9, False, 2.5)
    assert c.preserve_first is False and loaded.thread_id == "user-7"
    assert loaded.dump_component() == model  # validate and initial_messages too
    assert caplog.records == []

    with caplog.at_level(logging.WARNING, logger="agentstate_reducer.integrations.autogen"):
        ReducingChatCompletionContext(summarizer=Recorder().summarize, on_reduce=print).dump_component()
    assert "left out: summarize_fn, on_reduce" in caplog.text


def test_an_agent_config_carries_the_context() -> None:
    """AssistantAgent.dump_component holds the context's component, and loads it back."""
    context = ReducingChatCompletionContext(min_messages=6, max_messages=10, thread_id="t")
    client = ReplayChatCompletionClient(["hi"])
    agent = AssistantAgent("helper", client, system_message=SYSTEM_PROMPT, model_context=context)
    loaded = AssistantAgent.load_component(json.loads(agent.dump_component().model_dump_json()))
    assert isinstance(loaded.model_context, ReducingChatCompletionContext)
    assert (loaded.model_context.reducer.config.max_messages, loaded.model_context.thread_id) == (10, "t")


def test_token_limits_round_trip() -> None:
    context = ReducingChatCompletionContext(
        max_tokens=3000, target_tokens=2000, min_messages=4, preserve_first=True
    )
    loaded = ChatCompletionContext.load_component(context.dump_component())
    assert isinstance(loaded, ReducingChatCompletionContext)
    assert (loaded.reducer.config.max_tokens, loaded.reducer.config.target_tokens) == (3000, 2000)
    assert loaded.reducer.config.preserve_first is True


# -- bad arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("forty",), {}, TypeError, "reducer must be an agentstate_reducer.MessageReducer, got str"),
        ((MessageReducer(2, 4),), {"max_messages": 9}, TypeError, "not both"),
        ((), {"max_mesages": 9}, TypeError, r"'max_mesages' \(did you mean 'max_messages'\?\)"),
        ((), {"max_messages": -1}, ValueError, "max_messages"),
        ((), {"min_messages": 30, "max_messages": 20}, ValueError, "min_messages"),
        ((), {"summarizer": "summarize"}, TypeError, "summarizer must be a callable"),
        ((), {"on_reduce": 3}, TypeError, "on_reduce must be callable"),
        ((), {"validate": "yes"}, TypeError, "validate must be a bool"),
        ((), {"preserve_first": 1}, TypeError, "preserve_first must be a bool"),
        ((), {"thread_id": 7}, TypeError, "thread_id must be a str or None, got int"),
        ((), {"initial_messages": "hello"}, TypeError, "initial_messages must be a list"),
    ],
)
def test_bad_arguments_fail_at_construction(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        ReducingChatCompletionContext(*args, **kwargs)


# -- concurrency ---------------------------------------------------------------------------------


def call(call_id: str, arguments: str = "{}", name: str = "lookup") -> FunctionCall:
    return FunctionCall(id=call_id, arguments=arguments, name=name)


def result(call_id: str, content: str = "r", name: str = "lookup") -> FunctionExecutionResult:
    return FunctionExecutionResult(call_id=call_id, content=content, name=name)


def history(turns: int) -> list[LLMMessage]:
    out: list[LLMMessage] = []
    for i in range(turns):
        out += [
            UserMessage(content=question(i), source="user"),
            AssistantMessage(content=[call(f"c{i}")], source="helper"),
            FunctionExecutionResultMessage(content=[result(f"c{i}")]),
            AssistantMessage(content=f"answer {i}", source="helper"),
        ]
    return out


async def test_concurrent_calls_prune_each_message_once() -> None:
    rec = Recorder()
    reducer = hooked_reducer(rec)
    context = ReducingChatCompletionContext(reducer, summarizer=rec.asummarize)
    for m in history(20):
        await context.add_message(m)

    async def add_and_get(i: int) -> list[LLMMessage]:
        await context.add_message(UserMessage(content=f"late {i}", source="user"))
        return await context.get_messages()

    results = await asyncio.gather(*(add_and_get(i) for i in range(6)))
    assert distinct(rec.pruned) and distinct(rec.summarized)
    for sent in results:
        assert request_errors(openai_chat(sent)) == []
    kept = await stored(context)
    late = [m.content for m in kept if isinstance(m, UserMessage) and str(m.content).startswith("late")]
    assert late == [f"late {i}" for i in range(6)]  # nothing added during a reduction is lost


def test_threads_with_their_own_loops_share_one_context() -> None:
    rec = Recorder()
    reducer = hooked_reducer(rec)
    context = ReducingChatCompletionContext(reducer, summarizer=rec.summarize)
    asyncio.run(_fill(context, [*history(30), UserMessage(content=question(30), source="user")]))
    errors: list[BaseException] = []
    sent: list[list[LLMMessage]] = []

    def worker() -> None:
        try:
            sent.append(asyncio.run(context.get_messages()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(sent) == 4
    assert distinct(rec.pruned) and rec.calls == 1
    assert all(request_errors(openai_chat(s)) == [] for s in sent)


async def _fill(context: ReducingChatCompletionContext, messages: list[LLMMessage]) -> None:
    for m in messages:
        await context.add_message(m)


# -- reading AutoGen's messages ------------------------------------------------------------------


def sample() -> list[LLMMessage]:
    return [
        SystemMessage(content="sys"),
        UserMessage(content="q", source="user"),
        AssistantMessage(
            content=[call("a1", '{"q": "x"}')], thought="thinking", source="helper"
        ),
        FunctionExecutionResultMessage(content=[result("a1", "r1")]),
        AssistantMessage(
            content=[
                FunctionCall(id="b1", arguments='{"q": "y"}', name="lookup"),
                FunctionCall(id="b2", arguments='{"a": 1, "b": 2}', name="add"),
            ],
            source="helper",
        ),
        FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(call_id="b1", content="r2", name="lookup"),
                FunctionExecutionResult(call_id="b2", content="3", name="add", is_error=False),
            ]
        ),
        AssistantMessage(content="done", source="helper"),
    ]


@pytest.mark.parametrize("dumped", [False, True], ids=["objects", "model_dump"])
def test_the_adapter_reads_autogen_messages(dumped: bool) -> None:
    msgs: list[Any] = sample()
    if dumped:
        msgs = [m.model_dump() for m in msgs]
    infos = [read_message(m) for m in msgs]
    assert [i.kind for i in infos] == ["system", "human", "ai", "tool", "ai", "tool", "ai"]
    assert [i.call_ids for i in infos] == [(), (), ("a1",), (), ("b1", "b2"), (), ()]
    assert [i.result_ids for i in infos] == [(), (), (), ("a1",), (), ("b1", "b2"), ()]
    assert infos[1].name == "user" and infos[2].content == "thinking" and infos[3].content == ("r1",)
    assert tool_call_payloads(msgs[4]) == [("b1", "lookup", '{"q": "y"}'), ("b2", "add", '{"a": 1, "b": 2}')]
    assert tool_call_payloads(msgs[6]) == []


def test_empty_call_ids_pair_by_name_and_order() -> None:
    calls = AssistantMessage(
        content=[call("", name="f"), call("", name="f")],
        source="helper",
    )
    results = FunctionExecutionResultMessage(
        content=[
            FunctionExecutionResult(call_id="", content="1", name="f"),
            FunctionExecutionResult(call_id="", content="2", name="f"),
        ]
    )
    assert read_message(calls).call_ids == ("f#0", "f#1") == read_message(results).result_ids


def test_the_counter_counts_arguments_results_and_thoughts() -> None:
    reducer = MessageReducer(min_messages=0, max_messages=None)  # the default counter (tiktoken)

    def tokens(m: LLMMessage) -> int:
        return reducer.count_tokens([m])[0]

    short = AssistantMessage(content=[call("x")], source="helper")
    long = AssistantMessage(content=[call("x", '{"q": "' + "w" * 400 + '"}')], source="helper")
    thought = AssistantMessage(content=short.content, thought="t" * 400, source="helper")
    assert tokens(long) >= tokens(short) + 90 and tokens(thought) >= tokens(short) + 90
    one = FunctionExecutionResultMessage(content=[result("x", "r" * 400)])
    two = FunctionExecutionResultMessage(content=[*one.content, *one.content])
    assert tokens(one) >= 90 and tokens(two) >= 2 * tokens(one) - 5


def test_the_column_path_reads_them_as_the_reference_does() -> None:
    msgs = sample() * 3
    reference = [read_message(m) for m in msgs]
    structure = read_structure(msgs)
    assert structure.kinds == [i.kind for i in reference]
    assert list(structure.calls.values()) == [i.call_ids for i in reference if i.call_ids]
    assert pinned_indices(msgs) == [0, 7, 14]
    infos, _ = read_plain(msgs, with_calls=True)
    assert all(info is None or info == ref for info, ref in zip(infos, reference, strict=True))


@pytest.mark.parametrize("max_tokens", [None, 300])
def test_reductions_agree_on_both_paths(max_tokens: int | None) -> None:
    msgs = [m for i in range(12) for m in history(1 + i)[-4:]] + sample()[1:]
    extra = sample()[1:]
    position = {id(m): i for i, m in enumerate([*msgs, *extra])}

    def reduce() -> tuple[list[int], list[int], list[int]]:
        config = ReducerConfig(
            min_messages=8,
            max_messages=20,
            max_tokens=max_tokens,
            token_counter=heuristic_counter(),
            preserve_first=False,
        )
        reducer = MessageReducer(config=config)
        result = reducer.reduce(msgs)
        again = reducer.reduce([*result.surviving, *extra])
        return (
            [position[id(m)] for m in result.surviving],
            [position.get(id(m), -1) for m in again.surviving],
            reducer.count_tokens(msgs),
        )

    was = _columns.enabled
    try:
        _columns.use(True)
        fast = reduce()
        _columns.use(False)
        slow = reduce()
    finally:
        _columns.use(was)
    assert fast == slow
    assert len(fast[0]) < len(msgs)  # it pruned


# -- imports -------------------------------------------------------------------------------------


def test_importing_the_core_loads_no_autogen() -> None:
    code = "import sys, agentstate_reducer\nprint(sorted(m for m in sys.modules if m.startswith('autogen')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_without_autogen_the_import_error_names_the_extra() -> None:
    blocked = ("autogen_core", "autogen_agentchat")
    text = import_error_without(blocked, "agentstate_reducer.integrations.autogen")
    assert "autogen-core" in text and 'pip install ".[autogen]"' in text
