"""``ReducingCompressionManager`` over generated histories, through Agno's compression hook.

Agno rebuilds the list it sends at every run from the stored session (copies of the stored
messages, tagged ``from_history``) and hands it to its compression manager before each model
call (``compress(messages)``, edited in place). Each model call of a generated history
(``tests.histories.calls``) builds that list anew, as Agno does: the system message and copies
of the session's stored ``Message`` objects (``tests.natives.to_agno``). Request mode: the
session keeps every message, the last request is what the running summary does not cover.
Checked: every request passes ``tests.provider_rules``, every message is kept or reached the
summarizer and ``on_prune`` exactly once, and the request holds the list's own objects, never
mutated.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentstate_reducer.integrations.agno import ReducingCompressionManager
from tests import natives
from tests.histories import History, calls, histories

HISTORIES = histories(24, seed=600)


def converse(history: History) -> tuple[natives.Count, list[str], list[Any]]:
    count = natives.Count.of(history, natives.agno_ids)
    manager = ReducingCompressionManager(
        max_messages=8, min_messages=4, summarizer=count.summarizer, on_prune=[count.hook]
    )
    problems: list[str] = []
    last: list[Any] = []
    stored = natives.to_agno([("system", "sys"), *history.spec])  # the session's messages
    for n, spec in enumerate(calls(history)):
        messages = [copy.deepcopy(m) for m in stored[: len(spec) + 1]]  # Agno's copies of them
        given = list(messages)
        snapshot = [natives.dump(m) for m in given]
        manager.compress(messages)
        if natives.is_model_call(spec):
            problems += [
                f"call {n}: {e}" for e in natives.request_problems(natives.agno_chat(messages), spec, history)
            ]
        problems += [
            f"call {n}: not the list's own {m!r}" for m in natives.foreign(messages, given, natives.agno_ids)
        ]
        if [natives.dump(m) for m in given] != snapshot:
            problems.append(f"call {n}: the list's messages were mutated")
        last = [m for m in messages if m.role != "system"]
    return count, problems, last


@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History) -> None:
    count, problems, last = converse(history)
    assert problems == []
    assert count.request_errors(last) == []
