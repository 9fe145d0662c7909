"""What a reduction returns: ``ReducerResult`` and its ``ReducerStats``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["messages", "tokens", "off"]


@dataclass(frozen=True, slots=True)
class ReducerStats:
    """What one reduction did, for logs and metrics."""

    mode: Mode
    triggered: bool
    messages_before: int
    messages_after: int
    pruned_count: int
    #: tokens before and after; None in count mode (tokens are only counted in token mode).
    #: ``tokens_before`` may hold the count a message had when it was last checked, when it was
    #: edited in place since and lies before what a triggered decision reads (docs/tokens.md)
    tokens_before: int | None = None
    tokens_after: int | None = None
    #: the kept history is over the target because one unit, or the live turn, is bigger than it
    over_target: bool = False
    #: the summarizer raised or timed out: ``repr`` of the error (see ``ReducerConfig.on_summary_error``)
    summary_error: str | None = None
    #: no trigger fired, but messages a provider rejects (orphan, late or second results, dangling
    #: calls) were pruned
    repaired: bool = False
    #: token mode: the calibration ratio the counts were scaled by (``tokens_before``/``after``
    #: are in the provider's tokens then), None when they are the counter's own
    token_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class ReducerResult:
    """``surviving`` and ``pruned`` partition the input, each in original order.

    With ``inject_summary``, they partition the input *plus the injected summary message*: the new
    summary is in ``surviving`` (after the leading pinned messages) and the summary it replaces is
    at the front of ``pruned``.
    """

    surviving: list[Any]
    pruned: list[Any]
    summary: str | None = None
    stats: ReducerStats = field(
        default_factory=lambda: ReducerStats("off", False, 0, 0, 0), compare=False, repr=False
    )

__all__ = ["Mode", "ReducerResult", "ReducerStats"]
