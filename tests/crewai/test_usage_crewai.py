"""The scripted CrewAI model reports usage as CrewAI's providers do, and CrewAI records it: the
LLM's running usage (``get_token_usage_summary``, which a pre-model hook reaches as ``ctx.llm``)
and ``LLMCallCompletedEvent.usage`` beside the messages sent. The executor's messages, the list
``ReducerHook`` bounds, carry none."""

from __future__ import annotations

import itertools
from typing import Any

from crewai.events import crewai_event_bus
from crewai.events.types.llm_events import LLMCallCompletedEvent
from crewai.hooks import LLMCallHookContext, clear_all_global_hooks, register_before_llm_call_hook

from tests.crewai.scripted import crew_for
from tests.crewai.usage import UsageLLM
from tests.usage_models import Reporter


def test_crewai_usage_is_on_the_llm_and_its_events_not_the_messages() -> None:
    reporter = Reporter()
    llm = UsageLLM(model="scripted", turns=3, reporter=reporter)
    events: list[LLMCallCompletedEvent] = []
    running: list[int] = []  # the LLM's running prompt tokens, as each pre-model hook sees it

    def before(ctx: LLMCallHookContext) -> None:
        running.append(ctx.llm.get_token_usage_summary().prompt_tokens)
        assert not any("usage" in m for m in ctx.messages)

    with crewai_event_bus.scoped_handlers():

        @crewai_event_bus.on(LLMCallCompletedEvent)
        def completed(source: Any, event: LLMCallCompletedEvent) -> None:
            events.append(event)

        register_before_llm_call_hook(before)
        try:
            crew, _ = crew_for(llm)
            crew.kickoff()
            crewai_event_bus.flush()
        finally:
            clear_all_global_hooks()

    assert len(reporter.counts) == 7  # 3 rounds of two calls, then the answer
    assert [e.usage["prompt_tokens"] for e in events if e.usage] == reporter.counts
    assert all(isinstance(e.messages, list) and e.messages for e in events)
    # the hook before call n+1 sees the total of calls 1..n: the last call's figure is the step
    assert [b - a for a, b in itertools.pairwise(running)] == reporter.counts[:-1]
    assert llm.get_token_usage_summary().prompt_tokens == sum(reporter.counts)
