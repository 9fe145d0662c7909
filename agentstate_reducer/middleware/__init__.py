"""The LangChain ``create_agent`` middleware under its first import path.

``agentstate_reducer.middleware`` re-exports ``agentstate_reducer.integrations.langchain``
(``ReducerMiddleware``, ``ReduceRecord``, ``Mode``, ``DEFAULT_SUMMARY_PROMPT``): both paths name
the same objects, and both need the ``langchain`` extra (``pip install ".[langchain]"``).
"""

from agentstate_reducer.integrations.langchain import (
    DEFAULT_SUMMARY_PROMPT,
    Mode,
    ReduceRecord,
    ReducerMiddleware,
)

__all__ = ["DEFAULT_SUMMARY_PROMPT", "Mode", "ReduceRecord", "ReducerMiddleware"]
