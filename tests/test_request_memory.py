"""What an integration's request mode keeps of the conversations it served: nothing its callers
dropped but the last few lists (the reducer's memo), whatever the number of conversations.
Memory is stated by the objects still alive, never by a time."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from agno.models.message import Message
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner

from agentstate_reducer import MessageReducer, ReducerConfig, wait_released
from agentstate_reducer.integrations.agno import ReducingCompressionManager
from agentstate_reducer.integrations.google_adk import ReducerPlugin
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.adk_script import ScriptedLlm, agent, question, user

APP = "app"


class Watch(BasePlugin):
    """Runs after ``ReducerPlugin``: a weak reference to each content the model is sent."""

    def __init__(self) -> None:
        super().__init__(name="watch")
        self.sent: list[weakref.ref[Any]] = []

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        self.sent.extend(weakref.ref(c) for c in llm_request.contents)


def _callers(content: Any) -> bool:
    """A content of the conversation (not the running summary, which the plugin makes and keeps
    its newest 256 of, shared by the sessions whose summaries read the same)."""
    if content is None:
        return False
    text = "".join(p.text or "" for p in content.parts or [])
    return not text.startswith(SUMMARY_PREFIX)


def test_adk_request_mode_in_count_mode_keeps_no_request_of_a_dropped_session() -> None:
    """Count mode uses no calibration, so the plugin keeps no session's last request: after
    the sessions are deleted, only contents of the last one may still be alive (the reducer's
    memo, the summaries' last list)."""
    reducer = MessageReducer(config=ReducerConfig(max_messages=8, min_messages=4))
    plugin = ReducerPlugin(reducer, summarizer=lambda messages: f"{len(messages)} earlier messages")
    watch = Watch()
    model = ScriptedLlm()
    runner = InMemoryRunner(app=App(name=APP, root_agent=agent(model), plugins=[plugin, watch]))
    per_session: list[list[weakref.ref[Any]]] = []

    async def run() -> None:
        for s in range(4):
            session = f"s{s}"
            await runner.session_service.create_session(app_name=APP, user_id="u", session_id=session)
            for i in range(4):
                new = user(question(100 * s + i))
                async for _ in runner.run_async(user_id="u", session_id=session, new_message=new):
                    pass
            await runner.session_service.delete_session(app_name=APP, user_id="u", session_id=session)
            per_session.append(watch.sent)
            watch.sent = []

    asyncio.run(run())
    model.requests.clear()
    assert wait_released(timeout=120)
    gc.collect()
    alive = [s for s, refs in enumerate(per_session) if any(_callers(r()) for r in refs)]
    assert alive in ([], [3]), f"contents of sessions {alive} are still alive"


def _agno_run(t: int, n: int) -> list[Message]:
    """An Agno request: the system message, ``n`` messages copied from the session's history
    (question, tool call, result, answer, repeated) and the run's new question."""
    out = [Message(role="system", content="You answer questions.")]
    for i in range(0, n, 4):
        call_id = f"c{t}-{i}"
        call = {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        out += [
            Message(role="user", content=f"run {t} question {i}", from_history=True),
            Message(role="assistant", tool_calls=[call], from_history=True),
            Message(role="tool", tool_call_id=call_id, content=f"result {i}", from_history=True),
            Message(role="assistant", content=f"answer {i}", from_history=True),
        ]
    return [*out, Message(role="user", content=f"run {t} new question")]


def test_agno_manager_keeps_no_message_of_an_ended_run() -> None:
    """Within a run the manager keeps what it pruned from the run's list (the next model call is
    bounded against the whole history); once Agno drops the list, it keeps none of it: only the
    newest runs' messages may still be alive (the reducer's memo keeps its last few lists)."""
    manager = ReducingCompressionManager(
        max_messages=8, min_messages=4, summarizer=lambda messages: f"{len(messages)} earlier messages"
    )
    runs: list[list[weakref.ref[Any]]] = []
    for t in range(8):
        messages = _agno_run(t, 40)
        manager.compress(messages)
        assert len(messages) < 42, "the request was bounded"
        messages += [Message(role="assistant", content="thinking"), Message(role="user", content="go on")]
        made = [*messages]
        manager.compress(messages)
        runs.append([weakref.ref(m) for m in made])
        del messages, made
    assert wait_released(timeout=120)
    gc.collect()
    alive = [
        t
        for t, refs in enumerate(runs)
        if any((m := r()) is not None and not str(m.content or "").startswith(SUMMARY_PREFIX) for r in refs)
    ]
    assert alive == [] or (alive == list(range(alive[0], 8)) and len(alive) <= 4), alive
