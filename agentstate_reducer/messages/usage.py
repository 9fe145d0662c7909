"""Reading the input tokens a provider reported: from its usage object, or from a message.

Every provider reports how many input tokens a request held; the token calibration
(``agentstate_reducer.tokens.calibration``) learns from that figure. Two readers, stdlib only,
duck-typed (dicts and SDK objects alike, no framework imported):

* ``usage_input_tokens(usage)``: the input tokens of one provider usage object or dict;
* ``carried_usage(message, body)``: the figure a stored assistant message carries about the request that
  produced it (LangChain ``usage_metadata`` / ``response_metadata``, Pydantic AI
  ``ModelResponse.usage``, Google ADK ``Event.usage_metadata``, smolagents
  ``ActionStep.token_usage``, Agno ``Message.metrics``).

Both answer None for anything that is not a usable figure: missing, zero, negative, a bool, a
float that is not a whole number, NaN. A figure is never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: Where each provider's usage keeps the request's input tokens, in the order tried; the first
#: usable one is the figure. OpenAI Chat Completions (and AutoGen's ``RequestUsage``):
#: ``prompt_tokens``; OpenAI Responses, the Agents SDK, Anthropic, LangChain ``usage_metadata``,
#: Pydantic AI, smolagents, Agno: ``input_tokens``; Gemini: ``prompt_token_count``
#: (``promptTokenCount`` in REST JSON); Bedrock Converse: ``inputTokens``; Agent Framework
#: ``UsageDetails``: ``input_token_count``.
INPUT_FIELDS: Final = (
    "input_tokens",
    "prompt_tokens",
    "prompt_token_count",
    "promptTokenCount",
    "inputTokens",
    "input_token_count",
)

#: Cache fields added to the figure of the field they go with: Anthropic's ``input_tokens`` and
#: Bedrock's ``inputTokens`` count only the uncached part of the prompt; the cached part is
#: reported beside it. (OpenAI's ``prompt_tokens``/``input_tokens``, Gemini's count and
#: LangChain's ``usage_metadata["input_tokens"]`` include the cached tokens already.)
CACHE_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "input_tokens": ("cache_read_input_tokens", "cache_creation_input_tokens"),
    "inputTokens": ("cacheReadInputTokens", "cacheWriteInputTokens"),
}

#: Where a message keeps its usage, in the order tried: LangChain ``AIMessage.usage_metadata``
#: (Google ADK events too), Pydantic AI ``ModelResponse.usage``, smolagents ``token_usage``,
#: Agno ``metrics``.
MESSAGE_USAGE_FIELDS: Final = ("usage_metadata", "usage", "token_usage", "metrics")

#: Keys of LangChain's ``response_metadata`` holding the provider's raw usage
RESPONSE_METADATA_FIELDS: Final = ("token_usage", "usage")


def _field(obj: Any, key: str) -> Any:
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:  # a property that raises is no figure
        return None


def _count(value: Any) -> int | None:
    """A usable token figure: an int > 0 (a whole float is accepted), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value) if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:  # is_integer() is False for nan/inf
        return int(value)
    return None


def usage_input_tokens(usage: Any, *, _whole: bool = True) -> int | None:
    """The input tokens a provider reported in ``usage`` (a dict or an SDK object), or None.

    Reads OpenAI Chat Completions ``prompt_tokens``, Responses and Agents SDK ``input_tokens``,
    Anthropic ``input_tokens`` plus ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``, Gemini ``prompt_token_count``, Bedrock Converse
    ``inputTokens`` plus its cache reads and writes, and the frameworks' usage objects that use
    one of these names (LangChain ``usage_metadata``, Pydantic AI ``RequestUsage``, AutoGen
    ``RequestUsage``, smolagents ``TokenUsage``, Agno ``Metrics``, Agent Framework
    ``UsageDetails``). A whole response (an object
    or dict with a ``usage``/``usage_metadata`` field) is read through that field.

    >>> usage_input_tokens({"prompt_tokens": 1200, "completion_tokens": 30})
    1200
    >>> usage_input_tokens({"input_tokens": 10, "cache_read_input_tokens": 900, "output_tokens": 5})
    910
    >>> usage_input_tokens({"input_tokens": 0}) is None
    True
    """
    if usage is None or isinstance(usage, str | bytes | int | float):
        return None
    for key in INPUT_FIELDS:
        base = _count(_field(usage, key))
        if base is None:
            continue
        extra = (_count(_field(usage, k)) or 0 for k in CACHE_FIELDS.get(key, ()))
        return base + sum(extra)
    for key in ("usage", "usage_metadata") if _whole else ():  # a whole response: its usage, one level
        inner = _field(usage, key)
        if inner is not None and inner is not usage:
            found = usage_input_tokens(inner, _whole=False)
            if found is not None:
                return found
    return None


def carried_usage(msg: Any, body: Any = None) -> int | None:
    """The input tokens reported for the request that produced ``msg``, an assistant message
    (or model response) of any supported shape; None when it carries no usable figure.

    ``body``: the object holding the message's fields when the caller unwrapped a serialized
    LangChain form already (``{"type": "ai", "data": {...}}``); else ``msg`` itself.
    """
    if body is None:
        body = msg
    for key in MESSAGE_USAGE_FIELDS:
        found = usage_input_tokens(_field(body, key), _whole=False)
        if found is not None:
            return found
    meta = _field(body, "response_metadata")
    if meta is not None:
        for key in RESPONSE_METADATA_FIELDS:
            found = usage_input_tokens(_field(meta, key), _whole=False)
            if found is not None:
                return found
    return None
