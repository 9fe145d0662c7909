"""What a conversation's model calls cost, with prompt caching: a pure model, never fetched.

``estimate(requests)`` takes what was sent at each model call (a list of messages per call, in
any shape the core reads), counts every message with the reducer's token counter and says, call
by call, how many input tokens a provider's prompt cache can serve, how many it writes, and the
cost at the given ``Prices`` (USD per million tokens; ``EXAMPLE_PRICES`` when none are given).

The cache, per provider (docs/cost.md is the user guide):

* ``"openai"``: automatic prefix caching. A call reads from the cache the prefix it shares with
  the previous call, message by message (each message the same object or equal to the one at the
  same place), in tokens rounded down to ``1024 + 128k`` (``OPENAI_MIN_CACHED_TOKENS``,
  ``OPENAI_CACHE_STEP``); a shared prefix under 1,024 tokens is not served. Writing costs
  nothing extra: ``cache_write_tokens`` is always 0.
* ``"anthropic"``: one cache breakpoint at the end of every call (the automatic setup). A call
  that is at least ``ANTHROPIC_MIN_CACHEABLE_TOKENS`` long writes the cache up to its end; the
  next call reads that entry when it starts with the whole of it (the entry's messages, each the
  same or equal, in order), and writes the rest of itself. A call that cut or changed anything
  in the cached messages reads nothing and writes itself whole (when long enough). Reads are
  priced ``Prices.cache_read`` (0.1x input), writes ``Prices.cache_write`` (1.25x, the 5-minute
  cache).

Simplifications, the same for every policy compared: tokens are the counter's per-message
counts, calibrated to the provider's tokens as token mode counts them (``calibrate``: the ratio
and offset the request's own AI messages carry in their reported usage, docs/tokens.md
"Calibrated budgets", the offset the start of every cached prefix; no request framing, tools or
system parameter beyond what that offset holds, unless they are messages of the list);
every call comes within the cache's lifetime of the one before; only the previous call's prefix
(OpenAI) or the newest entry (Anthropic) is looked up, not every earlier one; Anthropic's lookback
window of 20 content blocks before a breakpoint is not modelled (an agent adds a few messages per
call); output tokens are not counted (they are the same whatever the history).

``CacheTracker`` keeps the previous request of each conversation for the per-call records of
the integrations (``ReduceRecord.prefix_tokens``).

>>> system = {"role": "system", "content": "x" * 4400}  # 1,104 tokens by the heuristic counter
>>> first = [system, {"role": "user", "content": "hi"}]
>>> second = [*first, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
>>> [(r.input_tokens, r.cache_read_tokens) for r in estimate([first, second]).per_request]
[(1109, 0), (1120, 1024)]
>>> report = estimate([first, second], provider="anthropic")
>>> [(r.cache_read_tokens, r.cache_write_tokens) for r in report.per_request]
[(0, 1109), (1109, 11)]
>>> round(report.cost * 1e6) / 1e6  # USD at EXAMPLE_PRICES["anthropic"]
0.003022
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from types import MappingProxyType
from typing import Any, Final, Literal

from agentstate_reducer.tokens import TokenCounter, count_messages, heuristic_counter
from agentstate_reducer.tokens.calibration import history_scale, scale_counts

__all__ = [
    "ANTHROPIC_MIN_CACHEABLE_TOKENS",
    "EXAMPLE_PRICES",
    "OPENAI_CACHE_STEP",
    "OPENAI_MIN_CACHED_TOKENS",
    "PROVIDERS",
    "CacheTracker",
    "CostReport",
    "Prices",
    "Provider",
    "RequestCost",
    "estimate",
    "openai_cached_tokens",
    "shared_prefix",
]

Provider = Literal["openai", "anthropic"]
PROVIDERS: Final[tuple[Provider, ...]] = ("openai", "anthropic")

#: OpenAI serves a cached prefix of at least this many tokens ...
OPENAI_MIN_CACHED_TOKENS: Final = 1024
#: ... growing in steps of this many tokens.
OPENAI_CACHE_STEP: Final = 128
#: Anthropic caches a prefix of at least this many tokens (Claude Sonnet 4.5, Sonnet 4, Opus 4.1;
#: other models need more: pass ``min_cacheable_tokens``).
ANTHROPIC_MIN_CACHEABLE_TOKENS: Final = 1024

_PER: Final = 1_000_000


def _check_price(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Prices.{name} must be a number of USD per million tokens, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"Prices.{name} ({value!r}) must be a finite number >= 0 (USD per million tokens)")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """Input prices in USD per million tokens: uncached input, a cache read, a cache write.

    ``model``, ``taken`` (the date the prices were read) and ``source`` say where they come from.
    Prices change: pass the ones of your model and contract.

    Raises:
        TypeError: a price is not a number.
        ValueError: a price is negative, infinite or NaN.
    """

    input: float
    cache_read: float
    cache_write: float
    model: str = ""
    taken: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("input", "cache_read", "cache_write"):
            object.__setattr__(self, name, _check_price(name, getattr(self, name)))


#: Example prices per provider, read by hand on the date in ``taken``; never fetched.
EXAMPLE_PRICES: Final[Mapping[Provider, Prices]] = MappingProxyType(
    {
        "openai": Prices(
            input=2.50,
            cache_read=0.25,
            cache_write=2.50,  # OpenAI charges no premium to write its cache
            model="gpt-5.4",
            taken="2026-12-02",
            source="OpenAI API pricing (developers.openai.com/api/docs/pricing), standard tier, "
            "as reported by benchlm.ai (2026-04) and morphllm.com (2026-06)",
        ),
        "anthropic": Prices(
            input=2.00,
            cache_read=0.20,
            cache_write=2.50,
            model="claude-sonnet-5",
            taken="2026-12-02",
            source="platform.claude.com/docs/en/models/sonnet-5/overview (input, 5m cache write, "
            "cache read)",
        ),
    }
)


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One model call: ``input_tokens`` = ``cache_read_tokens`` + ``cache_write_tokens`` + the
    uncached rest; ``cost`` in USD."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    #: leading messages the call shares with the previous one (each the same or equal)
    shared_messages: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class CostReport:
    """The sum over the calls of ``per_request``, and how it was priced."""

    provider: Provider
    prices: Prices
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    per_request: tuple[RequestCost, ...]

    @property
    def cache_share(self) -> float:
        """The share of the input tokens the cache served (0.0 without input)."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # a message whose == raises is a different message
        return False


