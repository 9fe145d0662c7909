"""One switch runs every reducer and counter on the reference path: the environment variable
``AGENTSTATE_REDUCER_REFERENCE=1`` at import, or ``_columns.use(False)`` at run time."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer, ReducerConfig, _columns
from agentstate_reducer.tokens import heuristic_counter


def _history(n: int, compact_every: int = 0) -> list[Any]:
    """``compact_every``: an AI message with an Anthropic compaction block after every so many turns."""
    msgs: list[Any] = [SystemMessage("sys", id="s")]
    for t in range(n):
        if compact_every and t and t % compact_every == 0:
            msgs.append(AIMessage([{"type": "compaction", "content": f"up to {t}"}], id=f"k{t}"))
        msgs += [
            HumanMessage(f"question {t} " * 5, id=f"h{t}"),
            AIMessage("", tool_calls=[{"id": f"c{t}", "name": "f", "args": {"q": t}}], id=f"a{t}"),
            ToolMessage(f"result {t}", tool_call_id=f"c{t}", id=f"t{t}"),
            AIMessage(f"answer {t} " * 8, id=f"f{t}"),
        ]
    return msgs


@contextmanager
def reference_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The column path off, and any use of it an error."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the column path was used")

    was = _columns.enabled
    _columns.use(False)
    monkeypatch.setattr(_columns, "plan", refuse)
    monkeypatch.setattr(_columns, "count", refuse)
    monkeypatch.setattr(_columns.warm, "read_and_count", refuse)
    try:
        yield
    finally:
        _columns.use(was)
        monkeypatch.undo()


CONFIGS = [
    ReducerConfig(min_messages=6, max_messages=12),
    ReducerConfig(max_tokens=300, target_tokens=200),
    ReducerConfig(max_messages=1000),  # untriggered: the repair
]


@pytest.mark.parametrize("compact_every", [0, 5])
@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_the_reference_path_alone_reduces_as_the_column_path_does(
    index: int, compact_every: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = _history(12, compact_every)
    cfg = CONFIGS[index]
    def counted() -> ReducerConfig:  # a counter of its own: nothing cached from the other path
        return dataclasses.replace(cfg, token_counter=heuristic_counter()) if cfg.max_tokens else cfg

    fast = MessageReducer(config=counted())
    want = [fast.reduce(msgs[:k]) for k in (20, 33, 49)]
    with reference_only(monkeypatch):
        reference = MessageReducer(config=counted())
        got = [reference.reduce(msgs[:k]) for k in (20, 33, 49)]
    for a, b in zip(got, want, strict=True):
        assert [id(m) for m in a.surviving] == [id(m) for m in b.surviving]
        assert [id(m) for m in a.pruned] == [id(m) for m in b.pruned]
        assert a.stats == b.stats


def test_the_environment_variable_turns_the_column_path_off() -> None:
    code = (
        "from agentstate_reducer import _columns\n"
        "from agentstate_reducer.tokens import cache\n"
        "print(_columns.enabled, bool(cache._warm))\n"
    )
    env = {**os.environ, "AGENTSTATE_REDUCER_REFERENCE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "False"]
    env["AGENTSTATE_REDUCER_REFERENCE"] = "0"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "True"]
