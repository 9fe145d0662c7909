"""Microsoft Agent Framework: ReducerCompactionStrategy through the real agent loop.

The model is ``tests.af_script.ScriptClient`` (a ``BaseChatClient`` with the framework's
function-invocation layer, no network); every request it received is converted to OpenAI Chat
dicts by the script's own code and judged by ``tests.provider_rules``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from agent_framework import (
    AgentSession,
    CompactionProvider,
    Content,
    InMemoryHistoryProvider,
    Message,
)

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from agentstate_reducer.messages import read_message
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.af_script import INSTRUCTIONS, ScriptClient, Summarizer, make_agent, question, to_openai
from tests.integration_checks import import_error_without
from tests.provider_rules import request_errors

TURNS = 30
MAX, MIN = 24, 12


def key(m: Message) -> str:
    """A message by role and contents (the framework copies messages between calls)."""
    dumped = [c.to_dict(exclude_none=True) for c in m.contents]
    return m.role + json.dumps(dumped, sort_keys=True, default=str)


def is_summary(m: Message) -> bool:
    return m.role == "user" and (m.text or "").startswith(SUMMARY_PREFIX)


async def converse(agent: Any, session: AgentSession, turns: int, start: int = 0) -> None:
    for i in range(start, start + turns):
        await agent.run(question(i), session=session)


def assert_requests(client: ScriptClient, turns: int, *, bound: int) -> None:
    assert len(client.requests) == 3 * turns
    for n, request in enumerate(client.requests):
        assert request_errors(to_openai(request)) == [], n
        assert request.instructions == INSTRUCTIONS
        i = n // 3
        users = [m.text for m in request.messages if m.role == "user" and not is_summary(m)]
        assert question(i) in users, n  # the live turn
        assert len(request.messages) <= bound, (n, len(request.messages))


def stored(session: AgentSession) -> list[Message]:
    return list(session.state["in_memory"]["messages"])


def test_request_placement_30_turns_bounds_every_request_and_keeps_the_history() -> None:
    client, summarizer, pruned = ScriptClient(), Summarizer(), []
    hook = [lambda ms, ns: pruned.extend(ms)]
    strategy = ReducerCompactionStrategy(
        max_messages=MAX, min_messages=MIN, summarizer=summarizer, on_prune=hook
    )
    agent = make_agent(client, compaction_strategy=strategy)
    session = agent.create_session()
    asyncio.run(converse(agent, session, TURNS))

    # the live turn may grow the request by its four messages above max_messages
    assert_requests(client, TURNS, bound=MAX + 1)
    assert max(len(r.messages) for r in client.requests) > MIN
    assert summarizer.calls > 0
    assert all(is_summary(r.messages[0]) for r in client.requests[-30:])
    seen = Counter(key(m) for batch in summarizer.seen for m in batch if not is_summary(m))
    assert seen and max(seen.values()) == 1
    assert max(Counter(key(m) for m in pruned if not is_summary(m)).values()) == 1
    # request only: the session's history keeps every message, none excluded, no summary
    history = stored(session)
    assert len(history) == 6 * TURNS
    assert not any(m.additional_properties.get("_excluded") for m in history)
    assert not any(is_summary(m) for m in history)


def test_request_placement_pruning_the_run_s_own_messages_stores_no_exclusion() -> None:
    # a limit smaller than one turn: the tool loop's own messages are pruned from the requests;
    # what the session stores must hold them unmarked (an exclusion stored without its summary
    # would drop them from the next run with skip_excluded=True)
    client, summarizer = ScriptClient(), Summarizer()
    strategy = ReducerCompactionStrategy(max_messages=3, min_messages=2, summarizer=summarizer)
    history = InMemoryHistoryProvider(skip_excluded=True)
    agent = make_agent(client, compaction_strategy=strategy, context_providers=[history])
    session = agent.create_session()
    asyncio.run(converse(agent, session, 4))
    assert_requests(client, 4, bound=4)
    assert summarizer.calls > 0
    assert len(stored(session)) == 24
    assert not any(m.additional_properties.get("_excluded") for m in stored(session))


def test_an_async_summarizer_and_on_reduce_records() -> None:
    got: list[int] = []
    records: list[ReduceRecord] = []

    async def summarize(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        got.append(len(messages))
        assert all(isinstance(m, Message) for m in messages)
        return f"{len(messages)} earlier"

    client = ScriptClient()
    strategy = ReducerCompactionStrategy(
        max_messages=MAX, min_messages=MIN, summarizer=summarize, on_reduce=records.append
    )
    agent = make_agent(client, compaction_strategy=strategy)
    asyncio.run(converse(agent, agent.create_session(), 10))
    assert got and all(request_errors(to_openai(r)) == [] for r in client.requests)
    assert len(records) == len(client.requests)
    summarized = [r for r in records if r.summarized]
    assert len(summarized) == len(got)
    assert all(r.triggered and r.pruned and r.messages_after < r.messages_before for r in summarized)
    assert [r.messages_after for r in records] == [len(r.messages) for r in client.requests]


def test_request_placement_prefix_is_stable_between_summaries() -> None:
    client = ScriptClient()
    strategy = ReducerCompactionStrategy(max_messages=MAX, min_messages=MIN, summarizer=Summarizer())
    agent = make_agent(client, compaction_strategy=strategy)
    asyncio.run(converse(agent, agent.create_session(), 10))
    grew = 0
    for before, after in zip(client.requests, client.requests[1:], strict=False):
        if len(after.messages) > len(before.messages):
            prefix = after.messages[: len(before.messages)]
            assert [key(m) for m in prefix] == [key(m) for m in before.messages]
            grew += 1
    assert grew > len(client.requests) // 2


def test_before_strategy_bounds_the_request_only() -> None:
    client, summarizer = ScriptClient(), Summarizer()
    strategy = ReducerCompactionStrategy(max_messages=MAX, min_messages=MIN, summarizer=summarizer)
    history = InMemoryHistoryProvider()
    compaction = CompactionProvider(before_strategy=strategy, history_source_id=history.source_id)
    agent = make_agent(client, context_providers=[history, compaction])
    session = agent.create_session()
    asyncio.run(converse(agent, session, TURNS))
    # loaded history bounded before the run; the turn's own messages come on top
    assert_requests(client, TURNS, bound=MAX + 5)
    seen = Counter(key(m) for batch in summarizer.seen for m in batch if not is_summary(m))
    assert seen and max(seen.values()) == 1
    assert len(stored(session)) == 6 * TURNS and not any(is_summary(m) for m in stored(session))


def test_after_strategy_bounds_the_stored_history_and_persists_the_summary() -> None:
    client, summarizer, pruned = ScriptClient(), Summarizer(), []
    hook = [lambda ms, ns: pruned.extend(ms)]
    strategy = ReducerCompactionStrategy(
        max_messages=MAX, min_messages=MIN, summarizer=summarizer, on_prune=hook
    )
    history = InMemoryHistoryProvider(skip_excluded=True)
    compaction = CompactionProvider(after_strategy=strategy, history_source_id=history.source_id)
    # after_run goes in reverse order: the compaction first, so it sees the run's saved messages
    agent = make_agent(client, context_providers=[compaction, history])
    session = agent.create_session()
    asyncio.run(converse(agent, session, TURNS))

    # the stored window, then the live turn's messages
    assert_requests(client, TURNS, bound=MAX + 5)
    kept = [m for m in stored(session) if not m.additional_properties.get("_excluded")]
    assert len(kept) <= MAX and is_summary(kept[0])
    assert max(Counter(key(m) for batch in summarizer.seen for m in batch if not is_summary(m)).values()) == 1
    assert max(Counter(key(m) for m in pruned if not is_summary(m)).values()) == 1
    # nothing deleted: every message of every turn is still stored, the pruned ones excluded
    assert sum(1 for m in stored(session) if not is_summary(m)) == 6 * TURNS

    # the summary survives serialization and the conversation goes on from it
    restored = AgentSession.from_dict(session.to_dict())
    loaded = restored.state["in_memory"]["messages"]
    again = [m for m in loaded if not m.additional_properties.get("_excluded")]
    assert [key(m) for m in again] == [key(m) for m in kept]
    calls = summarizer.calls
    asyncio.run(converse(agent, restored, 6, start=TURNS))
    assert summarizer.calls > calls
    assert all(request_errors(to_openai(r)) == [] for r in client.requests)
    assert is_summary(client.requests[-1].messages[0])


def test_a_failing_summarizer_prunes_nothing_and_the_run_goes_on() -> None:
    client, summarizer = ScriptClient(), Summarizer(fail=True)
    strategy = ReducerCompactionStrategy(max_messages=MAX, min_messages=MIN, summarizer=summarizer)
    agent = make_agent(client, compaction_strategy=strategy)
    session = agent.create_session()
    asyncio.run(converse(agent, session, 8))
    assert summarizer.calls > 0
    assert len(client.requests) == 24
    # nothing lost: the last request holds the whole conversation
    assert len(client.requests[-1].messages) == 6 * 7 + 5
    assert all(request_errors(to_openai(r)) == [] for r in client.requests)


def test_concurrent_sessions_share_one_strategy() -> None:
    client, summarizer = ScriptClient(), Summarizer()
    strategy = ReducerCompactionStrategy(max_messages=MAX, min_messages=MIN, summarizer=summarizer)
    agent = make_agent(client, compaction_strategy=strategy)
    sessions = [agent.create_session() for _ in range(3)]

    async def one(n: int, session: AgentSession) -> None:
        for i in range(12):
            await agent.run(f"s{n} " + question(i), session=session)
            await asyncio.sleep(0)

    async def all_of_them() -> None:
        await asyncio.gather(*(one(n, s) for n, s in enumerate(sessions)))

    asyncio.run(all_of_them())
    assert len(client.requests) == 3 * 12 * 3
    for request in client.requests:
        assert request_errors(to_openai(request)) == []
        assert len(request.messages) <= MAX + 1
        owners = {m.text.split()[0] for m in request.messages if m.role == "user" and not is_summary(m)}
        assert len(owners) == 1  # no session sees another's messages
    seen = Counter(key(m) for batch in summarizer.seen for m in batch if not is_summary(m))
    assert max(seen.values()) == 1
    assert {k.split('"text": "')[1][:2] for k in seen if k.startswith("user")} == {"s0", "s1", "s2"}


def test_it_composes_with_another_strategy_s_exclusions() -> None:
    messages = [Message(role="user", contents=[question(i)]) for i in range(6)]
    messages[0].additional_properties["_excluded"] = True
    strategy = ReducerCompactionStrategy(max_messages=3, min_messages=2)
    assert asyncio.run(strategy(messages)) is True
    assert len(messages) == 6  # excluded, never deleted
    assert [m.additional_properties.get("_excluded", False) for m in messages] == [True] * 4 + [False] * 2
    assert {m.additional_properties.get("_exclude_reason") for m in messages[1:4]} == {"agentstate_reducer"}
    assert asyncio.run(strategy(messages)) is False  # a bounded list is left as it is


def test_a_pending_call_ending_a_stored_history_is_kept() -> None:
    call = Content.from_function_call(call_id="p1", name="lookup", arguments={"q": "x"})
    approval = Content.from_function_approval_request(id="ap1", function_call=call)
    messages = [Message(role="user", contents=[question(i)]) for i in range(6)]
    messages.append(Message(role="assistant", contents=[approval]))
    strategy = ReducerCompactionStrategy(max_messages=3, min_messages=2)
    asyncio.run(strategy(messages))
    assert not messages[-1].additional_properties.get("_excluded")
    assert read_message(messages[-1]).call_ids == ("ap1",)


def test_the_core_reads_agent_framework_messages() -> None:
    calls = Message(
        role="assistant",
        contents=[
            Content.from_function_call(call_id="a", name="lookup", arguments={"q": "x"}),
            Content.from_function_call(call_id="b", name="add", arguments={"a": 1, "b": 2}),
        ],
        message_id="m1",
    )
    results = Message(
        role="tool",
        contents=[Content.from_function_result(call_id=c, result="r") for c in ("a", "b")],
    )
    user_results = Message(role="user", contents=[Content.from_function_result(call_id="c", result="r")])
    for msg in (calls, calls.to_dict()):
        info = read_message(msg)
        assert (info.kind, info.call_ids, info.id) == ("ai", ("a", "b"), "m1")
    assert (read_message(results).kind, read_message(results).result_ids) == ("tool", ("a", "b"))
    assert read_message(user_results).kind == "tool"
    assert read_message(Message(role="user", contents=["hi"])).kind == "human"
    assert read_message(Message(role="system", contents=["s"])).kind == "system"
    answer, live = Message(role="assistant", contents=["done"]), Message(role="user", contents=["n"])
    history = [Message(role="user", contents=["q"]), calls, results, answer, live]
    for limit in (1, 2, 3, 4):  # the results never survive without their call, nor it without them
        config = ReducerConfig(max_messages=limit, min_messages=limit, preserve_first=False)
        kept = MessageReducer(config=config).reduce(history)
        assert (calls in kept.surviving) == (results in kept.surviving), limit
        assert kept.surviving[-1] is live and kept.pruned


def test_reference_path_reads_them_the_same() -> None:
    code = (
        "import agentstate_reducer.integrations.agent_framework\n"
        "from tests import test_integration_agent_framework as t\n"
        "t.test_the_core_reads_agent_framework_messages()\n"
    )
    env = {**__import__("os").environ, "AGENTSTATE_REDUCER_REFERENCE": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


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
        ({"max_mesages": 20}, TypeError, "did you mean 'max_messages'"),
        ({"max_threads": 0}, ValueError, "max_threads must be an int >= 1"),
    ],
)
def test_bad_arguments_fail_at_construction(
    kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        ReducerCompactionStrategy(**kwargs)


def test_import_agentstate_reducer_loads_no_agent_framework() -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "assert not [m for m in sys.modules if m.startswith('agent_framework')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_agent_framework_names_the_extra() -> None:
    text = import_error_without(("agent_framework",), "agentstate_reducer.integrations.agent_framework")
    assert 'pip install ".[agent-framework]"' in text and "'agent-framework-core'" in text


def test_a_conversation_that_opens_like_another_gets_none_of_its_summary() -> None:
    """Two conversations open with the same "hi" through one strategy: the second gets neither
    the first one's summary nor its exclusions, and the first keeps its own summary after."""
    seen: list[list[str]] = []

    def summarize(messages: list[Any]) -> str:
        seen.append([m.text for m in messages])
        return "about " + ", ".join(m.text for m in messages)

    strategy = ReducerCompactionStrategy(max_messages=6, min_messages=3, summarizer=summarize)

    def first() -> list[Message]:
        history = [Message(role="user", contents=["hi"])]
        for i in range(8):
            history += [Message(role="assistant", contents=[f"secret answer {i}"]),
                        Message(role="user", contents=[f"question {i}"])]
        return history

    async def main() -> tuple[list[Message], list[Message]]:
        a = first()
        await strategy(a)
        b = [Message(role="user", contents=["hi"]), Message(role="assistant", contents=["hello"]),
             Message(role="user", contents=["what's up"])]
        await strategy(b)
        return a, b

    a, b = asyncio.run(main())
    assert [m.text for m in b] == ["hi", "hello", "what's up"]
    assert not any(m.additional_properties.get("_excluded") for m in b)
    assert not any("secret" in (m.text or "") for m in b)
    assert any(m.text.startswith(SUMMARY_PREFIX) for m in a if not m.additional_properties.get("_excluded"))
    assert len(seen) == 1 and "secret answer 0" in seen[0]
