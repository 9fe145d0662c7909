"""``ReducingMemory`` over generated histories, through LlamaIndex's ``Memory`` API.

A LlamaIndex agent puts each message into its memory (``aput_messages``) and reads the request
from it before each model call (``aget``). Each model call of a generated history
(``tests.histories.calls``) puts the history's new ``ChatMessage`` objects, then reads the
request. State mode: the stored history is the active queue (``aget_all``); request mode: the
memory keeps every message and the last request is what the running summary does not cover.
Checked: every request passes ``tests.provider_rules``, every message is kept or reached the
summarizer and ``on_prune`` exactly once, and the caller's messages are never mutated (the
memory's SQL store hands back new objects at every read, so identity is not LlamaIndex's to keep).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from llama_index.core.memory.memory import MessageStatus

from agentstate_reducer.integrations._common import Mode
from agentstate_reducer.integrations.llama_index import ReducingMemory
from tests import natives
from tests.histories import History, histories

HISTORIES = histories(24, seed=500)


async def converse(history: History, mode: Mode) -> tuple[natives.Count, list[str], list[Any]]:
    count = natives.Count.of(history, natives.llama_index_ids)
    memory = ReducingMemory.from_defaults(
        session_id="s1",
        mode=mode,
        max_messages=8,
        min_messages=4,
        summarizer=count.asummarizer,
        on_prune=[count.hook],
    )
    problems: list[str] = []
    given: list[Any] = []
    got: list[Any] = []
    for n, (spec, new) in enumerate(natives.model_calls(history, natives.to_llama_index)):
        given += new
        snapshot = copy.deepcopy(given)
        await memory.aput_messages(new)
        got = await memory.aget()
        if natives.is_model_call(spec):
            problems += [
                f"call {n}: {e}"
                for e in natives.request_problems(natives.llama_index_chat(got), spec, history)
            ]
        if given != snapshot:
            problems.append(f"call {n}: the caller's messages were mutated")
    kept = await memory.aget_all(status=MessageStatus.ACTIVE) if mode == "state" else got
    return count, problems, list(kept)


@pytest.mark.parametrize("mode", ["state", "request"])
@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History, mode: Mode) -> None:
    count, problems, kept = asyncio.run(converse(history, mode))
    assert problems == []
    assert (count.errors(kept) if mode == "state" else count.request_errors(kept)) == []
