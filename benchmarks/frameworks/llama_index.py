"""LlamaIndex's memories against ReducingMemory, on the scripted conversation.

The real ``FunctionAgent`` loop with the scripted function-calling LLM of the tests
(tests/llama_index_script.py), one ``agent.run(question, memory=memory)`` per turn. Policies:
``none`` (``Memory`` with a token limit it never reaches), ``default-buffer``
(``ChatMemoryBuffer.from_defaults(llm=llm)``, the memory the agent makes itself when given none:
75% of the LLM's context window, 3,900 tokens for this LLM), ``token-limit``
(``Memory.from_defaults(token_limit=...)``: its flush, with the limit at which its chat history
share, 70%, holds what ``MAX_MESSAGES`` messages of this conversation cost by its own tokenizer)
and ``ours`` (``ReducingMemory`` with ``max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES`` and
a summarizer). ``python -m benchmarks.frameworks.llama_index [--quick]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer, Memory

from agentstate_reducer.integrations.llama_index import ReducingMemory
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.llama_index_script import SYSTEM_PROMPT, TOOLS, ScriptedLLM, openai_chat, question, script

#: a token limit the conversation never reaches
UNREACHED = 10**9
#: Memory's default share of its token limit for the chat history
HISTORY_RATIO = 0.7


class _Summarizer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Any]) -> str:
        self.calls += 1
        return f"summary {self.calls}: {len(messages)} earlier messages, items looked up and added"


async def _run(memory: BaseMemory, llm: ScriptedLLM, turns: int) -> None:
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM_PROMPT)
    for i in range(turns):
        await agent.run(question(i), memory=memory)


def _lost_turns(requests: list[list[ChatMessage]]) -> int:
    """Turns with a call whose request lacks the turn's question (three calls per turn)."""
    return len({n // 3 for n, r in enumerate(requests) if not any(m.content == question(n // 3) for m in r)})


def _token_limit(turns: int) -> int:
    """Memory's token limit whose chat history share holds the newest ``MAX_MESSAGES`` messages
    of this conversation, counted by Memory's own estimate."""
    memory = Memory.from_defaults(token_limit=UNREACHED)
    asyncio.run(_run(memory, ScriptedLLM(script(turns)), turns))
    history = memory.get_all()
    tokens = sum(memory._estimate_token_count(m) for m in history[-MAX_MESSAGES:])
    return int(tokens / HISTORY_RATIO)


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    limit = _token_limit(turns)
    summarizer = _Summarizer()
    policies: list[tuple[str, bool, Callable[[ScriptedLLM], BaseMemory], str]] = [
        ("none", False, lambda llm: Memory.from_defaults(token_limit=UNREACHED), "Memory, no limit reached"),
        (
            "default-buffer",
            False,
            lambda llm: ChatMemoryBuffer.from_defaults(llm=llm),
            "ChatMemoryBuffer.from_defaults(llm=llm), the agent's own default",
        ),
        (
            "token-limit",
            False,
            lambda llm: Memory.from_defaults(token_limit=limit),
            f"Memory.from_defaults(token_limit={limit}) ({MAX_MESSAGES} messages in its 70%)",
        ),
        (
            "ours",
            True,
            lambda llm: ReducingMemory.from_defaults(
                min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES, summarizer=summarizer
            ),
            f"max_messages={MAX_MESSAGES}, min_messages={MIN_MESSAGES}, summarizer",
        ),
    ]
    rows = []
    for policy, ours, make, note in policies:
        llm = ScriptedLLM(script(turns))
        asyncio.run(_run(make(llm), llm, turns))
        assert all(r[0].role.value == "system" for r in llm.requests)
        rows.append(
            score(
                "llama-index",
                policy,
                [openai_chat(r) for r in llm.requests],
                ours=ours,
                summarizer_calls=summarizer.calls if ours else 0,
                lost_turns=_lost_turns(llm.requests),
                note=note,
            )
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
