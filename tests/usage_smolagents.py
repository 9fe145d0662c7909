"""A smolagents model reporting usage as its provider models do: ``ChatMessage.token_usage``.

``UsageModel`` is the scripted ``tests.smolagents_script.ScriptedModel`` whose every answer
carries ``TokenUsage(input_tokens=...)``, the figure of ``tests.usage_models.Reporter`` for the
request (``tests.smolagents_script.openai_dicts``); smolagents copies it to the step's
``token_usage``. A missing figure leaves ``token_usage`` None.
"""

from __future__ import annotations

from typing import Any

from smolagents.models import ChatMessage
from smolagents.monitoring import TokenUsage

from tests.smolagents_script import ScriptedModel, openai_dicts
from tests.usage_models import Reporter


def token_usage(figure: int | None) -> TokenUsage | None:
    """smolagents' usage of an answer for an input figure (None: no usage)."""
    return None if figure is None else TokenUsage(input_tokens=figure, output_tokens=8)


class UsageModel(ScriptedModel):
    """``ScriptedModel`` reporting the provider's count of each request."""

    def __init__(self, *, reporter: Reporter | None = None, code: bool = False) -> None:
        super().__init__(code=code)
        self.reporter = reporter if reporter is not None else Reporter()

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        figure = self.reporter.report(openai_dicts(messages))
        answer = super().generate(messages, stop_sequences, response_format, tools_to_call_from, **kwargs)
        answer.token_usage = token_usage(figure)
        return answer
