"""Google ADK: ``ReducerCallback`` and ``ReducerPlugin`` (``pip install ".[google-adk]"``).

Both bound ``llm_request.contents`` (google-genai ``Content`` objects) before every model call::

    LlmAgent(..., before_model_callback=ReducerCallback(reducer))   # one agent
    App(name=..., root_agent=agent, plugins=[ReducerPlugin(reducer)])  # every agent of an app

* Request mode: ADK rebuilds the contents from the session's events at every model call, so only
  the request is edited; the session's events are never touched. ADK hands over copies of the
  stored contents (equal, not the same objects) and ids stripped from its own function calls, so
  what the summary covers is found again by equality (``_common.RequestWindow``), per session,
  agent, branch and isolation scope: the summarizer and ``on_prune`` hooks see each message once
  although ADK sends the whole history at every call, also when answering a long-running or
  confirmed call makes ADK cut the history back to the call or move the answer up to it.
* The running summary is a user ``Content`` with one text part, at the front of the contents,
  where ADK's own events compaction materializes its summary (in place of the events it covers);
  user, not ADK's ``model``, so that the request still opens with a user turn.
* ``preserve_first`` defaults to False: the agent's instruction is
  ``llm_request.config.system_instruction``, outside the contents, so the first content is the
  first user message, not a system prompt to pin.
* Held out of the reduction, sent as ADK built them: a content whose unanswered function calls
  are all long-running calls ADK still waits for (marked in an event's ``long_running_tool_ids``
  and answered by no event of the session; ADK keeps them while the conversation goes on), the
  response content right after it answering its other calls, and ADK's own compaction summaries
  (kept first). They are never summarized, pruned or repaired away. Any other unanswered call (a
  run that died before its tool answered, a result that came late or split over two contents)
  is repaired as in every integration: the request never holds a call nothing answers but
  the ones ADK itself leaves pending.
* ``__call__`` is async (ADK awaits a callback's awaitable), so an async summarizer works; a
  sync summarizer runs as is. ``Runner.run`` and ``Runner.run_async`` both work; one object may
  serve many sessions and threads.

Importing this module imports ADK; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentstate_reducer.messages import read_message
from agentstate_reducer.reducer import MessageReducer

from ._common import Calibrations, CallFlow, NativeSummaries, ReduceRecord, build_reducer, missing_extra

try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    what = "agentstate_reducer.integrations.google_adk"
    raise ImportError(missing_extra(what, "google-adk", "google-adk")) from exc

__all__ = ["ReducerCallback", "ReducerPlugin"]

logger = logging.getLogger("agentstate_reducer.integrations.google_adk")


def summary_content(text: str) -> types.Content:
    """The running summary as ADK sends a user turn: one text part."""
    return types.Content(role="user", parts=[types.Part(text=text)])


def _text_of(content: Any) -> str | None:
    """The text of a user content made of one text part (None for anything else)."""
    if getattr(content, "role", None) != "user":
        return None
    parts = getattr(content, "parts", None) or []
    if len(parts) != 1:
        return None
    text = getattr(parts[0], "text", None)
    return text if isinstance(text, str) else None


def _session(callback_context: Any) -> Any:
    """The session of this call: a property of the context in 2.x; the invocation context has it
    in 1.x as well."""
    invocation = getattr(callback_context, "_invocation_context", None)
    return getattr(callback_context, "session", None) or getattr(invocation, "session", None)


def _conversation(callback_context: Any) -> tuple[Hashable, str | None]:
    """The key of the history ADK builds for this call, and the session id (the thread).

    ADK builds one history per session, agent, branch and isolation scope.
    """
    invocation = getattr(callback_context, "_invocation_context", None)
    session = _session(callback_context)
    session_id = getattr(session, "id", None)
    thread = session_id if isinstance(session_id, str) else None
    key = (
        getattr(session, "app_name", None),
        getattr(session, "user_id", None),
        thread,
        getattr(callback_context, "agent_name", None),
        getattr(invocation, "branch", None),
        getattr(invocation, "isolation_scope", None),
    )
    return key, thread


def _compaction_summaries(events: Sequence[Any]) -> list[Any]:
    """The summaries of ADK's events compaction in ``events`` (``compacted_content``)."""
    out = []
    for event in events:
        compaction = getattr(getattr(event, "actions", None), "compaction", None)
        content = getattr(compaction, "compacted_content", None)
        if content is not None:
            out.append(content)
    return out


