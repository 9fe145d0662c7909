"""The former name of ``agentstate_reducer.merge``, kept so existing imports work."""

from .merge import REMOVE_ALL_MESSAGES, make_state_reducer, merge_messages

__all__ = ["REMOVE_ALL_MESSAGES", "make_state_reducer", "merge_messages"]
