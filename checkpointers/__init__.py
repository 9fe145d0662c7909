"""LangGraph checkpoint savers that keep the messages channel bounded where state is persisted."""
