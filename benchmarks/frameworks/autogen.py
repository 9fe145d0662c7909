"""AutoGen's model contexts against ReducingChatCompletionContext, on the scripted conversation.

The real ``AssistantAgent`` loop (``max_tool_iterations=3``: a call, two parallel calls, the
answer) with the scripted client of the tests (tests/autogen_script.py), one ``agent.run`` per
turn. Policies: ``unbounded`` (``UnboundedChatCompletionContext``, AutoGen's default),
``buffered-<n>`` (``BufferedChatCompletionContext(buffer_size=n)`` for n = ``MIN_MESSAGES`` and
``MAX_MESSAGES``), ``token-limited`` (``TokenLimitedChatCompletionContext`` with the scripted
client counting characters / 4 and a limit of what ``MAX_MESSAGES`` messages of this conversation
cost), ``head-and-tail`` (``HeadAndTailChatCompletionContext``, a head of 3 and a tail making
``MAX_MESSAGES`` with the placeholder) and ``ours`` (``max_messages=MAX_MESSAGES,
min_messages=MIN_MESSAGES`` and a summarizer).
``python -m benchmarks.frameworks.autogen [--quick]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import LLMMessage, SystemMessage, UserMessage

from agentstate_reducer.integrations.autogen import ReducingChatCompletionContext
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.autogen_script import (
    SYSTEM_PROMPT,
    ScriptedClient,
    add,
    lookup,
    openai_chat,
    question,
    turn_responses,
)

HEAD = 3  # the first task, its call and its result


class _Summarizer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Any]) -> str:
        self.calls += 1
        return f"summary {self.calls}: {len(messages)} earlier messages, items looked up and added"


async def _run(context: ChatCompletionContext, client: ScriptedClient, turns: int) -> None:
    agent = AssistantAgent(
        "helper",
        client,
        tools=[lookup, add],
        system_message=SYSTEM_PROMPT,
        model_context=context,
        max_tool_iterations=3,
    )
    for i in range(turns):
        await agent.run(task=question(i))


def _lost_turns(requests: list[list[LLMMessage]]) -> int:
    """Turns with a call whose request lacks the turn's question (three calls per turn)."""
    lost = set()
    for n, request in enumerate(requests):
        i = n // 3
        if not any(isinstance(m, UserMessage) and m.content == question(i) for m in request):
            lost.add(i)
    return len(lost)


def _conversation_limit(turns: int) -> int:
    """What ``MAX_MESSAGES`` conversation messages of this conversation cost, by the scripted
    client's count: the newest ``MAX_MESSAGES`` of the unbounded history."""
    client = _client(turns)
    context = UnboundedChatCompletionContext()
    asyncio.run(_run(context, client, turns))
    history = asyncio.run(context.get_messages())
    return client.count_tokens(history[-MAX_MESSAGES:])


def _buffered(size: int) -> Callable[[ScriptedClient], ChatCompletionContext]:
    return lambda client: BufferedChatCompletionContext(buffer_size=size)


def _client(turns: int) -> ScriptedClient:
    return ScriptedClient([r for i in range(turns) for r in turn_responses(i)])


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    limit = _conversation_limit(turns)
    summarizer = _Summarizer()
    policies: list[tuple[str, bool, Callable[[ScriptedClient], ChatCompletionContext], str]] = [
        ("unbounded", False, lambda c: UnboundedChatCompletionContext(), "AutoGen's default"),
        *[(f"buffered-{n}", False, _buffered(n), f"buffer_size={n}") for n in (MIN_MESSAGES, MAX_MESSAGES)],
        (
            "token-limited",
            False,
            lambda c: TokenLimitedChatCompletionContext(c, token_limit=limit),
            f"token_limit={limit} (chars/4 of {MAX_MESSAGES} messages' JSON)",
        ),
        (
            "head-and-tail",
            False,
            lambda c: HeadAndTailChatCompletionContext(head_size=HEAD, tail_size=MAX_MESSAGES - HEAD - 1),
            f"head_size={HEAD}, tail_size={MAX_MESSAGES - HEAD - 1}",
        ),
        (
            "ours",
            True,
            lambda c: ReducingChatCompletionContext(
                min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES, summarizer=summarizer
            ),
            f"max_messages={MAX_MESSAGES}, min_messages={MIN_MESSAGES}, summarizer",
        ),
    ]
    rows = []
    for policy, ours, make, note in policies:
        client = _client(turns)
        asyncio.run(_run(make(client), client, turns))
        assert all(isinstance(r[0], SystemMessage) for r in client.requests)
        rows.append(
            score(
                "autogen",
                policy,
                [openai_chat(r) for r in client.requests],
                ours=ours,
                summarizer_calls=summarizer.calls if ours else 0,
                lost_turns=_lost_turns(client.requests),
                note=note,
            )
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
