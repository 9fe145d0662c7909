"""Scripted providers whose tokenizers differ from the package's counter, reporting usage.

Each tokenizer counts what a request holds its own way, written apart from the reducer:

* ``bytes3``: UTF-8 bytes / 3 + 4 per message (an Anthropic-like count, about 1.3x the heuristic
  on English text);
* ``wordpiece``: one token per word of up to 5 characters, one more per 5 characters past them,
  one per punctuation mark, 3 per message (fewer tokens than the heuristic on short words);
* ``o200k``: tiktoken's ``o200k_base`` + 3 per message, where that encoding loads.

``UsageToolModel`` is ``tests.scenario_graph.ScriptedToolModel`` that records the provider's count
of every request and reports it as ``usage_metadata["input_tokens"]``, as a LangChain chat model
does; ``lookup`` is the tool its calls name, for ``create_agent``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

from tests.scenario_graph import ScriptedToolModel, _filler

_WORDS = re.compile(r"\w+|[^\w\s]")


def _text(m: Any) -> str:
    """Everything of a LangChain message a provider tokenizes: content, tool calls, call ids."""
    content = m.content
    parts = [content if isinstance(content, str) else json.dumps(content)]
    for call in getattr(m, "tool_calls", None) or []:
        parts.append(call["name"] + json.dumps(call["args"]) + str(call.get("id")))
    tool_call_id = getattr(m, "tool_call_id", None)
    if tool_call_id:
        parts.append(tool_call_id)
    return " ".join(parts)


def bytes3(messages: Sequence[Any]) -> int:
    return sum(len(_text(m).encode()) // 3 + 4 for m in messages)


def wordpiece(messages: Sequence[Any]) -> int:
    total = 0
    for m in messages:
        total += 3
        for word in _WORDS.findall(_text(m)):
            total += 1 + max(len(word) - 5, 0) // 5
    return total


def o200k() -> Callable[[Sequence[Any]], int] | None:
    """The ``o200k_base`` provider count, or None where the encoding does not load (no network
    and no local file)."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
    except Exception:
        return None
    return lambda messages: sum(len(enc.encode_ordinary(_text(m))) + 3 for m in messages)


TOKENIZERS: dict[str, Callable[[Sequence[Any]], int]] = {"bytes3": bytes3, "wordpiece": wordpiece}


class UsageToolModel(ScriptedToolModel):
    """``ScriptedToolModel`` reporting its provider's count of each request in ``usage_metadata``
    (``report=False``: no usage), and recording it in ``requests``."""

    tokenizer: str = "bytes3"
    report: bool = True
    _requests: list[int] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[int]:
        """The provider's count of each request, in order."""
        return self._requests

    def count(self, messages: Sequence[Any]) -> int:
        return TOKENIZERS[self.tokenizer](messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> UsageToolModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        msg = self.next_message(messages)
        sent = self.count(messages)
        self._requests.append(sent)
        if self.report:
            usage: Any = {"input_tokens": sent, "output_tokens": 10, "total_tokens": sent + 10}
            msg.usage_metadata = usage
        return ChatResult(generations=[ChatGeneration(message=msg)])


def lookup_tool(content_chars: int) -> Any:
    """The ``lookup`` tool ``UsageToolModel`` calls, answering ``content_chars`` characters."""

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return _filler(f"result for {query}", content_chars)

    return lookup
