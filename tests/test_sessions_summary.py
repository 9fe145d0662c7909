"""ReducingSession's running summary reaches the model, through the SDK's real Runner on its
Responses and Chat Completions models (a scripted OpenAI API, no network); and ReducingSession
takes the words every integration takes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.openai_agents import ReducingSession
from tests.openai_agents_script import APIS, Api, Reply, ScriptedAPI, chat_payload, responses_item_errors
from tests.provider_rules import request_errors

set_tracing_disabled(True)

HEADER = "Summary of the earlier conversation"


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


def is_summary(item: Any) -> bool:
    content = item.get("content") if isinstance(item, dict) else None
    return isinstance(content, str) and content.startswith(HEADER)


class Summaries:
    """A summarizer recording what it was given; its summary lists the contents it covers."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, items: list[Any]) -> str:
        self.calls.append(list(items))
        return "covered: " + "; ".join(describe(i) for i in items)


def describe(item: dict[str, Any]) -> str:
    if is_summary(item):
        return "<summary>"
    if item.get("type") == "function_call":
        return f"call {item['call_id']}"
    if item.get("type") == "function_call_output":
        return f"output {item['call_id']}"
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    return str(content)


def pairs(n: int, start: int = 0) -> list[Any]:
    items: list[Any] = []
    for i in range(start, start + n):
        items += [
            {"role": "user", "content": f"q{i}"},
            {"type": "message", "role": "assistant", "id": f"msg_{i}", "content": f"a{i}"},
        ]
    return items


@pytest.mark.parametrize("api", APIS)
async def test_the_running_summary_reaches_every_model_call_after_a_reduction(
    tmp_path: Path, api: Api
) -> None:
    scripted = ScriptedAPI()
    summaries = Summaries()
    inner = SQLiteSession("user-1", str(tmp_path / "chats.db"))
    session = ReducingSession(inner, min_messages=4, max_messages=8, summarizer=summaries)
    agent = Agent(name="assistant", instructions="Use lookup.", model=scripted.model(api), tools=[lookup])
    runs: list[tuple[int, int]] = []  # the requests of each run
    for turn in range(1, 13):
        lookup_call = (f"call_{turn}", "lookup", {"q": f"x{turn}"})
        scripted.extend([Reply(calls=(lookup_call,)), Reply(text=f"a{turn}")])
        before = len(scripted.requests)
        result = await Runner.run(agent, f"q{turn}", session=session)
        assert result.final_output == f"a{turn}"
        runs.append((before, len(scripted.requests)))
    assert not scripted.replies
    for body in scripted.requests:
        payload = chat_payload(api, body)
        assert request_errors(payload) == [], payload
        if api == "responses":
            assert responses_item_errors(body["input"]) == [], body["input"]
    summarized = [n for n, (start, _) in enumerate(runs) if summaries.calls and start > 0]
    assert summaries.calls and summarized
    # from the first summary on, every request opens with it: one user message after the
    # instructions, the newest summary of what was pruned
    first = next(n for n, (start, end) in enumerate(runs)
                 if any(is_summary(m) for m in chat_payload(api, scripted.requests[start])))  # fmt: skip
    assert first <= 4
    for start, end in runs[first:]:
        for body in scripted.requests[start:end]:
            payload = chat_payload(api, body)
            assert payload[0]["role"] == "system"
            assert payload[1]["role"] == "user" and payload[1]["content"].startswith(HEADER)
            assert sum(is_summary(m) for m in payload) == 1
    # the stored session holds the summary first, as an item the SDK takes, and read back it is
    # recognised as the running summary: the summarizer gets it as the first item to roll forward
    stored: list[Any] = await inner.get_items()
    assert is_summary(stored[0]) and set(stored[0]) == {"role", "content"}
    assert sum(is_summary(m) for m in stored) == 1
    for call in summaries.calls[1:]:
        assert is_summary(call[0]) and set(call[0]) == {"role", "content"}
        assert not any(is_summary(m) for m in call[1:])
    # every question and answer is stored or was summarized, exactly once
    covered = [describe(m) for call in summaries.calls for m in call if not is_summary(m)]
    kept = [describe(m) for m in stored if not is_summary(m)]
    expected = [x for t in range(1, 13) for x in (f"q{t}", f"call call_{t}", f"output call_{t}", f"a{t}")]
    assert sorted(covered + kept) == sorted(expected)
    assert covered + kept == expected  # and in order
    inner.close()


@pytest.mark.parametrize(
    "make",
    [
        lambda inner, fn: ReducingSession(inner, min_messages=2, max_messages=4, summarizer=fn),
        lambda inner, fn: ReducingSession(inner, min_messages=2, max_messages=4, summarize_fn=fn),
        lambda inner, fn: ReducingSession(
            inner, MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, summarize_fn=fn))
        ),
        lambda inner, fn: ReducingSession(
            inner, config=ReducerConfig(min_messages=2, max_messages=4, summarize_fn=fn)
        ),
    ],
    ids=["summarizer", "summarize_fn", "reducer", "config"],
)
async def test_every_way_of_giving_a_summarizer_stores_the_summary(tmp_path: Path, make: Any) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    session = make(inner, lambda items: f"{len(items)} items")
    for i in range(4):
        await session.add_items(pairs(1, start=i))
    stored: list[Any] = await inner.get_items()
    assert stored[0] == {"role": "user", "content": f"{HEADER} (6 messages):\n3 items"}  # [summary, q2, a2]
    assert stored[1:] == pairs(1, start=3)
    assert await session.get_items() == stored
    inner.close()


