"""A bounded model context for AutoGen: ``ReducingChatCompletionContext`` (``pip install ".[autogen]"``).

``AssistantAgent(name, model_client, model_context=ReducingChatCompletionContext(reducer))``.
The agent stores every message of a run in its model context (``add_message``: the task, the
model's ``AssistantMessage``, each ``FunctionExecutionResultMessage``) and asks it for the history
before every model call (``get_messages``); it sends its system message itself, in front of what
the context returns.

What it bounds: the stored history. ``get_messages`` reduces the messages the context holds,
keeps the reduced list as its history (the running summary, an AutoGen ``UserMessage`` whose
``source`` is ``SUMMARY_SOURCE``, at its front, rolling forward from call to call) and returns it,
made sendable: a ``FunctionExecutionResultMessage`` always right after the ``AssistantMessage``
with its calls, no call left without its results before a later message, a user message first.
So ``save_state`` holds at most one reduction's worth of messages plus what was added since, and
the summarizer and ``on_prune`` hooks see each pruned message once (it leaves the history).
The summarizer gets AutoGen messages only: the running summary's ``UserMessage`` first when
there is one, then the pruned messages.

* ``preserve_first`` defaults to False: AssistantAgent keeps its system message outside the
  context, so the first stored message is the first task, which a later turn makes old; the
  newest task (the live turn) is never pruned. A ``SystemMessage`` stored in the context (as
  ``initial_messages``, say) is pinned whatever ``preserve_first`` says.
* Each ``get_messages`` is one reduction: calls are serialized (across tasks and threads), and a
  message added while the summarizer runs is kept after the reduced history. ``clear`` and
  ``load_state`` during a reduction win: the reduction's result is not stored then.
* The component config (``dump_component`` / ``load_component``) holds the reducer's limits,
  ``preserve_first``, ``validate``, ``thread_id`` and ``initial_messages``; callables cannot be
  serialized, so the summarizer, ``on_reduce``, ``on_prune`` hooks, a ``token_counter``, a
  ``summary_message_factory``, an ``Encoding`` object and ``model_client`` are not in it (a
  warning names those left out): pass them again to a context built from the config's values.
* ``model_client=`` (the agent's client) calibrates a token budget to the provider's tokens from
  the usage the client reports (docs/tokens.md, "Calibrated budgets").
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from agentstate_reducer.config import ReducerConfig
from agentstate_reducer.reducer import MessageReducer

from ._bounded import BoundedMap
from ._common import Calibrations, CallFlow, NativeSummaries, ReduceRecord, build_reducer, missing_extra

try:
    from autogen_core import Component
    from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
    from autogen_core.models import LLMMessage, UserMessage
    from pydantic import BaseModel
    from typing_extensions import Self
except ImportError as exc:  # the framework is an extra
    what = "agentstate_reducer.integrations.autogen"
    raise ImportError(missing_extra(what, "autogen-core", "autogen")) from exc

__all__ = [
    "SUMMARY_SOURCE",
    "ReducingChatCompletionContext",
    "ReducingChatCompletionContextConfig",
]

logger = logging.getLogger("agentstate_reducer.integrations.autogen")

#: the ``source`` of the running summary's ``UserMessage`` (a valid OpenAI message name)
SUMMARY_SOURCE: Final = "conversation_summary"

#: ReducerConfig fields a component config holds (the serializable limits)
_LIMITS: Final = (
    "min_messages",
    "max_messages",
    "max_tokens",
    "target_tokens",
    "cascade_tool_messages",
    "start_on_human",
    "encoding",
    "on_summary_error",
    "summary_timeout",
)
#: ReducerConfig fields a component config cannot hold (callables), with their empty value
_CALLABLES: Final[Mapping[str, Any]] = {
    "token_counter": None,
    "summarize_fn": None,
    "asummarize_fn": None,
    "summary_message_factory": None,
    "on_prune": (),
}

#: seconds between two tries at the reduction lock held by another call
_LOCK_POLL: Final = 0.002


class ReducingChatCompletionContextConfig(BaseModel):
    """The component config of ``ReducingChatCompletionContext``: the reducer's limits (the
    ``ReducerConfig`` fields of the same names) and the context's options; no callables."""

    min_messages: int
    max_messages: int | None = None
    max_tokens: int | None = None
    target_tokens: int | None = None
    cascade_tool_messages: bool = True
    start_on_human: bool = True
    encoding: str = "cl100k_base"
    on_summary_error: str = "keep"
    summary_timeout: float | None = None
    preserve_first: bool = False
    validate_requests: bool = True
    thread_id: str | None = None
    initial_messages: list[LLMMessage] | None = None


