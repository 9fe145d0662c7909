"""A bounded LlamaIndex memory: ``ReducingMemory`` (``pip install ".[llama-index]"``).

``agent.run(user_msg, memory=ReducingMemory.from_defaults(session_id="user-1", max_messages=40))``
with a ``FunctionAgent``, ``ReActAgent`` or ``AgentWorkflow``. ``ReducingMemory`` is a LlamaIndex
``Memory``: the same chat store (an in-memory SQLite by default, any ``AsyncDBChatStore``),
``session_id``, memory blocks and sync and async methods. The agent puts the user's message in
the memory (``aput``), reads the memory before every model call of the run (``aget``), sends its
``system_prompt`` itself in front of it with the run's calls and results after it, and puts the
run's messages in at its end (``aput_messages``).

What it bounds (``mode``):

* ``"state"`` (default): the stored history, as Memory's own queue is bounded. ``aget`` reduces
  the active messages, keeps the reduced list as the active queue (the running summary, a user
  ``ChatMessage`` starting with the summary header, at its front, rolling forward) and archives
  the pruned messages in the chat store (status ``ARCHIVED``, as Memory's flush does): no message
  leaves the store (only a summary the next one replaces), ``aget_all()`` still returns every
  message, and the summarizer and ``on_prune`` hooks see each pruned message once (it leaves
  the active queue).
* ``"request"``: the request only. The active queue keeps every message; ``aget`` returns the
  reduced window, which remembers per session what the running summary covers, so each
  message is still summarized once and the request grows from call to call (a stable prefix).

Whatever the mode, what ``aget`` returns is sendable: a tool result right after the call that
made it, no call without its results, a user message first (``validate``).

It replaces Memory's token flush: ``token_limit`` and ``token_flush_size`` flush nothing (a
flush would drop messages the summarizer never saw); ``token_limit`` still bounds the memory
blocks against the chat history. Memory blocks get the messages the reducer prunes
(``aput(..., from_short_term_memory=True)``), once, as they get Memory's flushed messages, and
their content goes into what ``aget`` returns as Memory puts it (``insert_method``).

* ``preserve_first`` defaults to False: the agents send ``system_prompt`` outside the memory, so
  the first stored message is the first question, which a later turn makes old; the newest
  question (the live turn) is never pruned. A system message stored in the memory is pinned.
* One ``aget`` of a memory at a time (tasks and threads): a message put while the summarizer
  runs is kept after the reduced queue (a put waits only while the queue is rewritten); a
  ``set`` or ``reset`` during a reduction wins.
* A token budget is in the provider's tokens (docs/tokens.md, "Calibrated budgets"): the
  memory's messages carry no usage, so the first ``ReducingMemory`` adds one event handler to
  LlamaIndex's root instrumentation dispatcher. At each ``LLMChatEndEvent`` whose request holds
  the list a memory's ``aget`` returned last (the same message objects), that memory learns
  ``response.raw``'s usage (or ``additional_kwargs``'s) against that list: the system prompt
  and the run's own calls and results, which the agent sends besides the memory, fold into the
  ratio. No setup; a response without usage teaches nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

from agentstate_reducer.messages import usage_input_tokens
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.summary import SUMMARY_PREFIX
from agentstate_reducer.tokens.calibration import Calibration

from ._bounded import BoundedMap
from ._common import CallFlow, Mode, NativeSummaries, ReduceRecord, build_reducer, missing_extra

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
    from llama_index.core.memory import Memory
    from llama_index.core.memory.memory import DEFAULT_TOKEN_LIMIT
    from llama_index.core.storage.chat_store.sql import MessageStatus
except ImportError as exc:  # the framework is an extra
    what = "agentstate_reducer.integrations.llama_index"
    raise ImportError(missing_extra(what, "llama-index-core", "llama-index")) from exc

__all__ = ["ReducingMemory"]

logger = logging.getLogger("agentstate_reducer.integrations.llama_index")

#: seconds between two tries at the reduction lock held by another call
_LOCK_POLL: Final = 0.002
#: the arguments of ``Memory.from_defaults`` (the rest of ``from_defaults``'s are the reducer's)
_MEMORY_ARGS: Final = frozenset(inspect.signature(Memory.from_defaults).parameters) - {"cls"}


async def _acquire(lock: threading.Lock) -> None:
    """Take ``lock``, shared by every task and thread, without blocking a loop."""
    while not lock.acquire(blocking=False):
        await asyncio.sleep(_LOCK_POLL)


@asynccontextmanager
async def _holding(lock: threading.Lock) -> AsyncIterator[None]:
    await _acquire(lock)
    try:
        yield
    finally:
        lock.release()


def _summary_message(content: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text=content)])


def _summary_text(message: Any) -> str | None:
    """The text of a plain user text message (a summary when it starts with the header)."""
    if not isinstance(message, ChatMessage) or message.role != MessageRole.USER:
        return None
    blocks = message.blocks
    if len(blocks) != 1 or not isinstance(blocks[0], TextBlock) or message.additional_kwargs:
        return None
    return blocks[0].text


def _is_summary(message: Any) -> bool:
    text = _summary_text(message)
    return text is not None and text.startswith(SUMMARY_PREFIX)


# -- usage: the LLM calls' responses, paired with what a memory's ``aget`` returned -----------------

#: the memory whose ``aget`` returned a list last, by the id of that list's newest message (the
#: memory holds the list, so while it lives the id names that message)
_memories: BoundedMap[int, weakref.ref[ReducingMemory]] = BoundedMap(1024)
_install_lock = threading.Lock()
_installed = False


def _response_usage(response: Any) -> int | None:
    """The input tokens a LlamaIndex ``ChatResponse`` reports: its provider's raw response
    (``raw``, read through its ``usage``) or the usage keys LLMs copy to ``additional_kwargs``."""
    for where in (getattr(response, "raw", None), getattr(response, "additional_kwargs", None)):
        if where is not None:
            found = usage_input_tokens(where)
            if found is not None:
                return found
    return None


def _learn(event: LLMChatEndEvent) -> None:
    """Pair one LLM call's usage with the memory whose ``aget`` list the request held."""
    messages = event.messages or []
    for message in reversed(messages):
        ref = _memories.get(id(message))
        memory = ref() if ref is not None else None
        if memory is None or not memory._returned or memory._returned[-1] is not message:
            continue
        returned = memory._returned
        held = {id(m) for m in messages}
        if not all(id(m) in held for m in returned):
            return
        figure = _response_usage(event.response)
        if figure is not None:
            memory._calibration.observe(returned, figure)
        return


