"""agentstate-reducer: keep LLM agent conversations bounded without breaking them.

Prunes message history by count or token budget, keeps tool calls with their results, cuts at
turn boundaries and never drops the live turn. Zero runtime dependencies.
"""

from typing import TYPE_CHECKING

from .config import ReducerConfig
from .messages import MessageInfo, read_message
from .reducer import MessageReducer, ReducerResult, ReducerStats, wait_released
from .tokens import (
    Calibration,
    TokenCounter,
    TokenCountError,
    resolve_token_counter,
    tiktoken_counter,
    usage_input_tokens,
)

__all__ = [
    "Calibration",
    "MessageInfo",
    "MessageReducer",
    "ReducerConfig",
    "ReducerResult",
    "ReducerStats",
    "TokenCountError",
    "TokenCounter",
    "read_message",
    "resolve_token_counter",
    "tiktoken_counter",
    "usage_input_tokens",
    "wait_released",
]

# The version has one source, pyproject.toml: it is read from the installed distribution's metadata
# on first use (module __getattr__), so importing the package does not load importlib.metadata.
__version__: str

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise type every unknown name

    def __getattr__(name: str) -> str:
        if name != "__version__":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import metadata

        try:
            version = metadata.version("agentstate-reducer")
        except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
            version = "0+unknown"
        globals()["__version__"] = version
        return version
