"""Calibrated budgets: token counts scaled to the provider's own tokens, learned from usage.

Every provider reports the input tokens of each request it served. A conversation's calibration
is one number, its *ratio*: the reported input tokens of the newest request divided by this
package's count (tiktoken or the heuristic) of the messages that request held. Token mode then
plans with every message's count multiplied by the ratio (rounded up), so ``max_tokens`` and
``target_tokens`` are in the provider's tokens. docs/tokens.md ("Calibrated budgets") is the user
guide; the rules:

* **Learned from** the newest *anchor*: a reported figure with the messages it was reported for.
  Either the history itself (the newest AI message carrying usage, among the last
  ``SCAN_AI_MESSAGES`` AI messages of the last ``SCAN_MESSAGES`` messages: it answered a request
  holding the messages before it) or a ``Calibration`` the caller feeds with
  ``observe(sent, usage)``. A given ``Calibration`` is the only source for that call.
* **Adapts** at once: the newest anchor wins, so a model or provider change is followed at the
  first usage it reports.
* **Bounded**: a ratio under ``RATIO_MIN`` (an uncached part alone, a partial count) or over
  ``RATIO_MAX`` (a provider counting large tools, a cumulative total, a corrupt figure) is taken
  for a wrong figure and ignored, as a missing, zero, negative or non-integer figure is: no
  anchor. Without an anchor the counts are used as they are, so a bad figure never makes the
  budget smaller than the package's own count gives.
* The system prompt and tools a request holds besides the messages are folded into the ratio:
  ``reported / counted(messages)`` grows with them, so the calibrated count of the same messages
  is never below what that request cost.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from agentstate_reducer.messages import MessageInfo, read_message, read_usage, usage_input_tokens
from agentstate_reducer.tokens.cache import TokenCounterFn
from agentstate_reducer.tokens.counting import count_messages

__all__ = [
    "RATIO_MAX",
    "RATIO_MIN",
    "SCAN_AI_MESSAGES",
    "SCAN_MESSAGES",
    "Anchor",
    "Calibration",
    "anchor_ratio",
    "history_ratio",
    "scale_counts",
    "usage_input_tokens",
]

#: The smallest ratio accepted: a figure under half the package's count is taken for a wrong one
RATIO_MIN: Final = 0.5
#: The largest ratio accepted: a figure over four times the package's count is taken for a wrong one
RATIO_MAX: Final = 4.0
#: How many of a history's newest messages are searched for reported usage
SCAN_MESSAGES: Final = 64
#: How many of those AI messages are tried, newest first (a streamed one may carry no usage)
SCAN_AI_MESSAGES: Final = 8


class Anchor(NamedTuple):
    """A reported figure and the messages of the request it was reported for."""

    sent: tuple[Any, ...]
    input_tokens: int
    #: the model that reported it, when the caller said (informational: the newest anchor wins)
    model: str | None = None


def _figure(usage: Any) -> int | None:
    """A usable input-token figure from an int or a provider usage object, else None."""
    if isinstance(usage, bool):
        return None
    if isinstance(usage, int):
        return int(usage) if usage > 0 else None
    return usage_input_tokens(usage)


def anchor_ratio(reported: int, counted: int) -> float | None:
    """``reported / counted`` bounded: None when ``counted`` is not positive or the ratio is under
    ``RATIO_MIN`` or over ``RATIO_MAX`` (a wrong figure).

    >>> anchor_ratio(1300, 1000), anchor_ratio(100, 1000), anchor_ratio(9000, 1000)
    (1.3, None, None)
    """
    if counted <= 0 or reported <= 0:
        return None
    ratio = reported / counted
    if not RATIO_MIN <= ratio <= RATIO_MAX:  # also NaN
        return None
    return ratio


def scale_counts(counts: Sequence[int], ratio: float | None) -> list[int]:
    """Each count times ``ratio``, rounded up (a new list; the counts as they are when None).

    >>> scale_counts([10, 3, 0], 1.25)
    [13, 4, 0]
    """
    if ratio is None or ratio == 1.0:
        return list(counts)
    return list(map(math.ceil, map(ratio.__mul__, counts)))


def history_ratio(
    messages: Sequence[Any], counts: Sequence[int], infos: Sequence[MessageInfo] | None = None
) -> float | None:
    """The ratio a history carries: from its newest AI message with a usable reported figure
    (searched among the last ``SCAN_AI_MESSAGES`` AI messages of the last ``SCAN_MESSAGES``
    messages), against ``counts`` of the messages before it (the request it answered). None when
    no AI message there carries one that ``anchor_ratio`` accepts.

    ``counts``: the package's count of each message; ``infos``: their readings, when made already.
    """
    n = len(messages)
    tried = 0
    for i in range(n - 1, max(n - SCAN_MESSAGES, 0) - 1, -1):
        kind = infos[i].kind if infos is not None else read_message(messages[i]).kind
        if kind != "ai":
            continue
        tried += 1
        reported = read_usage(messages[i])
        if reported is not None:
            ratio = anchor_ratio(reported, sum(counts[:i]))
            if ratio is not None:
                return ratio
        if tried >= SCAN_AI_MESSAGES:
            break
    return None


class Calibration:
    """One conversation's calibration, fed with what was sent and what the provider reported.

    For entry points whose messages carry no usage (OpenAI, Anthropic, Gemini and Bedrock
    responses, AutoGen ``CreateResult``, the Agents SDK's ``ModelResponse``...): after each model
    call, ``observe(sent, usage)`` with the messages the request held (in the shape the reducer
    reduces) and the provider's usage object, dict or input-token int; then
    ``reducer.reduce(history, calibration=cal)``. One object per conversation: it is passed per
    call, so threads and asyncio tasks sharing one reducer never mix conversations. Thread-safe.

    >>> from agentstate_reducer import MessageReducer, ReducerConfig
    >>> from agentstate_reducer.tokens import heuristic_counter
    >>> cal = Calibration()
    >>> sent = [{"role": "user", "content": "x" * 400}]  # 104 tokens by the heuristic counter
    >>> cal.observe(sent, {"prompt_tokens": 208})
    True
    >>> r = MessageReducer(config=ReducerConfig(max_tokens=1000, token_counter=heuristic_counter()))
    >>> r.token_ratio(sent, calibration=cal)
    2.0
    """

    __slots__ = ("_anchor", "_lock", "_memo")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._anchor: Anchor | None = None
        #: (counter, anchor, ratio) of the last ``ratio`` call
        self._memo: tuple[object, Anchor, float | None] | None = None

    def observe(self, sent: Iterable[Any], usage: Any, *, model: str | None = None) -> bool:
        """Learn from one model call: ``sent``, the messages its request held; ``usage``, the
        provider's usage (any shape ``usage_input_tokens`` reads) or the input tokens as an int.
        The newest usable figure replaces the anchor; an unusable one (missing, zero, negative,
        a streamed chunk without usage) is ignored and the anchor kept. Returns whether it was
        used."""
        reported = _figure(usage)
        if reported is None:
            return False
        anchor = Anchor(tuple(sent), reported, model if isinstance(model, str) else None)
        if not anchor.sent:
            return False
        with self._lock:
            self._anchor = anchor
        return True

    @property
    def anchor(self) -> Anchor | None:
        """The newest anchor observed, or None."""
        return self._anchor

    def clear(self) -> None:
        """Forget what was learned (e.g. the conversation moves to another model)."""
        with self._lock:
            self._anchor = None
            self._memo = None

    def ratio(self, counter: TokenCounterFn) -> float | None:
        """The ratio for counts made by ``counter``: the newest anchor's reported figure over
        ``counter``'s count of its messages (``anchor_ratio``), or None."""
        anchor = self._anchor
        if anchor is None:
            return None
        memo = self._memo
        if memo is not None and memo[0] is counter and memo[1] is anchor:
            return memo[2]
        ratio = anchor_ratio(anchor.input_tokens, sum(count_messages(counter, anchor.sent)))
        with self._lock:
            if self._anchor is anchor:
                self._memo = (counter, anchor, ratio)
        return ratio

    def __repr__(self) -> str:
        a = self._anchor
        if a is None:
            return "Calibration(no anchor)"
        model = f", model={a.model!r}" if a.model else ""
        return f"Calibration(input_tokens={a.input_tokens}, messages={len(a.sent)}{model})"