async def test_an_async_summarizer_rolls_the_summary_forward(tmp_path: Path) -> None:
    seen: list[list[Any]] = []

    async def summarize(items: list[Any]) -> str:
        seen.append(items)
        return "/".join(describe(i) for i in items)

    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    session = ReducingSession(inner, min_messages=2, max_messages=4, summarizer=summarize)
    for i in range(6):
        await session.add_items(pairs(1, start=i))
    stored: list[Any] = await inner.get_items()
    assert [describe(m) for m in stored] == ["<summary>", "q5", "a5"]
    assert stored[0]["content"] == f"{HEADER} (10 messages):\n<summary>/q4/a4"
    assert [[describe(m) for m in call] for call in seen] == [
        ["q0", "a0", "q1", "a1"],
        ["<summary>", "q2", "a2"],
        ["<summary>", "q3", "a3"],
        ["<summary>", "q4", "a4"],
    ]
    inner.close()


async def test_a_summary_written_by_another_process_is_recognised(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    first = SQLiteSession("s", db)
    await ReducingSession(first, min_messages=2, max_messages=4, summarizer=lambda items: "old").add_items(
        pairs(3)
    )
    first.close()
    seen: list[list[Any]] = []

    def summarize(items: list[Any]) -> str:
        seen.append(items)
        return "new"

    inner = SQLiteSession("s", db)
    session = ReducingSession(inner, min_messages=2, max_messages=4, summarizer=summarize)
    assert (await session.get_items())[0]["content"] == f"{HEADER} (4 messages):\nold"
    await session.add_items(pairs(2, start=3))
    stored: list[Any] = await inner.get_items()
    assert stored[0]["content"] == f"{HEADER} (8 messages):\nnew"
    assert sum(is_summary(m) for m in stored) == 1
    assert [describe(m) for m in seen[0]] == ["<summary>", "q2", "a2", "q3", "a3"]
    inner.close()


async def test_a_failing_summarizer_drops_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    failing = [True]
    pruned: list[Any] = []

    def summarize(items: list[Any]) -> str:
        if failing[0]:
            raise RuntimeError("model down")
        return f"{len(items)} items"

    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    session = ReducingSession(
        inner, min_messages=2, max_messages=4, summarizer=summarize,
        on_prune=[lambda items, namespace: pruned.extend(items)],
    )  # fmt: skip
    with caplog.at_level(logging.ERROR):
        for i in range(3):
            await session.add_items(pairs(1, start=i))
    assert await inner.get_items() == pairs(3) and pruned == []  # all kept
    assert "model down" in caplog.text
    failing[0] = False
    await session.add_items(pairs(1, start=3))
    stored: list[Any] = await inner.get_items()
    assert [describe(m) for m in stored] == ["<summary>", "q3", "a3"]
    assert pruned == pairs(3)
    inner.close()


def test_the_words_of_every_integration(tmp_path: Path) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    built = ReducingSession(inner, max_tokens=400, target_tokens=200, preserve_first=True).reducer.config
    assert (built.max_tokens, built.target_tokens, built.preserve_first) == (400, 200, True)
    default = ReducingSession(inner).reducer.config
    assert (default.min_messages, default.max_messages, default.preserve_first) == (20, 40, False)
    config = ReducerConfig(min_messages=3, max_messages=6, preserve_first=False)
    assert ReducingSession(inner, config=config).reducer.config == config
    mine = MessageReducer(config=config)
    assert ReducingSession(inner, mine).reducer is mine
    assert ReducingSession(inner, mine, preserve_first=True).reducer.config.preserve_first is True
    inner.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_mesages": 4},
         r"ReducingSession: unknown keyword argument\(s\) 'max_mesages' \(did you mean 'max_messages'\?\)"),
        ({"sumarizer": print}, r"'sumarizer' \(did you mean 'summari"),
        ({"summarizer": "short"}, r"ReducingSession: summarizer must be a callable"),
        ({"summarizer": print, "summarize_fn": print}, r"pass summarizer= or summarize_fn=, not both"),
        ({"preserve_first": "yes"}, r"ReducingSession: preserve_first must be a bool"),
        ({"config": {"max_messages": 4}}, r"ReducingSession: config must be a ReducerConfig, got dict"),
        ({"config": ReducerConfig(), "max_messages": 4},
         r"pass config=ReducerConfig\(...\) or its fields, not both"),
        ({"reducer": MessageReducer(), "config": ReducerConfig()},
         r"a MessageReducer or config=ReducerConfig\(...\), not both"),
        ({"reducer": MessageReducer(), "max_messages": 4}, r"not both"),
        ({"reducer": MessageReducer}, r"reducer is the class MessageReducer: pass an instance"),
        ({"min_messages": 9, "max_messages": 4}, r"min_messages \(9\) must be <= max_messages \(4\)"),
        ({"on_reduce": print}, r"takes no on_reduce=: a session sees no model call; on_prune="),
        ({"validate": True}, r"takes no validate=: the stored history is always kept sendable"),
    ],
)  # fmt: skip
def test_a_wrong_word_gets_a_precise_error(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    inner = SQLiteSession("s", str(tmp_path / "s.db"))
    with pytest.raises((TypeError, ValueError), match=match) as caught:
        ReducingSession(inner, **kwargs)
    assert "__init__" not in str(caught.value) and "_common" not in str(caught.value)
    inner.close()