class _UsageHandler(BaseEventHandler):
    """Feeds each ``ReducingMemory``'s calibration from ``LLMChatEndEvent`` (never raises)."""

    @classmethod
    def class_name(cls) -> str:
        return "AgentstateReducerUsageHandler"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if not isinstance(event, LLMChatEndEvent):
            return
        try:
            _learn(event)
        except Exception:  # a hostile response must not fail the LLM call
            logger.exception("reading the usage of an LLM call failed; the budget is not calibrated")


def _install() -> None:
    """Add the usage handler to the root dispatcher, once per process."""
    global _installed
    with _install_lock:
        if not _installed:
            get_dispatcher().add_event_handler(_UsageHandler())
            _installed = True


def _make_flow(
    what: str,
    reducer: MessageReducer | None,
    reducer_kwargs: dict[str, Any],
    *,
    mode: Any,
    summarizer: Any,
    on_reduce: Any,
    validate: Any,
    preserve_first: Any,
) -> CallFlow:
    if mode not in ("state", "request"):
        raise ValueError(f"{what}: mode must be 'state' or 'request', got {mode!r}")
    built = build_reducer(
        reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=what
    )
    try:
        return CallFlow(
            built,
            mode=mode,
            validate=validate,
            on_reduce=on_reduce,
            native=NativeSummaries(_summary_message, _summary_text),
            logger=logger,
            max_threads=4,
        )
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{what}: {exc}") from None


