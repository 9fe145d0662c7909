"""Pydantic AI models reporting usage as a provider does: ``ModelResponse.usage``.

``reporting(answer, reporter, convert)`` wraps a ``FunctionModel`` answer function: the request
is converted to OpenAI Chat dicts by ``convert`` (the test's own converter), counted by the
scripted provider's tokenizer (``tests.usage_models``), and the response carries the figure as
``RequestUsage.input_tokens``; a missing figure is ``RequestUsage(unmeasured_requests=1)``, what
Pydantic AI records for a response without usage (``FunctionModel`` would otherwise estimate one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from tests.usage_models import Reporter

Answer = Callable[[list[ModelMessage], AgentInfo], ModelResponse]
Convert = Callable[[list[ModelMessage]], Sequence[dict[str, Any]]]


def usage_of(figure: int | None, response: ModelResponse) -> RequestUsage:
    """The usage a response reports for an input figure (None: not measured)."""
    if figure is None:
        return RequestUsage(unmeasured_requests=1)
    out = sum(len(p.content) for p in response.parts if isinstance(p, TextPart))
    out += sum(len(p.args_as_json_str()) for p in response.parts if isinstance(p, ToolCallPart))
    return RequestUsage(input_tokens=figure, output_tokens=out // 3 + 1)


def reporting(answer: Answer, reporter: Reporter, convert: Convert) -> Answer:
    """``answer`` with the reporter's figure for each request set as the response's usage."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        figure = reporter.report(convert(messages))
        response = answer(messages, info)
        response.usage = usage_of(figure, response)
        return response

    return respond


def reporting_model(answer: Answer, reporter: Reporter, convert: Convert) -> FunctionModel:
    """A ``FunctionModel`` over ``reporting(answer, reporter, convert)``."""
    return FunctionModel(reporting(answer, reporter, convert))
