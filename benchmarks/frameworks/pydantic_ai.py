"""Pydantic AI (v2): no handling, the keep-last-N history processor of its docs, and ``ReduceHistory``.

Pydantic AI ships no model-agnostic history reduction (only provider-native compaction); its docs
("Processing Message History", "Keep Only Recent Messages") show a user-written processor,
reproduced here as written there with N = ``MAX_MESSAGES``::

    async def keep_recent_messages(messages):
        return messages[-N:] if len(messages) > N else messages

    Agent(model, capabilities=[ProcessHistory(keep_recent_messages)])

Each turn is one ``agent.run_sync(question, message_history=previous.all_messages())`` through
the real agent loop and a scripted ``FunctionModel`` (the conversation and the OpenAI Chat
conversion of ``tests/test_integration_pydantic_ai.py``). Pydantic AI repairs what it is sent
after the processors (orphan results dropped, results added for dangling calls, consecutive
requests merged), so the figures are of what the model received.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage

from agentstate_reducer.integrations.pydantic_ai import ReduceHistory
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.test_integration_pydantic_ai import Script, Summarizer, make_agent

FRAMEWORK = "pydantic-ai"


def keep_recent_messages(n: int) -> Any:
    """The docs' processor, keeping the last ``n`` messages."""

    async def keep(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-n:] if len(messages) > n else messages

    return keep


def _lost_turns(script: Script, questions: list[str]) -> int:
    """Turns with a model call whose request lacks the turn's question (a user message)."""
    lost = 0
    calls = iter(script.requests)
    per_turn = 3  # the scripted turn: lookup, the two parallel calls, the answer
    for q in questions:
        requests = [next(calls) for _ in range(per_turn)]
        if any({"role": "user", "content": q} not in r for r in requests):
            lost += 1
    return lost


def _run(
    policy: str, capability: Any, turns: int, summarizer: Summarizer | None, note: str
) -> dict[str, Any]:
    script = Script()
    agent = make_agent(script.sync_model(), capability)
    history: list[ModelMessage] = []
    questions = [f"q{i} please tell me" for i in range(turns)]
    for q in questions:
        history = agent.run_sync(q, message_history=history).all_messages()
    task_kept = all({"role": "user", "content": questions[0]} in r for r in script.requests)
    system_kept = all(r and r[0].get("role") == "system" for r in script.requests)
    return score(
        FRAMEWORK,
        policy,
        script.requests,
        ours=policy == "ours",
        summarizer_calls=summarizer.calls if summarizer is not None else 0,
        lost_turns=_lost_turns(script, questions),
        note=f"{note}; system prompt {'kept' if system_kept else 'lost'}, "
        f"task {'kept' if task_kept else 'lost'}; stored history {len(history)} messages",
    )


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    summarizer = Summarizer()
    return [
        _run("none", None, turns, None, "no processor"),
        _run(
            "keep-last-n",
            ProcessHistory(keep_recent_messages(MAX_MESSAGES)),
            turns,
            None,
            f"the docs' keep_recent_messages, N={MAX_MESSAGES}",
        ),
        _run(
            "ours",
            ReduceHistory(min_messages=MIN_MESSAGES, max_messages=MAX_MESSAGES, summarizer=summarizer),
            turns,
            summarizer,
            f"ReduceHistory(min_messages={MIN_MESSAGES}, max_messages={MAX_MESSAGES}, summarizer=...)",
        ),
    ]


if __name__ == "__main__":
    raise SystemExit(main(measure))