#: ADK's interrupt calls that older sessions store without ``long_running_tool_ids``: ADK
#: waits for them all the same (``google.adk.events._interrupts``)
_INTERRUPT_CALLS: Final = frozenset({"adk_request_input", "adk_request_credential"})


def _parts(content: Any) -> Sequence[Any]:
    return getattr(content, "parts", None) or ()


def _signature(call: Any) -> tuple[str, str]:
    """A call's name and arguments: what is left to know it by when ADK stripped its id."""
    args = json.dumps(getattr(call, "args", None), sort_keys=True, default=repr)
    return str(getattr(call, "name", None)), args


@dataclass(frozen=True, slots=True)
class _LongRunning:
    """The long-running calls ADK still waits for in a session: marked in an event's
    ``long_running_tool_ids`` (or an interrupt call of an older session) and answered by no
    function response of the session. ADK sends such a call with no response after it while the
    conversation goes on; every other unanswered call is a broken history."""

    ids: frozenset[str] = frozenset()
    #: name and arguments of each, for a request call whose ``adk-`` id ADK stripped
    signatures: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, events: Sequence[Any]) -> _LongRunning:
        answered: set[str] = set()
        marked: list[Any] = []
        for event in events:
            content = getattr(event, "content", None)
            waits = set(getattr(event, "long_running_tool_ids", None) or ())
            for part in _parts(content):
                response = getattr(part, "function_response", None)
                if response is not None and getattr(response, "id", None):
                    answered.add(response.id)
                call = getattr(part, "function_call", None)
                if call is not None and call.id and (call.id in waits or call.name in _INTERRUPT_CALLS):
                    marked.append(call)
        pending = [c for c in marked if c.id not in answered]
        return cls(frozenset(c.id for c in pending), frozenset(_signature(c) for c in pending))

    def waits_for(self, call: Any) -> bool:
        """Whether ``call`` (from the request: its ``adk-`` id may be stripped) is one of them."""
        if not self.ids:
            return False
        call_id = getattr(call, "id", None)
        return call_id in self.ids if call_id else _signature(call) in self.signatures


def _held(
    contents: Sequence[Any], adk_summaries: Sequence[Any], long_running: _LongRunning
) -> tuple[set[int], set[int]]:
    """Positions of ADK's compaction summaries, and of the pending call units: a content whose
    calls the content right after it leaves unanswered are all long-running calls ADK waits for,
    with that content when it answers the unit's other calls (ADK puts every response right
    after its call)."""
    summaries = {i for i, c in enumerate(contents) if adk_summaries and any(c == s for s in adk_summaries)}
    pending: set[int] = set()
    for i, content in enumerate(contents):
        calls = [p.function_call for p in _parts(content) if getattr(p, "function_call", None)]
        if i in summaries or not any(long_running.waits_for(c) for c in calls):
            continue
        info = read_message(content)
        if len(info.call_ids) != len(calls):
            continue  # not read as one call per part: left to the repair
        answer = read_message(contents[i + 1]) if i + 1 < len(contents) else None
        answered = set(answer.result_ids) if answer is not None else set()
        open_calls = [c for c, cid in zip(calls, info.call_ids, strict=True) if cid not in answered]
        if not open_calls or not all(long_running.waits_for(c) for c in open_calls):
            continue
        pending.add(i)
        if answered & set(info.call_ids):
            pending.add(i + 1)
    return summaries, pending


class _Bounder:
    """What the callback and the plugin share: the flow and one model call's edit."""

    def __init__(
        self,
        what: str,
        reducer: MessageReducer | None,
        *,
        summarizer: Any,
        on_reduce: Callable[[ReduceRecord], Any] | None,
        validate: bool,
        preserve_first: bool,
        reducer_kwargs: dict[str, Any],
    ) -> None:
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=what
        )
        self.flow = CallFlow(
            built,
            mode="request",
            validate=validate,
            on_reduce=on_reduce,
            native=NativeSummaries(summary_content, _text_of),
            logger=logger,
        )
        self.calibrations = Calibrations(built)

    async def bound(self, callback_context: Any, llm_request: Any) -> None:
        contents = list(getattr(llm_request, "contents", None) or [])
        if not contents:
            return
        key, thread = _conversation(callback_context)
        events = getattr(_session(callback_context), "events", None) or ()
        summaries, pending = _held(contents, _compaction_summaries(events), _LongRunning.of(events))
        held = summaries | pending
        history = [c for i, c in enumerate(contents) if i not in held]
        reported = _newest_usage(events, getattr(callback_context, "agent_name", None))
        calibration = self.calibrations.calibration(
            key,
            getattr(reported, "usage_metadata", None),
            source=getattr(reported, "id", None) if reported is not None else None,
        )
        bounded = await self.flow.abound(key, history, thread=thread, calibration=calibration)
        sent = _merge(contents, bounded.sent, summaries, pending)
        self.calibrations.sent(key, sent)  # paired with the usage reported after it
        if len(sent) != len(contents) or any(a is not b for a, b in zip(sent, contents, strict=True)):
            llm_request.contents = sent