def _summary_message(content: str) -> UserMessage:
    return UserMessage(content=content, source=SUMMARY_SOURCE)


def _summary_text(message: Any) -> str | None:
    """The text of a summary this module made (or one loaded from its saved state)."""
    if not isinstance(message, UserMessage) or message.source != SUMMARY_SOURCE:
        return None
    return message.content if isinstance(message.content, str) else None


#: id of a model client -> id of the context that called it last and its prompt tokens then: a
#: client may serve several agents, and the growth of its total is one context's only when no
#: other context called it in between
_CLIENT_TOTALS: BoundedMap[int, tuple[int, int]] = BoundedMap(1024)


def _reported(context: Any, client: Any) -> int | None:
    """The input tokens of ``context``'s previous model call, read from ``client``'s running
    ``actual_usage().prompt_tokens``; None when unknown."""
    if client is None:
        return None
    try:
        total = client.actual_usage().prompt_tokens
    except Exception:
        logger.exception("reading actual_usage() of %r failed; the budget is not calibrated", client)
        return None
    if isinstance(total, bool) or not isinstance(total, int):
        return None
    last = _CLIENT_TOTALS.put(id(client), (id(context), total))
    if last is None or last[0] != id(context):
        return None
    return total - last[1]


class ReducingChatCompletionContext(ChatCompletionContext, Component[ReducingChatCompletionContextConfig]):
    """An AutoGen model context that keeps its history bounded and every request sendable.

    Args:
        reducer: a ``MessageReducer``; or pass its ``ReducerConfig`` fields as keyword arguments
            (``max_messages=40, min_messages=20`` unless a limit is given), not both.
        summarizer: ``(messages) -> str`` or an async one, replacing the reducer's; with a
            summarizer (this one or the reducer's) the running summary is kept in the history.
        on_reduce: ``fn(ReduceRecord)`` after every ``get_messages`` (failures are logged).
        validate: repair what ``get_messages`` returns by the providers' rules (a history loaded
            or added by hand may be broken); the stored history is the reducer's output.
        preserve_first: pin the first stored message (False: see the module docs).
        thread_id: names the conversation to ``on_prune`` hooks (namespace ``("memories",
            thread_id)``) and in ``ReduceRecord.thread_id``.
        initial_messages: the history to start with (AutoGen's own argument).
        model_client: the agent's ``ChatCompletionClient``, for a token budget in the provider's
            tokens: AutoGen reports usage on ``CreateResult``, never in the context, so each
            ``get_messages`` reads the growth of the client's running ``actual_usage()`` since
            this context's previous call (when no other context called the client in between)
            and calibrates with it and the messages that call was sent.

    Raises:
        TypeError, ValueError: at construction, for a bad reducer, option or limit.
    """

    component_config_schema = ReducingChatCompletionContextConfig
    component_provider_override = "agentstate_reducer.integrations.autogen.ReducingChatCompletionContext"

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Any = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        thread_id: str | None = None,
        initial_messages: list[LLMMessage] | None = None,
        model_client: Any = None,
        **reducer_kwargs: Any,
    ) -> None:
        what = type(self).__name__
        if model_client is not None and not callable(getattr(model_client, "actual_usage", None)):
            raise TypeError(
                f"{what}: model_client must be the agent's ChatCompletionClient (it reports "
                f"actual_usage()), got {type(model_client).__name__}"
            )
        if thread_id is not None and not isinstance(thread_id, str):
            raise TypeError(f"{what}: thread_id must be a str or None, got {type(thread_id).__name__}")
        if initial_messages is not None and not isinstance(initial_messages, list):
            raise TypeError(
                f"{what}: initial_messages must be a list of autogen_core.models messages, "
                f"got {type(initial_messages).__name__}"
            )
        native = NativeSummaries(_summary_message, _summary_text)
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=what
        )
        self._flow = CallFlow(
            built,
            mode="state",
            validate=validate,
            on_reduce=on_reduce,
            native=native,
            logger=logger,
            max_threads=1,
        )
        self.reducer = self._flow.reducer
        super().__init__(initial_messages)
        self.thread_id = thread_id
        #: held while a get_messages reduces (never across an add_message)
        self._reducing = threading.Lock()
        #: held for each read or swap of the message list (never across an await)
        self._list_lock = threading.Lock()
        self.model_client = model_client
        self._calibrations = Calibrations(self.reducer, max_threads=1)

    # -- the history -----------------------------------------------------------------------------

    async def add_message(self, message: LLMMessage) -> None:
        """Add ``message`` to the stored history."""
        with self._list_lock:
            self._messages.append(message)

    async def get_messages(self) -> list[LLMMessage]:
        """Reduce the stored history, keep the reduced one, return it made sendable."""
        await self._lock()
        try:
            with self._list_lock:
                history = list(self._messages)
                held = self._messages
            calibration = self._calibrations.calibration(self, _reported(self, self.model_client))
            bounded = await self._flow.abound(self, history, thread=self.thread_id, calibration=calibration)
            self._calibrations.sent(self, bounded.sent)
            if bounded.stored is not None:
                with self._list_lock:
                    if self._messages is held:  # only appended to since (clear, load_state rebind)
                        # messages added during the reduction follow the reduced history
                        self._messages = [*bounded.stored, *self._messages[len(history) :]]
                    else:
                        logger.debug("history cleared or loaded during a reduction: not stored")
            return list(bounded.sent)
        finally:
            self._reducing.release()

    async def _lock(self) -> None:
        """Take the reduction lock: shared by every task and thread, without blocking a loop."""
        while not self._reducing.acquire(blocking=False):
            await asyncio.sleep(_LOCK_POLL)

    async def clear(self) -> None:
        """Forget the stored history (the summary with it)."""
        with self._list_lock:
            self._messages = []

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Replace the stored history with a saved one (``save_state``); a summary in it is
        recognised and rolls forward."""
        loaded = ChatCompletionContextState.model_validate(state).messages
        with self._list_lock:
            self._messages = loaded

    # -- the component config -------------------------------------------------------------------

    def _to_config(self) -> ReducingChatCompletionContextConfig:
        config = self.reducer.config
        left_out = [name for name, empty in _CALLABLES.items() if getattr(config, name) != empty]
        if not isinstance(config.encoding, str):
            left_out.append("encoding")
        if self._flow.on_reduce is not None:
            left_out.append("on_reduce")
        if self.model_client is not None:
            left_out.append("model_client")
        if left_out:
            logger.warning(
                "%s: the component config holds no callables; left out: %s",
                type(self).__name__,
                ", ".join(left_out),
            )
        limits = {name: getattr(config, name) for name in _LIMITS}
        if not isinstance(limits["encoding"], str):
            del limits["encoding"]
        return ReducingChatCompletionContextConfig(
            **limits,
            preserve_first=config.preserve_first,
            validate_requests=self._flow.validate,
            thread_id=self.thread_id,
            initial_messages=self._initial_messages,
        )

    @classmethod
    def _from_config(cls, config: ReducingChatCompletionContextConfig) -> Self:
        options = {"preserve_first", "validate_requests", "thread_id", "initial_messages"}
        fields = config.model_dump(exclude=options)
        reducer = MessageReducer(config=ReducerConfig(**fields))
        return cls(
            reducer,
            validate=config.validate_requests,
            preserve_first=config.preserve_first,
            thread_id=config.thread_id,
            initial_messages=config.initial_messages,
        )
