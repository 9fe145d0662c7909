"""``ReducingChatCompletionContext`` over generated histories, through AutoGen's model context API.

An AutoGen agent adds each message to its model context (``add_message``) and reads the request
from it before each model call (``get_messages``). Each model call of a generated history
(``tests.histories.calls``) adds the history's new messages, in AutoGen's own types
(``tests.natives.to_autogen``: the results of one step in one ``FunctionExecutionResultMessage``),
then reads the request. State mode: the stored history is the context's (``save_state``).
Checked: every request passes ``tests.provider_rules``, every message is kept or reached the
summarizer and ``on_prune`` exactly once, and the request holds the caller's own objects, never
mutated.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from autogen_core.model_context import ChatCompletionContextState

from agentstate_reducer.integrations.autogen import ReducingChatCompletionContext
from tests import natives
from tests.histories import History, histories

HISTORIES = histories(32, seed=400)


async def converse(history: History, *, preserve_first: bool) -> tuple[natives.Count, list[str], list[Any]]:
    count = natives.Count.of(history, natives.autogen_ids)
    context = ReducingChatCompletionContext(
        max_messages=8,
        min_messages=4,
        summarizer=count.asummarizer,
        on_prune=[count.hook],
        preserve_first=preserve_first,
    )
    problems: list[str] = []
    given: list[Any] = []
    for n, (spec, new) in enumerate(natives.model_calls(history, natives.to_autogen)):
        given += new
        snapshot = copy.deepcopy(given)
        for message in new:
            await context.add_message(message)
        sent = await context.get_messages()
        if natives.is_model_call(spec):
            problems += [
                f"call {n}: {e}" for e in natives.request_problems(natives.autogen_chat(sent), spec, history)
            ]
        problems += [
            f"call {n}: not the caller's object {m!r}"
            for m in natives.foreign(sent, given, natives.autogen_ids)
        ]
        if given != snapshot:
            problems.append(f"call {n}: the caller's messages were mutated")
    stored = ChatCompletionContextState.model_validate(await context.save_state()).messages
    return count, problems, list(stored)


@pytest.mark.parametrize("preserve_first", [False, True], ids=["plain", "preserve_first"])
@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"seed{h.seed}")
def test_generated_history_sendable_and_each_message_once(history: History, preserve_first: bool) -> None:
    count, problems, stored = asyncio.run(converse(history, preserve_first=preserve_first))
    assert problems == []
    assert count.errors(stored) == []
