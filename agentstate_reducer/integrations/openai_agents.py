"""A bounded session for the OpenAI Agents SDK: ``ReducingSession`` (``pip install ".[openai-agents]"``).

``ReducingSession(inner, reducer)`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over a local
session that stores Responses items (``SQLiteSession``, ``AdvancedSQLiteSession``, the Redis and
SQLAlchemy sessions, or any object with those four methods). It keeps the stored history bounded
and sendable with the reducer's rules for Responses items: a call travels with its output, a
reasoning item with the item after it, the newest whole turns are kept.

* ``add_items`` checks its argument before anything is written (a list of items, each a mapping
  with a ``type`` or a ``role``; else ``TypeError``), stores the items, then reduces the history
  it holds in memory plus the new items. Untriggered, that costs a check of the new items only
  (the reducer's memo of its last output), and the inner session is not read again.
* When a reduction prunes, the stored items are replaced by the survivors. Where the inner
  session has the SDK's atomic replacement (``_get_compaction_snapshot``, internal to the SDK,
  which its ``OpenAIResponsesCompactionSession`` uses; ``SQLiteSession``, ``AsyncSQLiteSession``,
  ``SQLAlchemySession`` and an ``EncryptedSession`` over one of them, not their subclasses), that
  is one transaction that also checks the stored
  items are the ones reduced: a crash leaves the old items or the survivors, and a writer in
  another process makes the reduction start again from what is stored. Any other session has no
  replace in its protocol: ``clear_session``, then ``add_items`` of the survivors, and if either
  raises the previous items are put back; a process killed between the two leaves the session
  without the items.
* ``on_prune`` hooks get the namespace ``("memories", session_id)`` (``StoreArchive`` files the
  pruned items there) and run before the stored items are replaced, so an item is archived
  before it leaves the session; a replacement that fails or starts again archives it again.
* ``get_items(limit)`` reads the whole inner session (whatever its ``session_settings.limit``),
  reduces (replacing the stored items when that prunes) and returns the reduced history, or at
  most ``limit`` of its newest items: from the first user message among them, or, when they hold
  none (one turn longer than ``limit``), the newest whole units of that turn that fit. Without a
  ``limit``, the inner session's ``session_settings.limit`` is the limit, as in the SDK's sessions.
* One ``ReducingSession`` serves one session: its calls are serialized by a lock, and the
  in-memory copy is refreshed on every ``get_items``. Writes that bypass it (``inner.add_items``,
  another process) are seen at the next ``get_items``.
* It takes the words of every integration: a ``MessageReducer``, ``config=ReducerConfig(...)``
  or the ``ReducerConfig`` fields (``min_messages=20, max_messages=40`` when none is given),
  ``summarizer=``, ``preserve_first=``; a misspelt one is refused with the name it resembles.
* ``preserve_first`` defaults to False, for a given reducer or config too: the agent's
  instructions live outside the items, so the first item is the first user message, not a
  system prompt worth pinning.
* With a summarizer (``summarizer=``, or a ``summarize_fn``/``asummarize_fn`` however given) a
  reduction that prunes stores one running summary first: ``{"role": "user", "content":
  "Summary of the earlier conversation (N messages):\n..."}``, the item the runner stores for
  text input, which the SDK's Responses and Chat Completions models (and LiteLLM) send as a user
  message. Read back, a user message with that header is the running summary: the next
  reduction replaces it, and the summarizer gets it first with the newly pruned items. A
  summarizer that fails prunes nothing (``on_summary_error="keep"``). A ``limit`` (given or the
  inner session's) returns the newest items only: the summary is among them while it is.

* With a token budget (``max_tokens``), ``UsageHooks(session)``
  (``agentstate_reducer.integrations.openai_agents_usage``) feeds ``session.calibration`` with
  the input items of each model call and the usage its response reported, so the budget is in
  the provider's tokens (docs/tokens.md, "Calibrated budgets"), and its
  ``call_model_input_filter`` bounds each request of a run, whose tool loop adds items on top
  of the stored history (``bound_input``); a session sees no model call itself.

Not for server-side sessions (``OpenAIConversationsSession``): the conversation lives on OpenAI's
servers, which manage its length. Importing this module imports no SDK.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from agentstate_reducer import telemetry
from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.messages import read_message
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.tokens.calibration import Calibration

from ._common import NativeSummaries, build_reducer, responses_summary_item, responses_summary_text

logger = logging.getLogger("agentstate_reducer.sessions")

_METHODS = ("get_items", "add_items", "pop_item", "clear_session")

#: Attempts at an atomic replacement whose stored items keep changing under it (other writers);
#: after them the items stay as they are (longer than the bound, nothing lost) until the next write.
_REPLACE_ATTEMPTS = 5

_WHAT = "ReducingSession"

#: words of the model-call integrations that a session, which sees no model call, does not take
_NOT_HERE = {
    "on_reduce": "a session sees no model call; on_prune=[hook] gets what each reduction pruned "
    "(hook(items, namespace)), and get_items() returns what the next run sends",
    "validate": "the stored history is always kept sendable (the SDK's runner reads it whole)",
}


@dataclass(frozen=True, slots=True)
class _Held:
    """The items of the inner session, and the same items as the reducer reads them (the running
    summary as the core's summary message; the same list without a summarizer)."""

    items: list[Any]
    readable: list[Any]


@dataclass(frozen=True, slots=True)
class _Reduced:
    """One reduction of the stored items: what the session holds afterwards, and whether it
    pruned (then the stored items are to be replaced)."""

    held: _Held
    pruned: bool


class _Snapshot(Protocol):
    """The SDK's compaction snapshot: the newest stored items and their atomic replacement."""

    items: list[Any]
    complete: bool
    replace_suffix: Callable[[int, list[Any]], Awaitable[bool]]


def _is_snapshot(value: object) -> TypeGuard[_Snapshot]:
    """True for a snapshot this module can use (a session without one answers None)."""
    return (
        isinstance(getattr(value, "items", None), list)
        and isinstance(getattr(value, "complete", None), bool)
        and callable(getattr(value, "replace_suffix", None))
    )


def _checked_items(items: object) -> list[Any]:
    """``items`` as a new list, or ``TypeError`` saying what was passed and what to pass.

    A Responses item is a mapping with a string ``type`` or ``role`` (``{"role": "user",
    "content": ...}``, ``{"type": "function_call", ...}``). A string, a single item and anything
    that is not a list of items are refused whole, so nothing of them is written.
    """
    if isinstance(items, str | bytes):
        raise TypeError(
            f"add_items takes a list of Responses items, got a {type(items).__name__}; "
            "wrap text in an item: add_items([{'role': 'user', 'content': text}])"
        )
    if isinstance(items, Mapping):
        raise TypeError(
            f"add_items takes a list of Responses items, got one item (a {type(items).__name__}); "
            "pass a list: add_items([item])"
        )
    if callable(getattr(items, "model_dump", None)):  # pydantic models iterate over their fields
        raise TypeError(
            f"add_items takes a list of Responses items, got one SDK object ({type(items).__name__}); "
            "pass a list of dicts: add_items([item.model_dump(exclude_unset=True)])"
        )
    if not isinstance(items, Iterable):
        raise TypeError(f"add_items takes a list of Responses items, got {type(items).__name__}")
    batch = list(items)
    for i, item in enumerate(batch):
        if not isinstance(item, Mapping):
            raise TypeError(
                f"add_items: item {i} is a {type(item).__name__}, not a Responses item; each item is "
                "a dict with a 'type' or a 'role', e.g. {'role': 'user', 'content': ...}"
                + (" (from an SDK object: item.model_dump(exclude_unset=True))"
                   if callable(getattr(item, "model_dump", None)) else "")
            )
        if not isinstance(item.get("type"), str) and not isinstance(item.get("role"), str):
            keys = ", ".join(repr(k) for k in list(item)[:8]) or "none"
            raise TypeError(
                f"add_items: item {i} has no 'type' or 'role' (its keys: {keys}); a Responses item "
                "says what it is, e.g. {'role': 'user', 'content': ...} or {'type': 'function_call', ...}"
            )
    return batch


class ReducingSession:
    """The SDK's ``Session`` protocol over ``session``, keeping its items bounded and sendable.

    >>> from agents import SQLiteSession  # doctest: +SKIP
    >>> inner = SQLiteSession("user-1", "chats.db")  # doctest: +SKIP
    >>> session = ReducingSession(inner, min_messages=20, max_messages=40)  # doctest: +SKIP

    Args:
        session: the local session that stores the items (``SQLiteSession`` and the like).
        reducer: the ``MessageReducer`` whose settings apply (limits, token counter, hooks); or
            pass ``config=ReducerConfig(...)``, or its fields as keyword arguments (default
            ``min_messages=20, max_messages=40``); one of the three.
        summarizer: ``(items) -> str`` or an async one; the pruned items (the previous summary
            among them, as the item the session stores) become one running summary item, a
            user message, first in the session. Replaces the reducer's summarizer; a
            ``summarize_fn`` given any other way is injected the same way.
        preserve_first: pin the first item. False: the agent's instructions live outside the
            items, so the first item is the first user message, not a system prompt.
        config: a ``ReducerConfig`` instead of its fields.

    Raises:
        TypeError: ``session`` lacks a method of the protocol or is an
            ``OpenAIConversationsSession``; a reducer that is no ``MessageReducer`` or a config
            that is no ``ReducerConfig``; two of reducer, config and keyword arguments; an
            unknown keyword argument, or ``on_reduce``/``validate`` (a session sees no model
            call); a summarizer that is not callable; a ``preserve_first`` that is no bool.
        ValueError: keyword arguments that are no valid ``ReducerConfig``.
    """

    def __init__(
        self,
        session: Any,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Callable[[list[Any]], Any] | None = None,
        preserve_first: bool = False,
        config: ReducerConfig | None = None,
        **reducer_kwargs: Any,
    ) -> None:
        missing = [m for m in _METHODS if not callable(getattr(session, m, None))]
        if missing:
            raise TypeError(
                f"{_WHAT} wraps an Agents SDK session; {type(session).__name__} has no "
                f"{', '.join(missing)}"
            )
        if type(session).__name__ == "OpenAIConversationsSession":
            raise TypeError(
                f"{_WHAT} wraps local sessions (SQLiteSession and the like); an "
                "OpenAIConversationsSession keeps the conversation on OpenAI's servers"
            )
        for word, why in _NOT_HERE.items():
            if word in reducer_kwargs:
                raise TypeError(f"{_WHAT} takes no {word}=: {why}")
        if config is not None:
            if not isinstance(config, ReducerConfig):
                raise TypeError(f"{_WHAT}: config must be a ReducerConfig, got {type(config).__name__}")
            if reducer is not None:
                raise TypeError(f"{_WHAT}: pass a MessageReducer or config=ReducerConfig(...), not both")
            if reducer_kwargs:
                raise TypeError(
                    f"{_WHAT}: pass config=ReducerConfig(...) or its fields, not both "
                    f"(got a config and {sorted(reducer_kwargs)})"
                )
            reducer = MessageReducer(config=config)
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=_WHAT
        )
        #: the running summary as the item the session stores (None: the reducer injects none)
        self._native: NativeSummaries | None = None
        if built.config.inject_summary:
            self._native = NativeSummaries(responses_summary_item, responses_summary_text)
        #: the reducer the session runs (its summarizer and hooks see the items the session stores)
        self.reducer = self._native.speaking_natively(built) if self._native is not None else built
        self.session = session
        self.session_id: str = session.session_id
        self._held: _Held | None = None  # what the inner session holds, when known
        self._lock = asyncio.Lock()
        #: this session's token calibration, fed by ``openai_agents_usage.UsageHooks``
        self.calibration = Calibration()

    @property
    def session_settings(self) -> Any:
        """The inner session's settings (``limit`` and the like), read and set there."""
        return getattr(self.session, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self.session.session_settings = value

    def __getattr__(self, name: str) -> Any:
        # other public methods of the inner session (close, get_conversation_turns, ...); its
        # private ones (the SDK's _get_compaction_snapshot, _atomic_replace_items) would write the
        # stored items behind this wrapper, so an SDK wrapper around it must not find them here
        if name == "session" or name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.session, name)

    @property
    def _namespace(self) -> tuple[str, str]:
        """Where ``on_prune`` hooks file this session's pruned items (``StoreArchive``)."""
        return ("memories", self.session_id)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The reduced history (the stored items replaced when the reduction prunes), or at most
        ``limit`` of its newest items, cut at the start only, to a start that can be sent."""
        async with self._lock:
            self._held = None  # unknown until what is stored is reduced
            stored = await self._read_all()
            reduced = await self._reduce(stored)
            if reduced.pruned:
                await self._replace(stored, reduced)
            else:
                self._held = reduced.held
            view = list((self._held if self._held is not None else reduced.held).items)
        if limit is None:
            limit = self._own_limit()
            if limit is None:
                return view
        if limit <= 0:
            return []
        return self._tail(view, limit)

    def bound_input(self, items: Sequence[Any]) -> list[Any]:
        """The input items of one model request bounded as the session bounds what it stores.

        ``items``: what the runner sends (the session's history, the run's new input and the
        items its tool loop added). The session's reducer plans the cut with
        ``calibration``, so a request stays within ``max_tokens`` in the provider's tokens
        while the tool loop grows it; calls stay with their outputs. Returns ``items`` as a
        new list when nothing is over the budget. A view of the request: nothing stored changes
        and no summarizer or ``on_prune`` hook runs. The items it leaves out stay in the
        session, which prunes, summarizes and archives them at its next reduction, so each
        item is handled there once.
        """
        batch = list(items)
        readable = self._native.inward(batch) if self._native is not None else batch
        calibration = self.calibration if self.calibration.anchor is not None else None
        planned, _ = self.reducer.plan(readable, calibration=calibration)
        if len(planned.kept) == len(batch):
            return batch
        return [batch[i] for i in planned.kept]

    async def add_items(self, items: list[Any]) -> None:
        """Store ``items``; reduce, replacing the stored items with the survivors when that prunes.

        ``TypeError`` before anything is written when ``items`` is not a list of Responses items.
        """
        batch = _checked_items(items)
        if not batch:
            return
        async with self._lock:
            known, self._held = self._held, None  # unknown until this write is reduced
            await self.session.add_items(batch)
            if known is None:
                previous: list[Any] = await self._read_all()
                if previous[-len(batch) :] == batch:  # the hooks get the caller's own new items
                    previous[-len(batch) :] = batch
                reduced = await self._reduce(previous)
            else:
                previous = [*known.items, *batch]
                reduced = await self._reduce(previous, known, len(batch))
            if reduced.pruned:
                await self._replace(previous, reduced)
            else:
                self._held = reduced.held

    async def pop_item(self) -> Any:
        async with self._lock:
            item = await self.session.pop_item()
            self._held = None  # read again on the next add
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            await self.session.clear_session()
            self._held = _Held([], [])

    # -- reducing -------------------------------------------------------------------------------

    async def _reduce(self, items: list[Any], known: _Held | None = None, new: int = 0) -> _Reduced:
        """Reduce the stored ``items``: the summary item the session stores is the core's summary
        while reduced, and the item the session stores again after. With ``known``, ``items`` is
        its items plus ``new`` more, and only those are read again (the untriggered path)."""
        native = self._native
        readable: list[Any]
        # without a reported figure yet, the core reads any usage the items carry
        calibration = self.calibration if self.calibration.anchor is not None else None
        with telemetry.entry("openai_agents"):
            if known is None:
                readable = native.inward(items) if native is not None else items
                result = await self.reducer.areduce(
                    readable, namespace=self._namespace, calibration=calibration
                )
            else:
                batch = items[len(items) - new :]
                readable = native.inward(batch) if native is not None else batch
                result = await self.reducer.areduce(
                    known.readable, readable, namespace=self._namespace, calibration=calibration
                )
        surviving = list(result.surviving)
        if not result.pruned:  # all kept: the items themselves, each readable as it was read
            return _Reduced(_Held(items, surviving), False)
        held = _Held(native.outward(surviving) if native is not None else surviving, surviving)
        return _Reduced(held, True)

    # -- reading --------------------------------------------------------------------------------

    async def _read_all(self) -> list[Any]:
        """Every stored item: the inner session's own ``session_settings.limit`` would hand back
        only its newest ones, and a replacement computed from those would delete the rest."""
        if self._own_limit() is None:
            return list(await self.session.get_items())
        return list(await self.session.get_items(limit=sys.maxsize))

    def _own_limit(self) -> int | None:
        """``session_settings.limit`` of the inner session: how many items ``get_items()`` without
        a limit returns, as the SDK's sessions do."""
        settings = getattr(self.session, "session_settings", None)
        limit = settings.get("limit") if isinstance(settings, Mapping) else getattr(settings, "limit", None)
        return limit if isinstance(limit, int) else None

    def _tail(self, view: list[Any], limit: int) -> list[Any]:
        """At most ``limit`` newest items of the sendable ``view``, cut at the start only: from
        the first user message among them (a turn boundary: no group or reasoning unit spans
        it), else (their turn is longer than ``limit``) the newest whole units of that turn."""
        if limit >= len(view):
            return view
        tail = view[-limit:]
        start = next((i for i, m in enumerate(tail) if read_message(m).kind == "human"), None)
        if start is not None:
            return tail[start:]
        older = range(len(view) - limit - 1, -1, -1)
        turn_start = next((i + 1 for i in older if read_message(view[i]).kind == "human"), 0)
        return self._newest_units(view[turn_start:], limit)

    def _newest_units(self, turn: list[Any], limit: int) -> list[Any]:
        """The newest whole units of ``turn`` (a turn's model and tool items) that fit in
        ``limit``; empty when its newest unit alone is longer."""
        fit = MessageReducer(
            config=ReducerConfig(min_messages=limit, max_messages=limit, preserve_first=False,
                                 start_on_human=False)
        )  # fmt: skip
        kept = set(fit.plan(turn)[0].kept)
        start = len(turn)
        while start > 0 and start - 1 in kept:  # the kept suffix: a pinned item further back is older
            start -= 1
        return turn[start:] if len(turn) - start <= limit else []

    # -- replacing ------------------------------------------------------------------------------

    async def _replace(self, previous: list[Any], reduced: _Reduced) -> None:
        """Replace the stored ``previous`` items with ``reduced.held.items``, atomically where the
        inner session can; ``self._held`` is what it holds afterwards (None: unknown)."""
        reader = getattr(self.session, "_get_compaction_snapshot", None)
        if callable(reader) and await self._replace_atomically(reader, previous, reduced):
            return
        await self._rewrite(previous, reduced.held)

    async def _replace_atomically(
        self, reader: Callable[[int], Awaitable[_Snapshot | None]], previous: list[Any], reduced: _Reduced
    ) -> bool:
        """One transaction of the inner session (the SDK's compaction snapshot): it replaces the
        stored items only if they are still the ones read. False when the session has none."""
        for _ in range(_REPLACE_ATTEMPTS):
            limit = len(previous) + 1
            snapshot = await reader(limit)
            while _is_snapshot(snapshot) and not snapshot.complete and len(snapshot.items) >= limit:
                limit *= 2  # more stored than read: read them all
                snapshot = await reader(limit)
            if not _is_snapshot(snapshot) or not snapshot.complete:
                return False  # none, or older items it would not replace (unreadable ones)
            stored = list(snapshot.items)
            if stored != previous:  # another writer, or items that read back differently
                previous = stored
                reduced = await self._reduce(stored)
                if not reduced.pruned:
                    self._held = reduced.held
                    return True
            try:
                replaced = await snapshot.replace_suffix(0, list(reduced.held.items))
            except BaseException:
                self._held = None  # the transaction rolled back: read again next time
                raise
            if replaced:
                self._held = reduced.held
                return True
        logger.warning(
            "session %r: its stored items kept changing while being replaced (%d attempts); they "
            "stay as they are until the next write",
            self.session_id,
            _REPLACE_ATTEMPTS,
        )
        self._held = None
        return True

    async def _rewrite(self, previous: Sequence[Any], surviving: _Held) -> None:
        """Replace the stored items with ``surviving.items`` through the protocol (clear, then
        add); on failure put ``previous`` back, then raise."""
        cleared = False
        try:
            await self.session.clear_session()
            cleared = True
            if surviving.items:
                await self.session.add_items(list(surviving.items))
        except BaseException:
            self._held = None
            await asyncio.shield(self._restore(previous, cleared))
            raise
        self._held = surviving

    async def _restore(self, previous: Sequence[Any], cleared: bool) -> None:
        try:
            if cleared:
                await self.session.clear_session()
            elif await self._read_all() == list(previous):
                return  # the clear failed before changing anything
            else:
                await self.session.clear_session()
            if previous:
                await self.session.add_items(list(previous))
        except Exception:
            logger.warning(
                "session %r: rewriting the reduced history failed and so did putting the previous "
                "%d items back; the session may hold fewer items than before",
                self.session_id,
                len(previous),
                exc_info=True,
            )
            return
        logger.warning(
            "session %r: rewriting the reduced history failed; the previous %d items were put back",
            self.session_id,
            len(previous),
        )
