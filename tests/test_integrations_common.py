"""What every framework integration shares (``agentstate_reducer.integrations._common``), on plain
OpenAI-style dicts without ids: the shape every framework's history reduces to for these tests.

Each model call is judged by ``tests.provider_rules.request_errors``, written apart from the reducer.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import pytest

from agentstate_reducer import MessageReducer
from agentstate_reducer.integrations._common import (
    CallFlow,
    NativeSummaries,
    RequestRepair,
    build_reducer,
    missing_extra,
)
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.provider_rules import request_errors

LOG = logging.getLogger("tests.integrations")


def _turn(i: int) -> list[dict[str, Any]]:
    """One turn without ids: a question, a call, its result, two parallel calls, their results, an answer."""
    call = {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    pair = [
        {"id": f"p{i}a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
        {"id": f"p{i}b", "type": "function", "function": {"name": "add", "arguments": "{}"}},
    ]
    return [
        {"role": "user", "content": f"q{i} please"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
        {"role": "assistant", "content": None, "tool_calls": pair},
        {"role": "tool", "tool_call_id": f"p{i}a", "content": "a"},
        {"role": "tool", "tool_call_id": f"p{i}b", "content": "b"},
        {"role": "assistant", "content": f"answer {i}"},
    ]


class Native:
    """A framework's own user message class: no room for an id or a marker."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    role = "user"

    @property
    def content(self) -> str:
        return self.text


def _text_of(m: Any) -> str | None:
    return m.text if isinstance(m, Native) else None


class Summarizer:
    def __init__(self, fail: bool = False) -> None:
        self.seen: list[list[Any]] = []
        self.fail = fail

    def __call__(self, messages: list[Any]) -> str:
        self.seen.append(list(messages))
        if self.fail:
            raise RuntimeError("summarizer down")
        return f"summary {len(self.seen)}"


def _conversation_ids(batches: list[list[Any]]) -> list[int]:
    """Identities of the conversation messages a summarizer got (its earlier summaries aside)."""
    return [id(m) for batch in batches for m in batch if not _is_summary(m)]


def _is_summary(m: Any) -> bool:
    text = m.text if isinstance(m, Native) else m.get("content")
    return str(text or "").startswith(SUMMARY_PREFIX)


@pytest.mark.parametrize("mode", ["state", "request"])
def test_thirty_turns_every_call_valid_each_message_summarized_once(mode: Any) -> None:
    summarizer = Summarizer()
    pruned: list[Any] = []
    reducer = build_reducer(
        None,
        {"min_messages": 8, "max_messages": 16, "on_prune": [lambda batch, ns: pruned.extend(batch)]},
        preserve_first=False,
        summarizer=summarizer,
        what="test",
    )
    native = NativeSummaries(Native, _text_of)
    flow = CallFlow(reducer, mode=mode, native=native, logger=LOG)
    system = {"role": "system", "content": "be terse"}
    history: list[Any] = [system]
    for i in range(30):
        turn = _turn(i)
        history.append(turn[0])
        for step in turn[1:]:
            bounded = flow.bound("thread", history, thread="t")
            sent = bounded.sent
            assert sent[0] is system
            assert turn[0] in sent, f"turn {i}: the live question was not sent"
            payload = [{"role": "user", "content": m.text} if isinstance(m, Native) else m for m in sent]
            assert request_errors(payload) == [], (i, request_errors(payload))
            assert len(sent) <= 1 + 1 + 16 + 1
            if mode == "state" and bounded.stored is not None:
                history = bounded.stored
            history.append(step)
    assert summarizer.seen, "nothing was summarized"
    once = _conversation_ids(summarizer.seen)
    assert len(once) == len(set(once)), "a message reached the summarizer twice"
    hooked = [id(m) for m in pruned if not _is_summary(m)]
    assert len(hooked) == len(set(hooked)), "an on_prune hook saw a message twice"
    assert set(hooked) == set(once)
    if mode == "request":
        assert len(history) == 1 + 30 * 7  # the stored history is the framework's, untouched


def test_request_mode_sends_the_previous_request_plus_the_new_messages() -> None:
    reducer = build_reducer(None, {"min_messages": 8, "max_messages": 16}, preserve_first=False,
                            summarizer=Summarizer(), what="test")
    flow = CallFlow(reducer, mode="request", native=NativeSummaries(Native, _text_of), logger=LOG)
    history: list[Any] = []
    sent: list[list[Any]] = []
    for i in range(10):
        for m in _turn(i):
            history.append(m)
            if m["role"] != "assistant":
                sent.append(flow.bound("k", history).sent)
    extends = sum(1 for a, b in itertools.pairwise(sent) if b[: len(a)] == a)
    cuts = sum(1 for a, b in itertools.pairwise(sent) if b[: len(a)] != a)
    assert cuts >= 2 and extends > 4 * cuts, (extends, cuts)


def test_an_edited_history_is_reduced_whole_again() -> None:
    summarizer = Summarizer()
    reducer = build_reducer(None, {"min_messages": 4, "max_messages": 8}, preserve_first=False,
                            summarizer=summarizer, what="test")
    flow = CallFlow(reducer, mode="request", logger=LOG)
    history = [m for i in range(3) for m in _turn(i)]
    first = flow.bound("k", history).sent
    assert len(summarizer.seen) == 1 and len(first) < len(history)
    edited = [{"role": "user", "content": "a different start"}, *history[1:]]
    flow.bound("k", edited)
    assert len(summarizer.seen) == 2
    assert summarizer.seen[1][0] is edited[0], "the edited history was summarized from its start"


