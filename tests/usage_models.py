"""A scripted provider's own token count and the usage figures it reports, for every framework.

The scripted models of the integration tests report usage in their framework's own usage object
(``tests/usage_<framework>.py``), counted by a tokenizer that is not the reducer's: per message
``ceil(UTF-8 bytes / 3) + 4``, an Anthropic-like count about 1.3x the reducer's characters/4
heuristic on English text. The count is made on the request as OpenAI Chat dicts, each
framework's request converted by its test script's own code (no reducer code), so it measures
what a provider would bill.

``Reporter`` records the true count of every request and gives the figure the model reports:
the true one, or a bad one (missing, zero, negative, absurd), for the tests that a bad figure
changes nothing for the worse. Framework-free: imported by every framework's usage module.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

#: the usage figure a scripted model reports: the provider's true count, or a bad one
Figure = Literal["true", "missing", "zero", "negative", "absurd"]
FIGURES: Final[tuple[Figure, ...]] = ("true", "missing", "zero", "negative", "absurd")
BAD_FIGURES: Final[tuple[Figure, ...]] = ("missing", "zero", "negative", "absurd")

#: what the provider adds per message (role and framing), as Anthropic-like tokenizers do
PER_MESSAGE: Final = 4
#: an absurd figure: far more than any request of the tests holds
ABSURD: Final = 10**9


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "\n".join(_block_text(block) for block in value)
    return json.dumps(value, default=str, sort_keys=True)


def _block_text(block: Any) -> str:
    if isinstance(block, Mapping) and isinstance(block.get("text"), str):
        return str(block["text"])
    return _text(block)


def message_tokens(message: Mapping[str, Any]) -> int:
    """The provider's count of one OpenAI Chat message: its text, tool calls (id, name,
    arguments) and the call id it answers, ``ceil(bytes / 3)``, plus ``PER_MESSAGE``."""
    pieces = [_text(message.get("content")), str(message.get("name") or "")]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        pieces += [str(call.get("id") or ""), str(function.get("name") or ""),
                   _text(function.get("arguments"))]  # fmt: skip
    pieces.append(str(message.get("tool_call_id") or ""))
    size = sum(len(piece.encode("utf-8")) for piece in pieces)
    return math.ceil(size / 3) + PER_MESSAGE


def provider_tokens(messages: Sequence[Mapping[str, Any]], *, overhead: int = 0) -> int:
    """The provider's input count of a request: its messages, plus ``overhead`` (the tools'
    schemas and instructions sent outside the messages, which a provider counts too)."""
    return overhead + sum(message_tokens(m) for m in messages)


def figure_of(true_count: int, figure: Figure) -> int | None:
    """The input-token figure a model reports for a request whose true count is ``true_count``:
    None for a missing figure."""
    if figure == "true":
        return true_count
    if figure == "missing":
        return None
    if figure == "zero":
        return 0
    if figure == "negative":
        return -true_count
    if figure == "absurd":
        return ABSURD
    raise ValueError(f"figure must be one of {FIGURES}, got {figure!r}")


@dataclass
class Reporter:
    """The provider's ledger: the true count of every request, in order, and the figure reported.

    Thread-safe: one reporter may serve a model that several conversations call at once.
    """

    figure: Figure = "true"
    #: counted for every request beyond its messages (tool schemas, instructions)
    overhead: int = 0
    counts: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def report(self, messages: Sequence[Mapping[str, Any]]) -> int | None:
        """Record the request (OpenAI Chat dicts) and return the input figure to report."""
        count = provider_tokens(messages, overhead=self.overhead)
        with self._lock:
            self.counts.append(count)
        return figure_of(count, self.figure)

    def after_first(self) -> list[int]:
        """The true counts of the requests made after the first usage was reported."""
        return self.counts[1:]

    def over(self, max_tokens: int) -> list[int]:
        """The requests after the first report that exceed ``max_tokens`` in the provider's count."""
        return [count for count in self.after_first() if count > max_tokens]
