"""ReducingSession over generated histories (``tests.histories``) in the OpenAI Agents SDK's own
item shapes, as its sessions store them: each model call is sendable (``tests.provider_rules``),
each message is kept, summarized or archived exactly once (``Ledger``), and the caller's items
are neither copied on the way to the hooks nor mutated.

Two drivers: the ``Session`` protocol itself, fed the growing histories a run stores
(``histories.calls``), and the SDK's real ``Runner`` with its Responses and Chat Completions
models over a scripted OpenAI API (``tests.openai_agents_script``), which sends every request
the model receives through the SDK's own conversion.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, Runner, SQLiteSession, TResponseInputItem, set_tracing_disabled

from agentstate_reducer.integrations.openai_agents import ReducingSession
from tests.convo import Spec
from tests.histories import History, Ledger, calls, histories, text_id
from tests.openai_agents_script import APIS, Api, Reply, ScriptedAPI, chat_payload, responses_item_errors
from tests.provider_rules import request_errors

set_tracing_disabled(True)

#: generated histories per test: every defect appears (``histories`` adds seeds until it does)
SEEDS = 16
RUNNER_SEEDS = 8


def _text(mid: str) -> str:
    return f"message {mid} " + "x" * 20


def sdk_items(spec: Spec, api: Api) -> list[list[dict[str, Any]]]:
    """Each step of ``spec`` as the items an Agents SDK session stores for it, in the shapes the
    runner stores after a run on ``api``'s model: the user's text input; function calls (one
    item per call, the Chat Completions model's with its placeholder id and provider data);
    function call outputs; assistant output messages."""
    chat = api == "chat"
    steps: list[list[dict[str, Any]]] = []
    for kind, mid, *rest in spec:
        provider = {"provider_data": {"model": "gpt-test", "response_id": f"chatcmpl_{mid}"}} if chat else {}
        if kind == "human":
            steps.append([{"content": _text(mid), "role": "user"}])
        elif kind == "ai":
            part: dict[str, Any] = {"annotations": [], "text": _text(mid), "type": "output_text"}
            if chat:
                part["logprobs"] = []
            item_id = "__fake_id__" if chat else f"msg_{mid}"
            steps.append([{"id": item_id, "content": [part], "role": "assistant", "status": "completed",
                           "type": "message", **provider}])  # fmt: skip
        elif kind == "call":
            step = []
            for k, call_id in enumerate(rest[0]):
                item: dict[str, Any] = {"arguments": json.dumps({"q": call_id}), "call_id": call_id,
                                        "name": "lookup", "type": "function_call"}  # fmt: skip
                if chat:
                    item.update(id="__fake_id__", **provider)
                else:
                    item.update(id=f"fc_{mid}" if k == 0 else f"fc_{mid}+{k}", status="completed")
                step.append(item)
            steps.append(step)
        elif kind == "tool":
            steps.append([{"call_id": rest[0], "output": _text(mid), "type": "function_call_output"}])
        else:
            raise ValueError(f"no Agents SDK item for a {kind!r} step")
    return steps


def key(item: Any) -> str | None:
    """The history id of an item: from its text, or for a function call from its call id
    (``k<n>.<s>.<j>`` is a call of step ``c<n>.<s>``; the step counts once, by its first call)."""
    if item.get("type") == "function_call":
        turn_step, _, j = item["call_id"][1:].rpartition(".")
        return f"c{turn_step}" if j == "0" else None
    if item.get("type") == "function_call_output":
        return text_id(item["output"])
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    return text_id(content)


def summaries_in(items: list[Any]) -> int:
    header = "Summary of the earlier conversation"
    return sum(1 for m in items if isinstance(m.get("content"), str) and m["content"].startswith(header))


class Witness:
    """Remembers the caller's items and checks what reached the hooks is those very objects."""

    def __init__(self) -> None:
        self.given: dict[int, Any] = {}
        self.seen: list[Any] = []

    def give(self, items: list[Any]) -> list[Any]:
        self.given.update((id(m), m) for m in items)
        return items

    def hook(self, items: list[Any], namespace: Any) -> None:
        self.seen.extend(items)

    def strangers(self) -> list[Any]:
        """Items the hooks saw that are not the caller's objects (the summaries aside)."""
        return [m for m in self.seen if self.given.get(id(m)) is not m and summaries_in([m]) == 0]


def feed(history: History, api: Api) -> list[tuple[Spec, list[dict[str, Any]]]]:
    """The growing histories of ``history`` a run stores, each with the items new in it."""
    steps = sdk_items(history.spec, api)
    out: list[tuple[Spec, list[dict[str, Any]]]] = []
    done = 0
    for prefix in calls(history):
        new = [item for step in steps[done : len(prefix)] for item in step]
        if new:
            out.append((prefix, new))
        done = len(prefix)
    return out


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("read_back", [True, False], ids=["get_items-at-each-run", "add_items-only"])
async def test_generated_histories_through_the_session_protocol(
    tmp_path: Path, api: Api, read_back: bool
) -> None:
    problems: list[str] = []
    for history in histories(SEEDS):
        ledger = Ledger(history, key)
        witness = Witness()
        inner = SQLiteSession(f"h{history.seed}", str(tmp_path / "sessions.db"))
        session = ReducingSession(
            inner, min_messages=6, max_messages=12, summarizer=ledger.summarizer,
            on_prune=[ledger.hook, witness.hook],
        )  # fmt: skip
        batches: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        for prefix, new in feed(history, api):
            batch = witness.give(new)
            batches.append((batch, copy.deepcopy(batch)))
            await session.add_items(batch)
            if read_back and prefix[-1][0] == "human":  # a run starts: the history it sends
                view = await session.get_items()
                errors = request_errors(chat_payload("responses", {"input": view}))  # items to Chat dicts
                if api == "responses":
                    errors += responses_item_errors(view)
                problems += [f"seed {history.seed} at {prefix[-1][1]}: {e}" for e in errors]
                if summaries_in(view) > 1:
                    problems.append(f"seed {history.seed}: {summaries_in(view)} summaries in one history")
        stored: list[Any] = await inner.get_items()
        problems += [f"seed {history.seed}: {e}" for e in ledger.errors(key(m) for m in stored)]
        problems += [f"seed {history.seed}: the caller's items were mutated"
                     for batch, before in batches if batch != before]  # fmt: skip
        if not read_back:  # no read from the store: the hooks see the caller's own objects
            problems += [f"seed {history.seed}: a hook got a copy of {key(m)}" for m in witness.strangers()]
        if ledger.summary_calls:
            assert summaries_in(stored) == 1 and summaries_in(stored[:1]) == 1
        inner.close()
    assert problems == []


@pytest.mark.parametrize("api", APIS)
async def test_generated_histories_through_the_runner(tmp_path: Path, api: Api) -> None:
    """Each user turn is a run of the real Runner (the model answers it); what earlier runs stored
    after the turn's question (the defects among it) is written to the session between runs."""
    problems: list[str] = []
    summarized = 0
    for history in histories(RUNNER_SEEDS):
        ledger = Ledger(history, key)
        scripted = ScriptedAPI()
        agent = Agent(name="assistant", instructions="Answer.", model=scripted.model(api))
        inner = SQLiteSession(f"h{history.seed}", str(tmp_path / "sessions.db"))
        session = ReducingSession(
            inner, min_messages=6, max_messages=12, summarizer=ledger.asummarizer, on_prune=[ledger.hook]
        )
        steps = sdk_items(history.spec, api)
        written: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        for (kind, mid, *_), items in zip(history.spec, steps, strict=True):
            if kind == "human":
                scripted.extend([Reply(text=_text(f"r{mid}"))])
                result = await Runner.run(agent, cast("list[TResponseInputItem]", items), session=session)
                assert result.final_output == _text(f"r{mid}")
            else:
                await session.add_items(items)
            written.append((items, copy.deepcopy(items)))
        for n, body in enumerate(scripted.requests):
            errors = request_errors(chat_payload(api, body))
            if api == "responses":
                errors += responses_item_errors(body["input"])
            problems += [f"seed {history.seed} request {n}: {e}" for e in errors]
        stored: list[Any] = await inner.get_items()
        problems += [f"seed {history.seed}: {e}" for e in ledger.errors(key(m) for m in stored)]
        problems += [f"seed {history.seed}: the caller's items were mutated"
                     for items, before in written if items != before]  # fmt: skip
        summarized += ledger.summary_calls > 0
        inner.close()
    assert problems == []
    assert summarized >= RUNNER_SEEDS // 2  # the summary path ran, not only the plain one