def _newest_usage(events: Sequence[Any], agent_name: Any) -> Any:
    """The newest event of ``agent_name`` carrying usage: the response to the agent's previous
    model call (ADK stores each model response as an event with its ``usage_metadata``)."""
    for event in reversed(events):
        usage = getattr(event, "usage_metadata", None)
        if usage is not None and getattr(event, "author", None) == agent_name:
            return event
    return None


def _merge(contents: list[Any], sent: list[Any], summaries: set[int], pending: set[int]) -> list[Any]:
    """``sent`` with the held contents back: ADK's summaries first, each pending unit before the
    first sent content that came after it in ``contents`` (or last)."""
    position = {id(c): i for i, c in enumerate(contents) if i not in summaries and i not in pending}
    out = [contents[i] for i in sorted(summaries)]
    waiting = sorted(pending)
    for message in sent:
        p = position.get(id(message))
        if p is not None:
            while waiting and waiting[0] < p:
                out.append(contents[waiting.pop(0)])
        out.append(message)
    out.extend(contents[i] for i in waiting)
    return out


class ReducerCallback:
    """A ``before_model_callback`` for ``LlmAgent`` that bounds the request's contents.

    >>> from agentstate_reducer import MessageReducer  # doctest: +SKIP
    >>> agent = LlmAgent(name="a", model=model,  # doctest: +SKIP
    ...                  before_model_callback=ReducerCallback(MessageReducer(max_messages=40)))

    Pass a ``MessageReducer`` or its keyword arguments (not both; neither: 20 to 40 messages).
    ``summarizer`` (``(contents) -> str``, sync or async) keeps a running summary of what was
    pruned; ``on_reduce`` gets a ``ReduceRecord`` per model call; ``validate`` repairs the request
    by the providers' rules. Returns None: the model call goes on with the edited request.

    Raises:
        TypeError, ValueError: bad arguments, at construction.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Any = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        **reducer_kwargs: Any,
    ) -> None:
        self._bounder = _Bounder(
            type(self).__name__,
            reducer,
            summarizer=summarizer,
            on_reduce=on_reduce,
            validate=validate,
            preserve_first=preserve_first,
            reducer_kwargs=reducer_kwargs,
        )

    @property
    def reducer(self) -> MessageReducer:
        """The reducer this callback runs with (``preserve_first`` and summarizer applied)."""
        return self._bounder.flow.reducer

    async def __call__(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        await self._bounder.bound(callback_context, llm_request)
        return None


class ReducerPlugin(BasePlugin):
    """A ``BasePlugin`` bounding every agent's model requests in an app or runner:
    ``App(..., plugins=[ReducerPlugin(reducer)])`` or ``Runner(..., plugins=[...])``.

    The arguments of ``ReducerCallback``, and ``name`` (the plugin's name in the app, unique).
    Plugins run before the agents' own callbacks.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        name: str = "agentstate_reducer",
        summarizer: Any = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        **reducer_kwargs: Any,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"ReducerPlugin: name must be a non-empty str, got {name!r}")
        self._bounder = _Bounder(
            type(self).__name__,
            reducer,
            summarizer=summarizer,
            on_reduce=on_reduce,
            validate=validate,
            preserve_first=preserve_first,
            reducer_kwargs=reducer_kwargs,
        )
        super().__init__(name=name)

    @property
    def reducer(self) -> MessageReducer:
        """The reducer this plugin runs with (``preserve_first`` and summarizer applied)."""
        return self._bounder.flow.reducer

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        await self._bounder.bound(callback_context, llm_request)
        return None
