"""The Agent Framework's compaction strategies against ReducerCompactionStrategy.

The real ``Agent`` loop with the scripted client of the tests (tests/af_script.py: a call, two
parallel calls, the answer), one ``agent.run`` per turn in one session, each strategy given as
the agent's ``compaction_strategy=`` (it bounds every model request). Policies: ``none`` (no
compaction, the framework's default), ``sliding-window`` (``SlidingWindowStrategy`` keeping the
groups of ``MAX_MESSAGES`` messages), ``token-budget`` (``TokenBudgetComposedStrategy`` over
``ToolResultCompactionStrategy`` with the framework's character tokenizer and a budget of what the
newest ``MAX_MESSAGES`` messages of this conversation cost), ``summarization``
(``SummarizationStrategy`` with the scripted client as its summarizer, ``target_count=
MIN_MESSAGES``, triggering above ``MAX_MESSAGES``), ``ours`` (``max_messages=MAX_MESSAGES,
min_messages=MIN_MESSAGES`` and a summarizer) and ``ours-stored`` (the same strategy as a
``CompactionProvider`` ``after_strategy``, bounding the stored history).
``python -m benchmarks.frameworks.agent_framework [--quick]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_framework import (
    CharacterEstimatorTokenizer,
    CompactionProvider,
    CompactionStrategy,
    InMemoryHistoryProvider,
    SlidingWindowStrategy,
    SummarizationStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    annotate_message_groups,
    included_token_count,
)

from agentstate_reducer.integrations.agent_framework import ReducerCompactionStrategy
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.af_script import INSTRUCTIONS, Request, ScriptClient, Summarizer, make_agent, question, to_openai

#: groups per turn: the question, two call groups (calls with their results), the answer
GROUPS_PER_MESSAGE = 4 / 6


async def _run(client: ScriptClient, turns: int, **agent_kwargs: Any) -> None:
    agent = make_agent(client, **agent_kwargs)
    session = agent.create_session()
    for i in range(turns):
        await agent.run(question(i), session=session)


def _lost_turns(requests: list[Request]) -> int:
    """Turns with a call whose request lacks the turn's question (three calls per turn)."""
    lost = set()
    for n, request in enumerate(requests):
        if not any(m.role == "user" and m.text == question(n // 3) for m in request.messages):
            lost.add(n // 3)
    return len(lost)


def _budget(turns: int) -> int:
    """What the newest ``MAX_MESSAGES`` messages of this conversation cost, by the framework's
    character tokenizer."""
    client = ScriptClient()
    asyncio.run(_run(client, turns))
    newest = list(client.requests[-1].messages[-MAX_MESSAGES:])
    annotate_message_groups(newest, tokenizer=CharacterEstimatorTokenizer())
    return included_token_count(newest)


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    budget = _budget(turns)
    summarizer, summary_client = Summarizer(), ScriptClient()
    groups = round(MAX_MESSAGES * GROUPS_PER_MESSAGE)
    strategies: list[tuple[str, bool, Callable[[], CompactionStrategy | None], str]] = [
        ("none", False, lambda: None, "no compaction_strategy (the default)"),
        (
            "sliding-window",
            False,
            lambda: SlidingWindowStrategy(keep_last_groups=groups),
            f"keep_last_groups={groups}",
        ),
        (
            "token-budget",
            False,
            lambda: TokenBudgetComposedStrategy(
                token_budget=budget,
                tokenizer=CharacterEstimatorTokenizer(),
                strategies=[ToolResultCompactionStrategy(keep_last_tool_call_groups=4)],
            ),
            f"token_budget={budget} (chars/4 of {MAX_MESSAGES} messages), tool results first",
        ),
        (
            "summarization",
            False,
            lambda: SummarizationStrategy(
                client=summary_client, target_count=MIN_MESSAGES, threshold=MAX_MESSAGES - MIN_MESSAGES
            ),
            f"target_count={MIN_MESSAGES}, threshold={MAX_MESSAGES - MIN_MESSAGES}",
        ),
        (
            "ours",
            True,
            lambda: ReducerCompactionStrategy(
                max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES, summarizer=summarizer
            ),
            f"max_messages={MAX_MESSAGES}, min_messages={MIN_MESSAGES}, summarizer",
        ),
    ]
    rows = []
    for policy, ours, make, note in strategies:
        client, before = ScriptClient(), summarizer.calls
        strategy = make()
        asyncio.run(_run(client, turns, **({"compaction_strategy": strategy} if strategy else {})))
        rows.append(_row(policy, ours, client, summarizer.calls - before if ours else 0, note))
    rows[3]["summarizer_calls"] = summary_client.summaries

    client, before = ScriptClient(), summarizer.calls
    stored = ReducerCompactionStrategy(
        max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES, summarizer=summarizer
    )
    history = InMemoryHistoryProvider(skip_excluded=True)
    provider = CompactionProvider(after_strategy=stored, history_source_id=history.source_id)
    asyncio.run(_run(client, turns, context_providers=[provider, history]))
    note = "after_strategy, InMemoryHistoryProvider(skip_excluded=True): the stored history"
    rows.append(_row("ours-stored", True, client, summarizer.calls - before, note))
    return rows


def _row(policy: str, ours: bool, client: ScriptClient, calls: int, note: str) -> dict[str, Any]:
    assert all(r.instructions == INSTRUCTIONS for r in client.requests)
    return score(
        "agent-framework",
        policy,
        [to_openai(r) for r in client.requests],
        ours=ours,
        summarizer_calls=calls,
        lost_turns=_lost_turns(client.requests),
        note=note,
    )


if __name__ == "__main__":
    raise SystemExit(main(measure))
