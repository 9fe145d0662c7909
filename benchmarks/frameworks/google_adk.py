"""Google ADK: no handling, ADK's own events compaction, and ``ReducerPlugin``, on the scripted
conversation (``tests.adk_script``), each request scored as OpenAI Chat dicts.

* ``none``: ADK sends the whole session history at every call.
* ``events-compaction``: ``App(events_compaction_config=EventsCompactionConfig(
  compaction_interval=3, overlap_size=1, summarizer=LlmEventSummarizer(<scripted BaseLlm>)))``;
  its summarizer calls are the scripted summarizer model's calls.
* ``ours``: ``ReducerPlugin`` with ``MAX_MESSAGES``/``MIN_MESSAGES`` and a summarizer.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.runners import InMemoryRunner
from google.genai import types

from agentstate_reducer.integrations.google_adk import ReducerPlugin
from benchmarks.frameworks._score import MAX_MESSAGES, MIN_MESSAGES, QUICK_TURNS, TURNS, main, score
from tests.adk_script import ScriptedLlm, SummaryLlm, agent, question, to_openai, user

APP = "bench"


async def _run(app: App, turns: int) -> None:
    runner = InMemoryRunner(app=app)
    await runner.session_service.create_session(app_name=APP, user_id="u", session_id="s")
    for i in range(turns):
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=user(question(i))):
            pass


def _lost(requests: list[list[types.Content]], turns: int) -> int:
    """Turns whose own question was missing from one of their model calls."""
    lost = set()
    for n, request in enumerate(requests):
        q = question(n // 3)
        if not any(c.parts and c.parts[0].text == q for c in request):
            lost.add(n // 3)
    return len(lost)


def measure(quick: bool) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    rows = []

    model = ScriptedLlm()
    asyncio.run(_run(App(name=APP, root_agent=agent(model)), turns))
    rows.append(score("google-adk", "none", [to_openai(r) for r in model.requests], ours=False,
                      lost_turns=_lost(model.requests, turns)))  # fmt: skip

    model, summary_llm = ScriptedLlm(), SummaryLlm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # EventsCompactionConfig is marked experimental
        compaction = EventsCompactionConfig(
            compaction_interval=3, overlap_size=1, summarizer=LlmEventSummarizer(llm=summary_llm)
        )
    asyncio.run(_run(App(name=APP, root_agent=agent(model), events_compaction_config=compaction), turns))
    requests = [to_openai(r) for r in model.requests]
    rows.append(score("google-adk", "events-compaction", requests, ours=False,
                      summarizer_calls=summary_llm.calls, lost_turns=_lost(model.requests, turns),
                      note="its summary (a model turn) opens the request"))  # fmt: skip

    model = ScriptedLlm()
    calls = [0]

    def summarize(messages: list[Any]) -> str:
        calls[0] += 1
        return f"{len(messages)} messages about lookups"

    plugin = ReducerPlugin(max_messages=MAX_MESSAGES, min_messages=MIN_MESSAGES, summarizer=summarize)
    asyncio.run(_run(App(name=APP, root_agent=agent(model), plugins=[plugin]), turns))
    rows.append(score("google-adk", "ours", [to_openai(r) for r in model.requests], ours=True,
                      summarizer_calls=calls[0], lost_turns=_lost(model.requests, turns)))  # fmt: skip
    return rows


if __name__ == "__main__":
    raise SystemExit(main(measure))
