"""What one bounded model call (``CallFlow``, every framework integration but LangChain's) costs
and keeps: it reads the messages about as often as one ``reduce`` of them, and in request mode
it holds no message its caller dropped."""

from __future__ import annotations

import gc
import logging
import weakref
from collections import Counter
from typing import Any, ClassVar

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig, wait_released
from agentstate_reducer.integrations._common import CallFlow, RequestWindow

LOGGER = logging.getLogger("tests.flow_one_pass")


class Msg:
    """An OpenAI-shaped message object that counts how often its role is read."""

    reads: ClassVar[Counter[int]] = Counter()

    def __init__(self, role: str, content: str | None = None, **fields: Any) -> None:
        self._role, self.content = role, content
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def role(self) -> str:
        Msg.reads[id(self)] += 1
        return self._role

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Msg({vars(self)!r})"


def history(turns: int, tag: str = "") -> list[Any]:
    """``turns`` turns of a question, a tool call, its result and an answer."""
    out: list[Any] = []
    for i in range(turns):
        call = {"id": f"c{tag}{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        out += [
            Msg("user", f"{tag} question {i}"),
            Msg("assistant", None, tool_calls=[call]),
            Msg("tool", f"{tag} result {i}", tool_call_id=f"c{tag}{i}"),
            Msg("assistant", f"{tag} answer {i}"),
        ]
    return out


def summarize(messages: list[Any]) -> str:
    return f"{len(messages)} earlier messages"


def reducer() -> MessageReducer:
    return MessageReducer(config=ReducerConfig(max_messages=40, min_messages=20, summarize_fn=summarize))


@pytest.mark.parametrize("mode", ["state", "request"])
@pytest.mark.parametrize("turns", [8, 50])
def test_a_model_call_reads_the_messages_about_as_often_as_one_reduce(mode: str, turns: int) -> None:
    """One planning pass per call: the call reads the messages as often as one ``reduce`` of the
    same list does, plus a few reads whatever the history's length (the request's opening and its
    last group), with no ``on_reduce`` to count for."""
    messages = history(turns)
    Msg.reads.clear()
    reducer().reduce(list(messages))
    once = sum(Msg.reads.values())
    Msg.reads.clear()
    flow = CallFlow(reducer(), mode=mode, logger=LOGGER)  # type: ignore[arg-type]
    bounded = flow.bound("t", messages)
    assert bounded.sent and bool(bounded.result.pruned) == (turns > 10)
    assert sum(Msg.reads.values()) <= once + 24


def test_request_mode_holds_no_message_its_caller_dropped() -> None:
    """After many conversations, each bounded and then dropped by its caller, the flow keeps none
    of their messages alive: it remembers fingerprints, not messages. (The reducer's own memo
    keeps the last few lists it reduced, whatever the number of conversations.)"""
    flow = CallFlow(reducer(), mode="request", logger=LOGGER)
    refs: list[list[weakref.ref[Any]]] = []
    for t in range(20):
        messages = history(30, tag=str(t))
        first = flow.bound(t, messages[:60])
        second = flow.bound(t, messages)
        assert first.result.pruned and second.sent
        refs.append([weakref.ref(m) for m in messages])
        del messages, first, second
    assert wait_released(timeout=120)  # the memo frees the lists it let go of on its releasing thread
    gc.collect()
    alive = [t for t, conversation in enumerate(refs) if any(r() is not None for r in conversation)]
    assert alive == [] or (alive == list(range(alive[0], 20)) and len(alive) <= 4)


def test_request_mode_finds_what_it_summarized_in_an_equal_copy() -> None:
    """A framework that sends equal copies (ADK) at every call: what the summary covers is
    found by fingerprint, summarized once, not again."""
    seen: list[Any] = []

    def recording(messages: list[Any]) -> str:
        seen.extend(messages)
        return summarize(messages)

    flow = CallFlow(
        MessageReducer(config=ReducerConfig(max_messages=40, min_messages=20, summarize_fn=recording)),
        mode="request",
        logger=LOGGER,
    )
    flow.bound("t", history(30)[:100])
    summarized = len(seen)
    assert summarized > 0
    again = flow.bound("t", history(30)[:104])  # equal copies, one turn more
    assert len(seen) == summarized, "nothing summarized twice"
    assert len([m for m in again.sent if isinstance(m, Msg)]) < 104 - summarized + 1


def test_a_request_window_keeps_within_its_bytes() -> None:
    """The oldest conversations go first when the window is over its bytes; the newest stays."""
    window = RequestWindow(preserve_first=False, max_bytes=4096)
    r = reducer()
    for t in range(10):
        view = window.view(t, history(30, tag=str(t)))
        window.record(view, r.reduce(view.messages))
    newest = window.view(9, history(30, tag="9"))
    oldest = window.view(0, history(30, tag="0"))
    assert newest.covered and not oldest.covered
