"""ReducerCallback and ReducerPlugin over generated histories (``tests.histories``) in ADK's own
types (``tests.adk_histories``): through the hook ADK calls, with a real callback context, and
through a real ``Runner`` with a scripted model. Every request the model would get passes the
providers' rules (``tests.provider_rules``, on ``tests.adk_script.to_openai``'s conversion), each
message is kept or pruned (summarized and archived) exactly once, and the contents the callback
gets stay the caller's own, unmutated."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.apps import App
from google.adk.models import LlmRequest
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.sessions import InMemorySessionService, Session
from google.genai import types

from agentstate_reducer.integrations.google_adk import ReducerCallback, ReducerPlugin
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.adk_histories import AGENT, IdMode, contents, count, events, ids, request_copy
from tests.adk_script import ScriptedLlm, agent, user
from tests.adk_script import to_openai as adk_to_openai
from tests.convo import Spec
from tests.histories import History, Ledger, calls, histories
from tests.provider_rules import request_errors

MAX, MIN = 8, 4
SEEDS = histories(24, seed=1000, rate=0.1)
AGENT_ITSELF = LlmAgent(name=AGENT, model=ScriptedLlm())


def _is_summary(content: Any) -> bool:
    parts = getattr(content, "parts", None) or []
    return content.role == "user" and len(parts) == 1 and (parts[0].text or "").startswith(SUMMARY_PREFIX)


def to_openai(request: list[types.Content]) -> list[dict[str, Any]]:
    return adk_to_openai(request, system=None)


class Counted:
    """A ``Ledger`` fed with ADK contents: a results content carries one id per result."""

    def __init__(self, history: History) -> None:
        self.ledger = Ledger(history, key=lambda m: None)

    def on_prune(self, messages: list[Any], namespace: Any = None) -> None:
        self.ledger.pruned_ids(i for m in messages for i in ids(m))

    def summarize(self, messages: list[Any]) -> str:
        self.ledger.summary_calls += 1
        found = [i for m in messages for i in ids(m)]
        self.ledger.summarized.update(found)
        return "covers " + " ".join(found)

    async def asummarize(self, messages: list[Any]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)

    def errors(self, request: list[types.Content]) -> list[str]:
        return self.ledger.errors(i for c in request for i in ids(c))


Hook = Callable[..., Any]


def _hook(kind: str, counted: Counted) -> Hook:
    kwargs: dict[str, Any] = {"max_messages": MAX, "min_messages": MIN, "on_prune": [counted.on_prune]}
    if kind == "callback":
        return ReducerCallback(summarizer=counted.asummarize, **kwargs)
    plugin = ReducerPlugin(summarizer=counted.summarize, **kwargs)
    return plugin.before_model_callback


def _context(stored: list[Any]) -> CallbackContext:
    """The callback context of one model call: the session holds the history's events."""
    session = Session(id="s", app_name="app", user_id="u", events=stored)
    invocation = InvocationContext(
        session_service=InMemorySessionService(), invocation_id="e-1", agent=AGENT_ITSELF, session=session
    )
    return CallbackContext(invocation)


def _model_calls(history: History) -> list[Spec]:
    """The histories ADK sends at its model calls: ``calls(history)``, the whole history with the
    next user message (ADK calls the model after a user message or results; the last step of a
    whole history may be the model's answer or a step the run died in)."""
    out = list(calls(history))
    if out and out[-1][-1][0] != "human":
        out[-1] = [*out[-1], ("human", "next")]
    return out


#: the defects whose results answer a call pruned (summarized) at an earlier model call; without
#: ids and names to tell calls apart, an orphan or a second result reads as such a result too
REPLAYS: dict[str, frozenset[str]] = {
    "ids": frozenset({"late", "replayed"}),
    "adk": frozenset({"late", "replayed"}),
    "none": frozenset({"late", "replayed", "orphan", "duplicate"}),
}


