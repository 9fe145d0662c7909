"""Agno: ``ReducingCompressionManager`` (``pip install ".[agno]"``).

``Agent(model, db=..., add_history_to_context=True, compression_manager=ReducingCompressionManager(
reducer))`` bounds every model call of the agent. Agno calls its agent's compression manager
before each model request, inside the model's tool loop, with the very list it sends
(``should_compress(messages, ...)``, then ``compress(messages, run_metrics=...)`` in place; the
``a``-prefixed pair in async runs): the one place that sees every request whole, the system
message, the session history Agno added and the live turn with its tool calls and results. This
subclass of ``agno.compression.manager.CompressionManager`` reduces that list with the core, on
Agno's ``Message`` objects themselves (read by ``agentstate_reducer.messages``, never converted),
and writes the result back in place.

* Request mode: Agno rebuilds the list at every run from the stored session (copies of the stored
  messages, tagged ``from_history``), and the session keeps every run whole. What the list held is
  what the run records (``RunOutput.messages``: the history copies and the summary are tagged
  ``from_history``, which Agno skips when it reads the history again), so the stored session is
  never pruned. What the running summary covers is found again in the next run's copies by
  equality (``_common.RequestWindow``), so the summarizer and ``on_prune`` hooks see each message
  once although Agno sends the whole history at every run.
* Within a run the list is the one edited before the previous model call plus what the tool loop
  appended since; the manager keeps the history it was made from, so each call is bounded against
  the whole conversation, not against its own earlier result.
* Only the history Agno copied in (messages tagged ``from_history``) and older summaries are
  pruned: the system message and every message of the live run (its input, calls and results) stay
  in every request in order, since Agno records that very list as the run (``RunOutput.messages``)
  and the session must keep the run whole. The limits bound the history part, so a request holds up
  to ``max_messages`` of history plus the live run, and a run longer than the limit sends more.
* A conversation is named by the id of its first message after the system message (Agno's
  ``Message.id``, copied with the message into every later run's history): a compression manager
  is not told the session id. ``on_prune`` hooks get the namespace ``("memories", <that id>)``.
* ``preserve_first=False``: the system message (instructions, the agent's context) is Agno's first
  message, rebuilt at every run and pinned as any system message; the first question of a session
  is a chat turn, not a task that must stay.
* The running summary is a user ``Message`` tagged ``from_history``, after the system message.
* A token budget is in the provider's tokens (docs/tokens.md, "Calibrated budgets"): the newest
  assistant message of a list carries the usage Agno copied from the response to the
  conversation's previous request (``Message.metrics.input_tokens``), and the manager pairs it
  with the history part it let that request send (``Calibrations``), not with the whole history
  the list holds (more than was sent). The live run sent on top of that part folds into the
  ratio. No setup; until a figure is paired the counts are the counter's own.

Importing this module imports Agno; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentstate_reducer.messages import read_message, read_usage
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.tokens.calibration import Calibration

from ._bounded import BoundedMap
from ._common import (
    Bounded,
    Calibrations,
    CallFlow,
    NativeSummaries,
    ReduceRecord,
    build_reducer,
    missing_extra,
)

try:
    from agno.compression.manager import CompressionManager
    from agno.models.message import Message
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the package
    raise ImportError(missing_extra("agentstate_reducer.integrations.agno", "agno", "agno")) from exc

__all__ = ["ReduceRecord", "ReducingCompressionManager", "summary_message"]

logger = logging.getLogger("agentstate_reducer.integrations.agno")

_WHAT = "ReducingCompressionManager"

#: given while a conversation has no paired figure: never fed, so the counts are the counter's own
#: (the history's own figures were reported for fewer messages than the list holds)
_UNCALIBRATED: Final = Calibration()


def summary_message(content: str) -> Message:
    """The running summary as Agno sends it: a user message, tagged as history (never stored as
    a turn of the run)."""
    return Message(role="user", content=content, from_history=True)


def _text_of(message: Any) -> str | None:
    """The text of a user ``Message`` with string content; None for anything else."""
    if not isinstance(message, Message) or message.role != "user":
        return None
    return message.content if isinstance(message.content, str) else None


class _InList:
    """In ``_Edited.history``: the message at position ``at`` of the edited list (held by it)."""

    __slots__ = ("at",)

    def __init__(self, at: int) -> None:
        self.at = at


def _weak(message: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(message)
    except TypeError:  # a message without weak references is held
        return lambda: message


@dataclass(frozen=True, slots=True)
class _Edited:
    """One list as the manager left it: what it was made from and what it holds.

    Holds only the messages the list no longer does (those pruned from it); the list's own are
    referenced weakly, so once Agno drops the list (the run ended) the entry holds nothing the
    caller dropped and is swept (``gone``)."""

    key: str
    #: the whole history the list stood for, in order: a message pruned from the list, or
    #: ``_InList`` for one the list holds
    history: tuple[Any, ...]
    #: weak references to the messages written into the list, in order
    sent: tuple[Callable[[], Any], ...]

    @classmethod
    def of(cls, key: str, history: Sequence[Any], messages: Sequence[Any]) -> _Edited:
        at = {id(m): i for i, m in enumerate(messages)}
        kept = tuple(_InList(at[id(m)]) if id(m) in at else m for m in history)
        return cls(key, kept, tuple(_weak(m) for m in messages))

    def extended_by(self, messages: Sequence[Any]) -> bool:
        """Whether ``messages`` starts with the very messages written into the list."""
        return len(messages) >= len(self.sent) and all(
            r() is m for r, m in zip(self.sent, messages, strict=False)
        )

    def whole(self, messages: Sequence[Any]) -> list[Any]:
        """The history ``messages`` (``extended_by`` it) stands for."""
        return [
            *(messages[h.at] if isinstance(h, _InList) else h for h in self.history),
            *messages[len(self.sent) :],
        ]

    def gone(self) -> bool:
        """The list's last message (the live run's own) is gone: Agno dropped the list, the run
        ended."""
        return bool(self.sent) and self.sent[-1]() is None


class ReducingCompressionManager(CompressionManager):
    """A compression manager keeping every model call of an Agno agent bounded and sendable.

    >>> from agno.agent import Agent  # doctest: +SKIP
    >>> agent = Agent(model, db=db, add_history_to_context=True,  # doctest: +SKIP
    ...               compression_manager=ReducingCompressionManager(max_messages=40))

    Args:
        reducer: the ``MessageReducer`` whose settings apply (limits, token counter, hooks);
            or pass its keyword arguments instead (default ``min_messages=20, max_messages=40``).
        summarizer: ``(messages) -> str`` or an async one; the pruned ``Message`` objects (the
            previous summary among them) become one running summary message. Replaces the
            reducer's summarizer. In a sync run (``Agent.run``) an async summarizer runs on a
            private event loop in a worker thread, as the core runs it.
        on_reduce: called with a ``ReduceRecord`` after each model call was bounded.
        validate: repair the request by the planner's rules before it is sent.
        preserve_first: pin the first message after the system message.

    One instance may serve many agents, sessions and threads at once. It replaces Agno's
    tool-result compression for the agent (one compression manager per agent).

    Raises:
        TypeError: a reducer that is no ``MessageReducer``, a reducer and keyword arguments
            together, a summarizer or ``on_reduce`` that is not callable, a ``validate`` or
            ``preserve_first`` that is no bool.
        ValueError: keyword arguments that are no valid ``ReducerConfig``.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Callable[[list[Any]], Any] | None = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        **reducer_kwargs: Any,
    ) -> None:
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=_WHAT
        )
        try:
            self._flow = CallFlow(
                built,
                mode="request",
                validate=validate,
                on_reduce=on_reduce,
                native=NativeSummaries(summary_message, _text_of),
                logger=logger,
            )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{_WHAT}: {exc}") from None
        self.reducer = self._flow.reducer
        # the lists being sent, by identity: one per run in progress
        self._edited: BoundedMap[int, _Edited] = BoundedMap(256)
        self._calibrations = Calibrations(self.reducer)
        super().__init__(compress_tool_results=True)

    # -- Agno's compression manager interface ----------------------------------------------------

    def should_compress(
        self, messages: list[Message], tools: Any = None, model: Any = None, response_format: Any = None
    ) -> bool:
        """Always: every model call is bounded (a call within the limits is sent as it is)."""
        return True

    async def ashould_compress(
        self, messages: list[Message], tools: Any = None, model: Any = None, response_format: Any = None
    ) -> bool:
        """Always, as ``should_compress``."""
        return True

    def compress(self, messages: list[Message], run_metrics: Any = None) -> None:
        """Bound ``messages``, the request Agno is about to send, in place."""
        begun = self._history(messages)
        if begun is None:
            return
        key, history = begun
        prunable, own = _split(history)
        bounded = self._flow.bound(key, prunable, thread=key, calibration=self._calibration(key, messages))
        self._write(messages, key, history, bounded, own)

    async def acompress(self, messages: list[Message], run_metrics: Any = None) -> None:
        """``compress`` with the async summarizer and hooks."""
        begun = self._history(messages)
        if begun is None:
            return
        key, history = begun
        prunable, own = _split(history)
        calibration = self._calibration(key, messages)
        bounded = await self._flow.abound(key, prunable, thread=key, calibration=calibration)
        self._write(messages, key, history, bounded, own)

    # -- the history behind one list -------------------------------------------------------------

    def _history(self, messages: list[Message]) -> tuple[str, list[Any]] | None:
        """The conversation's key and the whole history ``messages`` stands for: the list as Agno
        built it, or, for a list this manager edited before (the same run's next model call), the
        history it was made from and what the tool loop appended since."""
        edited = self._edited.get(id(messages))
        if edited is not None and edited.extended_by(messages):
            return edited.key, edited.whole(messages)
        first = next((m for m in messages if read_message(m).kind != "system"), None)
        if first is None:
            return None
        return str(read_message(first).id or id(first)), list(messages)

    def _calibration(self, key: str, messages: list[Message]) -> Calibration:
        """``key``'s calibration, after pairing the usage of the newest assistant message in
        ``messages`` (the response to the conversation's previous request) with what that
        request sent; ``_UNCALIBRATED`` while nothing is paired."""
        newest = next((m for m in reversed(messages) if read_message(m).kind == "ai"), None)
        figure = read_usage(newest) if newest is not None else None
        source = getattr(newest, "id", None)  # Agno copies a message's id into later runs
        found = self._calibrations.calibration(key, figure, source=_text_id(source))
        return found if found is not None else _UNCALIBRATED

    def _write(
        self, messages: list[Message], key: str, history: list[Any], bounded: Bounded, own: list[Any]
    ) -> None:
        # the history part this request sends: its usage comes back on the response
        self._calibrations.sent(key, bounded.sent)
        sent = [*bounded.sent, *own]
        if len(sent) != len(messages) or any(a is not b for a, b in zip(sent, messages, strict=True)):
            messages[:] = sent
        self._edited.sweep(_Edited.gone)
        self._edited.put(id(messages), _Edited.of(key, history, messages))

    def __repr__(self) -> str:
        return f"ReducingCompressionManager({self.reducer!r}, validate={self._flow.validate})"


def _text_id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _split(history: list[Any]) -> tuple[list[Any], list[Any]]:
    """``history`` as what may be pruned (the leading system messages and everything up to the
    last ``from_history`` message: the session history Agno copied in, after any extra messages)
    and the live run's own messages after it (its input, calls and results, in order), which Agno
    records as the run and so are never pruned."""
    end = 0
    while end < len(history) and read_message(history[end]).kind == "system":
        end += 1
    for i in range(len(history) - 1, end - 1, -1):
        if getattr(history[i], "from_history", False) is True:
            end = i + 1
            break
    return history[:end], history[end:]

