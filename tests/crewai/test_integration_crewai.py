"""``ReducerHook`` through CrewAI's real agent loop (crewai.Crew, a scripted ``BaseLLM``, no network).

Every request the model gets is judged by ``tests.provider_rules.request_errors`` after the
test's own conversion (``scripted.as_openai``). Run in the CrewAI environment (scripts/test.sh).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from crewai.hooks import clear_all_global_hooks, get_before_llm_call_hooks

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.crewai import ReducerHook
from agentstate_reducer.messages import read_message
from tests.crewai.scripted import ROLE, TASK, ScriptedLLM, as_openai, crew_for
from tests.provider_rules import request_errors

ROOT = Path(__file__).resolve().parents[2]
TURNS = 32
#: the tests of one property each: long enough to reduce several times
SHORT = 14
MAX, MIN = 30, 16
SUMMARY_HEAD = "Summary of the earlier conversation"


@pytest.fixture(autouse=True)
def _no_global_hooks() -> Iterator[None]:
    clear_all_global_hooks()
    yield
    clear_all_global_hooks()


def key(m: dict[str, Any]) -> str:
    """One message, told apart from every other of the scripted run."""
    calls = [c["id"] for c in m.get("tool_calls") or []]
    return json.dumps([m.get("role"), m.get("tool_call_id"), calls, m.get("content")], default=str)


def is_summary(m: Any) -> bool:
    return isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_HEAD)


class Recorder:
    """A summarizer and an ``on_prune`` hook that remember what they got."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.summarized: list[list[str]] = []
        self.pruned: list[str] = []
        self.records: list[ReduceRecord] = []

    def summarize(self, messages: list[Any]) -> str:
        self.summarized.append([key(m) for m in messages if not is_summary(m)])
        if self.fail:
            raise RuntimeError("the summarizer is down")
        return f"summary {len(self.summarized)}"

    def on_prune(self, pruned: list[Any], namespace: Any) -> None:
        self.pruned.extend(key(m) for m in pruned if not is_summary(m))

    def reducer(self) -> MessageReducer:
        config = ReducerConfig(min_messages=MIN, max_messages=MAX, on_prune=[self.on_prune])
        return MessageReducer(config=config)


def assert_every_request_sound(llm: ScriptedLLM) -> None:
    """Valid, system prompt and task first, the newest results in, bounded."""
    assert len(llm.received) == 2 * llm.turns + 1
    for i, request in enumerate(llm.received):
        assert request_errors(as_openai(request)) == [], i
        assert request[0]["role"] == "system" and request[0]["content"].startswith(f"You are {ROLE}.")
        assert request[1]["role"] == "user" and TASK in request[1]["content"]
        # CrewAI's own keys stay on its messages
        assert request[0]["cache_breakpoint"] is True and request[1]["cache_breakpoint"] is True
        if i:  # the live turn: the results of the previous response, last
            newest = [m.get("tool_call_id") for m in request[-len(llm.issued[i - 1]) :]]
            assert newest == llm.issued[i - 1], i
        # system + task + summary + what the reducer keeps, + the step's new messages
        assert len(request) <= 2 + 1 + MAX + 2, (i, len(request))
    # the task prompt is the executor's own object at every call
    assert len({ids[1] for ids in llm.identities}) == 1


def assert_seen_once(rec: Recorder) -> None:
    seen = [k for batch in rec.summarized for k in batch]
    assert seen and len(seen) == len(set(seen))
    assert rec.pruned and len(rec.pruned) == len(set(rec.pruned))
    assert set(rec.pruned) == set(seen)


def test_a_long_task_stays_bounded_and_valid_at_every_call() -> None:
    rec = Recorder()
    llm = ScriptedLLM(model="scripted", turns=TURNS)
    crew, agent = crew_for(llm)
    hook = ReducerHook(rec.reducer(), summarizer=rec.summarize, on_reduce=rec.records.append).register()
    assert get_before_llm_call_hooks()  # registered with CrewAI's own registry
    assert str(crew.kickoff()) == f"answered {TURNS} questions"

    assert_every_request_sound(llm)
    assert_seen_once(rec)
    assert len(rec.summarized) >= 3
    assert len(llm.received[-1]) < (2 + 5 * TURNS) // 4  # unbounded, the last request has them all
    # the running summary: one plain user message right after the task prompt, no extra keys
    last = llm.received[-1]
    assert is_summary(last[2]) and set(last[2]) == {"role", "content"}
    assert sum(is_summary(m) for m in last) == 1
    # the executor's own list is bounded (state mode)
    assert len(agent.agent_executor.messages) <= 2 + 1 + MAX + 3
    assert rec.records and all(r.mode == "state" for r in rec.records)
    assert any(r.summarized for r in rec.records)
    assert hook.unregister() is True and not get_before_llm_call_hooks()


