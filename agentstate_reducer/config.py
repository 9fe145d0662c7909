"""``ReducerConfig``: the policy, validated once at construction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

SummaryErrorPolicy = Literal["keep", "prune"]


def _check_count(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or None" if optional else "an int"
        raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} ({value}) must be >= 0")


@dataclass(frozen=True, kw_only=False)
class ReducerConfig:
    """How and when to prune. The fields up to ``summarize_fn`` are the public positional API:
    their order, names and defaults never change; fields after them are keyword additions.

    Count mode (``max_tokens`` unset): pruning triggers when the list is longer than
    ``max_messages`` and keeps at most ``min_messages`` messages besides the pinned ones.
    Token mode (``max_tokens`` set, takes precedence): pruning triggers when the list costs more
    than ``max_tokens`` and keeps at most ``target_tokens`` (default ``max_tokens``), pinned
    messages included.
    """

    min_messages: int = 10
    max_messages: int | None = 20
    max_tokens: int | None = None
    target_tokens: int | None = None
    token_counter: Callable[[Any], int] | None = None
    preserve_first: bool = True
    cascade_tool_messages: bool = True
    summarize_fn: Callable[[list[Any]], str] | None = None
    # --- keyword additions (keep them after the positional API above) --------------------------
    #: Cut the kept history at a turn boundary, so it starts with a human message.
    start_on_human: bool = True
    #: tiktoken encoding used when ``token_counter`` is None: a name ("o200k_base" for newer OpenAI
    #: models) or a ready ``tiktoken.Encoding`` (e.g. built from a local file).
    encoding: Any = "cl100k_base"
    #: ``"keep"``: when the summarizer raises or times out, prune nothing this time (nothing is
    #: lost; the messages are summarized at the next reduction); ``"prune"``: prune anyway, with no
    #: new summary.
    on_summary_error: SummaryErrorPolicy = "keep"
    #: Put one running summary message into ``surviving`` (see ``agentstate_reducer.summary``).
    #: Opt-in everywhere, also behind a checkpoint saver; needs ``summarize_fn`` or ``asummarize_fn``.
    inject_summary: bool = False
    #: ``(text, count) -> message`` building the injected summary message (``count``: conversation
    #: messages the summary covers); None = a user message in the shape of the input.
    summary_message_factory: Callable[[str, int], Any] | None = None
    #: Hooks ``fn(pruned, namespace)`` called after a reduction that pruned; failures are logged.
    on_prune: Sequence[Callable[[list[Any], Any], None]] = field(default=())
    #: ``async (pruned) -> str``, used by ``areduce``/``aput``; ``reduce`` uses ``summarize_fn`` when
    #: set, else runs this on a private event loop in a worker thread.
    asummarize_fn: Callable[[list[Any]], Awaitable[str]] | None = None
    #: Seconds the summarizer may take; past it the call counts as failed (``on_summary_error``).
    #: A sync ``summarize_fn`` cannot be interrupted: it finishes in its thread, unused.
    summary_timeout: float | None = None
    #: Token mode in the provider's tokens, learned from the usage each request reports
    #: (``agentstate_reducer.tokens.calibration``, docs/tokens.md "Calibrated budgets"). None:
    #: on for the built-in counters (tiktoken, heuristic), off for your ``token_counter``, which is
    #: taken as exact; True: on for any counter; False: off, counts used as they are.
    calibrate: bool | None = None

    def __post_init__(self) -> None:
        _check_count("min_messages", self.min_messages, optional=False)
        _check_count("max_messages", self.max_messages, optional=True)
        _check_count("max_tokens", self.max_tokens, optional=True)
        _check_count("target_tokens", self.target_tokens, optional=True)
        if self.max_messages is not None and self.min_messages > self.max_messages:
            raise ValueError(
                f"min_messages ({self.min_messages}) must be <= max_messages ({self.max_messages})"
            )
        if self.target_tokens is not None:
            if self.max_tokens is None:
                raise ValueError(
                    f"target_tokens ({self.target_tokens}) needs max_tokens: set max_tokens to the "
                    "threshold that triggers pruning"
                )
            if self.target_tokens > self.max_tokens:
                raise ValueError(
                    f"target_tokens ({self.target_tokens}) must be <= max_tokens ({self.max_tokens})"
                )
        for name in ("token_counter", "summarize_fn", "summary_message_factory", "asummarize_fn"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
        for name in ("preserve_first", "cascade_tool_messages", "start_on_human", "inject_summary"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.inject_summary and self.summarize_fn is None and self.asummarize_fn is None:
            raise ValueError(
                "inject_summary=True needs summarize_fn (or asummarize_fn): there is no summary to inject"
            )
        timeout = self.summary_timeout
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                    or not timeout > 0):
            raise ValueError(f"summary_timeout must be a number of seconds > 0 or None, got {timeout!r}")
        if self.calibrate is not None and not isinstance(self.calibrate, bool):
            raise TypeError(f"calibrate must be a bool or None, got {self.calibrate!r}")
        if self.on_summary_error not in ("keep", "prune"):
            raise ValueError(f"on_summary_error must be 'keep' or 'prune', got {self.on_summary_error!r}")
        if isinstance(self.encoding, str):
            if not self.encoding:
                raise ValueError("encoding must be a tiktoken encoding name such as 'cl100k_base', got ''")
        elif not callable(getattr(self.encoding, "encode_ordinary", None)):
            raise TypeError(
                "encoding must be a tiktoken encoding name or a tiktoken.Encoding, "
                f"got {type(self.encoding).__name__}"
            )
        hooks = self.on_prune
        if callable(hooks):
            hooks = (hooks,)  # a single hook is accepted for convenience
        if not isinstance(hooks, Sequence) or not all(callable(h) for h in hooks):
            raise TypeError("on_prune must be a sequence of callables fn(pruned, namespace)")
        object.__setattr__(self, "on_prune", tuple(hooks))

    @property
    def token_mode(self) -> bool:
        return self.max_tokens is not None

    @property
    def effective_target_tokens(self) -> int | None:
        """The token budget after a trigger; ``target_tokens=0`` is a value, not "unset"."""
        return self.max_tokens if self.target_tokens is None else self.target_tokens
