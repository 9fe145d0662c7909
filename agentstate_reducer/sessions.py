"""A bounded session for the OpenAI Agents SDK: ``ReducingSession`` (``pip install ".[openai-agents]"``).

``ReducingSession(inner, reducer)`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over a local
session that stores Responses items (``SQLiteSession``, ``AdvancedSQLiteSession``, the Redis and
SQLAlchemy sessions, or any object with those four methods). It keeps the stored history bounded
and sendable with the reducer's rules for Responses items: a call travels with its output, a
reasoning item with the item after it, the newest whole turns are kept.

* ``add_items`` stores the items, then reduces the history it holds in memory plus the new items.
  Untriggered, that costs a check of the new items only (the reducer's memo of its last output),
  and the inner session is not read again. When the reduction prunes, the stored items are
  rewritten: ``clear_session``, then ``add_items`` of the survivors; if either fails, the previous
  items are put back and the error is raised.
* ``get_items(limit)`` reads the inner session, reduces (rewriting it when that prunes) and returns
  the reduced history, or its newest ``limit`` items with anything that cannot start a history
  (an output whose call is older, a reasoning item's follower cut off) left out.
* The protocol has no replace, so one writer per session is assumed (as the SDK's compaction
  session does); the in-memory copy is refreshed on every ``get_items``.
* ``preserve_first`` defaults to False: the agent's instructions live outside the items, so the
  first item is the first user message, not a system prompt worth pinning.

Not for server-side sessions (``OpenAIConversationsSession``): the conversation lives on OpenAI's
servers, which manage its length. Importing this module imports no SDK.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from .config import ReducerConfig
from .reducer import MessageReducer

logger = logging.getLogger("agentstate_reducer.sessions")

_METHODS = ("get_items", "add_items", "pop_item", "clear_session")


class ReducingSession:
    """The SDK's ``Session`` protocol over ``session``, keeping its items bounded and sendable.

    >>> from agents import SQLiteSession  # doctest: +SKIP
    >>> inner = SQLiteSession("user-1", "chats.db")  # doctest: +SKIP
    >>> session = ReducingSession(inner, min_messages=20, max_messages=40)  # doctest: +SKIP

    Pass a ``MessageReducer`` or the ``ReducerConfig`` fields (``preserve_first`` defaults to
    False here), not both.
    """

    def __init__(self, session: Any, reducer: MessageReducer | None = None, **config: Any) -> None:
        missing = [m for m in _METHODS if not callable(getattr(session, m, None))]
        if missing:
            raise TypeError(
                f"ReducingSession wraps an Agents SDK session; {type(session).__name__} has no "
                f"{', '.join(missing)}"
            )
        if type(session).__name__ == "OpenAIConversationsSession":
            raise TypeError(
                "ReducingSession wraps local sessions (SQLiteSession and the like); an "
                "OpenAIConversationsSession keeps the conversation on OpenAI's servers"
            )
        if reducer is not None and config:
            raise TypeError(f"pass a reducer or ReducerConfig fields, not both (got {sorted(config)})")
        if reducer is None:
            reducer = MessageReducer(config=ReducerConfig(**{"preserve_first": False, **config}))
        self.session = session
        self.reducer = reducer
        self.session_id: str = session.session_id
        self._items: list[Any] | None = None  # what the inner session holds, when known
        self._repair = MessageReducer(config=ReducerConfig(preserve_first=False))
        self._lock = asyncio.Lock()

    @property
    def session_settings(self) -> Any:
        """The inner session's settings (``limit`` and the like), read and set there."""
        return getattr(self.session, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self.session.session_settings = value

    def __getattr__(self, name: str) -> Any:
        # other methods of the inner session (close, get_conversation_turns, ...)
        if name in ("session", "__setstate__"):
            raise AttributeError(name)
        return getattr(self.session, name)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The reduced history (rewritten in the inner session when the reduction prunes), or its
        newest ``limit`` items that can start a history."""
        async with self._lock:
            stored = list(await self.session.get_items())
            result = await self.reducer.areduce(stored)
            if result.pruned:
                await self._rewrite(stored, result.surviving)
            self._items = result.surviving
            view = result.surviving
        if limit is None:
            return list(view)
        if limit <= 0:
            return []
        return list(self._repair.reduce(view[-limit:]).surviving)

    async def add_items(self, items: list[Any]) -> None:
        """Store ``items``; reduce, rewriting the stored items when that prunes."""
        if not items:
            return
        async with self._lock:
            await self.session.add_items(items)
            if self._items is None:
                previous: list[Any] = list(await self.session.get_items())
                result = await self.reducer.areduce(previous)
            else:
                previous = [*self._items, *items]
                result = await self.reducer.areduce(self._items, items)
            if result.pruned:
                await self._rewrite(previous, result.surviving)
            self._items = result.surviving

    async def pop_item(self) -> Any:
        async with self._lock:
            item = await self.session.pop_item()
            self._items = None  # read again on the next add
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            await self.session.clear_session()
            self._items = []

    async def _rewrite(self, previous: Sequence[Any], surviving: Sequence[Any]) -> None:
        """Replace the stored items with ``surviving``; on failure put ``previous`` back, then raise."""
        cleared = False
        try:
            await self.session.clear_session()
            cleared = True
            if surviving:
                await self.session.add_items(list(surviving))
        except BaseException:
            self._items = None
            await asyncio.shield(self._restore(previous, cleared))
            raise

    async def _restore(self, previous: Sequence[Any], cleared: bool) -> None:
        try:
            if cleared:
                await self.session.clear_session()
            elif list(await self.session.get_items()) == list(previous):
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
