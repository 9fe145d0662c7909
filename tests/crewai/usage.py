"""A CrewAI model reporting usage as CrewAI's provider LLMs do.

``UsageLLM`` is the scripted ``tests.crewai.scripted.ScriptedLLM`` that, for every request, adds
the figure of ``tests.usage_models.Reporter`` (the request as OpenAI Chat dicts, ``as_openai``)
to the LLM's running usage (``_track_token_usage_internal``, read by
``get_token_usage_summary()``) and emits ``LLMCallCompletedEvent`` with the request's messages
and ``usage={"prompt_tokens": ...}``, as ``crewai.llms.providers`` do; a missing figure leaves
both without usage.
"""

from __future__ import annotations

from typing import Any

from crewai.events.types.llm_events import LLMCallType
from pydantic import Field

from tests.crewai.scripted import ScriptedLLM, as_openai
from tests.usage_models import Reporter


def usage_dict(figure: int | None) -> dict[str, int] | None:
    """CrewAI's usage of a response for an input figure (None: no usage)."""
    if figure is None:
        return None
    return {"prompt_tokens": figure, "completion_tokens": 8, "total_tokens": figure + 8}


class UsageLLM(ScriptedLLM):
    """``ScriptedLLM`` reporting the provider's count of each request."""

    reporter: Any = Field(default_factory=Reporter)

    def _respond(self, messages: Any) -> Any:
        before = len(self.received)
        answer = super()._respond(messages)
        if len(self.received) == before:  # CrewAI's own summarization request: not the script's
            return answer
        usage = usage_dict(self.reporter.report(as_openai(messages)))
        if usage is not None:
            self._track_token_usage_internal(usage)
        call_type = LLMCallType.LLM_CALL if isinstance(answer, str) else LLMCallType.TOOL_CALL
        self._emit_call_completed_event(answer, call_type, messages=messages, usage=usage)
        return answer
