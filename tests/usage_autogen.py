"""An AutoGen client reporting usage as a provider's client does: ``CreateResult.usage``.

``UsageClient`` is the scripted ``tests.autogen_script.ScriptedClient`` whose every result
carries ``RequestUsage(prompt_tokens=...)``, the figure of ``tests.usage_models.Reporter`` for
the request (``tests.autogen_script.openai_chat``). AutoGen's usage has no "missing": its OpenAI
client reports ``RequestUsage(0, 0)`` for a response without usage, so a missing figure is 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from autogen_core.models import CreateResult, LLMMessage, RequestUsage

from tests.autogen_script import ScriptedClient, openai_chat
from tests.usage_models import Reporter


class UsageClient(ScriptedClient):
    """``ScriptedClient`` reporting the provider's count of each request."""

    def __init__(self, responses: Sequence[CreateResult], reporter: Reporter | None = None) -> None:
        super().__init__(responses)
        self.reporter = reporter if reporter is not None else Reporter()
        self._actual = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)

    def _next(self, messages: Sequence[LLMMessage]) -> CreateResult:
        figure = self.reporter.report(openai_chat(messages))
        result = super()._next(messages)
        usage = RequestUsage(prompt_tokens=figure or 0, completion_tokens=8)
        # cumulative, as autogen-ext's OpenAI client keeps them
        self._actual = RequestUsage(
            prompt_tokens=self._actual.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self._actual.completion_tokens + usage.completion_tokens,
        )
        self._total = self._actual
        return result.model_copy(update={"usage": usage})

    def actual_usage(self) -> RequestUsage:
        return self._actual

    def total_usage(self) -> RequestUsage:
        return self._total
