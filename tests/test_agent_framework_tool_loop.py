"""Agent Framework ``compaction_strategy=``: a tool loop longer than the limit is summarized once.

In request placement the framework hands the strategy copies of the whole stored history at
every model call. When one turn's tool loop is longer than ``max_messages`` the reduction keeps
the turn's question and prunes the loop's older steps, so what the running summary covers has
the question between covered messages; the later calls must still find what it covers, or they
plan the conversation as new and summarize and archive it again. Through the real agent loop,
with a scripted client whose tool loop length is set per turn.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from agent_framework import Agent, BaseChatClient, ChatResponse, Content, FunctionInvocationLayer, Message

from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.af_script import Request, lookup, to_openai
from tests.provider_rules import request_errors


class LoopClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Calls ``lookup`` ``loops.get(turn, 1)`` times in a row, then answers ``a<turn>``."""

    def __init__(self, loops: dict[int, int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loops = loops
        self.requests: list[Request] = []
        self.made: Counter[int] = Counter()  # calls made per turn

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse[Any]:
        msgs = list(messages)
        self.requests.append(Request(msgs, options.get("instructions")))
        asked = [m.text for m in msgs if m.role == "user" and re.match(r"q\d+ please", m.text or "")]
        turn = int(re.match(r"q(\d+)", asked[-1]).group(1))  # type: ignore[union-attr]
        done = self.made[turn]  # not read from the request: the reduction may prune the loop
        if done < self.loops.get(turn, 1):
            self.made[turn] += 1
            call = Content.from_function_call(
                call_id=f"t{turn}.{done}", name="lookup", arguments={"q": f"t{turn}.{done}"}
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        return ChatResponse(messages=[Message(role="assistant", contents=[Content.from_text(f"a{turn}")])])


def label(m: Message) -> str:
    """Which message of the scripted conversation ``m`` is (each one differs)."""
    for c in m.contents:
        if c.type == "function_call":
            return f"call {c.call_id}"
        if c.type == "function_result":
            return f"result {c.call_id}"
    return f"{m.role} {m.text}"


@pytest.mark.parametrize("loops", [{3: 8}, {2: 6, 5: 9}, {1: 12}], ids=["8", "6-9", "12"])
def test_a_tool_loop_longer_than_the_limit_is_summarized_and_archived_once(loops: dict[int, int]) -> None:
    summarized: Counter[str] = Counter()
    archived: Counter[str] = Counter()

    def summarize(messages: list[Message]) -> str:
        summarized.update(label(m) for m in messages if not (m.text or "").startswith(SUMMARY_PREFIX))
        return f"{len(messages)} messages"

    def archive(messages: list[Message], namespace: Any) -> None:
        archived.update(label(m) for m in messages if not (m.text or "").startswith(SUMMARY_PREFIX))

    client = LoopClient(loops, function_invocation_configuration={"max_iterations": 20})
    strategy = ReducerCompactionStrategy(
        max_messages=10, min_messages=5, summarizer=summarize, on_prune=[archive]
    )
    agent = Agent(client=client, instructions="be brief", tools=[lookup], compaction_strategy=strategy)
    session = agent.create_session()

    async def converse() -> None:
        for i in range(10):
            await agent.run(f"q{i} please", session=session)

    asyncio.run(converse())
    assert [e for r in client.requests for e in request_errors(to_openai(r))] == []
    assert summarized and max(summarized.values()) == 1, summarized.most_common(3)
    assert archived == summarized