def shared_prefix(previous: Sequence[Any], request: Sequence[Any]) -> int:
    """How many leading messages ``request`` shares with ``previous``: each the same object or
    equal to the one at the same place."""
    n = 0
    for a, b in zip(previous, request, strict=False):
        if not _same(a, b):
            break
        n += 1
    return n


def openai_cached_tokens(prefix_tokens: int) -> int:
    """The tokens OpenAI serves from its cache for a shared prefix of ``prefix_tokens``: 0 under
    1,024, else rounded down to ``1024 + 128k``.

    >>> [openai_cached_tokens(n) for n in (1023, 1024, 1151, 1152, 5000)]
    [0, 1024, 1024, 1152, 4992]
    """
    if prefix_tokens < OPENAI_MIN_CACHED_TOKENS:
        return 0
    steps = (prefix_tokens - OPENAI_MIN_CACHED_TOKENS) // OPENAI_CACHE_STEP
    return OPENAI_MIN_CACHED_TOKENS + OPENAI_CACHE_STEP * steps


def _check_provider(provider: object) -> Provider:
    if provider == "openai":
        return "openai"
    if provider == "anthropic":
        return "anthropic"
    raise ValueError(f"provider must be one of {list(PROVIDERS)}, got {provider!r}")


def _requests(requests: object) -> list[list[Any]]:
    if isinstance(requests, str | bytes | Mapping) or not isinstance(requests, Iterable):
        raise TypeError(
            "requests must be a sequence of requests, each the list of messages sent at one model "
            f"call; got {type(requests).__name__}"
        )
    out = list(requests)
    for i, request in enumerate(out):
        if not isinstance(request, list):
            raise TypeError(
                f"request {i} must be a list of messages (what one model call was sent), "
                f"got {type(request).__name__}"
            )
    return out


@dataclass(frozen=True, slots=True)
class _Sent:
    """A request as the cache model remembers it: its messages and the tokens before each."""

    messages: tuple[Any, ...]
    #: ``upto[k]``: the tokens of the first ``k`` messages (``upto[-1]``: the whole request)
    upto: tuple[int, ...]

    @classmethod
    def of(cls, messages: Sequence[Any], counts: Sequence[int], offset: int = 0) -> _Sent:
        """``offset``: the tokens the request holds before its messages (a calibration's system
        prompt and tools), the start of every cached prefix."""
        return cls(tuple(messages), tuple(accumulate(counts, initial=offset)))

    @property
    def tokens(self) -> int:
        return self.upto[-1]


