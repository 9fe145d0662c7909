"""ReducingSession over the Agents SDK's SQLiteSession (a real SQLite file), driven by the SDK's
own Runner and ScriptedModel over many turns with tool calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, Session, SessionSettings, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseReasoningItem

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.sessions import ReducingSession
from tests.test_properties import violations

set_tracing_disabled(True)  # no trace export from the scripted runs


def valid(items: list[Any]) -> bool:
    return violations([read_message(m) for m in items]) == []


def kinds(items: list[Any]) -> list[str]:
    return [str(m.get("type", m.get("role"))) for m in items]


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


def turn_steps(turn: int, calls: int) -> list[Any]:
    """A reasoning model's turn: ``calls`` tool steps, then the answer; each output starts with a
    reasoning item, and the first step makes two parallel calls."""

    def reasoning(step: int) -> ResponseReasoningItem:
        return ResponseReasoningItem(
            type="reasoning", id=f"rs_{turn}_{step}", summary=[], encrypted_content="gAAAA" + "x" * 200
        )

    steps: list[Any] = []
    for k in range(calls):
        parallel = [function_call("lookup", {"q": f"q{turn}.{k}.{j}"}, call_id=f"call_{turn}_{k}_{j}")
                    for j in range(2 if k == 0 else 1)]  # fmt: skip
        steps.append([reasoning(k), *parallel])
    return [*steps, [reasoning(calls), assistant_message(f"answer {turn}", item_id=f"msg_{turn}")]]


async def test_runner_over_many_turns_keeps_the_session_bounded_and_sendable(tmp_path: Path) -> None:
    inner = SQLiteSession("user-1", str(tmp_path / "chats.db"))
    session = ReducingSession(inner, min_messages=8, max_messages=16)
    model = ScriptedModel()
    agent = Agent(name="assistant", instructions="Answer with the lookup tool.", model=model, tools=[lookup])
    longest_input = 0
    for turn in range(1, 41):
        model.extend(turn_steps(turn, calls=1 + turn % 2))
        calls_before = len(model.calls)
        result = await Runner.run(agent, f"question {turn}", session=session)
        assert result.final_output == f"answer {turn}"
        for call in model.calls[calls_before:]:  # every input the model was sent
            assert isinstance(call.input, list) and valid(call.input), kinds(call.input)
            longest_input = max(longest_input, len(call.input))
        stored: list[Any] = await inner.get_items()
        assert valid(stored), kinds(stored)
        assert len(stored) <= 16
        assert stored[-1]["id"] == f"msg_{turn}"
        assert stored[0].get("role") == "user"  # whole turns: it starts at a user message
        assert sum(m.get("type") == "reasoning" for m in stored) >= 1
    model.assert_complete()
    # the model saw at most the stored bound plus the turn in progress (its input and its calls)
    assert longest_input <= 16 + 8
    assert await session.get_items() == await inner.get_items()
    inner.close()


async def test_the_untriggered_path_does_not_read_the_inner_session(tmp_path: Path) -> None:
    reads: list[int | None] = []

    class Counting(SQLiteSession):
        async def get_items(self, limit: int | None = None) -> list[Any]:
            reads.append(limit)
            return await super().get_items(limit)

    inner = Counting("s", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=50, max_messages=100)
    for i in range(30):
        await session.add_items([{"role": "user", "content": f"q{i}"}])
        await session.add_items([{"type": "message", "role": "assistant", "content": f"a{i}", "id": f"m{i}"}])
    assert reads == [None]  # once, to learn what the session held
    assert len(await inner.get_items()) == 60
    inner.close()


async def test_a_failed_rewrite_puts_the_previous_items_back(tmp_path: Path) -> None:
    class Failing(SQLiteSession):
        """Fails the first add after a clear once ``fail`` is set: the write of the survivors."""

        fail = False
        cleared = False

        async def clear_session(self) -> None:
            await super().clear_session()
            self.cleared = True

        async def add_items(self, items: list[Any]) -> None:
            if self.fail and self.cleared:
                self.fail = False
                raise OSError("disk full")
            await super().add_items(items)

    inner = Failing("s", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=2, max_messages=4)
    history = []
    for i in range(2):
        history += [
            {"role": "user", "content": f"q{i}"},
            {"type": "message", "role": "assistant", "content": f"a{i}", "id": f"m{i}"},
        ]
    await session.add_items(history)
    assert await inner.get_items() == history
    inner.fail = True
    new = {"role": "user", "content": "q2"}
    with pytest.raises(OSError, match="disk full"):
        await session.add_items([new])
    assert await inner.get_items() == [*history, new]  # nothing lost
    assert inner.fail is False  # it did fail, once
    await session.add_items([{"type": "message", "role": "assistant", "content": "a2", "id": "m2"}])
    stored: list[Any] = await inner.get_items()
    assert [m["content"] for m in stored] == ["q2", "a2"]
    inner.close()


async def test_get_items_reduces_repairs_and_limits_to_a_sendable_tail(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    items: list[Any] = [
        {"role": "user", "content": "q1"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {"type": "message", "role": "assistant", "id": "m1", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "lookup", "arguments": "{}"},
        {"role": "user", "content": "q3"},  # the run of q2 died before its tool answered
        {"type": "message", "role": "assistant", "id": "m3", "content": "a3"},
    ]
    await inner.add_items(items)
    session = ReducingSession(inner)  # no limits: only what cannot be sent goes
    repaired = [m for m in items if m.get("id") != "fc_2"]
    assert await session.get_items() == repaired
    assert await inner.get_items() == repaired  # rewritten
    # the newest 5 would start with the output of c1, whose call is older: left out
    assert await session.get_items(limit=5) == repaired[3:]
    assert await session.get_items(limit=0) == []
    inner.close()


async def test_pop_and_clear_go_to_the_inner_session(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=2, max_messages=4)
    await session.add_items([{"role": "user", "content": "q1"}, {"role": "user", "content": "q2"}])
    assert await session.pop_item() == {"role": "user", "content": "q2"}
    await session.add_items([{"role": "user", "content": "q3"}])
    assert await inner.get_items() == [{"role": "user", "content": "q1"}, {"role": "user", "content": "q3"}]
    await session.clear_session()
    assert await inner.get_items() == [] and await session.get_items() == []
    assert session.session_id == "s" and session.session_settings is inner.session_settings
    session.session_settings = SessionSettings(limit=3)
    assert inner.session_settings == SessionSettings(limit=3)
    protocol: Session = session  # the SDK's protocol, checked by mypy and at run time
    assert isinstance(protocol, Session)
    inner.close()


def test_construction_defaults_and_errors(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    assert ReducingSession(inner, min_messages=2, max_messages=4).reducer.config.preserve_first is False
    mine = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4))
    assert ReducingSession(inner, mine).reducer is mine
    with pytest.raises(TypeError, match="not both"):
        ReducingSession(inner, mine, max_messages=5)
    with pytest.raises(TypeError, match="has no get_items, add_items, pop_item, clear_session"):
        ReducingSession(object())
    inner.close()


def test_importing_the_package_imports_no_sessions_module_and_no_sdk() -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "assert 'agentstate_reducer.sessions' not in sys.modules\n"
        "assert 'agents' not in sys.modules and 'openai' not in sys.modules\n"
        "import agentstate_reducer.sessions\n"
        "assert 'agents' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
