"""``telemetry.enter``/``leave``, the saver's entry without a block, nest like ``entry``."""

from __future__ import annotations

from agentstate_reducer import telemetry


def test_enter_and_leave_nest_like_entry_blocks() -> None:
    assert telemetry.current_entry() == ("reduce", None)
    with telemetry.entry("middleware", thread=7):
        token = telemetry.enter("saver", thread="t1")
        try:
            assert telemetry.current_entry() == ("saver", "t1")
            with telemetry.entry("state"):
                assert telemetry.current_entry() == ("state", None)
            assert telemetry.current_entry() == ("saver", "t1")
        finally:
            telemetry.leave(token)
        assert telemetry.current_entry() == ("middleware", "7")  # the thread as text
    assert telemetry.current_entry() == ("reduce", None)


def test_an_entry_made_once_is_the_same_for_every_caller() -> None:
    """Entries are shared between puts (made once per name and thread): each still reads as its own."""
    for thread in ("a", "b", "a"):
        token = telemetry.enter("saver", thread=thread)
        try:
            assert telemetry.current_entry() == ("saver", thread)
        finally:
            telemetry.leave(token)
