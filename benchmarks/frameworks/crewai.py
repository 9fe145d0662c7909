"""CrewAI: no handling, its own ``respect_context_window``, and ``ReducerHook``, on one task.

CrewAI clears an executor's messages at every task and kickoff, so the history that grows from
model call to model call is one task's loop: the scripted model (``tests/crewai/scripted.py``, a
``crewai.BaseLLM``) runs ``TURNS`` rounds, each a ``lookup`` call, then ``lookup`` and ``add`` in
parallel, and answers in text after the last. Rows:

* ``none``: ``respect_context_window=False``, no hook: every request holds the whole history.
* ``respect_context_window``: CrewAI's default. It summarizes the whole history (the task prompt
  included) into one user message when a request passes the model's usable window
  (``BaseLLM.get_context_window_size``); the scripted model reports ``WINDOW`` tokens, which the
  scripted conversation passes, and counts the summarization requests it gets.
* ``ours``: ``ReducerHook(MessageReducer(MIN_MESSAGES, MAX_MESSAGES), summarizer=...)`` with
  ``respect_context_window=True`` and the same window: CrewAI's summary never fires.

``lost_turns``: rounds with a request that lacks the task prompt (the first question).
Run in the CrewAI environment: ``.venv-crewai/bin/python -m benchmarks.frameworks.crewai --quick``.
"""

from __future__ import annotations

from typing import Any

from agentstate_reducer import MessageReducer
from agentstate_reducer.integrations.crewai import ReducerHook
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.crewai.scripted import TASK, ScriptedLLM, as_openai, crew_for

#: the usable window the scripted model reports, in its own estimate (characters of JSON / 4):
#: the unbounded run passes it in its ninth round, ours (40 messages at most) stays below it
WINDOW = 2400


def _lost_turns(llm: ScriptedLLM) -> int:
    rounds = {i // 2 for i, r in enumerate(llm.received) if not any(TASK in str(m.get("content")) for m in r)}
    return len(rounds)


def _run(turns: int, *, respect: bool, hook: ReducerHook | None) -> ScriptedLLM:
    llm = ScriptedLLM(model="scripted", turns=turns, window=WINDOW)
    crew, _ = crew_for(llm, respect_context_window=respect)
    if hook is None:
        crew.kickoff()
        return llm
    hook.register()
    try:
        crew.kickoff()
    finally:
        hook.unregister()
    return llm


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    rows = []
    none = _run(turns, respect=False, hook=None)
    rows.append(score("crewai", "none", [as_openai(r) for r in none.received], ours=False))

    builtin = _run(turns, respect=True, hook=None)
    rows.append(
        score(
            "crewai",
            "respect_context_window",
            [as_openai(r) for r in builtin.received],
            ours=False,
            summarizer_calls=builtin.summarize_requests,
            lost_turns=_lost_turns(builtin),
            note=f"window {WINDOW} tokens; whole history into one summary, task prompt included",
        )
    )

    calls = 0

    def summarize(messages: list[Any]) -> str:
        nonlocal calls
        calls += 1
        return f"summary {calls}: {len(messages)} messages"

    hook = ReducerHook(MessageReducer(MIN_MESSAGES, MAX_MESSAGES), summarizer=summarize)
    ours = _run(turns, respect=True, hook=hook)
    rows.append(
        score(
            "crewai",
            "ours",
            [as_openai(r) for r in ours.received],
            ours=True,
            summarizer_calls=calls,
            lost_turns=_lost_turns(ours),
            note=f"respect_context_window=True too; CrewAI's summary fired {ours.summarize_requests}x",
        )
    )
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
