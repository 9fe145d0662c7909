"""The OpenAI Agents SDK's real models over a scripted API that reports usage: the response
body's ``usage``, which the SDK reads into ``ModelResponse.usage``.

``UsageAPI`` is ``tests.openai_agents_script.ScriptedAPI`` whose every response body carries the
figure of ``tests.usage_models.Reporter`` for the request (``chat_payload``): ``input_tokens`` of a
Responses body, ``prompt_tokens`` of a Chat Completions body. A missing figure leaves ``usage``
out of the body (the SDK then records zeros).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tests.openai_agents_script import Api, ScriptedAPI, chat_payload
from tests.usage_models import Reporter


def usage_body(path: str, figure: int | None) -> dict[str, Any] | None:
    """The ``usage`` of a response body of the API at ``path`` for an input figure."""
    if figure is None:
        return None
    if path.endswith("/responses"):
        return {"input_tokens": figure, "output_tokens": 8, "total_tokens": figure + 8,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    return {"prompt_tokens": figure, "completion_tokens": 8, "total_tokens": figure + 8}


@dataclass
class UsageAPI(ScriptedAPI):
    """``ScriptedAPI`` reporting the provider's count of each request."""

    reporter: Reporter = field(default_factory=Reporter)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        api: Api = "responses" if path.endswith("/responses") else "chat"
        figure = self.reporter.report(chat_payload(api, json.loads(request.content)))
        response = super()._handle(request)
        if response.status_code != 200:
            return response
        body = json.loads(response.content)
        usage = usage_body(path, figure)
        if usage is None:
            body.pop("usage", None)
        else:
            body["usage"] = usage
        return httpx2.Response(200, json=body)
