"""ReducingSession over the Agents SDK's SQLiteSession (a real SQLite file), driven by the SDK's
own Runner and ScriptedModel over many turns with tool calls."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, Session, SessionSettings, SQLiteSession, function_tool, set_tracing_disabled
from agents.extensions.memory import AdvancedSQLiteSession
from agents.extensions.memory.async_sqlite_session import AsyncSQLiteSession
from agents.extensions.memory.encrypt_session import EncryptedSession
from agents.testing import ScriptedModel, assistant_message, function_call
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from openai.types.responses import ResponseReasoningItem

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.sessions import ReducingSession
from checkpointers.archive import StoreArchive
from tests.session_kill_child import NEW_ITEM
from tests.test_properties import violations

ROOT = Path(__file__).resolve().parent.parent

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
    # the newest 5 start with the output of c1, whose call is older: they start at q2
    assert await session.get_items(limit=5) == repaired[4:]
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
    # the inner session's public methods are there, not its private storage operations
    assert session.close == inner.close and session.get_items != inner.get_items
    assert getattr(session, "_get_compaction_snapshot", None) is None
    inner.close()


def test_construction_defaults_and_errors(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    assert ReducingSession(inner, min_messages=2, max_messages=4).reducer.config.preserve_first is False
    mine = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, preserve_first=False))
    assert ReducingSession(inner, mine).reducer is mine
    # preserve_first is the session's argument, for a given reducer too
    pinning = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4))
    assert ReducingSession(inner, pinning).reducer.config == mine.config
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


def test_the_old_import_path_names_the_same_class() -> None:
    from agentstate_reducer.integrations.openai_agents import ReducingSession as New

    assert ReducingSession is New


def collect(into: list[Any]) -> Any:
    """An ``on_prune`` hook appending the pruned items to ``into``."""
    return lambda pruned, namespace: into.extend(pruned)


def pairs(n: int, start: int = 0) -> list[Any]:
    """``n`` plain turns: a user message and the assistant's answer each."""
    items: list[Any] = []
    for i in range(start, start + n):
        items += [
            {"role": "user", "content": f"q{i}"},
            {"type": "message", "role": "assistant", "id": f"m{i}", "content": f"a{i}"},
        ]
    return items


