"""ReducingMemory through LlamaIndex's real FunctionAgent loop, with a scripted function-calling LLM.

Every request the model receives is converted to OpenAI Chat dicts here (tests/llama_index_script.py)
and judged by tests/provider_rules.py. LlamaIndex's ChatMessage is read by the core adapter
(agentstate_reducer/messages/llama_index.py): checked here on both paths (columns and reference).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import BaseMemoryBlock, Memory
from llama_index.core.storage.chat_store.sql import MessageStatus, SQLAlchemyChatStore
from openai.types.chat import ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function

from agentstate_reducer import MessageReducer, ReducerConfig, _columns
from agentstate_reducer._columns.bulk import read_plain
from agentstate_reducer._columns.structure import read_structure
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.llama_index import ReducingMemory
from agentstate_reducer.messages import read_message, tool_call_payloads
from agentstate_reducer.summary import SUMMARY_PREFIX
from agentstate_reducer.tokens import heuristic_counter
from tests.integration_checks import import_error_without
from tests.llama_index_script import SYSTEM_PROMPT, TOOLS, ScriptedLLM, openai_chat, question, script
from tests.provider_rules import request_errors

# the workflow inspects its agent's pydantic attributes at every run: noise, and slow to record
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

ROOT = Path(__file__).resolve().parents[1]
TURNS = 32
MAX, MIN = 24, 12
#: the run's own messages after the memory in the turn's last call: two calls' messages, three results
IN_RUN = 5


def key(m: ChatMessage) -> str:
    """A message's identity across the chat store's round trips (it returns new objects)."""
    return str(m.model_dump_json())


def is_summary(m: ChatMessage) -> bool:
    return m.role.value == "user" and (m.content or "").startswith(SUMMARY_PREFIX)


def distinct(messages: list[ChatMessage]) -> bool:
    return len({key(m) for m in messages}) == len(messages)


class Recorder:
    """A summarizer (sync or async) and an on_prune hook recording the messages they get."""

    def __init__(self) -> None:
        self.inputs: list[list[ChatMessage]] = []
        self.summarized: list[ChatMessage] = []
        self.pruned: list[ChatMessage] = []
        #: (namespace, message) of each pruned message
        self.where: list[tuple[Any, str]] = []
        self.calls = 0
        self.fail = False
        self.lock = threading.Lock()

    def summarize(self, messages: list[ChatMessage]) -> str:
        if self.fail:
            raise RuntimeError("summarizer down")
        with self.lock:  # threads share one recorder
            self.calls += 1
            self.inputs.append(list(messages))
            self.summarized += [m for m in messages if not is_summary(m)]
            return f"summary #{self.calls} of {len(messages)} messages"

    async def asummarize(self, messages: list[ChatMessage]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)

    def on_prune(self, pruned: list[Any], namespace: Any) -> None:
        with self.lock:
            self.pruned += pruned
            self.where += [(namespace, key(m)) for m in pruned]


def hooked_reducer(rec: Recorder) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=MIN, max_messages=MAX, on_prune=[rec.on_prune]))


def make_agent(llm: ScriptedLLM, *, streaming: bool = True) -> FunctionAgent:
    return FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM_PROMPT, streaming=streaming)


async def run_turns(agent: FunctionAgent, memory: Memory, turns: range) -> None:
    for i in turns:
        response = await agent.run(question(i), memory=memory)
        assert str(response) == f"answer {i}: item {i} added"


def conversation(request: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in request if m.role.value != "system"]


def check_requests(llm: ScriptedLLM, turns: range, tag: str = "") -> None:
    """Every call valid, the system prompt first, the live turn in, the parallel calls whole."""
    assert len(llm.requests) == 3 * len(turns)
    for n, request in enumerate(llm.requests):
        i = turns[n // 3]
        assert request_errors(openai_chat(request)) == [], (n, openai_chat(request))
        assert request[0].role.value == "system" and request[0].content == SYSTEM_PROMPT
        assert sum(m.role.value == "system" for m in request) == 1
        assert [m.content for m in request].count(question(i)) == 1, n
        if n % 3 == 2:  # the answer's call: the turn's parallel calls and both results last
            calls = request[-3].additional_kwargs["tool_calls"]
            assert [c["id"] for c in calls] == [f"call{tag}-{i}-b", f"call{tag}-{i}-c"]
            # the tools run concurrently: their results come in the order they finish
            assert {m.additional_kwargs["tool_call_id"] for m in request[-2:]} == {
                f"call{tag}-{i}-b",
                f"call{tag}-{i}-c",
            }


async def stored(memory: Memory, status: MessageStatus | None = MessageStatus.ACTIVE) -> list[ChatMessage]:
    return await memory.sql_store.get_messages(memory.session_id, status=status)


# -- the agent loop ------------------------------------------------------------------------------


async def test_state_mode_bounds_the_stored_queue_and_archives_the_rest() -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    memory = ReducingMemory.from_defaults(
        hooked_reducer(rec), summarizer=rec.summarize, on_reduce=records.append, session_id="user-1"
    )
    llm = ScriptedLLM(script(TURNS))
    await run_turns(make_agent(llm), memory, range(TURNS))

    check_requests(llm, range(TURNS))
    sizes = [len(conversation(r)) for r in llm.requests]
    assert max(sizes) <= MAX + 1 + IN_RUN  # the running summary besides the limit
    assert max(sizes[-30:]) < 40 and sizes[-1] < len(llm.requests)  # bounded, not growing

    # the active queue is bounded and led by the summary; every message is still in the store
    active = await stored(memory)
    assert len(active) <= MAX + 1 + IN_RUN + 1 and is_summary(active[0])
    assert f"summary #{rec.calls} of" in (active[0].content or "")
    everything = [m for m in await stored(memory, None) if not is_summary(m)]
    assert len(everything) == 7 * TURNS and distinct(everything)
    archived = await stored(memory, MessageStatus.ARCHIVED)
    assert {key(m) for m in archived} == {key(m) for m in rec.pruned if not is_summary(m)}
    assert not {key(m) for m in archived} & {key(m) for m in active}

    # the summary leads every request after the first prune
    first = next(n for n, r in enumerate(records) if r.pruned)
    for request in llm.requests[first + 1 :]:
        assert is_summary(request[1]) and sum(map(is_summary, request)) == 1
    assert rec.calls >= 3

    # each pruned message reaches the summarizer and the hook once; ChatMessages only
    assert rec.pruned and distinct(rec.pruned) and distinct(rec.summarized)
    assert all(isinstance(m, ChatMessage) for batch in rec.inputs for m in batch)
    assert all(is_summary(b[0]) and not any(map(is_summary, b[1:])) for b in rec.inputs[1:])
    assert {key(m) for m in rec.summarized} <= {key(m) for m in rec.pruned}
    assert sum(1 for r in records if r.summarized) == rec.calls
    assert all(r.mode == "state" and r.summary_error is None and r.repaired == () for r in records)
    assert {r.thread_id for r in records} == {"user-1"}


async def test_request_mode_keeps_the_queue_whole_and_bounds_each_request() -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    memory = ReducingMemory.from_defaults(
        hooked_reducer(rec), mode="request", summarizer=rec.asummarize, on_reduce=records.append
    )
    llm = ScriptedLLM(script(TURNS))
    await run_turns(make_agent(llm, streaming=False), memory, range(TURNS))  # achat, not streamed

    check_requests(llm, range(TURNS))
    sizes = [len(conversation(r)) for r in llm.requests]
    assert max(sizes) <= MAX + 1 + IN_RUN and max(sizes[-30:]) < 40
    active = await stored(memory)
    assert len(active) == 7 * TURNS and not any(map(is_summary, active))  # nothing left the queue
    assert await stored(memory, MessageStatus.ARCHIVED) == []
    assert await memory.aget_all() == active

    assert rec.calls >= 3 and is_summary(llm.requests[-1][1])
    assert rec.pruned and distinct(rec.pruned) and distinct(rec.summarized)
    assert all(is_summary(b[0]) and not any(map(is_summary, b[1:])) for b in rec.inputs[1:])
    assert all(r.mode == "request" for r in records)


async def test_the_reducers_own_summarizer_gets_chat_messages() -> None:
    rec = Recorder()
    config = ReducerConfig(min_messages=MIN, max_messages=MAX, summarize_fn=rec.summarize)
    reducer = MessageReducer(config=config)
    memory = ReducingMemory.from_defaults(reducer)
    llm = ScriptedLLM(script(8))
    await run_turns(make_agent(llm), memory, range(8))
    check_requests(llm, range(8))
    assert rec.calls >= 2 and is_summary(llm.requests[-1][1])
    assert all(isinstance(m, ChatMessage) for batch in rec.inputs for m in batch)


async def test_an_agent_workflow_reads_the_same_memory() -> None:
    rec = Recorder()
    memory = ReducingMemory.from_defaults(hooked_reducer(rec), summarizer=rec.summarize)
    llm = ScriptedLLM(script(8))
    workflow = AgentWorkflow(agents=[make_agent(llm)])
    for i in range(8):
        response = await workflow.run(question(i), memory=memory)
        assert str(response) == f"answer {i}: item {i} added"
    check_requests(llm, range(8))
    assert rec.calls >= 1 and is_summary(llm.requests[-1][1]) and distinct(rec.pruned)
    assert len(await stored(memory)) <= MAX + 1 + IN_RUN + 1


async def test_a_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    memory = ReducingMemory.from_defaults(
        hooked_reducer(rec), summarizer=rec.summarize, on_reduce=records.append
    )
    llm = ScriptedLLM(script(8))
    agent = make_agent(llm)
    await run_turns(agent, memory, range(3))  # 21 messages: not over the limit yet
    rec.fail = True
    await run_turns(agent, memory, range(3, 6))
    assert rec.pruned == [] and rec.calls == 0
    assert len(await stored(memory)) == 7 * 6  # nothing left the queue
    failed = [r for r in records if r.summary_error is not None]
    assert failed and all(r.pruned == () for r in failed)
    assert "summarizer down" in str(failed[0].summary_error)
    rec.fail = False
    await run_turns(agent, memory, range(6, 8))
    check_requests(llm, range(8))
    assert rec.calls >= 1 and rec.pruned and distinct(rec.pruned)


async def test_a_stored_system_message_is_pinned() -> None:
    memory = ReducingMemory.from_defaults(max_messages=MAX, min_messages=MIN)
    await memory.aset([ChatMessage(role="system", content="the house rules")])
    llm = ScriptedLLM(script(6))
    await run_turns(make_agent(llm), memory, range(6))
    for request in llm.requests:
        assert request_errors(openai_chat(request)) == []
        assert [m.content for m in request[:2]] == [SYSTEM_PROMPT, "the house rules"]
    assert (await stored(memory))[0].content == "the house rules"


async def test_tool_call_blocks_through_llama_indexs_own_mock_llm() -> None:
    """MockFunctionCallingLLM writes its calls as ToolCallBlock blocks (newer LLM integrations do
    too): the same promises hold."""
    requests: list[list[ChatMessage]] = []

    def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        requests.append([m.model_copy(deep=True) for m in messages])
        last = messages[-1]
        n = len(requests)
        if last.role.value == "user":
            call = ToolCallBlock(tool_call_id=f"a{n}", tool_name="lookup", tool_kwargs={"q": f"{n}"})
            return ChatMessage(role="assistant", blocks=[TextBlock(text="looking"), call])
        if messages[-2].role.value == "assistant" and len(messages[-2].blocks) == 2:  # the first call
            both = [
                ToolCallBlock(tool_call_id=f"b{n}", tool_name="lookup", tool_kwargs={"q": "t"}),
                ToolCallBlock(tool_call_id=f"c{n}", tool_name="add", tool_kwargs={"a": n, "b": 1}),
            ]
            return ChatMessage(role="assistant", blocks=both)
        return ChatMessage(role="assistant", content=f"answer {n}")

    rec = Recorder()
    memory = ReducingMemory.from_defaults(hooked_reducer(rec), summarizer=rec.summarize)
    agent = FunctionAgent(tools=TOOLS, llm=MockFunctionCallingLLM(response_generator=respond),
                          system_prompt=SYSTEM_PROMPT)
    for i in range(10):
        await agent.run(question(i), memory=memory)
    assert len(requests) == 30
    for n, request in enumerate(requests):
        assert request_errors(openai_chat(request)) == [], (n, openai_chat(request))
        assert request[0].content == SYSTEM_PROMPT
        assert [m.content for m in request].count(question(n // 3)) == 1
    assert len(conversation(requests[-1])) <= MAX + 1 + IN_RUN and is_summary(requests[-1][1])
    assert rec.pruned and distinct(rec.pruned) and rec.calls >= 1


async def test_memorys_token_flush_is_replaced_by_the_reducer() -> None:
    plain = Memory.from_defaults(token_limit=200)
    memory = ReducingMemory.from_defaults(token_limit=200, max_messages=MAX, min_messages=MIN)
    for m in history(5):
        await plain.aput(m)
        await memory.aput(m)
    assert len(await stored(plain)) < 20  # Memory flushed its queue
    assert len(await stored(memory)) == 20 and await stored(memory, MessageStatus.ARCHIVED) == []
    assert len(await memory.aget()) == 20  # under max_messages: nothing to prune


async def test_a_set_during_a_reduction_wins() -> None:
    replacement = [ChatMessage(role="user", content="start over")]

    def summarize(messages: list[ChatMessage]) -> str:
        memory.set(replacement)  # from the summarizer's thread of control: a concurrent set
        return "summary"

    memory = ReducingMemory.from_defaults(max_messages=MAX, min_messages=MIN, summarizer=summarize)
    await memory.aput_messages([*history(8), ChatMessage(role="user", content=question(8))])
    sent = await memory.aget()
    assert request_errors(openai_chat(sent)) == []
    assert [m.content for m in await stored(memory)] == ["start over"]


# -- memory blocks -------------------------------------------------------------------------------


class NotesBlock(BaseMemoryBlock[str]):
    """A memory block recording what it is given and offering a count of it."""

    got: list[ChatMessage] = Field(default_factory=list)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        return f"{len(self.got)} older messages noted"

    async def _aput(self, messages: list[ChatMessage]) -> None:
        self.got = [*self.got, *messages]


@pytest.mark.parametrize("mode", ["state", "request"])
async def test_memory_blocks_get_each_pruned_message_once(mode: Any) -> None:
    rec = Recorder()
    block = NotesBlock(name="notes")
    memory = ReducingMemory.from_defaults(
        hooked_reducer(rec), mode=mode, summarizer=rec.summarize, memory_blocks=[block]
    )
    llm = ScriptedLLM(script(8))
    await run_turns(make_agent(llm), memory, range(8))
    for request in llm.requests:
        assert request_errors(openai_chat(request)) == []
    strip = [m.model_copy(update={"additional_kwargs": {}}) for m in block.got]
    assert block.got and len({key(m) for m in block.got}) == len(block.got)
    assert {key(m) for m in strip} == {
        key(m.model_copy(update={"additional_kwargs": {}})) for m in rec.pruned if not is_summary(m)
    }
    # the block's content reaches the model as Memory puts it: in a system message
    assert f"{len(block.got)} older messages noted" in (llm.requests[-1][1].content or "")


# -- sync use and concurrency --------------------------------------------------------------------


def history(turns: int) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        out += [
            ChatMessage(role="user", content=question(i)),
            ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]}),
            ChatMessage(role="tool", content="r", additional_kwargs={"tool_call_id": f"c{i}"}),
            ChatMessage(role="assistant", content=f"answer {i}"),
        ]
    return out


@pytest.mark.parametrize("mode", ["state", "request"])
def test_sync_put_and_get(mode: Any) -> None:
    rec = Recorder()
    memory = ReducingMemory.from_defaults(hooked_reducer(rec), mode=mode, summarizer=rec.summarize)
    sent: list[list[ChatMessage]] = []
    for m in history(20):
        memory.put(m)
        if m.role.value == "user":
            sent.append(memory.get())
    assert all(request_errors(openai_chat(s)) == [] for s in sent)
    assert max(map(len, sent)) <= MAX + 1 and is_summary(sent[-1][0])
    assert sent[-1][-1].content == question(19)
    assert distinct(rec.pruned) and rec.calls >= 2
    assert len(memory.get_all()) == (80 if mode == "request" else 80 + 1)


def database(tmp_path: Path) -> str:
    """A SQLite file: LlamaIndex's default in-memory store loses writes of concurrent tasks
    (plain Memory too), a file or server database does not."""
    return f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"


async def test_concurrent_conversations_share_one_reducer_and_store(tmp_path: Path) -> None:
    rec = Recorder()
    reducer = hooked_reducer(rec)
    store = SQLAlchemyChatStore(table_name="conversations", async_database_uri=database(tmp_path))
    await store.get_messages("none")  # its table made before the tasks share it
    tags = ["x", "y", "z"]
    memories = {
        t: ReducingMemory.from_defaults(reducer, summarizer=rec.asummarize, session_id=t, chat_store=store)
        for t in tags
    }
    llms = {t: ScriptedLLM(script(8, tag=t)) for t in tags}

    async def converse(tag: str) -> None:
        await run_turns(make_agent(llms[tag]), memories[tag], range(8))

    await asyncio.gather(*(converse(t) for t in tags))
    for t in tags:
        check_requests(llms[t], range(8), tag=t)
        calls = [c for r in llms[t].requests for m in r for c in m.additional_kwargs.get("tool_calls", [])]
        ids = {c["id"] for c in calls}
        assert all(i.startswith(f"call{t}-") for i in ids)  # no conversation saw another's
        assert len([m for m in await stored(memories[t], None) if not is_summary(m)]) == 7 * 8
    # conversations hold equal messages (the same questions): each pruned once in its own
    assert len(set(rec.where)) == len(rec.where)
    assert {n for n, _ in rec.where} == {("memories", t) for t in tags}
    assert len(rec.summarized) == sum(1 for m in rec.pruned if not is_summary(m)) and rec.calls >= 3


async def test_gets_racing_puts_on_one_memory_lose_nothing(tmp_path: Path) -> None:
    rec = Recorder()
    memory = ReducingMemory.from_defaults(
        hooked_reducer(rec), summarizer=rec.asummarize, async_database_uri=database(tmp_path)
    )
    await memory.aput_messages(history(20))

    async def put_and_get(i: int) -> list[ChatMessage]:
        await memory.aput(ChatMessage(role="user", content=f"late {i}"))
        return await memory.aget()

    results = await asyncio.gather(*(put_and_get(i) for i in range(6)))
    assert distinct(rec.pruned) and distinct(rec.summarized)
    assert all(request_errors(openai_chat(sent)) == [] for sent in results)
    late = [m.content or "" for m in await stored(memory) if (m.content or "").startswith("late")]
    # nothing put during a reduction is lost (tasks take the write lock in no set order)
    assert sorted(late) == [f"late {i}" for i in range(6)]


def test_threads_each_with_a_memory_share_one_reducer() -> None:
    rec = Recorder()
    reducer = hooked_reducer(rec)
    errors: list[BaseException] = []
    sent: list[list[ChatMessage]] = []

    def worker(n: int) -> None:
        try:
            memory = ReducingMemory.from_defaults(reducer, summarizer=rec.summarize, session_id=f"t{n}")
            memory.put_messages(history(15))
            memory.put(ChatMessage(role="user", content=question(15)))
            sent.append(memory.get())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(sent) == 3
    assert rec.calls == 3 and all(is_summary(s[0]) for s in sent)
    assert all(request_errors(openai_chat(s)) == [] and len(s) <= MAX + 1 for s in sent)


# -- construction --------------------------------------------------------------------------------


def test_it_is_a_memory_the_agents_take() -> None:
    memory = ReducingMemory.from_defaults(session_id="s", token_limit=5000, max_messages=30)
    assert isinstance(memory, Memory) and memory.session_id == "s" and memory.token_limit == 5000
    assert memory.reducer.config.max_messages == 30 and memory.reducer.config.preserve_first is False
    direct = ReducingMemory(max_messages=30, session_id="d")
    assert direct.session_id == "d" and direct.reducer.config.max_messages == 30 and direct.mode == "state"
    assert ReducingMemory.class_name() == "ReducingMemory"


@pytest.mark.parametrize("build", ["from_defaults", "init"])
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((), {"mode": "both"}, ValueError, "mode must be 'state' or 'request', got 'both'"),
        ((MessageReducer,), {}, TypeError, "reducer is the class MessageReducer"),
        (("r",), {}, TypeError, "reducer must be an agentstate_reducer.MessageReducer, got str"),
        ((MessageReducer(),), {"max_messages": 5}, TypeError, "not both"),
        ((), {"max_mesages": 5}, TypeError, "did you mean 'max_messages'"),
        ((), {"min_messages": 30, "max_messages": 20}, ValueError, "min_messages"),
        ((), {"summarizer": 3}, TypeError, "summarizer must be a callable"),
        ((), {"validate": "yes"}, TypeError, "validate must be a bool"),
        ((), {"preserve_first": "no"}, TypeError, "preserve_first must be a bool"),
        ((), {"on_reduce": 1}, TypeError, "on_reduce must be callable"),
    ],
)
def test_bad_arguments_fail_at_construction(
    build: str, args: tuple[Any, ...], kwargs: dict[str, Any], error: type, match: str
) -> None:
    make = ReducingMemory.from_defaults if build == "from_defaults" else ReducingMemory
    with pytest.raises(error, match=match):
        make(*args, **kwargs)


# -- reading LlamaIndex's messages ---------------------------------------------------------------


def sample() -> list[ChatMessage]:
    sdk_call = ChatCompletionMessageToolCall(
        id="b2", type="function", function=Function(name="add", arguments='{"a": 1, "b": 2}')
    )
    return [
        ChatMessage(role="system", content="sys"),
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            content="",
            additional_kwargs={
                "tool_calls": [
                    {"id": "a1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                ]
            },
        ),
        ChatMessage(role="tool", content="r1", additional_kwargs={"tool_call_id": "a1"}),
        ChatMessage(
            role="assistant",
            blocks=[TextBlock(text="two at once"), ToolCallBlock(tool_call_id="b1", tool_name="lookup")],
            additional_kwargs={"tool_calls": [sdk_call]},
        ),
        ChatMessage(role="tool", content="r2", additional_kwargs={"tool_call_id": "b1"}),
        ChatMessage(role="tool", content="3", additional_kwargs={"tool_call_id": "b2"}),
        ChatMessage(role="assistant", content="done", additional_kwargs={"tool_call_id": "b2"}),
    ]


def test_the_adapter_reads_chat_messages() -> None:
    infos = [read_message(m) for m in sample()]
    assert [i.kind for i in infos] == ["system", "human", "ai", "tool", "ai", "tool", "tool", "ai"]
    assert [i.call_ids for i in infos] == [(), (), ("a1",), (), ("b2", "b1"), (), (), ()]
    assert [i.result_ids for i in infos] == [(), (), (), ("a1",), (), ("b1",), ("b2",), ()]
    assert infos[4].content == "two at once" and infos[3].content == "r1"
    assert tool_call_payloads(sample()[4]) == [("b2", "add", '{"a": 1, "b": 2}'), ("b1", "lookup", "{}")]
    assert tool_call_payloads(sample()[7]) == []


def test_the_column_path_reads_them_as_the_reference_does() -> None:
    msgs = sample() * 3
    reference = [read_message(m) for m in msgs]
    structure = read_structure(msgs)
    assert structure.kinds == [i.kind for i in reference]
    assert list(structure.calls.values()) == [i.call_ids for i in reference if i.call_ids]
    infos, _ = read_plain(msgs, with_calls=True)
    assert all(info is None or info == ref for info, ref in zip(infos, reference, strict=True))


@pytest.mark.parametrize("max_tokens", [None, 300])
def test_reductions_agree_on_both_paths(max_tokens: int | None) -> None:
    msgs = [*history(12), *sample()[1:]]
    position = {id(m): i for i, m in enumerate(msgs)}

    def reduce() -> tuple[list[int], list[int]]:
        config = ReducerConfig(
            min_messages=8, max_messages=20, max_tokens=max_tokens, token_counter=heuristic_counter()
        )
        reducer = MessageReducer(config=config)
        result = reducer.reduce(msgs)
        return [position[id(m)] for m in result.surviving], reducer.count_tokens(msgs)

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


def test_importing_the_core_loads_no_llama_index() -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "print(sorted(m for m in sys.modules if m.startswith('llama_index')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_without_llama_index_the_import_error_names_the_extra() -> None:
    text = import_error_without(("llama_index",), "agentstate_reducer.integrations.llama_index")
    assert "llama-index-core" in text and 'pip install ".[llama-index]"' in text
