"""A warm reducer handed equal copies (a checkpoint read back each turn) answers what a fresh
reducer answers, and the copies it lets go of are freed: it holds no messages its caller
dropped beyond the lists its memo keeps, whichever thread frees them."""

from __future__ import annotations

import copy
import threading
import time
import weakref
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer, wait_released


def _conversation(turns: int) -> list[Any]:
    msgs: list[Any] = [SystemMessage("s", id="s")]
    for t in range(turns):
        msgs += [
            HumanMessage(f"q{t}", id=f"h{t}"),
            AIMessage("", id=f"a{t}", tool_calls=[{"name": "f", "args": {}, "id": f"c{t}"}]),
            ToolMessage(f"r{t}", tool_call_id=f"c{t}", id=f"t{t}"),
            AIMessage(f"answer {t}", id=f"f{t}"),
        ]
    return msgs


def _ids(msgs: list[Any]) -> list[str]:
    return [m.id for m in msgs]


def test_copies_a_warm_reducer_lets_go_of_are_freed() -> None:
    seen = _conversation(30)
    warm = MessageReducer(min_messages=20, max_messages=40)
    warm.reduce(seen)
    watched: list[weakref.ref[Any]] = []
    for _ in range(6):
        copied = copy.deepcopy(seen)
        watched += [weakref.ref(m) for m in copied]
        result = warm.reduce(copied)
        fresh = MessageReducer(min_messages=20, max_messages=40).reduce(copy.deepcopy(seen))
        assert _ids(result.surviving) == _ids(fresh.surviving)
        assert _ids(result.pruned) == _ids(fresh.pruned)
        own = {id(m) for m in copied}
        assert all(id(m) in own for m in [*result.surviving, *result.pruned])  # the caller's objects
        warm.reduce(seen)  # the conversation goes on with the objects it holds
    del copied, result
    assert wait_released(timeout=120)
    alive = [r for r in watched if r() is not None]
    # the memo keeps four lists: the last copy read and what was cut from it, and ``seen``'s
    assert len(alive) <= len(seen)
    assert {m.id for m in (r() for r in alive) if m is not None} <= set(_ids(seen))
    fresh_again = MessageReducer(min_messages=20, max_messages=40).reduce(seen)
    assert warm.reduce(seen).surviving == fresh_again.surviving


def test_release_waits_for_nothing_when_nothing_was_dropped() -> None:
    assert wait_released(timeout=120)
    r = MessageReducer(min_messages=2, max_messages=10)
    msgs = _conversation(1)
    assert r.reduce(msgs).surviving == msgs
    assert wait_released(timeout=120)


def _releasing_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentstate-memo-release"]


def test_an_idle_process_runs_no_releasing_thread_and_a_later_drop_is_still_freed() -> None:
    seen = _conversation(30)
    warm = MessageReducer(min_messages=20, max_messages=40)
    for _ in range(6):  # enough copies to push records off the memo
        warm.reduce(copy.deepcopy(seen))
    assert wait_released(timeout=120)
    deadline = time.monotonic() + 120  # waits for an event; no speed is asserted
    while _releasing_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _releasing_threads() == []
    watched: list[weakref.ref[Any]] = []
    for _ in range(6):
        copied = copy.deepcopy(seen)
        watched += [weakref.ref(m) for m in copied]
        warm.reduce(copied)
        warm.reduce(seen)
    del copied
    assert wait_released(timeout=120)
    assert _releasing_threads()  # the drops started a thread again, and it freed them
    assert len([r for r in watched if r() is not None]) <= len(seen)