def test_async_kickoff_with_a_scoped_hook() -> None:
    rec = Recorder()
    llm = ScriptedLLM(model="scripted", turns=TURNS)
    crew, _ = crew_for(llm)

    async def run() -> Any:
        with ReducerHook(rec.reducer(), summarizer=rec.summarize).scoped():
            return await crew.akickoff()

    assert str(asyncio.run(run())) == f"answered {TURNS} questions"
    assert not get_before_llm_call_hooks()  # nothing global
    assert_every_request_sound(llm)
    assert_seen_once(rec)


def test_the_scope_ends_with_the_block_and_keeps_an_enclosing_scope() -> None:
    outer_calls: list[int] = []
    llm = ScriptedLLM(model="scripted", turns=SHORT)
    crew, _ = crew_for(llm)
    from crewai.hooks.dispatch import InterceptionPoint, register_scoped, scoped_hooks

    with scoped_hooks():
        register_scoped(InterceptionPoint.PRE_MODEL_CALL, lambda ctx: outer_calls.append(len(ctx.messages)))
        with ReducerHook(min_messages=MIN, max_messages=MAX).scoped():
            crew.kickoff()
    assert len(outer_calls) == len(llm.received)  # the enclosing scope's hook ran inside
    assert max(len(r) for r in llm.received) <= 2 + 1 + MAX + 2

    after = ScriptedLLM(model="scripted", turns=SHORT)
    crew_for(after)[0].kickoff()
    assert max(len(r) for r in after.received) == 2 + 5 * SHORT  # unbounded once the block is over


def test_one_hook_serves_crews_running_in_threads_at_once() -> None:
    rec = Recorder()
    llms = [ScriptedLLM(model="scripted", turns=SHORT, prefix=f"crew{i}-") for i in range(3)]
    crews = [crew_for(llm)[0] for llm in llms]
    ReducerHook(rec.reducer(), summarizer=rec.summarize).register()
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda crew: str(crew.kickoff()), crews))
    assert answers == [f"answered {SHORT} questions"] * 3
    for llm in llms:
        assert_every_request_sound(llm)
    assert_seen_once(rec)
    for llm in llms:  # each crew's history was summarized
        assert any(llm.prefix in k for batch in rec.summarized for k in batch)


def test_a_failing_summarizer_loses_nothing() -> None:
    rec = Recorder(fail=True)
    llm = ScriptedLLM(model="scripted", turns=12)
    crew, _ = crew_for(llm)
    ReducerHook(rec.reducer(), summarizer=rec.summarize, on_reduce=rec.records.append).register()
    assert str(crew.kickoff()) == "answered 12 questions"
    assert rec.summarized  # it was asked
    assert rec.pruned == []
    # every request holds the whole history: the last one every message of the run
    assert len(llm.received[-1]) == 2 + 5 * 12
    assert all(request_errors(as_openai(r)) == [] for r in llm.received)
    assert any(r.summary_error and "summarizer is down" in r.summary_error for r in rec.records)


@pytest.mark.parametrize("by", ["role", "object"])
def test_per_agent_registration_bounds_only_those_agents(by: str) -> None:
    from crewai import Crew

    ours, other = ScriptedLLM(model="scripted", turns=SHORT), ScriptedLLM(model="scripted", turns=SHORT)
    crew1, agent = crew_for(ours)
    crew2, writer = crew_for(other, role="Writer")
    crew = Crew(agents=[agent, writer], tasks=[*crew1.tasks, *crew2.tasks], verbose=False)
    hook = ReducerHook(min_messages=MIN, max_messages=MAX).register(agents=[ROLE if by == "role" else agent])
    crew.kickoff()
    assert max(len(r) for r in ours.received) <= 2 + 1 + MAX + 2
    assert all(request_errors(as_openai(r)) == [] for r in ours.received)
    assert max(len(r) for r in other.received) == 2 + 5 * SHORT  # the Writer: unbounded
    hook.unregister()