class ReducingMemory(Memory):
    """A LlamaIndex ``Memory`` whose history the reducer keeps bounded, every ``aget`` sendable.

    Build it with ``ReducingMemory.from_defaults(...)`` (or ``ReducingMemory(...)`` with Memory's
    fields). Besides ``Memory.from_defaults``'s arguments (``session_id``, ``chat_history``,
    ``memory_blocks``, ``chat_store``, ``insert_method``, ...) it takes:

    Args:
        reducer: a ``MessageReducer``; or pass its ``ReducerConfig`` fields as keyword arguments
            (``max_messages=40, min_messages=20`` unless a limit is given), not both. One reducer
            may serve many memories at once.
        mode: ``"state"`` bounds the stored active queue (pruned messages archived);
            ``"request"`` keeps every message active and bounds what ``aget`` returns.
        summarizer: ``(messages) -> str`` or an async one, replacing the reducer's; it gets
            LlamaIndex ``ChatMessage`` objects (the running summary first when there is one).
        on_reduce: ``fn(ReduceRecord)`` after every ``aget`` (failures are logged); its
            ``thread_id`` is the ``session_id``, and ``on_prune`` hooks get the namespace
            ``("memories", session_id)``.
        validate: repair what ``aget`` returns by the providers' rules (a history set by hand
            may be broken).
        preserve_first: pin the first stored message (False: see the module docs).

    Raises:
        TypeError, ValueError: at construction, for a bad reducer, option or limit.
    """

    mode: Mode = "state"

    _flow: CallFlow = PrivateAttr()
    #: held while an ``aget`` reduces and stores
    _reducing: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    #: held by every write of the active queue (never across the summarizer)
    _writing: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    #: this session's calibration, fed by the usage handler
    _calibration: Calibration = PrivateAttr(default_factory=Calibration)
    #: what ``aget`` returned last: the part of a request the usage handler pairs a figure with
    _returned: tuple[ChatMessage, ...] = PrivateAttr(default=())

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        mode: Mode = "state",
        summarizer: Any = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        **data: Any,
    ) -> None:
        fields = {k: v for k, v in data.items() if k in Memory.model_fields}
        reducer_kwargs = {k: v for k, v in data.items() if k not in fields}
        flow = _make_flow(
            type(self).__name__,
            reducer,
            reducer_kwargs,
            mode=mode,
            summarizer=summarizer,
            on_reduce=on_reduce,
            validate=validate,
            preserve_first=preserve_first,
        )
        fields.setdefault("token_limit", DEFAULT_TOKEN_LIMIT)
        fields["mode"] = mode
        super().__init__(**fields)
        self._flow = flow
        _install()

    @classmethod
    def class_name(cls) -> str:
        return "ReducingMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        reducer: MessageReducer | None = None,
        *,
        mode: Mode = "state",
        summarizer: Any = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        preserve_first: bool = False,
        **kwargs: Any,
    ) -> ReducingMemory:
        """A memory with a new chat store (an in-memory SQLite unless ``chat_store`` or
        ``async_database_uri`` says otherwise), as ``Memory.from_defaults`` makes one; the
        keyword arguments it does not take are the reducer's."""
        memory_kwargs = {k: v for k, v in kwargs.items() if k in _MEMORY_ARGS}
        reducer_kwargs = {k: v for k, v in kwargs.items() if k not in memory_kwargs}
        flow = _make_flow(
            cls.__name__,
            reducer,
            reducer_kwargs,
            mode=mode,
            summarizer=summarizer,
            on_reduce=on_reduce,
            validate=validate,
            preserve_first=preserve_first,
        )
        memory = super().from_defaults(**memory_kwargs)
        assert isinstance(memory, ReducingMemory)
        memory.mode = mode
        memory._flow = flow
        return memory

    @property
    def reducer(self) -> MessageReducer:
        """The reducer the memory runs (its summarizer and hooks get ``ChatMessage`` objects)."""
        return self._flow.reducer

    # -- the queue -------------------------------------------------------------------------------

    async def _manage_queue(self) -> None:
        """No token flush: the reducer bounds the queue at ``aget`` (a flush would archive
        messages the summarizer and ``on_prune`` hooks never saw)."""

    async def _reduce(self) -> list[ChatMessage]:
        """One reduction of the active queue (stored in state mode); the messages to send."""
        await _acquire(self._reducing)
        try:
            history = await self.sql_store.get_messages(self.session_id, status=MessageStatus.ACTIVE)
            calibration = self._calibration if self._calibration.anchor is not None else None
            bounded = await self._flow.abound(
                self.session_id, history, thread=self.session_id, calibration=calibration
            )
            pruned = [m for m in bounded.result.pruned if isinstance(m, ChatMessage) and not _is_summary(m)]
            # the store gives new objects at every read: an equal queue is the same queue
            if bounded.stored is not None and (pruned or bounded.stored != history):
                await self._store(history, bounded.stored, pruned)
            if pruned and self.memory_blocks:
                # copies: a block's aput writes the session id into each message it gets
                await asyncio.gather(
                    *(
                        block.aput(
                            [m.model_copy(deep=True) for m in pruned],
                            from_short_term_memory=True,
                            session_id=self.session_id,
                        )
                        for block in self.memory_blocks
                    )
                )
            return list(bounded.sent)
        finally:
            self._reducing.release()

    async def _store(
        self, history: Sequence[ChatMessage], stored: list[Any], pruned: list[ChatMessage]
    ) -> None:
        """Archive ``pruned`` and make ``stored`` the active queue, followed by what was put
        during the reduction; nothing when the queue was set or reset meanwhile."""
        async with _holding(self._writing):
            await self._replace(history, stored, pruned)

    async def _replace(
        self, history: Sequence[ChatMessage], stored: list[Any], pruned: list[ChatMessage]
    ) -> None:
        now = await self.sql_store.get_messages(self.session_id, status=MessageStatus.ACTIVE)
        if len(now) < len(history) or any(a != b for a, b in zip(now, history, strict=False)):
            logger.debug("memory %s set or reset during a reduction: not stored", self.session_id)
            return
        if pruned:  # archived first: a failure after it leaves the queue as it was
            await self.sql_store.add_messages(self.session_id, pruned, status=MessageStatus.ARCHIVED)
        active = [*stored, *now[len(history) :]]
        await self.sql_store.delete_messages(self.session_id, status=MessageStatus.ACTIVE)
        if active:
            await self.sql_store.add_messages(self.session_id, active, status=MessageStatus.ACTIVE)

    async def aput(self, message: ChatMessage) -> None:
        async with _holding(self._writing):
            await super().aput(message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        async with _holding(self._writing):
            await super().aput_messages(messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        async with _holding(self._writing):
            await super().aset(messages)

    async def areset(self, status: MessageStatus | None = None) -> None:
        async with _holding(self._writing):
            await super().areset(status)

    async def aget(
        self, input: str | ChatMessage | None = None, **block_kwargs: Any
    ) -> list[ChatMessage]:
        """The reduced history, sendable, with the memory blocks' content put in as Memory puts it."""
        return self._returning(await self._aget(input, **block_kwargs))

    def _returning(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """Remember ``messages`` as this memory's last request part, for the usage handler."""
        if messages:
            self._returned = tuple(messages)
            _memories.put(id(messages[-1]), weakref.ref(self))
        return messages

    async def _aget(self, input: str | ChatMessage | None, **block_kwargs: Any) -> list[ChatMessage]:
        chat_history = await self._reduce()
        if not self.memory_blocks:
            return chat_history
        # Memory.aget's steps over the reduced history in place of the stored one
        content = await self._get_memory_blocks_content(chat_history, input=input, **block_kwargs)
        block_tokens = sum(self._estimate_token_count(c) for c in content.values())
        history_tokens = sum(self._estimate_token_count(m) for m in chat_history)
        truncated = await self._truncate_memory_blocks(content, block_tokens, history_tokens)
        blocks_data, chat_message_data = await self._format_memory_blocks(truncated)
        memory_content: list[Any] = []
        if blocks_data:
            formatted = self.memory_blocks_template.format_messages(memory_blocks=blocks_data)
            memory_content = formatted[0].blocks if formatted else []
        return self._insert_memory_content(chat_history, memory_content, chat_message_data)