def estimate(
    requests: Iterable[list[Any]],
    *,
    provider: Provider = "openai",
    prices: Prices | None = None,
    token_counter: Callable[[Any], int] | None = None,
    min_cacheable_tokens: int | None = None,
    calibrate: bool | None = None,
) -> CostReport:
    """The input tokens, cache reads and writes, and cost of ``requests`` (what each model call of
    one conversation was sent, in order) under ``provider``'s prompt cache (module docstring).

    ``prices``: ``EXAMPLE_PRICES[provider]`` when None. ``token_counter``: a callable message ->
    int (a reducer's ``token_counter``); None: the package's heuristic counter.
    ``min_cacheable_tokens``: Anthropic's minimum for the model (default 1,024); OpenAI's is
    fixed at 1,024. ``calibrate``: as ``ReducerConfig.calibrate`` (None: on for the built-in
    counters, off for your own): each request's counts are scaled by the ratio its own AI
    messages' reported usage gives, plus its offset, the counts token mode plans with.

    Raises:
        ValueError: an unknown provider; ``min_cacheable_tokens`` < 0; a price < 0 (``Prices``).
        TypeError: ``requests`` is not a sequence of lists; ``prices`` is not ``Prices``;
            ``min_cacheable_tokens`` is not an int.
        TokenCountError: ``token_counter`` raised or returned something other than an int >= 0.
    """
    chosen = _check_provider(provider)
    if prices is None:
        prices = EXAMPLE_PRICES[chosen]
    elif not isinstance(prices, Prices):
        raise TypeError(f"prices must be agentstate_reducer.cost.Prices or None, got {type(prices).__name__}")
    minimum = ANTHROPIC_MIN_CACHEABLE_TOKENS if min_cacheable_tokens is None else min_cacheable_tokens
    if isinstance(minimum, bool) or not isinstance(minimum, int):
        raise TypeError(f"min_cacheable_tokens must be an int or None, got {minimum!r}")
    if minimum < 0:
        raise ValueError(f"min_cacheable_tokens ({minimum}) must be >= 0")
    calls = _requests(requests)
    if token_counter is not None and not callable(token_counter):
        raise TypeError(
            f"token_counter must be a callable message -> int, got {type(token_counter).__name__}"
        )
    counter = token_counter if token_counter is not None else heuristic_counter()
    if calibrate is not None and not isinstance(calibrate, bool):
        raise TypeError(f"calibrate must be a bool or None, got {calibrate!r}")
    calibrates = isinstance(counter, TokenCounter) if calibrate is None else calibrate
    per: list[RequestCost] = []
    previous: _Sent | None = None  # OpenAI: the previous call
    entry: _Sent | None = None  # Anthropic: the newest cache entry
    for request in calls:
        counts = count_messages(counter, request)
        offset = 0
        if calibrates and (scale := history_scale(request, counts)) is not None:
            counts, offset = scale_counts(counts, scale.ratio), scale.offset
        sent = _Sent.of(request, counts, offset)
        before = previous if chosen == "openai" else entry
        shared = shared_prefix(before.messages, request) if before is not None else 0
        read = write = 0
        if chosen == "openai":
            read = openai_cached_tokens(sent.upto[shared]) if before is not None else 0
            previous = sent
        else:
            if entry is not None and shared == len(entry.messages):
                read = entry.tokens
            if sent.tokens >= minimum and sent.tokens > 0:
                write = sent.tokens - read
                entry = sent
        uncached = sent.tokens - read - write
        cost = (uncached * prices.input + read * prices.cache_read + write * prices.cache_write) / _PER
        per.append(RequestCost(sent.tokens, read, write, cost, shared))
    return CostReport(
        provider=chosen,
        prices=prices,
        input_tokens=sum(r.input_tokens for r in per),
        cache_read_tokens=sum(r.cache_read_tokens for r in per),
        cache_write_tokens=sum(r.cache_write_tokens for r in per),
        cost=sum(r.cost for r in per),
        per_request=tuple(per),
    )


class CacheTracker:
    """The previous request of each conversation, to say which share of the next one a prompt
    cache can serve: ``observe(key, messages, counts)`` returns the tokens of the leading messages
    ``messages`` shares with the previous request of ``key`` (0 for the first), before a
    provider's minimum and steps (``openai_cached_tokens`` applies OpenAI's), and remembers
    ``messages`` as the previous request.

    Bounded to the ``max_conversations`` most recently observed keys; thread-safe (threads and
    asyncio tasks may share one tracker: the comparison runs on immutable snapshots, outside the
    lock).

    >>> tracker = CacheTracker()
    >>> a, b, c = ({"role": "user", "content": t} for t in "abc")
    >>> tracker.observe("t1", [a, b], [10, 20]), tracker.observe("t1", [a, b, c], [10, 20, 5])
    (0, 30)
    >>> tracker.observe("t1", [b, c], [20, 5])  # cut at the front: nothing is shared
    0
    """

    __slots__ = ("_lock", "_seen", "max_conversations")

    def __init__(self, max_conversations: int = 1024) -> None:
        size = max_conversations
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"max_conversations must be an int >= 1, got {max_conversations!r}")
        self.max_conversations = max_conversations
        self._seen: OrderedDict[Hashable, _Sent] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, key: Hashable, messages: Sequence[Any], counts: Sequence[int]) -> int:
        """The tokens ``messages`` shares at its start with the previous request of ``key``.

        Raises:
            ValueError: ``counts`` does not give one count per message.
        """
        if len(counts) != len(messages):
            raise ValueError(
                f"counts has {len(counts)} values for {len(messages)} messages: give one per message"
            )
        sent = _Sent.of(messages, counts)
        with self._lock:
            previous = self._seen.pop(key, None)
            self._seen[key] = sent
            if len(self._seen) > self.max_conversations:
                self._seen.popitem(last=False)
        if previous is None:
            return 0
        return sent.upto[shared_prefix(previous.messages, sent.messages)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def __repr__(self) -> str:
        return f"CacheTracker(max_conversations={self.max_conversations}, conversations={len(self)})"
