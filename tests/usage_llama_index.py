"""A LlamaIndex LLM reporting usage as its OpenAI LLM does: ``ChatResponse.raw`` and
``additional_kwargs``.

``UsageLLM`` is the scripted ``tests.llama_index_script.ScriptedLLM`` whose every response
carries the provider's usage in ``raw["usage"]`` (``prompt_tokens``, the Chat Completions body)
and in ``additional_kwargs`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``, as
``llama_index.llms.openai`` sets them), the figure of ``tests.usage_models.Reporter`` for the
request (``tests.llama_index_script.openai_chat``). A missing figure leaves both without usage.
Its chat methods carry ``llm_chat_callback`` as every LlamaIndex LLM's do, so each call sends
the instrumentation's ``LLMChatStartEvent``/``LLMChatEndEvent`` (the request and the response).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
)
from llama_index.core.llms.callbacks import llm_chat_callback
from pydantic import PrivateAttr

from tests.llama_index_script import ScriptedLLM, openai_chat
from tests.usage_models import Reporter


def usage_fields(figure: int | None) -> dict[str, int]:
    """The usage keys of a response for an input figure (empty: no usage)."""
    if figure is None:
        return {}
    return {"prompt_tokens": figure, "completion_tokens": 8, "total_tokens": figure + 8}


class UsageLLM(ScriptedLLM):
    """``ScriptedLLM`` reporting the provider's count of each request."""

    _reporter: Reporter = PrivateAttr(default_factory=Reporter)

    def __init__(
        self, responses: Sequence[ChatMessage], reporter: Reporter | None = None, **kwargs: Any
    ) -> None:
        super().__init__(responses, **kwargs)
        if reporter is not None:
            self._reporter = reporter

    @property
    def reporter(self) -> Reporter:
        return self._reporter

    def _next(self, messages: Sequence[ChatMessage]) -> ChatResponse:
        figure = self._reporter.report(openai_chat(messages))
        response = super()._next(messages)
        usage = usage_fields(figure)
        response.raw = {"usage": usage} if usage else {}
        response.additional_kwargs = dict(usage)
        return response

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._next(messages)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._next(messages)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        response = self._next(messages)

        def gen() -> ChatResponseGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "",
                               raw=response.raw, additional_kwargs=response.additional_kwargs)  # fmt: skip

        return gen()

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        response = self._next(messages)

        async def gen() -> ChatResponseAsyncGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "",
                               raw=response.raw, additional_kwargs=response.additional_kwargs)  # fmt: skip

        return gen()
