"""An Agent Framework client reporting usage as a provider's does: ``ChatResponse.usage_details``.

``UsageClient`` answers as the scripted ``tests.af_script.ScriptClient`` and is layered as the
framework's provider clients are (``FunctionInvocationLayer``, ``ChatMiddlewareLayer``,
``BaseChatClient``: a chat middleware sees each model call of the tool loop). Its every response
carries ``usage_details={"input_token_count": ...}``, the figure of
``tests.usage_models.Reporter`` for the request (its messages and instructions,
``tests.af_script.to_openai``); a missing figure leaves ``usage_details`` None. Streamed
(``stream=True``), the answer comes as one update per message and the usage as a last update's
``Content.from_usage``, as the providers' clients stream it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    UsageDetails,
)

from tests.af_script import Request, ScriptClient, to_openai
from tests.usage_models import Reporter


def usage_details(figure: int | None) -> UsageDetails | None:
    """Agent Framework's usage of a response for an input figure (None: no usage)."""
    if figure is None:
        return None
    return UsageDetails(input_token_count=figure, output_token_count=8, total_token_count=figure + 8)


class UsageClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """``ScriptClient``'s answers, reporting the provider's count of each request."""

    def __init__(self, *, reporter: Reporter | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reporter = reporter if reporter is not None else Reporter()
        self.requests: list[Request] = []
        self.summaries = 0

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        if stream:
            return self._build_response_stream(self._updates(messages, options, **kwargs))
        return self._respond(messages, options, **kwargs)

    async def _respond(self, messages: Sequence[Message], options: Any, **kwargs: Any) -> ChatResponse[Any]:
        figure = self.reporter.report(to_openai(Request(list(messages), options.get("instructions"))))
        # the script's answer depends only on the request and the counters kept here
        answer = ScriptClient._inner_get_response
        response = await answer(self, messages=messages, stream=False, options=options, **kwargs)  # type: ignore[arg-type]
        response.usage_details = usage_details(figure)
        return response

    async def _updates(
        self, messages: Sequence[Message], options: Any, **kwargs: Any
    ) -> AsyncIterator[ChatResponseUpdate]:
        response = await self._respond(messages, options, **kwargs)
        for message in response.messages:
            yield ChatResponseUpdate(role="assistant", contents=list(message.contents))
        if response.usage_details is not None:
            yield ChatResponseUpdate(role="assistant", contents=[Content.from_usage(response.usage_details)])
