"""A Google ADK model reporting usage as Gemini does: ``LlmResponse.usage_metadata``.

``UsageLlm`` is the scripted ``tests.adk_script.ScriptedLlm`` whose every response carries
``GenerateContentResponseUsageMetadata(prompt_token_count=...)``, the figure of
``tests.usage_models.Reporter`` for the request (its contents and system instruction as OpenAI
Chat dicts, ``tests.adk_script.to_openai``); a missing figure leaves ``usage_metadata`` None, as a
streamed chunk without usage does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models import LlmRequest, LlmResponse
from google.genai import types
from pydantic import PrivateAttr

from tests.adk_script import ScriptedLlm, to_openai
from tests.usage_models import Reporter


def usage_metadata(figure: int | None) -> types.GenerateContentResponseUsageMetadata | None:
    """Gemini's usage of a response for an input figure (None: no usage)."""
    if figure is None:
        return None
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=figure, candidates_token_count=8, total_token_count=figure + 8
    )


class UsageLlm(ScriptedLlm):
    """``ScriptedLlm`` reporting the provider's count of each request."""

    _reporter: Reporter = PrivateAttr(default_factory=Reporter)

    @property
    def reporter(self) -> Reporter:
        return self._reporter

    def use(self, reporter: Reporter) -> UsageLlm:
        """Report through ``reporter`` (its figure and overhead); returns self."""
        self._reporter = reporter
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        system = llm_request.config.system_instruction if llm_request.config else None
        figure = self._reporter.report(
            to_openai(list(llm_request.contents), system if isinstance(system, str) else None)
        )
        async for response in super().generate_content_async(llm_request, stream):
            response.usage_metadata = usage_metadata(figure)
            yield response
