"""What an integration's request mode keeps of the conversations it served: nothing its callers
dropped but the last few lists (the reducer's memo), whatever the number of conversations.
Memory is stated by the objects still alive, never by a time."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer._columns.memo import released
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
    released()
    gc.collect()
    alive = [s for s, refs in enumerate(per_session) if any(_callers(r()) for r in refs)]
    assert alive in ([], [3]), f"contents of sessions {alive} are still alive"
