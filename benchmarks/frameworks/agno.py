"""Agno: full history, Agno's own history settings and compaction, and
``ReducingCompressionManager``, on the scripted conversation (``tests.agno_script``), each
request scored as OpenAI Chat dicts.

* ``none``: ``add_history_to_context=True, num_history_runs=10_000``: the whole session at
  every run (Agno's default is the last 3 runs).
* ``num_history_runs=N``: the last N runs (N = MAX_MESSAGES // 7, a turn being 7 messages).
* ``num_history_messages=N``: the last N stored messages, cut anywhere.
* ``max_tool_calls_from_history=N``: the whole session, only the newest N tool calls kept.
* ``compaction``: ``Compaction(model=<scripted summary model>, compact_at_tokens=1200,
  uncompacted_runs=3)`` on a SQLite session (Agno keeps compaction records in SQL databases
  only), in a subprocess without tiktoken, so that Agno sizes the fold with its own character
  estimate (with tiktoken it downloads an encoding); its summarizer calls are the summary model's.
* ``ours``: ``ReducingCompressionManager`` with ``MAX_MESSAGES``/``MIN_MESSAGES`` and a summarizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agno.agent import Agent
from agno.compaction import Compaction
from agno.db.sqlite import SqliteDb
from agno.models.message import Message

from agentstate_reducer.integrations.agno import ReducingCompressionManager
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.agno_script import ScriptedModel, SummaryModel, agent, question, to_openai, turn_of

RUN_MESSAGES = 7  # a question, three calls in two messages, three results, an answer


def _run(bot: Agent, turns: int) -> None:
    for i in range(turns):
        bot.run(question(i), session_id="s")


def _lost(requests: list[list[Message]]) -> int:
    """Turns whose own question was missing from one of their model calls."""
    lost = set()
    for n, request in enumerate(requests):
        if not any(turn_of(m) == n // 3 and not m.from_history for m in request):
            lost.add(n // 3)
    return len(lost)


def _tokens(messages: list[Message], tools: Any = None) -> int:
    """Characters / 4: Agno's default count needs tiktoken's encoding files (a download)."""
    return sum(len(str(m.content or "")) + len(str(m.tool_calls or "")) for m in messages) // 4


def _row(
    policy: str, model: ScriptedModel, *, ours: bool = False, calls: int = 0, note: str = ""
) -> dict[str, Any]:
    requests = [to_openai(r) for r in model.requests]
    return score("agno", policy, requests, ours=ours, summarizer_calls=calls,
                 lost_turns=_lost(model.requests), note=note)  # fmt: skip


def compaction_row(turns: int) -> dict[str, Any]:
    """The ``compaction`` row, run in this process."""
    model, summary = ScriptedModel(), SummaryModel()
    compaction = Compaction(
        model=summary, compact_at_tokens=1_200, uncompacted_runs=3, token_counter=_tokens
    )
    with tempfile.TemporaryDirectory() as folder:  # Agno stores compaction records in SQL only
        db = SqliteDb(db_file=os.path.join(folder, "agno.db"))
        _run(agent(model, compaction=compaction, db=db), turns)
    return _row("compaction", model, calls=summary.calls,
                note="compact_at_tokens=1200, uncompacted_runs=3")  # fmt: skip


#: Agno sizes a fold with tiktoken's o200k_base encoding, a download on first use; without
#: tiktoken it uses its own character estimate, which runs anywhere and the same everywhere
_WITHOUT_TIKTOKEN = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tiktoken":
            raise ImportError(name)
sys.meta_path.insert(0, Block())
from benchmarks.frameworks.agno import compaction_row
print(json.dumps(compaction_row(int(sys.argv[1]))))
"""


def _compaction_apart(turns: int) -> dict[str, Any]:
    """``compaction_row`` in a subprocess without tiktoken."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _WITHOUT_TIKTOKEN, str(turns)], cwd=root,
                         capture_output=True, text=True, check=True)  # fmt: skip
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    rows = []

    model = ScriptedModel()
    _run(agent(model), turns)
    rows.append(_row("none", model))

    runs = MAX_MESSAGES // RUN_MESSAGES
    model = ScriptedModel()
    _run(agent(model, num_history_runs=runs), turns)
    rows.append(_row(f"num_history_runs={runs}", model))

    model = ScriptedModel()
    _run(agent(model, num_history_runs=None, num_history_messages=MAX_MESSAGES), turns)
    cut = "cuts between a call and its results"
    rows.append(_row(f"num_history_messages={MAX_MESSAGES}", model, note=cut))

    calls = MAX_MESSAGES // RUN_MESSAGES * 3
    model = ScriptedModel()
    _run(agent(model, max_tool_calls_from_history=calls), turns)
    rows.append(_row(f"max_tool_calls_from_history={calls}", model))

    rows.append(_compaction_apart(turns))

    model = ScriptedModel()
    summarized = [0]

    def summarize(messages: list[Any]) -> str:
        summarized[0] += 1
        return f"{len(messages)} messages about lookups"

    compression = ReducingCompressionManager(
        max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES, summarizer=summarize
    )
    _run(agent(model, compression_manager=compression), turns)
    rows.append(_row("ours", model, ours=True, calls=summarized[0]))
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
