"""Calibrated budgets: token counts scaled to the provider's own tokens, learned from usage.

Every provider reports the input tokens of each request it served: its messages, and the system
prompt and tool schemas it holds besides them. A conversation's calibration is a ``Scale``: a
*ratio* every message's count (tiktoken or the heuristic) is multiplied by (rounded up), and an
*offset*, the tokens every request holds besides its messages. Token mode plans with the scaled
counts plus the offset, so ``max_tokens`` and ``target_tokens`` are in the provider's tokens
(the size of the request). docs/tokens.md ("Calibrated budgets") is the user guide; the rules:

* **Learned from** *anchors*: a reported figure with the messages it was reported for. Either
  the history itself (its AI messages carrying usage, among the last ``SCAN_AI_MESSAGES`` AI
  messages of the last ``SCAN_MESSAGES`` messages: each answered a request holding the
  messages before it) or a ``Calibration`` the caller feeds with ``observe(sent, usage)``. A
  given ``Calibration`` is the only source for that call.
* **One anchor**: the offset is 0 and the ratio ``reported / counted``: what the request held
  besides the messages is folded into the ratio (a history never counts less than the request
  that held it cost).
* **Two anchors** of requests whose counts differ by at least ``SPREAD_MIN`` of the newest's (a
  conversation that grew): the line through them, ``reported = ratio * counted + offset``, when
  its ratio is within the bounds and its offset not negative. The offset then holds the system
  prompt and tools, so a large tool schema no longer pushes the ratio out of its bounds. An
  older anchor that reported no more tokens for more messages (a history reduced since it, or
  another model) ends the search: the newest anchor alone, as above.
* **Adapts** at once: the newest anchor always lies on the scale, and the older one is the
  newest that is far enough from it; a ``Calibration`` told of another model (``model=``)
  forgets the older model's anchors.
* **Bounded**: a ratio under ``RATIO_MIN`` (an uncached part alone, a partial count) or over
  ``RATIO_MAX`` (a cumulative total, a corrupt figure) is taken for a wrong figure and ignored,
  as a missing, zero, negative or non-integer figure is: no anchor. The reducer ignores a scale
  whose offset leaves no room under ``target_tokens``. Without a scale the counts are used as
  they are, so a bad figure never makes the budget smaller than the package's own count gives.
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
    "SPREAD_MIN",
    "Anchor",
    "Calibration",
    "Scale",
    "anchor_ratio",
    "fit_scale",
    "history_ratio",
    "history_scale",
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
#: How far apart two anchors' counts must be, as a share of the newest's, for a line through
#: them (closer ones would turn small differences of content into a wrong ratio)
SPREAD_MIN: Final = 0.1
#: How many anchors a ``Calibration`` keeps, newest first
KEEP_ANCHORS: Final = 8


class Scale(NamedTuple):
    """A conversation's calibration: a request of messages the counter counts ``c_1 ... c_n``
    costs ``sum(ceil(ratio * c_i)) + offset`` provider tokens."""

    ratio: float
    #: the tokens every request holds besides its messages (system prompt, tool schemas)
    offset: int = 0


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


def fit_scale(points: Sequence[tuple[int, int]]) -> Scale | None:
    """The scale of ``(counted, reported)`` anchors, newest first: the line through the newest
    and the newest older one whose count is at least ``SPREAD_MIN`` of the newest's away from
    it, when its ratio is within ``RATIO_MIN``-``RATIO_MAX`` and its offset not negative; else
    the newest alone (``anchor_ratio``, offset 0); None when that is no ratio either.

    >>> fit_scale([(1000, 4300), (500, 3650)])  # 1.3 a token, 3,000 besides the messages
    Scale(ratio=1.3, offset=3000)
    >>> fit_scale([(1000, 1300)]), fit_scale([(1000, 1300), (990, 1290)])
    (Scale(ratio=1.3, offset=0), Scale(ratio=1.3, offset=0))
    """
    if not points:
        return None
    counted, reported = points[0]
    if counted <= 0 or reported <= 0:
        return None
    for older, older_reported in points[1:]:
        spread = counted - older
        if spread * (reported - older_reported) <= 0 and spread:
            # more messages, no more tokens: that request held messages no longer counted here
            # (a reduction since, read from a history) or was another model's; older ones too
            break
        if abs(spread) < SPREAD_MIN * counted or older <= 0 or older_reported <= 0:
            continue
        ratio = (reported - older_reported) / spread
        if RATIO_MIN <= ratio <= RATIO_MAX:
            offset = reported - ratio * counted
            if offset >= 0:
                return Scale(ratio, round(offset))
        break
    alone = anchor_ratio(reported, counted)
    return Scale(alone) if alone is not None else None


def scale_counts(counts: Sequence[int], ratio: float | None) -> list[int]:
    """Each count times ``ratio``, rounded up (a new list; the counts as they are when None).

    >>> scale_counts([10, 3, 0], 1.25)
    [13, 4, 0]
    """
    if ratio is None or ratio == 1.0:
        return list(counts)
    return list(map(math.ceil, map(ratio.__mul__, counts)))


def history_scale(
    messages: Sequence[Any], counts: Sequence[int], infos: Sequence[MessageInfo] | None = None
) -> Scale | None:
    """The scale a history carries (``fit_scale``): its AI messages with a usable reported
    figure, newest first (searched among the last ``SCAN_AI_MESSAGES`` AI messages of the last
    ``SCAN_MESSAGES`` messages), each against ``counts`` of the messages before it (the request
    it answered). None when no AI message there carries one.

    ``counts``: the package's count of each message; ``infos``: their readings, when made already.
    """
    n = len(messages)
    tried = 0
    points: list[tuple[int, int]] = []
    before = sum(counts)
    last = n
    for i in range(n - 1, max(n - SCAN_MESSAGES, 0) - 1, -1):
        kind = infos[i].kind if infos is not None else read_message(messages[i]).kind
        if kind != "ai":
            continue
        tried += 1
        reported = read_usage(messages[i])
        if reported is not None:
            before -= sum(counts[i:last])
            last = i
            points.append((before, reported))
        if tried >= SCAN_AI_MESSAGES:
            break
    scale = None
    while points and scale is None:  # an unusable newest figure: the next older one
        scale = fit_scale(points)
        points = points[1:]
    return scale


def history_ratio(
    messages: Sequence[Any], counts: Sequence[int], infos: Sequence[MessageInfo] | None = None
) -> float | None:
    """The ratio of ``history_scale``, or None."""
    scale = history_scale(messages, counts, infos)
    return scale.ratio if scale is not None else None


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

    __slots__ = ("_anchors", "_lock", "_memo")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: newest first, at most ``KEEP_ANCHORS``
        self._anchors: tuple[Anchor, ...] = ()
        #: (counter, anchors, scale) of the last ``scale`` call
        self._memo: tuple[object, tuple[Anchor, ...], Scale | None] | None = None

    def observe(self, sent: Iterable[Any], usage: Any, *, model: str | None = None) -> bool:
        """Learn from one model call: ``sent``, the messages its request held; ``usage``, the
        provider's usage (any shape ``usage_input_tokens`` reads) or the input tokens as an int.
        The newest usable figure becomes the newest anchor (one from another ``model`` than the
        anchor before it replaces them all); an unusable one (missing, zero, negative, a
        streamed chunk without usage) is ignored and the anchors kept. Returns whether it was
        used."""
        reported = _figure(usage)
        if reported is None:
            return False
        anchor = Anchor(tuple(sent), reported, model if isinstance(model, str) else None)
        if not anchor.sent:
            return False
        with self._lock:
            kept = self._anchors
            if kept and anchor.model is not None and kept[0].model not in (None, anchor.model):
                kept = ()
            self._anchors = (anchor, *kept[: KEEP_ANCHORS - 1])
        return True

    @property
    def anchor(self) -> Anchor | None:
        """The newest anchor observed, or None."""
        anchors = self._anchors
        return anchors[0] if anchors else None

    def clear(self) -> None:
        """Forget what was learned (e.g. the conversation moves to another model)."""
        with self._lock:
            self._anchors = ()
            self._memo = None

    def scale(self, counter: TokenCounterFn) -> Scale | None:
        """The scale for counts made by ``counter``: ``fit_scale`` of the anchors, each
        against ``counter``'s count of its messages; None without a usable one."""
        anchors = self._anchors
        if not anchors:
            return None
        memo = self._memo
        if memo is not None and memo[0] is counter and memo[1] is anchors:
            return memo[2]
        points = [(sum(count_messages(counter, a.sent)), a.input_tokens) for a in anchors]
        scale = None
        while points and scale is None:  # an unusable newest figure: the next older one
            scale = fit_scale(points)
            points = points[1:]
        with self._lock:
            if self._anchors is anchors:
                self._memo = (counter, anchors, scale)
        return scale

    def ratio(self, counter: TokenCounterFn) -> float | None:
        """The ratio of ``scale(counter)``, or None."""
        scale = self.scale(counter)
        return scale.ratio if scale is not None else None

    def __repr__(self) -> str:
        a = self.anchor
        if a is None:
            return "Calibration(no anchor)"
        model = f", model={a.model!r}" if a.model else ""
        return f"Calibration(input_tokens={a.input_tokens}, messages={len(a.sent)}{model})"
