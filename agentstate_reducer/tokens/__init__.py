"""Token counting: a user callable, else tiktoken when its encoding loads, else a heuristic.

* ``rules``: what one message costs (the same rules for both built-in counters);
* ``cache``: ``TokenCounter``, the cached counter (the reference: one message at a time);
* ``counting``: counting with any counter, user counters' results checked;
* ``tiktoken``: loading an encoding once per process, with a timeout, and resolving the counter;
* ``calibration``: counts scaled to the provider's tokens, learned from reported usage.

docs/tokens.md is the user guide.
"""

from __future__ import annotations

import sys
from types import ModuleType

from agentstate_reducer.messages import snapshot, snapshots, unchanged
from agentstate_reducer.tokens import tiktoken as _loader
from agentstate_reducer.tokens.cache import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_CACHE_SIZE,
    TokenCounter,
    TokenCounterFn,
    TokenCountError,
    heuristic_counter,
)
from agentstate_reducer.tokens.calibration import Calibration, usage_input_tokens
from agentstate_reducer.tokens.counting import count_messages, read_and_count
from agentstate_reducer.tokens.rules import (
    HEURISTIC_CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    MAX_CONTENT_ITEMS,
    MAX_ENCODED_CHARS,
    MESSAGE_OVERHEAD,
    heuristic_text_tokens,
    message_parts,
)
from agentstate_reducer.tokens.tiktoken import (
    DEFAULT_ENCODING,
    load_encoding,
    resolve_token_counter,
    tiktoken_counter,
)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_ENCODING",
    "HEURISTIC_CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MAX_CONTENT_ITEMS",
    "MAX_ENCODED_CHARS",
    "MESSAGE_OVERHEAD",
    "TIKTOKEN_LOAD_TIMEOUT",
    "Calibration",
    "TokenCountError",
    "TokenCounter",
    "TokenCounterFn",
    "count_messages",
    "heuristic_counter",
    "heuristic_text_tokens",
    "load_encoding",
    "message_parts",
    "read_and_count",
    "resolve_token_counter",
    "snapshot",
    "snapshots",
    "tiktoken_counter",
    "unchanged",
    "usage_input_tokens",
]

#: Seconds the first resolve waits for tiktoken to load an encoding before falling back for good.
#: A setting of this package, read at call time, so an application can lower it once at start-up
#: (``agentstate_reducer.tokens.TIKTOKEN_LOAD_TIMEOUT = 2``); kept by ``tokens.tiktoken``.
TIKTOKEN_LOAD_TIMEOUT: float


class _Package(ModuleType):
    """This package's module type: ``TIKTOKEN_LOAD_TIMEOUT`` reads and writes the loader's
    setting, so the loader needs no import of its package."""

    @property
    def TIKTOKEN_LOAD_TIMEOUT(self) -> float:
        return _loader.TIKTOKEN_LOAD_TIMEOUT

    @TIKTOKEN_LOAD_TIMEOUT.setter
    def TIKTOKEN_LOAD_TIMEOUT(self, seconds: float) -> None:
        _loader.TIKTOKEN_LOAD_TIMEOUT = seconds


sys.modules[__name__].__class__ = _Package