@pytest.mark.parametrize(
    ("items", "match"),
    [
        ("hello", r"got a str; wrap text in an item"),
        ({"role": "user", "content": "hi"}, r"got one item \(a dict\); pass a list"),
        (42, r"got int"),
        (None, r"got NoneType"),
        ([{"role": "user", "content": "hi"}, "hello"], r"item 1 is a str, not a Responses item"),
        ([{"content": "hi"}], r"item 0 has no 'type' or 'role' \(its keys: 'content'\)"),
        ([ResponseReasoningItem(type="reasoning", id="rs", summary=[])],
         r"item 0 is a ResponseReasoningItem.*model_dump"),
        (ResponseReasoningItem(type="reasoning", id="rs", summary=[]),
         r"got one SDK object \(ResponseReasoningItem\); pass a list of dicts"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("stored", [0, 4])
async def test_add_items_refuses_what_is_not_a_list_of_items_before_writing(
    tmp_path: Path, items: Any, match: str, stored: int
) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    history = pairs(stored // 2)
    await inner.add_items(history)
    session = ReducingSession(inner, min_messages=2, max_messages=4)
    with pytest.raises(TypeError, match=match):
        await session.add_items(items)
    assert await inner.get_items() == history  # nothing written
    await session.add_items([{"role": "user", "content": "next"}])  # and the session still works
    assert (await inner.get_items())[-1] == {"role": "user", "content": "next"}
    inner.close()


async def test_get_items_limit_returns_the_newest_items_from_a_user_message(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    items = pairs(30)
    await inner.add_items(items)
    session = ReducingSession(inner, min_messages=60, max_messages=100)
    assert await session.get_items(limit=50) == items[10:]  # not a default count of 10
    assert await session.get_items(limit=51) == items[10:]  # the newest 51 start with an answer
    assert await session.get_items(limit=3) == items[-2:]
    assert await session.get_items(limit=60) == await session.get_items(limit=1000) == items
    assert await inner.get_items() == items  # nothing pruned
    inner.close()


async def test_get_items_limit_inside_a_long_turn_keeps_its_newest_whole_units(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    turn: list[Any] = [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {"type": "function_call_output", "call_id": "c2", "output": "r2"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "message", "role": "assistant", "id": "m", "content": "a"},
    ]
    await inner.add_items([*pairs(2), *turn])
    session = ReducingSession(inner, min_messages=20, max_messages=40)
    for limit, expected in [(4, turn[-2:]), (6, turn[-2:]), (7, turn[1:]), (8, turn), (1, [])]:
        got = await session.get_items(limit=limit)
        assert got == expected, (limit, kinds(got))
        assert valid(got)
    inner.close()


async def test_the_inner_sessions_own_limit_does_not_cut_the_history(tmp_path: Path) -> None:
    pruned: list[Any] = []
    inner = SQLiteSession("s", str(tmp_path / "s.db"), session_settings=SessionSettings(limit=5))
    items = pairs(6)
    await inner.add_items(items)
    session = ReducingSession(inner, min_messages=2, max_messages=8, on_prune=[collect(pruned)])
    await session.add_items([{"role": "user", "content": "q6"}])
    stored: list[Any] = await inner.get_items(limit=100)
    assert stored == [{"role": "user", "content": "q6"}]
    assert pruned == items  # every item is kept or handed to on_prune
    # get_items() without a limit follows the session's settings, as the SDK's sessions do
    await session.add_items(pairs(3, start=7))
    assert await session.get_items() == pairs(3, start=7)[-5:][1:]
    inner.close()


async def test_pruned_items_go_to_the_archive_under_the_session_id(tmp_path: Path) -> None:
    archive = StoreArchive(InMemoryStore())
    inner = SQLiteSession("user-7", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=2, max_messages=4, on_prune=[archive])
    for i in range(5):
        await session.add_items(pairs(1, start=i))
    stored: list[Any] = await inner.get_items()
    archived = archive.messages(("memories", "user-7"))
    assert [m["content"] for m in [*archived, *stored]] == [m["content"] for m in pairs(5)]
    inner.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["SQLiteSession", "AsyncSQLiteSession"])
def test_a_process_killed_while_replacing_the_items_loses_none(tmp_path: Path, kind: str) -> None:
    db, store_path = tmp_path / "chats.db", tmp_path / "archive.db"
    history = pairs(4)
    seed = SQLiteSession("s", str(db))
    asyncio.run(seed.add_items(history))
    seed.close()
    child = subprocess.run(
        [sys.executable, "-m", "tests.session_kill_child", kind, str(db), str(store_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,  # a hung child fails the test; the run takes a few seconds
    )
    assert child.returncode == -signal.SIGKILL, child.stderr  # killed at the step boundary
    survivors = [*history[-2:], NEW_ITEM]

    async def reopen() -> None:  # this process did not take part: it reads what the file holds
        inner = SQLiteSession("s", str(db))
        assert await inner.get_items() == [*history, NEW_ITEM]  # the old items, all of them
        conn = sqlite3.connect(store_path, check_same_thread=False, isolation_level=None)
        archive = StoreArchive(SqliteStore(conn))
        archived = archive.messages(("memories", "s"))
        assert archived == history[:-2]  # archived before they were to leave
        session = ReducingSession(inner, min_messages=4, max_messages=8, on_prune=[archive])
        assert await session.get_items() == survivors  # the reduction is done again
        assert await inner.get_items() == survivors
        assert archive.messages(("memories", "s")) == archived  # once
        inner.close()

    asyncio.run(reopen())


@pytest.mark.parametrize(
    "kind", ["SQLiteSession", "AsyncSQLiteSession", "EncryptedSession", "AdvancedSQLiteSession"]
)
async def test_every_local_session_kind_stays_bounded_and_loses_nothing(tmp_path: Path, kind: str) -> None:
    db = str(tmp_path / "s.db")
    inner: Any
    if kind == "SQLiteSession":
        inner = SQLiteSession("s", db)
    elif kind == "AsyncSQLiteSession":
        inner = AsyncSQLiteSession("s", db)
    elif kind == "EncryptedSession":
        inner = EncryptedSession("s", SQLiteSession("s", db), encryption_key="k" * 43, ttl=3600)
    else:
        inner = AdvancedSQLiteSession(session_id="s", db_path=db, create_tables=True)
    pruned: list[Any] = []
    session = ReducingSession(inner, min_messages=4, max_messages=8, on_prune=[collect(pruned)])
    for i in range(12):
        await session.add_items(pairs(1, start=i))
        stored: list[Any] = await inner.get_items()
        assert len(stored) <= 8 and stored[0]["role"] == "user"
        assert [m["content"] for m in pruned + stored] == [m["content"] for m in pairs(i + 1)]
    assert await session.get_items() == stored
    closer = getattr(inner, "close", None)
    if closer is not None:
        out = closer()
        if asyncio.iscoroutine(out):
            await out


async def test_two_sessions_over_one_file_lose_no_items(tmp_path: Path) -> None:
    """Two writers (two processes, or two workers) over the same stored session."""
    pruned: list[Any] = []
    inners = [SQLiteSession("s", str(tmp_path / "s.db")) for _ in range(2)]
    writers = [
        ReducingSession(inner, min_messages=4, max_messages=8, on_prune=[collect(pruned)])
        for inner in inners
    ]
    sent: list[Any] = []
    for i in range(20):
        turn = pairs(1, start=i)
        await writers[i % 2].add_items(turn)
        sent += turn
    stored: list[Any] = await inners[0].get_items()
    assert len(stored) <= 8
    # a writer that reduced an older copy handed items to on_prune before it found the stored
    # items changed (hooks see a pruned item at least once): nothing is lost
    assert {m["content"] for m in pruned + stored} == {m["content"] for m in sent}
    assert {m["content"] for m in stored} == {m["content"] for m in sent[-len(stored):]}
    for inner in inners:
        inner.close()


async def test_concurrent_adds_on_one_session_lose_no_items(tmp_path: Path) -> None:
    pruned: list[Any] = []
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=6, max_messages=12, on_prune=[collect(pruned)])

    async def writer(name: str) -> None:
        for i in range(15):
            await session.add_items([{"role": "user", "content": f"{name}{i}"}])

    await asyncio.gather(writer("a"), writer("b"))
    stored: list[Any] = await inner.get_items()
    assert len(stored) <= 12
    contents = [m["content"] for m in pruned + stored]
    assert sorted(contents) == sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)])
    for name in "ab":  # each writer's items in its own order
        assert [c for c in contents if c[0] == name] == [f"{name}{i}" for i in range(15)]
    inner.close()


async def test_runner_with_a_session_limit_sends_a_sendable_history(tmp_path: Path) -> None:
    inner = SQLiteSession("user-1", str(tmp_path / "chats.db"), session_settings=SessionSettings(limit=8))
    session = ReducingSession(inner, min_messages=8, max_messages=16)
    model = ScriptedModel()
    agent = Agent(name="assistant", instructions="Answer with the lookup tool.", model=model, tools=[lookup])
    for turn in range(1, 13):
        before: list[Any] = await inner.get_items(limit=100)
        model.extend(turn_steps(turn, calls=1 + turn % 2))  # 11 items in odd turns, 8 in even ones
        calls_before = len(model.calls)
        result = await Runner.run(agent, f"question {turn}", session=session)
        assert result.final_output == f"answer {turn}"
        first = model.calls[calls_before].input
        assert isinstance(first, list) and valid(first), kinds(first)
        # the history: the newest 8 stored items from their first user message, then the question
        history, question = first[:-1], first[-1]
        assert question == {"role": "user", "content": f"question {turn}"}
        newest = before[-8:]
        users = [i for i, m in enumerate(newest) if m.get("role") == "user"]
        if users:
            assert history == newest[users[0] :]
        else:  # one turn longer than 8: its newest whole units
            assert history == before[len(before) - len(history) :] and len(history) <= 8
        if turn == 2:  # turn 1 is stored whole (11 items)
            assert [m.get("id") for m in history] == ["rs_1_1", "call_1_1_0", None, "rs_1_2", "msg_1"]
        stored: list[Any] = await inner.get_items(limit=100)
        assert len(stored) <= 16 and stored[-1]["id"] == f"msg_{turn}"
    model.assert_complete()
    inner.close()


async def test_after_a_reduction_raises_the_stored_items_are_read_again(tmp_path: Path) -> None:
    class Plain(SQLiteSession):
        """A subclass: no atomic replacement, the stored items are cleared and written."""

    failing = [True]

    def tokens(message: Any) -> int:
        if message.get("content") == "q1" and failing[0]:
            failing[0] = False
            raise RuntimeError("counter down")
        return 1

    pruned: list[Any] = []
    inner = Plain("s", str(tmp_path / "s.db"))
    session = ReducingSession(
        inner, max_tokens=6, target_tokens=3, token_counter=tokens, on_prune=[collect(pruned)]
    )
    await session.add_items(pairs(1))
    with pytest.raises(Exception, match="counter down"):
        await session.add_items(pairs(1, start=1))  # stored, then the reduction raised
    await session.add_items(pairs(1, start=2))
    await session.add_items(pairs(1, start=3))  # 8 items of a token each: reduced to 3 tokens
    stored: list[Any] = await inner.get_items()
    assert stored == pairs(1, start=3)
    assert pruned == pairs(3)  # every item is kept or handed to on_prune
    inner.close()


async def test_two_sessions_over_one_file_writing_at_once_lose_no_items(tmp_path: Path) -> None:
    pruned: list[Any] = []
    inners = [SQLiteSession("s", str(tmp_path / "s.db")) for _ in range(2)]
    writers = [
        ReducingSession(inner, min_messages=4, max_messages=8, on_prune=[collect(pruned)]) for inner in inners
    ]

    async def write(k: int) -> None:
        for i in range(15):
            await writers[k].add_items([{"role": "user", "content": f"{k}-{i}"}])

    await asyncio.gather(write(0), write(1))
    stored: list[Any] = await writers[0].get_items()  # reads what is stored, reduces it
    assert len(stored) <= 8 and await inners[1].get_items() == stored
    sent = {f"{k}-{i}" for k in range(2) for i in range(15)}
    assert {m["content"] for m in pruned + stored} == sent
    for inner in inners:
        inner.close()
