"""agentstate-reducer: keep LLM agent conversations bounded without breaking them.

Prunes message history by count or token budget, keeps tool calls with their results, cuts at
turn boundaries and never drops the live turn. Zero runtime dependencies.
"""

from .config import ReducerConfig
from .messages import MessageInfo, read_message
from .reducer import MessageReducer, ReducerResult, ReducerStats
from .tokens import TokenCounter, TokenCountError, resolve_token_counter, tiktoken_counter

__all__ = [
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
]

__version__ = "0.3.0"
