"""Bad configuration fails at construction with a precise message; the seed's defaults hold."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig


def test_seed_defaults() -> None:
    c = ReducerConfig()
    assert (c.min_messages, c.max_messages, c.max_tokens, c.target_tokens) == (10, 20, None, None)
    assert (c.token_counter, c.preserve_first, c.cascade_tool_messages, c.summarize_fn) == (
        None,
        True,
        True,
        None,
    )
    r = MessageReducer()
    assert (r.min_messages, r.max_messages) == (0, None)
    assert MessageReducer(config=c).config is c


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_messages": -1}, ValueError, "min_messages (-1) must be >= 0"),
        ({"max_messages": -5}, ValueError, "max_messages (-5) must be >= 0"),
        (
            {"min_messages": 30, "max_messages": 20},
            ValueError,
            "min_messages (30) must be <= max_messages (20)",
        ),
        (
            {"max_tokens": 100, "target_tokens": 200},
            ValueError,
            "target_tokens (200) must be <= max_tokens (100)",
        ),
        ({"target_tokens": 10}, ValueError, "target_tokens (10) needs max_tokens"),
        ({"max_tokens": -1}, ValueError, "max_tokens (-1) must be >= 0"),
        ({"min_messages": 2.5}, TypeError, "min_messages must be an int, got 2.5 (float)"),
        ({"max_messages": True}, TypeError, "max_messages must be an int or None, got True (bool)"),
        ({"token_counter": "len"}, TypeError, "token_counter must be callable or None, got str"),
        ({"summarize_fn": 3}, TypeError, "summarize_fn must be callable or None, got int"),
        ({"on_summary_error": "ignore"}, ValueError, "on_summary_error must be 'keep' or 'prune'"),
        ({"preserve_first": "yes"}, TypeError, "preserve_first must be a bool"),
        ({"on_prune": [print, 3]}, TypeError, "on_prune must be a sequence of callables"),
    ],
)
def test_bad_config_is_refused_precisely(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        ReducerConfig(**kwargs)


def test_target_tokens_zero_is_a_value() -> None:
    c = ReducerConfig(max_tokens=100, target_tokens=0)
    assert c.effective_target_tokens == 0
    assert ReducerConfig(max_tokens=100).effective_target_tokens == 100


def test_constructor_refuses_counts_and_config_together() -> None:
    with pytest.raises(ValueError, match=r"pass either min_messages/max_messages or config"):
        MessageReducer(5, 10, config=ReducerConfig())
    with pytest.raises(TypeError, match="config must be a ReducerConfig, got dict"):
        MessageReducer(config={"min_messages": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("min_messages (3) must be <= max_messages (2)")):
        MessageReducer(3, 2)


def test_a_string_is_not_a_message_list() -> None:
    with pytest.raises(TypeError, match="expected a message or a list of messages, got a str"):
        MessageReducer(1, 2).reduce("hello")
