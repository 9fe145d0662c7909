"""The summarizer adapters of ``ReducerMiddleware``: what its ``summarizer`` argument may be.

A chat model (prompted with ``DEFAULT_SUMMARY_PROMPT``), a callable ``(messages) -> str`` or an
async one; ``summary_fields`` turns it into the ``ReducerConfig`` fields the reducer runs with.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import get_buffer_string
from langgraph.constants import TAG_NOSTREAM

from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.integrations._common import summarizer_fields

__all__ = ["DEFAULT_SUMMARY_PROMPT", "ModelSummarizer", "summary_fields"]

DEFAULT_SUMMARY_PROMPT = """You maintain the running summary of a conversation between a user and an \
AI assistant that uses tools. The assistant will continue the conversation without the messages \
below, so the summary replaces them. If the messages start with an earlier summary, fold it in.

Keep: the user's goals and constraints, decisions made and why, facts learned from tools (names, \
numbers, ids, file paths, errors), what was already done, open questions and next steps. Drop \
pleasantries and repetition. Reply with the summary only.

<messages>
{messages}
</messages>"""
"""The prompt a chat-model ``summarizer`` gets; ``{messages}`` is the pruned messages (the previous
summary first) rendered by ``langchain_core.messages.get_buffer_string``."""


def _summary_text(response: Any) -> str:
    text = response.text if isinstance(response, BaseMessage) else response
    if not isinstance(text, str):
        raise TypeError(f"the summary model returned {type(text).__name__}, not text")
    return str(text).strip()


class ModelSummarizer:
    """A chat model writing the running summary with ``DEFAULT_SUMMARY_PROMPT``."""

    def __init__(self, model: BaseChatModel, prompt: str = DEFAULT_SUMMARY_PROMPT) -> None:
        self.model = model
        self.prompt = prompt

    def _input(self, messages: list[Any]) -> list[BaseMessage]:
        return [HumanMessage(self.prompt.format(messages=get_buffer_string(messages)))]

    def __call__(self, messages: list[Any]) -> str:
        return _summary_text(self.model.invoke(self._input(messages), config={"tags": [TAG_NOSTREAM]}))

    async def acall(self, messages: list[Any]) -> str:
        return _summary_text(await self.model.ainvoke(self._input(messages), config={"tags": [TAG_NOSTREAM]}))


def summary_fields(summarizer: Any, config: ReducerConfig) -> dict[str, Any]:
    """The ``ReducerConfig`` fields for the summarizer: a chat model, else what every integration
    takes (``integrations._common.summarizer_fields``); either way the summary is injected."""
    if isinstance(summarizer, BaseChatModel):
        s = ModelSummarizer(summarizer)
        return {"summarize_fn": s, "asummarize_fn": s.acall, "inject_summary": True}
    try:
        return summarizer_fields(summarizer, config)
    except TypeError:
        raise TypeError(
            "summarizer must be a chat model, a callable (messages) -> str or an async callable, "
            f"got {type(summarizer).__name__}"
        ) from None
