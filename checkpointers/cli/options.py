"""The reducer options shared by ``demo``, ``inspect`` and ``compact``: parsed into a
``MessageReducer`` and a token counter for the reports."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.tokens import heuristic_counter, resolve_token_counter

from .errors import PROG, CliError, require

TokenCounter = Callable[[Any], int]


def add_reducer_options(parser: argparse.ArgumentParser, *, reduce: bool) -> None:
    """The reducer option group; ``reduce``: with the bounds (demo, compact), else only how tokens
    are counted and where the messages are (inspect), under a title that says so."""
    group = parser.add_argument_group("reducer" if reduce else "messages and tokens")
    if reduce:
        group.add_argument(
            "--max-messages",
            type=int,
            default=40,
            metavar="N",
            help="prune when the history is longer than N messages (default 40)",
        )
        group.add_argument(
            "--min-messages",
            type=int,
            default=20,
            metavar="N",
            help="keep at most N messages besides the pinned ones after pruning (default 20)",
        )
        group.add_argument(
            "--max-tokens",
            type=int,
            default=None,
            metavar="N",
            help="token mode: prune when the history costs more than N tokens (overrides the message counts)",
        )
        group.add_argument(
            "--target-tokens",
            type=int,
            default=None,
            metavar="N",
            help="token mode: keep at most N tokens after pruning (default --max-tokens)",
        )
    group.add_argument(
        "--token-counter",
        choices=("heuristic", "tiktoken"),
        default="heuristic",
        help="count tokens with the chars/4 heuristic (default) or tiktoken (the tokens extra)",
    )
    group.add_argument("--encoding", default="cl100k_base", help="tiktoken encoding (default cl100k_base)")
    group.add_argument(
        "--messages-key",
        default="messages",
        metavar="KEY",
        help="the state key holding the messages (default 'messages')",
    )


def token_counter_from(args: argparse.Namespace) -> tuple[TokenCounter, str]:
    """The token counter the options name, and its name for reports."""
    counter: TokenCounter
    if args.token_counter == "tiktoken":
        # Asked for by name: without the extra this is an error, not the library's silent fallback.
        require("tiktoken", extra="tokens", feature=f"{PROG} --token-counter tiktoken")
        counter = resolve_token_counter(None, encoding=args.encoding)
    else:
        counter = heuristic_counter()
    return counter, getattr(counter, "name", args.token_counter)


def reducer_from(args: argparse.Namespace) -> tuple[MessageReducer, TokenCounter, str]:
    """The reducer the options describe, the token counter used for reports, and its name."""
    counter, counter_name = token_counter_from(args)
    try:
        config = ReducerConfig(
            min_messages=args.min_messages,
            max_messages=args.max_messages,
            max_tokens=args.max_tokens,
            target_tokens=args.target_tokens,
            token_counter=counter,
        )
    except (ValueError, TypeError) as exc:
        message = str(exc)
        for name in ("min_messages", "max_messages", "max_tokens", "target_tokens"):
            message = message.replace(name, "--" + name.replace("_", "-"))
        raise CliError(f"bad reducer options: {message}", exit_code=2) from exc
    return MessageReducer(config=config), counter, counter_name


def count_tokens(counter: TokenCounter, messages: list[Any] | None) -> int | None:
    """The tokens of ``messages`` by ``counter``; None when there is no list."""
    return sum(counter(m) for m in messages) if isinstance(messages, list) else None