def test_a_failing_summarizer_prunes_nothing_and_the_next_call_summarizes() -> None:
    summarizer = Summarizer(fail=True)
    reducer = build_reducer(None, {"min_messages": 4, "max_messages": 8}, preserve_first=False,
                            summarizer=summarizer, what="test")
    flow = CallFlow(reducer, mode="state", logger=LOG)
    history = [m for i in range(3) for m in _turn(i)]
    bounded = flow.bound("k", history)
    assert bounded.stored is None and bounded.sent == history
    assert bounded.record.summary_error is not None and "summarizer down" in bounded.record.summary_error
    summarizer.fail = False
    assert len(flow.bound("k", history).sent) < len(history)


async def test_abound_runs_the_async_summarizer_and_threads_share_one_flow() -> None:
    calls: list[int] = []

    async def asummarize(messages: list[Any]) -> str:
        calls.append(len(messages))
        await asyncio.sleep(0)
        return "async summary"

    reducer = build_reducer(None, {"min_messages": 4, "max_messages": 8}, preserve_first=False,
                            summarizer=asummarize, what="test")
    flow = CallFlow(reducer, mode="request", logger=LOG)
    histories = {k: [*(m for i in range(3) for m in _turn(i)), _turn(3)[0]] for k in ("a", "b", "c")}
    results = await asyncio.gather(*(flow.abound(k, h, thread=k) for k, h in histories.items()))
    assert len(calls) == 3
    for bounded in results:
        assert request_errors(bounded.sent) == []
        assert bounded.record.summarized


def test_native_summaries_are_recognised_by_their_text_after_a_reload() -> None:
    native = NativeSummaries(Native, _text_of)
    core = {"role": "user", "content": f"{SUMMARY_PREFIX} (5 messages):\nall of it",
            "id": "agentstate-summary", "agentstate_summary": {"count": 5}}
    out = native.outward([core])[0]
    assert isinstance(out, Native) and out.text == core["content"]
    assert native.outward([core])[0] is out, "the same summary gives the same native object"
    reloaded = Native(out.text)  # a copy, as after a save and a load
    back = NativeSummaries(Native, _text_of).inward([reloaded])[0]
    assert back["agentstate_summary"] == {"count": 5} and back["content"] == out.text
    plain = Native("Summary of the earlier conversation, as I typed it")
    assert NativeSummaries(Native, _text_of).inward([plain])[0] is plain


def test_repair_keeps_pinned_messages_before_the_first_user_turn() -> None:
    system = {"role": "system", "content": "s"}
    stray = {"role": "assistant", "content": "left over"}
    question = {"role": "user", "content": "q"}
    sent, removed = RequestRepair()([system, stray, question])
    assert sent == [system, question] and removed == [stray]
    task = {"role": "user", "content": "the task"}
    sent, removed = RequestRepair(preserve_first=True)([task, stray, question])
    assert sent == [task, stray, question] and removed == []


@pytest.mark.parametrize(
    ("reducer", "kwargs", "match"),
    [
        ("not a reducer", {}, "reducer must be an agentstate_reducer.MessageReducer, got str"),
        (MessageReducer(), {"max_messages": 4}, "not both"),
        (None, {"max_mesages": 4}, r"'max_mesages' \(did you mean 'max_messages'\?\)"),
        (MessageReducer, {}, r"the class MessageReducer: pass an instance"),
    ],
)
def test_build_reducer_names_a_bad_argument(reducer: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        build_reducer(reducer, kwargs, preserve_first=False, what="X")


def test_build_reducer_applies_preserve_first_and_the_summarizer() -> None:
    given = MessageReducer(min_messages=3, max_messages=6)
    built = build_reducer(given, {}, preserve_first=False, summarizer=Summarizer(), what="X")
    assert built is not given and built.config.min_messages == 3 and not built.config.preserve_first
    assert built.config.inject_summary
    same = build_reducer(built, {}, preserve_first=False, what="X")
    assert same is built
    with pytest.raises(TypeError, match="X: summarizer must be a callable"):
        build_reducer(None, {}, preserve_first=False, summarizer="model", what="X")
    with pytest.raises(TypeError, match="pass summarizer= or summarize_fn=, not both"):
        build_reducer(None, {"summarize_fn": len}, preserve_first=False, summarizer=len, what="X")


def test_missing_extra_names_the_checkout_install() -> None:
    text = missing_extra("ReducerHook", "crewai", "crewai")
    assert 'pip install ".[crewai]"' in text and "ReducerHook" in text


async def test_the_summarizer_and_hooks_see_the_frameworks_messages_only() -> None:
    """The previous summary reaches the summarizer and the hooks as the framework's own message,
    never as the core's summary dict; an async hook is awaited."""
    seen: list[Any] = []
    hooked: list[Any] = []

    def summarize(messages: list[Any]) -> str:
        seen.extend(messages)
        return "rolled"

    async def ahook(pruned: list[Any], namespace: Any) -> None:
        hooked.extend(pruned)

    reducer = build_reducer(None, {"min_messages": 4, "max_messages": 8, "on_prune": [ahook]},
                            preserve_first=False, summarizer=summarize, what="test")
    flow = CallFlow(reducer, mode="state", native=NativeSummaries(Native, _text_of), logger=LOG)
    history: list[Any] = []
    for i in range(6):
        history += _turn(i)[:1]
        bounded = await flow.abound("k", history, thread="t")
        history = (bounded.stored or history) + _turn(i)[1:]
    assert any(isinstance(m, Native) for m in seen), "the previous summary never reached the summarizer"
    assert not any(isinstance(m, dict) and m.get("id") == "agentstate-summary" for m in seen + hooked)
    assert any(isinstance(m, Native) for m in hooked)
