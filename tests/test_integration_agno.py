"""ReducingCompressionManager in real Agno runs: a scripted ``Model`` subclass, real tools, the
real agent loop and session databases; every request the model received is judged by
``tests.provider_rules`` after this file's own conversion to OpenAI Chat dicts
(``tests.agno_script.to_openai``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agno.agent import Agent
from agno.db.sqlite import SqliteDb
from agno.models.message import Message
from agno.run.agent import RunOutput

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.agno import ReducingCompressionManager
from agentstate_reducer.messages import read_message
from tests.agno_script import SYSTEM, ScriptedModel, agent, question, to_openai, turn_of
from tests.integration_checks import import_error_without
from tests.provider_rules import request_errors

MAX, MIN = 20, 10
#: the most messages of its own a run sends (question, call, result, two calls' results): never pruned
LIVE = 6


def _is_summary(m: Any) -> bool:
    return isinstance(m, Message) and isinstance(m.content, str) and m.content.startswith("Summary of")


class Recorder:
    """A summarizer and an ``on_prune`` hook recording the ids of the messages they get."""

    def __init__(self, *, fail: bool = False) -> None:
        self.summarized: list[list[str]] = []
        self.pruned: list[str] = []
        self.namespaces: set[Any] = set()
        self.fail = fail
        self._lock = threading.Lock()

    def summarize(self, messages: list[Any]) -> str:
        if self.fail:
            raise RuntimeError("summarizer down")
        assert all(isinstance(m, Message) for m in messages), "the summarizer gets Agno's messages"
        with self._lock:
            self.summarized.append([m.id for m in messages if not _is_summary(m)])
        return f"{len(messages)} messages about lookups"

    async def asummarize(self, messages: list[Any]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)

    def on_prune(self, messages: list[Any], namespace: Any) -> None:
        with self._lock:
            self.pruned.extend(m.id for m in messages if not _is_summary(m))
            self.namespaces.add(namespace)


def manager(rec: Recorder, most: int = MAX, least: int = MIN, **kwargs: Any) -> ReducingCompressionManager:
    config = ReducerConfig(max_messages=most, min_messages=least, on_prune=[rec.on_prune])
    return ReducingCompressionManager(MessageReducer(config=config), **kwargs)


def assert_requests_valid(requests: list[list[Message]], *, bound: int | None = None) -> None:
    assert requests, "the model was never called"
    for n, request in enumerate(requests):
        payload = to_openai(request)
        assert request_errors(payload) == [], f"call {n}: {request_errors(payload)}"
        system = request[0]
        assert system.role == "system" and SYSTEM in str(system.content), f"call {n}: no system message"
        if bound is not None:
            assert len(request) <= bound, f"call {n} sends {len(request)} messages"


def live_turn_sent(request: list[Message], turn: int) -> bool:
    return any(turn_of(m) == turn and not m.from_history for m in request)


def run_turns(bot: Agent, turns: range, *, session: str = "s1", sync: bool = True) -> None:
    if sync:
        for i in turns:
            bot.run(question(i), session_id=session)
    else:
        asyncio.run(arun_turns(bot, turns, session=session))


async def arun_turns(bot: Agent, turns: range, *, session: str) -> None:
    for i in turns:
        await bot.arun(question(i), session_id=session)


@pytest.mark.parametrize("sync", [True, False], ids=["run-sqlite", "arun-async-summarizer"])
def test_thirty_turns_bounded_valid_and_each_message_seen_once(sync: bool, tmp_path: Path) -> None:
    rec = Recorder()
    records: list[ReduceRecord] = []
    model = ScriptedModel()
    summarizer = rec.summarize if sync else rec.asummarize
    compression = manager(rec, summarizer=summarizer, on_reduce=records.append)
    db: dict[str, Any] = {"db": SqliteDb(db_file=str(tmp_path / "agno.db"))} if sync else {}
    bot = agent(model, compression_manager=compression, **db)
    run_turns(bot, range(30), sync=sync)

    assert len(model.requests) == 30 * 3
    # the limit, the system message, the summary, the live run (never pruned)
    assert_requests_valid(model.requests, bound=MAX + 2 + LIVE)
    for n, request in enumerate(model.requests):
        assert live_turn_sent(request, n // 3), f"call {n}: the live turn is missing"
    # the summarizer and on_prune see each message once, though Agno sends the whole session
    summarized = [k for batch in rec.summarized for k in batch]
    assert len(rec.summarized) >= 5 and len(summarized) == len(set(summarized))
    assert len(rec.pruned) == len(set(rec.pruned)) and set(rec.pruned) == set(summarized)
    first_question = next(m.id for m in model.requests[0] if turn_of(m) == 0)
    assert first_question in rec.pruned
    # from the first prune on the running summary follows the system message
    first = next(n for n, r in enumerate(model.requests) if _is_summary(r[1]))
    assert all(_is_summary(r[1]) and not any(_is_summary(m) for m in r[2:]) for r in model.requests[first:])
    assert len(records) == len(model.requests) and records[first].summarized
    assert sum(r.summarized for r in records) == len(rec.summarized)
    assert {r.thread_id for r in records} == {first_question}
    assert rec.namespaces == {("memories", first_question)}
    # request mode: the stored session keeps every run whole
    session = bot.get_session("s1")
    assert session is not None and len(session.runs or []) == 30
    stored = session.get_messages()
    assert [m.content for m in stored if turn_of(m) is not None] == [question(i) for i in range(30)]
    assert len(stored) == 30 * 7 + 1 and not any(_is_summary(m) for m in stored)


@pytest.mark.parametrize("sync", [True, False], ids=["run", "arun"])
def test_a_run_longer_than_the_limit_is_stored_whole(sync: bool) -> None:
    """A tool loop over the limit: only the history is pruned, never the run Agno records."""
    rec = Recorder()
    model = ScriptedModel()
    bot = agent(model, compression_manager=manager(rec, 5, 3, summarizer=rec.summarize))
    run_turns(bot, range(3), sync=sync)
    assert len(model.requests) == 9
    assert_requests_valid(model.requests)
    assert rec.pruned and len(rec.pruned) == len(set(rec.pruned))
    # every call sends the whole live run: the question and every call and result so far
    for n, request in enumerate(model.requests):
        own = [m for m in request if not m.from_history and m.role != "system"]
        assert len(own) == [1, 3, 6][n % 3] and turn_of(own[0]) == n // 3, f"call {n}"
    session = bot.get_session("s1")
    assert session is not None and len(session.runs or []) == 3
    for i, run in enumerate(session.runs or []):
        assert isinstance(run, RunOutput) and run.messages is not None
        kept = [m for m in run.messages if not m.from_history and m.role != "system"]
        roles = ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
        assert [m.role for m in kept] == roles
        assert turn_of(kept[0]) == i
        calls = [c["id"] for m in kept for c in m.tool_calls or []]
        assert len(calls) == 3 and [m.tool_call_id for m in kept if m.role == "tool"] == calls
    stored = session.get_messages()
    assert len(stored) == 3 * 7 + 1 and not any(_is_summary(m) for m in stored)


def test_the_stream_path_is_bounded_too() -> None:
    rec = Recorder()
    model = ScriptedModel()
    bot = agent(model, compression_manager=manager(rec, 12, 6, summarizer=rec.summarize))
    for i in range(6):
        for _ in bot.run(question(i), session_id="s1", stream=True):
            pass
    assert len(model.requests) == 18
    assert_requests_valid(model.requests, bound=12 + 2 + LIVE)
    assert rec.pruned and len(rec.pruned) == len(set(rec.pruned))


def test_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    rec = Recorder(fail=True)
    records: list[ReduceRecord] = []
    model = ScriptedModel()
    compression = manager(rec, 8, 4, summarizer=rec.summarize, on_reduce=records.append)
    bot = agent(model, compression_manager=compression)
    run_turns(bot, range(4))
    assert len(model.requests) == 12
    assert_requests_valid(model.requests)
    assert rec.pruned == []
    # every request is the whole session: system, 7 messages a turn, the live turn so far
    expected = [2 + 7 * (n // 3) + 2 * (n % 3) + (n % 3 == 2) for n in range(12)]
    assert [len(r) for r in model.requests] == expected
    assert any(r.summary_error and "summarizer down" in r.summary_error for r in records)
    assert all(r.pruned == () for r in records)


def test_an_async_summarizer_works_in_a_sync_run() -> None:
    rec = Recorder()
    model = ScriptedModel()
    bot = agent(model, compression_manager=manager(rec, 8, 4, summarizer=rec.asummarize))
    run_turns(bot, range(4))
    assert_requests_valid(model.requests, bound=8 + 2 + LIVE)
    assert rec.summarized and len(rec.pruned) == len(set(rec.pruned)) == sum(len(b) for b in rec.summarized)


def test_one_manager_serves_concurrent_sessions_in_threads() -> None:
    rec = Recorder()
    model = ScriptedModel()
    bot = agent(model, compression_manager=manager(rec, 10, 5, summarizer=rec.summarize))
    threads = [threading.Thread(target=run_turns, args=(bot, range(b, b + 8)), kwargs={"session": s})
               for s, b in (("a", 0), ("b", 100), ("c", 200))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(model.requests) == 3 * 8 * 3
    assert_requests_valid(model.requests, bound=10 + 2 + LIVE)
    for n, request in enumerate(model.requests):
        turns = {t // 100 for t in (turn_of(m) for m in request) if t is not None}
        assert len(turns) == 1, f"call {n} mixes the sessions: {turns}"
    assert len(rec.pruned) == len(set(rec.pruned)) == sum(len(b) for b in rec.summarized)
    assert len(rec.namespaces) == 3


def test_one_manager_serves_concurrent_sessions_in_tasks() -> None:
    rec = Recorder()
    model = ScriptedModel()
    bot = agent(model, compression_manager=manager(rec, 10, 5, summarizer=rec.asummarize))

    async def both() -> None:
        a, b = arun_turns(bot, range(8), session="a"), arun_turns(bot, range(100, 108), session="b")
        await asyncio.gather(a, b)

    asyncio.run(both())
    assert len(model.requests) == 2 * 8 * 3
    assert_requests_valid(model.requests, bound=10 + 2 + LIVE)
    for n, request in enumerate(model.requests):
        turns = {t // 100 for t in (turn_of(m) for m in request) if t is not None}
        assert len(turns) == 1, f"call {n} mixes the sessions: {turns}"
    assert len(rec.pruned) == len(set(rec.pruned)) == sum(len(b) for b in rec.summarized) > 0


def test_a_broken_stored_session_is_repaired_before_the_call() -> None:
    """An unpaired call in the history (a run cut off between a call and its result) is not sent."""
    model = ScriptedModel()
    bot = agent(model, compression_manager=ReducingCompressionManager(max_messages=40))
    run_turns(bot, range(2))
    session = bot.get_session("s1")
    assert session is not None and session.runs
    run = session.runs[0]
    assert isinstance(run, RunOutput) and run.messages is not None
    # drop the first result: its call is left unanswered in the stored run
    run.messages = [m for m in run.messages if not (m.role == "tool" and m.tool_call_id == "call_1_0")]
    bot.save_session(session)
    run_turns(bot, range(2, 3))
    assert_requests_valid(model.requests[6:])
    assert not any(m.tool_calls and m.tool_calls[0]["id"] == "call_1_0" for m in model.requests[6])


def test_core_adapter_reads_agno_messages() -> None:
    call = Message(role="assistant", tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
    ])  # fmt: skip
    results = [Message(role="tool", tool_call_id="c1", content="r1"),
               Message(role="tool", tool_call_id="c2", content="3")]  # fmt: skip
    assert read_message(call).call_ids == ("c1", "c2") and read_message(call).kind == "ai"
    assert [read_message(r).result_ids for r in results] == [("c1",), ("c2",)]
    assert read_message(Message(role="user", content="hi")).kind == "human"
    assert read_message(Message(role="system", content="s")).kind == "system"
    assert read_message(call).id == call.id
    # the reducer keeps the call with its results (the column path and the reference path)
    history = [Message(role="user", content="a"), call, *results, Message(role="user", content="b"),
               Message(role="assistant", content="ok")]  # fmt: skip
    config = ReducerConfig(max_messages=4, min_messages=2, preserve_first=False)
    out = MessageReducer(config=config).reduce(history)
    assert [id(m) for m in out.surviving] == [id(m) for m in history[4:]]
    assert [id(m) for m in out.pruned] == [id(m) for m in history[:4]]  # the call with its results


def test_reference_path_same_answers() -> None:
    code = (
        "import sys; sys.path.insert(0, '.');"
        "from tests.test_integration_agno import test_core_adapter_reads_agno_messages as t; t()"
    )
    env = {**os.environ, "AGENTSTATE_REDUCER_REFERENCE": "1"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"reducer": "r"}, TypeError, "reducer must be an agentstate_reducer.MessageReducer"),
        ({"reducer": MessageReducer}, TypeError, "pass an instance"),
        ({"reducer": MessageReducer(), "max_messages": 5}, TypeError, "not both"),
        ({"preserve_first": 1}, TypeError, "preserve_first must be a bool"),
        ({"summarizer": "s"}, TypeError, "summarizer must be a callable"),
        ({"validate": "yes"}, TypeError, "validate must be a bool"),
        ({"on_reduce": 3}, TypeError, "on_reduce must be callable"),
        ({"min_messages": 30, "max_messages": 20}, ValueError, "min_messages"),
        ({"max_mesages": 20}, TypeError, "max_mesages"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        ReducingCompressionManager(**kwargs)


def test_defaults_and_agno_wiring() -> None:
    compression = ReducingCompressionManager()
    assert compression.reducer.config.preserve_first is False
    assert (compression.reducer.config.min_messages, compression.reducer.config.max_messages) == (20, 40)
    bot = agent(ScriptedModel(), compression_manager=compression)
    bot.run(question(0), session_id="s1")
    assert bot.compress_tool_results is True  # Agno turns the manager on for the agent
    assert "ReducingCompressionManager" in repr(compression)


def test_import_agentstate_reducer_loads_no_agno() -> None:
    code = "import sys, agentstate_reducer; assert not [m for m in sys.modules if m.split('.')[0] == 'agno']"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_agno_names_the_extra() -> None:
    text = import_error_without(("agno",), "agentstate_reducer.integrations.agno")
    assert 'pip install ".[agno]"' in text and "'agno'" in text