async def _drive(hook: Hook, history: History, mode: IdMode) -> list[types.Content]:
    """Call the hook at each model call of ``history``; returns the last request sent. Every
    request passes the providers' rules."""
    sent: list[types.Content] = []
    calls_made = _model_calls(history)
    # a call's history is a prefix of the last one: ADK sends copies of what it stored
    stored, whole = events(calls_made[-1], mode), contents(calls_made[-1], mode)
    for n, spec in enumerate(calls_made):
        k = count(spec)
        given = [request_copy(c) for c in whole[:k]]
        request = LlmRequest(contents=list(given))
        assert await hook(callback_context=_context(stored[:k]), llm_request=request) is None
        sent = request.contents
        where = f"seed {history.seed} call {n}"
        errors = request_errors(to_openai(sent))
        assert errors == [], f"{where}: {errors}"
        # the caller's own objects (or the running summary), none of them changed
        assert all(_is_summary(c) or any(c is g for g in given) for c in sent), where
        assert given == whole[:k], where
    return sent


@pytest.mark.parametrize(
    ("kind", "mode"), [("callback", "ids"), ("callback", "adk"), ("callback", "none"), ("plugin", "ids")]
)
def test_every_request_valid_and_each_message_counted_once(kind: str, mode: IdMode) -> None:
    pruned = 0
    for history in SEEDS:
        counted = Counted(history)
        sent = asyncio.run(_drive(_hook(kind, counted), history, mode))
        assert counted.errors(sent) == [], f"seed {history.seed} {sorted(history.defects)}"
        pruned += sum(counted.ledger.pruned.values())
    assert pruned > 0, "no history was long enough to prune"


@pytest.mark.parametrize("mode", ["ids", "adk", "none"])
def test_a_replayed_result_is_counted_once(mode: IdMode) -> None:
    replays = [h for h in SEEDS if h.defects & REPLAYS[mode]]
    assert replays
    for history in replays:
        counted = Counted(history)
        sent = asyncio.run(_drive(_hook("callback", counted), history, mode))
        assert counted.errors(sent) == [], f"seed {history.seed} {sorted(history.defects)}"


def test_a_request_with_split_results_ends_with_a_user_turn() -> None:
    splits = [h for h in SEEDS if "split" in h.defects]
    assert splits
    for history in splits:
        asyncio.run(_drive(_hook("callback", Counted(history)), history, "ids"))


class Recording(BasePlugin):
    """Records the contents ADK built, before the agent's own callback edits them."""

    def __init__(self) -> None:
        super().__init__(name="recording")
        self.raw: list[list[types.Content]] = []

    async def before_model_callback(self, *, callback_context: Any, llm_request: LlmRequest) -> None:
        self.raw.append([c.model_copy(deep=True) for c in llm_request.contents])


async def _stored_then_three_turns(runner: InMemoryRunner, history: History, mode: IdMode) -> None:
    session = await runner.session_service.create_session(app_name="app", user_id="u", session_id="s")
    for event in events(history.spec, mode):
        await runner.session_service.append_event(session, event)
    for i in range(3):
        message = user(f"q{i} please look this up")
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
            pass


@pytest.mark.parametrize("mode", ["adk", "none"])
def test_real_runner_over_stored_generated_histories(mode: IdMode) -> None:
    """Sessions stored with the generated defects, then three turns through the real runner
    (the scripted model calls real tools): every request valid, each stored message counted
    once against what ADK itself put in its requests (ADK drops and moves some on its own)."""
    for history in SEEDS[:8]:
        counted = Counted(history)
        model, recording = ScriptedLlm(), Recording()
        callback = ReducerCallback(
            max_messages=MAX, min_messages=MIN, summarizer=counted.summarize, on_prune=[counted.on_prune]
        )
        app = App(name="app", root_agent=agent(model, before_model_callback=callback), plugins=[recording])
        runner = InMemoryRunner(app=app)

        asyncio.run(_stored_then_three_turns(runner, history, mode))
        assert len(model.requests) == 3 * 3
        for n, request in enumerate(model.requests):
            errors = request_errors(to_openai(request))
            assert errors == [], f"seed {history.seed} call {n}: {errors}"
        # what ADK sent us is the history the ledger judges
        seen = list(dict.fromkeys(i for raw in recording.raw for c in raw for i in ids(c)))
        judged = History([("human", i) for i in seen], history.defects, history.defect_ids, history.seed)
        counted.ledger.history = judged
        assert counted.errors(model.requests[-1]) == [], f"seed {history.seed}"
