"""Token budgets in the provider's tokens through LlamaIndex's real ``FunctionAgent`` loop.

The scripted LLM reports, in ``ChatResponse.raw["usage"]`` and ``additional_kwargs`` as
LlamaIndex's OpenAI LLM does, the input tokens of each request counted by a tokenizer that is
not the reducer's (``tests.usage_models``: bytes/3 + 4 per message, plus the tools' schemas).
The memory's messages carry no usage; ``ReducingMemory`` learns it from the instrumentation's
``LLMChatEndEvent``, with no setup. After the first reported usage no request exceeds
``max_tokens`` in the provider's count, the largest uses >= 0.9x of it, each message is kept or
summarized once, and an unusable figure changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.llama_index import ReducingMemory
from agentstate_reducer.summary import SUMMARY_PREFIX
from agentstate_reducer.tokens import heuristic_counter
from tests.llama_index_script import SYSTEM_PROMPT, TOOLS, openai_chat, question, script
from tests.usage_llama_index import UsageLLM
from tests.usage_models import Figure, Reporter

pytestmark = pytest.mark.slow  # each test runs whole conversations through the agent loop

MAX, TARGET = 3000, 2200
TURNS = 24
TOOLS_OVERHEAD = 120
Counter = Literal["tiktoken", "heuristic"]


class Summarizer:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.calls = 0

    def __call__(self, messages: list[ChatMessage]) -> str:
        self.calls += 1
        kept = [m for m in messages if not (m.content or "").startswith(SUMMARY_PREFIX)]
        self.seen += [m.model_dump_json() for m in kept]
        return f"summary #{self.calls} of {len(messages)} messages"


def run(
    figure: Figure,
    *,
    counter: Counter = "tiktoken",
    calibrate: bool | None = None,
    conversations: int = 1,
    streaming: bool = True,
) -> tuple[list[Reporter], list[UsageLLM]]:
    config = ReducerConfig(max_tokens=MAX, target_tokens=TARGET, calibrate=calibrate,
                           token_counter=heuristic_counter() if counter == "heuristic" else None)  # fmt: skip
    reducer = MessageReducer(config=config)  # one reducer serves every memory
    reporters = [Reporter(figure=figure, overhead=TOOLS_OVERHEAD) for _ in range(conversations)]
    llms = [UsageLLM(script(TURNS, tag=f"c{n}"), reporter=r) for n, r in enumerate(reporters)]
    summarizers = [Summarizer() for _ in range(conversations)]

    async def converse(n: int) -> None:
        memory = ReducingMemory.from_defaults(reducer, session_id=f"s{n}", summarizer=summarizers[n])
        agent = FunctionAgent(tools=TOOLS, llm=llms[n], system_prompt=SYSTEM_PROMPT, streaming=streaming)
        for i in range(TURNS):
            response = await agent.run(question(i), memory=memory)
            assert str(response) == f"answer {i}: item {i} added"

    async def all_of_them() -> None:
        await asyncio.gather(*(converse(n) for n in range(conversations)))

    asyncio.run(all_of_them())
    for reporter, summarizer in zip(reporters, summarizers, strict=True):
        assert len(reporter.counts) == 3 * TURNS
        assert summarizer.calls and len(summarizer.seen) == len(set(summarizer.seen))  # each once
    return reporters, llms


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
@pytest.mark.parametrize("streaming", [True, False])
def test_every_request_after_the_first_usage_fits_the_providers_count(
    counter: Counter, streaming: bool
) -> None:
    [reporter], _ = run("true", counter=counter, streaming=streaming)
    assert reporter.over(MAX) == []
    assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("counter", ["tiktoken", "heuristic"])
def test_without_calibration_the_budget_is_overrun_or_underused(counter: Counter) -> None:
    [reporter], _ = run("true", counter=counter, calibrate=False)
    assert reporter.over(MAX) or max(reporter.after_first()) < 0.9 * MAX


def test_memories_sharing_one_reducer_are_calibrated_apart() -> None:
    reporters, _ = run("true", conversations=3)
    for reporter in reporters:
        assert reporter.over(MAX) == []
        assert max(reporter.after_first()) >= 0.9 * MAX


@pytest.mark.parametrize("figure", ["missing", "zero", "negative", "absurd"])
def test_an_unusable_figure_changes_nothing(figure: Figure) -> None:
    [reporter], [llm] = run(figure)
    [plain], [plain_llm] = run("true", calibrate=False)
    assert [openai_chat(r) for r in llm.requests] == [openai_chat(r) for r in plain_llm.requests]
    assert reporter.counts == plain.counts