def test_registering_after_an_agents_first_kickoff_warns_and_is_true() -> None:
    llm = ScriptedLLM(model="scripted", turns=SHORT)
    crew, agent = crew_for(llm)
    crew.kickoff()
    with pytest.warns(RuntimeWarning, match="after the first kickoff of agent 'Researcher'"):
        hook = ReducerHook(min_messages=MIN, max_messages=MAX).register(agents=[agent])
    llm.received.clear()
    llm.issued.clear()
    crew.kickoff()
    # what the warning says: CrewAI kept the executor built before the hook was registered
    assert max(len(r) for r in llm.received) == 2 + 5 * SHORT
    hook.unregister()

    fresh = ScriptedLLM(model="scripted", turns=SHORT)
    crew2, agent2 = crew_for(fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hook = ReducerHook(min_messages=MIN, max_messages=MAX).register(agents=[agent2])
    crew2.kickoff()
    assert max(len(r) for r in fresh.received) <= 2 + 1 + MAX + 2
    hook.unregister()


def test_crewais_own_summary_never_fires_below_our_bound() -> None:
    """respect_context_window=True with a window the unbounded run overflows: CrewAI's summary
    fires without the hook (it replaces the task prompt too) and never with it."""
    window = 2500
    alone = ScriptedLLM(model="scripted", turns=SHORT, window=window)
    crew_for(alone, respect_context_window=True)[0].kickoff()
    assert alone.summarize_requests >= 1
    assert any(TASK not in json.dumps(r) for r in alone.received)  # CrewAI's summary took the task

    ours = ScriptedLLM(model="scripted", turns=SHORT, window=window)
    crew, _ = crew_for(ours, respect_context_window=True)
    ReducerHook(min_messages=MIN, max_messages=MAX).register()
    crew.kickoff()
    assert ours.summarize_requests == 0
    assert max(ours.get_input_tokens_count(r) for r in ours.received) < window
    assert all(TASK in r[1]["content"] for r in ours.received)


def test_a_direct_llm_call_is_left_as_it_is() -> None:
    """Outside an agent's loop (``executor=None``: ``llm.call`` from user code, CrewAI's own
    summarization prompts) there is no history to keep: the messages stay as they are."""
    from crewai.hooks import LLMCallHookContext

    messages: list[dict[str, Any]] = [{"role": "user", "content": f"m{i}"} for i in range(50)]
    before, items = json.dumps(messages), list(messages)
    context = LLMCallHookContext(executor=None, messages=messages, llm=ScriptedLLM(model="scripted"))
    assert ReducerHook(min_messages=2, max_messages=4)(context) is None
    assert context.messages is messages and json.dumps(messages) == before
    assert all(a is b for a, b in zip(messages, items, strict=True))


def test_register_unregister_and_repr() -> None:
    hook = ReducerHook(min_messages=MIN, max_messages=MAX)
    assert hook.unregister() is False
    assert hook.register() is hook
    assert "registered" in repr(hook) and "unregistered" not in repr(hook)
    with pytest.raises(RuntimeError, match="registered already"):
        hook.register()
    assert hook.unregister() is True
    assert hook.unregister() is False
    assert get_before_llm_call_hooks() == []


async def _async_summarizer(messages: list[Any]) -> str:
    return "s"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reducer": "not a reducer"}, TypeError, "must be an agentstate_reducer.MessageReducer"),
        ({"reducer": MessageReducer(5, 10), "max_messages": 3}, TypeError, "not both"),
        ({"min_messages": 30, "max_messages": 20}, ValueError, "min_messages"),
        ({"summarizer": "x"}, TypeError, "summarizer must be a callable"),
        ({"summarizer": _async_summarizer}, TypeError, "CrewAI runs its hooks synchronously"),
        ({"validate": "yes"}, TypeError, "validate must be a bool"),
        ({"on_reduce": 3}, TypeError, "on_reduce must be callable"),
    ],
)
def test_bad_arguments_fail_at_construction(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        ReducerHook(**kwargs)


@pytest.mark.parametrize(
    ("agents", "error", "match"),
    [
        ([], ValueError, "agents is empty"),
        ("Researcher", TypeError, "list of agent roles"),
        ([ROLE, 3], TypeError, r"agents\[1\] must be an agent role"),
        ([""], ValueError, r"agents\[0\] is an empty role"),
    ],
)
def test_bad_agents_fail_at_registration(agents: Any, error: type[Exception], match: str) -> None:
    hook = ReducerHook()
    with pytest.raises(error, match=match):
        hook.register(agents=agents)
    with pytest.raises(error, match=match), hook.scoped(agents=agents):
        pass
    assert get_before_llm_call_hooks() == []


def test_the_core_reads_crewais_messages() -> None:
    """The executor's dicts: assistant calls (content None), parallel results with a name."""
    llm = ScriptedLLM(model="scripted", turns=3)
    crew_for(llm)[0].kickoff()
    history = llm.received[-1]
    infos = [read_message(m) for m in history]
    assert [i.kind for i in infos[:2]] == ["system", "human"]
    assert infos[4].call_ids == ("t0-b", "t0-c") and infos[5].result_ids == ("t0-b",)
    assert infos[6].result_ids == ("t0-c",)
    # reduced, whole call groups survive, the caller's dicts come back untouched
    before = json.dumps(history)
    result = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=6)).reduce(history[1:])
    assert json.dumps(history) == before
    assert all(any(s is m for m in history) for s in result.surviving)
    assert request_errors(as_openai([history[0], *result.surviving])) == []


def test_the_modules_doctest() -> None:
    import doctest

    import agentstate_reducer.integrations.crewai as module

    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def test_import_agentstate_reducer_does_not_import_crewai() -> None:
    code = "import sys, agentstate_reducer; print(any(m.split('.')[0] == 'crewai' for m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
