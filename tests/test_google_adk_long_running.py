"""Only the calls ADK itself leaves pending go to the model unanswered: a long-running call ADK
marks (``long_running_tool_ids``) and nothing answered yet. Every other unanswered call (a run
that died before its tool answered, a call a later user message left behind) is repaired, in
the hook ADK calls and in a real ``Runner`` run with a scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.models import LlmRequest
from google.adk.runners import InMemoryRunner
from google.adk.sessions import InMemorySessionService, Session
from google.genai import types

from agentstate_reducer.integrations.google_adk import ReducerCallback, ReducerPlugin
from tests.adk_script import ScriptedLlm, agent, key, to_openai, user
from tests.provider_rules import request_errors

APP = "app"


def call(*ids: str | None, q: str = "x") -> types.Content:
    parts = [
        types.Part(function_call=types.FunctionCall(id=i, name="ask_approval", args={"q": q, "n": n}))
        for n, i in enumerate(ids)
    ]
    return types.Content(role="model", parts=parts)


def answer(*ids: str | None) -> types.Content:
    parts = [
        types.Part(function_response=types.FunctionResponse(id=i, name="ask_approval", response={"ok": True}))
        for i in ids
    ]
    return types.Content(role="user", parts=parts)


def model_text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def context(*stored: Event) -> CallbackContext:
    """A real callback context whose session holds ``stored``."""
    session = Session(id="s", app_name=APP, user_id="u", events=list(stored))
    invocation = InvocationContext(
        session_service=InMemorySessionService(),
        invocation_id="e-1",
        agent=LlmAgent(name="assistant", model=ScriptedLlm()),
        session=session,
    )
    return CallbackContext(invocation)


def stored_call(*ids: str, long_running: set[str] | None) -> Event:
    """The event ADK stores for a model turn of calls (ids as ADK gives them)."""
    return Event(author="assistant", content=call(*ids), long_running_tool_ids=long_running)


async def bound(hook: Any, contents: list[types.Content], ctx: CallbackContext) -> list[types.Content]:
    request = LlmRequest(contents=list(contents))
    await hook(callback_context=ctx, llm_request=request)
    return request.contents


PENDING = [user("q0"), call("c1"), user("q1 while it waits"), model_text("a1"), user("q2")]


@pytest.mark.parametrize("cls", [ReducerCallback, ReducerPlugin])
@pytest.mark.parametrize(
    ("case", "stored", "held"),
    [
        ("not long-running: a run that died", [stored_call("c1", long_running=None)], False),
        ("marked long-running, still pending", [stored_call("c1", long_running={"c1"})], True),
        (
            "marked, but answered in the session",
            [stored_call("c1", long_running={"c1"}), Event(author="user", content=answer("c1"))],
            False,
        ),
        ("another call's mark", [stored_call("c1", long_running={"c9"})], False),
    ],
)
def test_only_a_pending_long_running_call_is_sent_unanswered(
    cls: type, case: str, stored: list[Event], held: bool
) -> None:
    reducer = cls(max_messages=40, min_messages=20)
    hook = reducer if cls is ReducerCallback else reducer.before_model_callback
    sent = asyncio.run(bound(hook, PENDING, context(*stored)))
    if held:  # sent where ADK put it, unanswered: ADK waits for it
        assert sent == PENDING and all(a is b for a, b in zip(sent, PENDING, strict=True))
    else:
        assert [key(c) for c in sent] == [key(c) for c in PENDING if c is not PENDING[1]]
        assert request_errors(to_openai(sent)) == []


def test_a_stripped_adk_id_is_matched_by_name_and_arguments() -> None:
    """ADK strips its own ``adk-`` ids from the request: the marked call is known by its name and
    arguments; an unmarked call with other arguments is repaired."""
    stored = [
        Event(author="assistant", content=call("adk-1", q="wait"), long_running_tool_ids={"adk-1"}),
        Event(author="assistant", content=call("adk-2", q="died"), long_running_tool_ids=None),
    ]
    contents = [user("q0"), call(None, q="wait"), user("q1"), call(None, q="died"), user("q2")]
    sent = asyncio.run(bound(ReducerCallback(), contents, context(*stored)))
    assert [key(c) for c in sent] == [key(c) for c in contents if c is not contents[3]]


def test_a_pending_call_with_a_dead_sibling_is_repaired() -> None:
    """A content holding a pending long-running call and a call that will never be answered
    cannot be sent as it is; ADK stores them together only when the run died."""
    stored = [stored_call("c1", "c2", long_running={"c1"})]
    contents = [user("q0"), call("c1", "c2"), user("q1")]
    sent = asyncio.run(bound(ReducerCallback(), contents, context(*stored)))
    assert [key(c) for c in sent] == [key(user("q0")), key(user("q1"))]


def test_the_answered_siblings_of_a_pending_call_stay_with_it() -> None:
    stored = [stored_call("c1", "c2", long_running={"c1"}), Event(author="assistant", content=answer("c2"))]
    contents = [user("q0"), call("c1", "c2"), answer("c2"), user("q1"), model_text("a1"), user("q2")]
    sent = asyncio.run(bound(ReducerCallback(), contents, context(*stored)))
    assert sent == contents


def idless(author: str, content: types.Content) -> Event:
    return Event(author=author, content=content)


#: sessions stored without call ids (older sessions, histories imported from elsewhere): ADK
#: leaves their unanswered calls in the request
BROKEN = {
    "the run died between two tools": [
        idless("user", user("q0 please look this up")),
        idless("assistant", call(None, None)),
        idless("assistant", answer(None)),
    ],
    "a later user message left the call behind": [
        idless("user", user("q0 please look this up")),
        idless("assistant", call(None)),
        idless("user", user("q1 never mind")),
        idless("assistant", model_text("a1")),
    ],
}


def ask_approval(q: str, n: int) -> None:
    """Ask a human; the answer comes later."""
    return None


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_real_runner_repairs_a_stored_broken_history(case: str) -> None:
    model = ScriptedLlm()
    callback = ReducerCallback(max_messages=40, min_messages=20)
    runner = InMemoryRunner(agent=agent(model, before_model_callback=callback), app_name=APP)

    async def run() -> None:
        session = await runner.session_service.create_session(app_name=APP, user_id="u", session_id="s")
        for event in BROKEN[case]:
            await runner.session_service.append_event(session, event)
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=user("q2 please go on")):
            pass

    asyncio.run(run())
    assert len(model.requests) == 3
    for n, request in enumerate(model.requests):
        assert request_errors(to_openai(request)) == [], f"call {n}: {request_errors(to_openai(request))}"
        assert key(user("q2 please go on")) in [key(c) for c in request]
