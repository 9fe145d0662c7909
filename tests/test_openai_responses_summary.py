"""``reduce_request`` with a reducer that injects a running summary: the summary goes into
``input`` as an item the Responses API takes, and is recognised when the caller sends it back."""

from __future__ import annotations

from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.integrations.openai_responses import reduce_request
from tests.openai_agents_script import chat_payload, responses_item_errors
from tests.provider_rules import request_errors


def turn(n: int) -> list[Any]:
    return [
        {"role": "user", "content": f"q{n}"},
        {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
         "content": [{"type": "output_text", "text": f"a{n}", "annotations": []}]},
    ]  # fmt: skip


def test_the_summary_is_an_input_item_and_is_rolled_forward() -> None:
    seen: list[list[Any]] = []

    def summarize(items: list[Any]) -> str:
        seen.append(items)
        return f"{len(items)} items"

    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, preserve_first=False, summarize_fn=summarize,
                             inject_summary=True)
    )  # fmt: skip
    history: list[Any] = []
    for n in range(6):  # the caller keeps what it sent and the answer, and asks again
        question, answer = turn(n)
        sent = reduce_request({"model": "gpt-5", "input": [*history, question]}, reducer)["input"]
        assert responses_item_errors(sent) == [], sent
        assert request_errors(chat_payload("responses", {"input": sent})) == []
        history = [*sent, answer]
    summary = "Summary of the earlier conversation (8 messages):\n5 items"
    assert history == [{"role": "user", "content": summary}, *turn(4), *turn(5)]
    # the second summary rolls the first forward: it is read back from the caller's items
    assert [len(items) for items in seen] == [4, 5]
    assert seen[1][0]["content"] == "Summary of the earlier conversation (4 messages):\n4 items"
