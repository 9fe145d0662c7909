"""An Agno model reporting usage as Agno's providers do: ``ModelResponse.response_usage``.

``UsageModel`` is the scripted ``tests.agno_script.ScriptedModel`` whose every response carries
``MessageMetrics(input_tokens=...)``, the figure of ``tests.usage_models.Reporter`` for the
request (``tests.agno_script.to_openai``); Agno adds it to the assistant message's ``metrics``.
A missing figure leaves ``response_usage`` None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agno.metrics import MessageMetrics
from agno.models.message import Message
from agno.models.response import ModelResponse

from tests.agno_script import ScriptedModel, to_openai
from tests.usage_models import Reporter


def response_usage(figure: int | None) -> MessageMetrics | None:
    """Agno's usage of a response for an input figure (None: no usage)."""
    if figure is None:
        return None
    return MessageMetrics(input_tokens=figure, output_tokens=8, total_tokens=figure + 8)


@dataclass
class UsageModel(ScriptedModel):
    """``ScriptedModel`` reporting the provider's count of each request."""

    reporter: Reporter = field(default_factory=Reporter)

    def _answer(self, messages: list[Message]) -> ModelResponse:
        figure = self.reporter.report(to_openai(messages))
        response = super()._answer(messages)
        response.response_usage = response_usage(figure)
        return response
