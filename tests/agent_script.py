"""Scripted ``create_agent`` agents and a provider-validity checker for their model calls.

``ScriptedModel`` is a chat model that records the messages of every call and answers from a
script: turn ``q<i>`` (the user's text starts so) takes ``steps`` tool steps, each calling
``lookup`` once or, every other step, ``lookup`` and ``add`` in parallel, then a final answer.
Its progress is kept per turn in the model, and the turn is the newest question it has seen, so
a reduced request cannot make it loop; ``lost_turns`` counts the calls that did not carry that
question. With ``blocks=True`` its AI messages carry Anthropic-style content blocks (text and
``tool_use``), as ``ChatAnthropic`` returns them.

``provider_errors`` judges one recorded call from the providers' documented rules, on the
payloads langchain-openai and langchain-anthropic build from it; it shares no code with the
reducer.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

from tests.provider_rules import anthropic_errors, openai_errors


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}: " + "lorem ipsum dolor sit amet " * 8


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


TOOLS = [lookup, add]
QUESTION = re.compile(r"q(\d+) ")


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if isinstance(b, dict))


class ScriptedModel(BaseChatModel):
    """Records each call's messages; answers turn ``q<i>`` with ``steps`` tool steps, then text."""

    steps: int = 2
    blocks: bool = False
    usage: bool = False
    call_tool: str = "lookup"
    #: every ``fail_every``-th call raises (after being recorded), for retry middleware
    fail_every: int = 0
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _progress: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _latest: int = PrivateAttr(default=-1)
    _lost: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def lost_turns(self) -> int:
        """Calls that did not carry the newest question this model had seen (the live turn's)."""
        return self._lost

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._calls.append(list(messages))
            if self.fail_every and len(self._calls) % self.fail_every == 0:
                raise RuntimeError("scripted model: temporarily unavailable")
            asked = [
                int(q.group(1))
                for q in (QUESTION.match(_text(m)) for m in messages if m.type == "human")
                if q
            ]
            newest = max(asked, default=-1)
            if newest < self._latest:
                self._lost += 1  # the live question is not in this call
            self._latest = max(self._latest, newest)
            turn = f"q{self._latest}" if self._latest >= 0 else "q?"
            step = self._progress.get(turn, 0)
            self._progress[turn] = step + 1
            n = len(self._calls)
        if step < self.steps:
            calls = [{"name": self.call_tool, "args": {"q": f"{turn}-{step}"}, "id": f"c{n}_{turn}_{step}_0"}]
            if step % 2 == 1:
                calls.append({"name": "add", "args": {"a": step, "b": n}, "id": f"c{n}_{turn}_{step}_1"})
            content: Any = ""
            if self.blocks:
                content = [{"type": "text", "text": f"working on {turn}"}] + [
                    {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]} for c in calls
                ]
            msg = AIMessage(content=content, tool_calls=calls)
        else:
            text = f"answer to {turn} " + "detail " * 10
            msg = AIMessage(content=[{"type": "text", "text": text}] if self.blocks else text)
        if self.usage:
            sent = sum(len(_text(m)) // 4 + 4 for m in messages)
            usage: Any = {"input_tokens": sent, "output_tokens": 20, "total_tokens": sent + 20}
            msg.usage_metadata = usage
        return ChatResult(generations=[ChatGeneration(message=msg)])


def turns(n: int, start: int = 0) -> Iterator[Any]:
    for i in range(start, start + n):
        yield {"messages": [{"role": "user", "content": f"q{i} " + "please " * 5}]}


# -- validity, from the providers' documented rules (tests/provider_rules.py) --------------------


def provider_errors(call: list[BaseMessage]) -> list[str]:
    """Everything OpenAI or Anthropic would reject in one model call (as langchain-openai and
    langchain-anthropic would send it)."""
    from langchain_anthropic.chat_models import _format_messages
    from langchain_openai.chat_models.base import _convert_message_to_dict

    out = openai_errors([_convert_message_to_dict(m) for m in call])
    try:
        system, payload = _format_messages(call, model="claude-sonnet-4-5")
    except Exception as exc:  # langchain-anthropic refuses to build the payload
        out.append(f"anthropic: payload not built: {exc}")
    else:
        out += anthropic_errors(system, payload)
    return out


def prefix_reuse(calls: list[list[BaseMessage]]) -> float:
    """Share of calls whose messages start with the previous call's messages (what a provider's
    prompt cache can serve)."""

    def key(m: BaseMessage) -> Any:
        return (
            m.type,
            repr(m.content),
            repr(getattr(m, "tool_calls", None)),
            getattr(m, "tool_call_id", None),
        )

    if len(calls) < 2:
        return 0.0
    hits = 0
    for prev, cur in itertools.pairwise(calls):
        if len(cur) >= len(prev) and [key(m) for m in cur[: len(prev)]] == [key(m) for m in prev]:
            hits += 1
    return hits / (len(calls) - 1)
