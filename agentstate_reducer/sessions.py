"""The OpenAI Agents SDK session under its first import path.

``agentstate_reducer.sessions`` re-exports ``agentstate_reducer.integrations.openai_agents``
(``ReducingSession``): both paths name the same class.
"""

from agentstate_reducer.integrations.openai_agents import ReducingSession

__all__ = ["ReducingSession"]
