"""``ReducerCompactionStrategy`` over generated histories, as Agent Framework calls it.

With ``compaction_strategy=`` the framework hands the strategy copies of the session's stored
history at every model call and sends the messages the strategy leaves included. Each model call
of a generated history (``tests.histories.calls``) hands it copies of the stored ``Message``
objects (``tests.natives.to_agent_framework``: the results of one step in one tool message).
Request placement: the session keeps every message, the last request is what the running summary
does not cover. Checked: every request passes ``tests.provider_rules``, every message is kept or
reached the summarizer and ``on_prune`` exactly once, and the request holds the list's own
objects (the strategy marks them excluded or inserts the summary; it changes no content).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from agent_framework import EXCLUDED_KEY

from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from tests import natives
from tests.histories import History, histories

HISTORIES = histories(24, seed=700)


def contents(messages: list[Any]) -> list[Any]:
    return [(m.role, [c.to_dict() for c in m.contents]) for m in messages]


async def converse(history: History) -> tuple[natives.Count, list[str], list[Any]]:
    count = natives.Count.of(history, natives.agent_framework_ids)
    strategy = ReducerCompactionStrategy(
        max_messages=8, min_messages=4, summarizer=count.summarizer, on_prune=[count.hook]
    )
    stored = natives.to_agent_framework(history.spec)
    problems: list[str] = []
    included: list[Any] = []
    for n, (spec, _) in enumerate(natives.model_calls(history, natives.to_agent_framework)):
        messages = [copy.deepcopy(m) for m in stored[: len(natives.to_agent_framework(spec))]]
        given = list(messages)
        before = contents(given)
        await strategy(messages)
        included = [m for m in messages if not m.additional_properties.get(EXCLUDED_KEY)]
        if natives.is_model_call(spec):
            payload = natives.agent_framework_chat(included)
            problems += [f"call {n}: {e}" for e in natives.request_problems(payload, spec, history)]
        problems += [
            f"call {n}: not the list's own {m!r}"
            for m in natives.foreign(messages, given, natives.agent_framework_ids)
        ]
        if contents(given) != before:
            problems.append(f"call {n}: the contents of the list's messages changed")
    return count, problems, included


@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History) -> None:
    count, problems, last = asyncio.run(converse(history))
    assert problems == []
    assert count.request_errors(last) == []
