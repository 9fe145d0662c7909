"""smolagents as it is against ReduceMemory, on the scripted conversation.

The real ``ToolCallingAgent`` loop with the scripted model of the tests
(tests/smolagents_script.py), one ``agent.run(task, reset=False)`` per turn (a call, two
parallel calls, ``final_answer``). Policies: ``none`` (smolagents as it is: every request holds
every step of every task; ``max_steps`` bounds the steps of one run, not the memory across
runs, and the only cut smolagents makes is of an observation over 20,000 characters),
``ours`` (``ReduceMemory`` with ``max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES`` and a
summarizer, the limits of every integration: they count the messages the steps render) and
``ours-request`` (the same in request mode: the memory keeps every step).
Requests are judged through the tests' own view (native tool calls).
``python -m benchmarks.frameworks.smolagents [--quick]``.
"""

from __future__ import annotations

from typing import Any

from agentstate_reducer.integrations._common import Mode
from agentstate_reducer.integrations.smolagents import ReduceMemory
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.smolagents_script import (
    ScriptedModel,
    Summarizer,
    converse,
    openai_dicts,
    question,
    request_agent,
    text_of,
    tool_agent,
)


def _lost_turns(model: ScriptedModel) -> int:
    """Turns with a call whose request lacks the turn's task (three calls per turn)."""
    lost = set()
    for n, request in enumerate(model.requests):
        task = "New task:\n" + question(n // 3)
        if not any(text_of(m) == task for m in request):
            lost.add(n // 3)
    return len(lost)


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    rows: list[dict[str, Any]] = []
    limits = f"max_messages={MAX_MESSAGES}, min_messages={MIN_MESSAGES}, summarizer"
    policies: list[tuple[str, bool, str]] = [
        ("none", False, "smolagents as it is (max_steps bounds one run, not the memory)"),
        ("ours", True, f"ReduceMemory step callback, {limits}"),
        ("ours-request", True, f"ReduceMemory(mode='request'), {limits}"),
    ]
    for policy, ours, note in policies:
        model, summarizer = ScriptedModel(), Summarizer()
        mode: Mode = "request" if policy == "ours-request" else "state"
        reduce = ReduceMemory(
            max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES, summarizer=summarizer, mode=mode
        )
        if policy == "ours-request":
            converse(request_agent(model, reduce), turns)
        else:
            converse(tool_agent(model, step_callbacks=[reduce] if ours else []), turns)
        requests = [openai_dicts(r) for r in model.requests]
        lost = _lost_turns(model)
        rows.append(
            score(
                "smolagents", policy, requests, ours=ours, summarizer_calls=summarizer.calls, lost_turns=lost,
                note=note,
            )
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
