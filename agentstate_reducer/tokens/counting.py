"""Counting with any counter, the reducer's one counting path: a ``TokenCounter`` answers from
its cache; any other callable (a user's counter) is called once per message and its result
checked, so a wrong result raises ``TokenCountError`` naming the message instead of a wrong plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentstate_reducer.messages import MessageInfo, read_message
from agentstate_reducer.tokens.cache import TokenCounter, TokenCounterFn, TokenCountError


def count_messages(counter: TokenCounterFn, messages: Sequence[Any]) -> list[int]:
    """The token count of each message with any counter: the reducer's one counting path.

    A ``TokenCounter`` answers from its cache. Any other callable is called once per message and
    its result checked: an exception, or a result that is not a non-negative int, raises
    ``TokenCountError`` naming the message index.
    """
    if isinstance(counter, TokenCounter):
        return counter.count_messages(messages)
    counts: list[int] = []
    for i, msg in enumerate(messages):
        try:
            n = counter(msg)
        except Exception as exc:
            raise TokenCountError(
                f"token_counter raised {type(exc).__name__} for message {i} ({_describe(msg)}): {exc}; "
                "fix the counter so that it returns an int for every message"
            ) from exc
        if not (type(n) is int or (isinstance(n, int) and not isinstance(n, bool))) or n < 0:
            raise TokenCountError(
                f"token_counter returned {n!r} ({type(n).__name__}) for message {i} ({_describe(msg)}); "
                "it must return a non-negative int"
            )
        counts.append(n)
    return counts


def read_and_count(
    counter: TokenCounterFn, messages: Sequence[Any]
) -> tuple[list[int], list[MessageInfo] | None]:
    """``count_messages``, plus each message's reading when the counter has it (a
    ``TokenCounter``), else None: a user callable never makes the reducer read twice either."""
    if isinstance(counter, TokenCounter):
        return counter.read_and_count(messages)
    return count_messages(counter, messages), None


def _describe(msg: Any) -> str:
    info = read_message(msg)
    ident = f", id {info.id!r}" if info.id is not None else ""
    return f"{type(msg).__name__}, role {info.role!r}{ident}"
