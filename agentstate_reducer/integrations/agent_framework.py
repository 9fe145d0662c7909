"""Microsoft Agent Framework: ``ReducerCompactionStrategy`` (``pip install ".[agent-framework]"``).

A compaction strategy (the ``agent_framework.CompactionStrategy`` protocol: ``async
__call__(messages) -> bool``, editing the list in place) for every place the framework takes one::

    strategy = ReducerCompactionStrategy(reducer, summarizer=summarize)
    Agent(client=client, compaction_strategy=strategy)          # bounds each model request
    history = InMemoryHistoryProvider(skip_excluded=True)       # bounds the stored history
    compaction = CompactionProvider(after_strategy=strategy, history_source_id=history.source_id)
    Agent(client=client, context_providers=[compaction, history])

* As the framework's own strategies do, it never deletes a message: it marks the pruned ones
  excluded (``additional_properties["_excluded"]``, reason ``"agentstate_reducer"``) and inserts
  the running summary (a user ``Message`` with one text) before the first message it keeps; the
  framework sends the included messages only (``project_included_messages``).
* ``compaction_strategy=`` (client, agent or ``run()``) and ``before_strategy`` bound the request
  only: the framework hands the strategy copies of the stored history at every model call, and
  the session's history keeps every message and no summary. What the summary covers is
  remembered per conversation (told apart by its first message), found again in the next
  history by role and contents, in order, so the summarizer and ``on_prune`` hooks see each
  message once and the request is the previous one plus the new messages. A history that does
  not hold every covered message gets no remembered summary: it is planned as a new one.
* ``after_strategy`` bounds the stored history: after each run it marks the stored messages
  excluded and inserts the summary into the stored list, where it is persisted (and survives
  ``AgentSession.to_dict()`` / ``from_dict()``); load it with
  ``InMemoryHistoryProvider(skip_excluded=True)``, or the excluded messages are loaded again.
  The provider goes before the history provider: ``after_run`` runs in reverse order, and after
  it the strategy would see the history before the run's messages were saved.
* Excluding the tool loop's own messages (a turn longer than the limit) in a request placement
  names a summary the framework never finds, so the framework clears those marks before it
  persists the run: no exclusion is stored without its summary.
* ``preserve_first`` defaults to False: the agent's ``instructions`` travel in the chat options,
  outside the message list, so its first message is the first user message, not a system prompt
  (a system ``Message`` in the list is pinned whatever the setting).
* The live turn is kept whole; a pending call (an ``assistant`` message ending a stored history
  with a call or an approval request that nothing answers yet) is never excluded or split: the
  request repair (``validate``) applies to a request, a list whose last message is not the
  assistant's, and never to a stored history after a run.
* One object may serve many sessions and asyncio tasks at once; a failing summarizer prunes
  nothing (the run goes on).

Importing this module imports the Agent Framework; ``import agentstate_reducer`` does not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentstate_reducer.messages import read_message
from agentstate_reducer.reducer import MessageReducer
from agentstate_reducer.summary import SUMMARY_PREFIX

from ._bounded import BoundedMap
from ._common import Calibrations, CallFlow, NativeSummaries, ReduceRecord, build_reducer, missing_extra

try:
    from agent_framework import (
        EXCLUDE_REASON_KEY,
        EXCLUDED_KEY,
        GROUP_ANNOTATION_KEY,
        SUMMARIZED_BY_SUMMARY_ID_KEY,
        ChatContext,
        ChatMiddleware,
        ChatResponse,
        Message,
        ResponseStream,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    what = "agentstate_reducer.integrations.agent_framework"
    raise ImportError(missing_extra(what, "agent-framework-core", "agent-framework")) from exc

__all__ = ["EXCLUDE_REASON", "ReducerCompactionStrategy"]

logger = logging.getLogger("agentstate_reducer.integrations.agent_framework")

#: the ``_exclude_reason`` of the messages this strategy excludes
EXCLUDE_REASON: Final = "agentstate_reducer"
#: marks the summary messages this strategy inserts (kept through serialization)
SUMMARY_PROPERTY: Final = "agentstate_reducer_summary"

Identity = tuple[str, str]


def summary_message(text: str) -> Message:
    """The running summary as the framework sends a user turn: one text content."""
    return Message(role="user", contents=[text], additional_properties={SUMMARY_PROPERTY: True})


def _text_of(message: Any) -> str | None:
    """The text of a user message made of one text content (None for anything else)."""
    if getattr(message, "role", None) != "user":
        return None
    contents = getattr(message, "contents", None) or []
    if len(contents) != 1 or getattr(contents[0], "type", None) != "text":
        return None
    text = getattr(contents[0], "text", None)
    return text if isinstance(text, str) else None


def _summary_text(message: Any) -> str | None:
    """The text of a running summary message (one this strategy made), else None."""
    text = _text_of(message)
    return text if text is not None and text.startswith(SUMMARY_PREFIX) else None


def _identity(message: Message) -> Identity:
    """A message's role and contents: equal for the copies the framework makes of a stored
    message (its ``message_id`` may be assigned to one copy and not another)."""
    try:
        dumped = [c.to_dict(exclude_none=True) for c in message.contents]
        for item in dumped:
            item.pop("raw_representation", None)
        contents = json.dumps(dumped, sort_keys=True, ensure_ascii=False, default=str)
    except Exception:
        contents = repr(message.contents)
    return (str(message.role), contents)


def _excluded(message: Message) -> bool:
    return bool(message.additional_properties.get(EXCLUDED_KEY, False))


def _exclude(message: Message) -> bool:
    """Mark ``message`` excluded, summarized by a summary the framework never finds: in the tool
    loop it then clears the mark from the run's messages before they are persisted, as it does
    for a summary that does not reach the transcript (no exclusion stored without its summary)."""
    changed = not _excluded(message)
    properties = message.additional_properties
    properties[EXCLUDED_KEY] = True
    properties[EXCLUDE_REASON_KEY] = EXCLUDE_REASON
    group = properties.get(GROUP_ANNOTATION_KEY)
    group = dict(group) if isinstance(group, dict) else {}
    group[SUMMARIZED_BY_SUMMARY_ID_KEY] = EXCLUDE_REASON
    properties[GROUP_ANNOTATION_KEY] = group
    return changed


@dataclass(frozen=True, slots=True)
class _Covered:
    """What the running summary of one conversation covers."""

    #: role and contents of each covered message, in history order (the oldest messages)
    messages: tuple[Identity, ...]
    #: the summary's text (None without a summarizer)
    summary: str | None


class ReducerCompactionStrategy(ChatMiddleware):
    """An Agent Framework compaction strategy that bounds the history with a ``MessageReducer``.

    >>> strategy = ReducerCompactionStrategy(max_messages=40, summarizer=summarize)  # doctest: +SKIP
    >>> agent = Agent(client=client, compaction_strategy=strategy)  # doctest: +SKIP

    It is a chat middleware too: ``Agent(..., compaction_strategy=strategy,
    middleware=[strategy])`` lets it read each model call's ``ChatResponse.usage_details``, so a
    token budget is in the provider's tokens (docs/tokens.md, "Calibrated budgets"): the
    reported ``input_token_count`` is paired with the messages the strategy let that call send,
    per conversation. Without it, token mode counts with the reducer's own counter.

    Pass a ``MessageReducer`` or its keyword arguments (not both; neither: 20 to 40 messages).
    ``summarizer`` (``(messages) -> str``, sync or async, given ``agent_framework.Message``
    objects) keeps a running summary of what was pruned; ``on_reduce`` gets a ``ReduceRecord``
    per call; ``validate`` repairs a request by the providers' rules (the repaired-away messages
    are excluded too). Messages another strategy excluded stay excluded and are not reduced.

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
        max_threads: int = 1024,
        **reducer_kwargs: Any,
    ) -> None:
        what = type(self).__name__
        if not isinstance(max_threads, int) or isinstance(max_threads, bool) or max_threads < 1:
            raise ValueError(f"{what}: max_threads must be an int >= 1, got {max_threads!r}")
        built = build_reducer(
            reducer, reducer_kwargs, preserve_first=preserve_first, summarizer=summarizer, what=what
        )
        self._flow = CallFlow(
            built,
            mode="state",
            validate=validate,
            on_reduce=on_reduce,
            native=NativeSummaries(summary_message, _text_of),
            logger=logger,
            max_threads=max_threads,
        )
        self._seen: BoundedMap[Hashable, _Covered] = BoundedMap(max_threads)
        self._calibrations = Calibrations(self._flow.reducer, max_threads)

    @property
    def reducer(self) -> MessageReducer:
        """The reducer this strategy runs with (``preserve_first`` and summarizer applied)."""
        return self._flow.reducer

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._flow.reducer.config!r})"

    async def __call__(self, messages: list[Message]) -> bool:
        """Exclude what the reduction prunes from ``messages`` and insert the running summary;
        True when inclusion or the list changed."""
        if not messages:
            return False
        key = self._key(messages)
        known = self._seen.get(key) if key is not None else None
        changed = False
        covered: list[Message] = []
        if known is not None and known.messages:
            found = self._cover(messages, known.messages)
            if found is None:  # another conversation that opens the same way: not this one's
                known = None
            else:
                covered = found
                for m in found:
                    changed = _exclude(m) or changed
        included = [m for m in messages if not _excluded(m)]
        if not included:
            return changed
        if known is not None and known.summary is not None and not any(_summary_text(m) for m in included):
            at = self._front(messages, included)
            fresh = summary_message(known.summary)
            messages.insert(at, fresh)
            included = [m for m in messages if not _excluded(m)]
            changed = True
        first_pinned = self._flow.reducer.config.preserve_first
        calibration = self._calibrations.calibration(key, None) if key is not None else None
        bounded = await self._flow.abound(key, included, thread=None, calibration=calibration)
        request = getattr(included[-1], "role", None) != "assistant"
        sent = bounded.sent if request else (bounded.stored if bounded.stored is not None else included)
        if request and key is not None:
            self._calibrations.sent(key, sent)  # paired with its usage in ``process``
        kept_ids = {id(m) for m in sent}
        kept_summaries = {t for m in sent if (t := _summary_text(m)) is not None}
        newly: list[Message] = []
        for m in included:
            if id(m) in kept_ids:
                continue
            text = _summary_text(m)
            if text is not None and text in kept_summaries:
                kept_summaries.discard(text)  # the kept summary is this one already in the list
                continue
            changed = _exclude(m) or changed
            if text is None and not (first_pinned and m is included[0]):
                newly.append(m)
        present = {t for m in included if not _excluded(m) and (t := _summary_text(m)) is not None}
        new_summary: str | None = None
        for m in sent:
            text = _summary_text(m)
            if text is not None:
                new_summary = text
                if text not in present:
                    at = self._front(messages, [x for x in messages if not _excluded(x)])
                    messages.insert(at, summary_message(text))
                    changed = True
        pruned = {id(m) for m in bounded.result.pruned}
        # history order: the live turn's human message may stay while its tool loop is pruned,
        # and be pruned later, after messages that follow it
        now = {id(m) for m in covered} | {id(m) for m in newly if id(m) in pruned}
        identities = tuple(_identity(m) for m in messages if id(m) in now)
        if key is not None and (identities or new_summary is not None):
            summary = new_summary if new_summary is not None else (known.summary if known else None)
            self._seen.put(key, _Covered(identities, summary))
        return changed

    async def process(self, context: ChatContext, call_next: Callable[[], Any]) -> None:
        """The chat middleware: after the model call, learn the conversation's calibration from
        the response's ``usage_details`` (a streamed call's once its final response is built)
        and the request this strategy bounded for it. A figure the core cannot use (missing,
        zero, negative) teaches nothing; the call itself is never changed."""
        key = self._key(context.messages) if context.messages else None
        await call_next()
        result = context.result
        if key is None:
            return
        if isinstance(result, ResponseStream):  # learnt from the final response, once consumed

            def learn(final: Any) -> None:
                self._learn(key, final)

            try:
                result.with_result_hook(learn)
            except RuntimeError:  # a stream already consumed: nothing to learn from
                logger.debug("a consumed response stream takes no hook; the budget is not calibrated")
            return
        self._learn(key, result)

    def _learn(self, key: Hashable, response: Any) -> None:
        """Pair ``response``'s usage with the request ``key`` sent last (never raises)."""
        if not isinstance(response, ChatResponse):
            return
        try:
            self._calibrations.calibration(key, response.usage_details)
        except Exception:  # a hostile usage object must not fail the model call
            logger.exception("reading the usage of a model call failed; the budget is not calibrated")

    def _key(self, messages: Sequence[Message]) -> Hashable | None:
        """The conversation: its first message that is no system message or summary."""
        for m in messages:
            if m.role == "system" or _summary_text(m) is not None:
                continue
            return _identity(m)
        return None

    def _cover(self, messages: Sequence[Message], covered: Sequence[Identity]) -> list[Message] | None:
        """The covered messages of ``messages``: each, in history order, the next conversation
        message with its role and contents (the summaries are passed over, and so are messages
        between covered ones: the human message of a tool loop longer than the limit stays while
        the loop's older steps are pruned); None unless every covered message is found, so a
        conversation that only opens like the remembered one never gets its summary or
        exclusions."""
        found: list[Message] = []
        pinned = self._flow.reducer.config.preserve_first
        first = True
        for m in messages:
            if len(found) >= len(covered):
                break
            if m.role == "system" or _summary_text(m) is not None:
                continue
            if pinned and first:
                first = False
                continue
            first = False
            if _identity(m) == covered[len(found)]:
                found.append(m)
        return found if len(found) == len(covered) else None

    def _front(self, messages: Sequence[Message], included: Sequence[Message]) -> int:
        """Where the summary goes: before the first included message that is no system message
        (after the first one with ``preserve_first``)."""
        skip = 1 if self._flow.reducer.config.preserve_first else 0
        for m in included:
            if read_message(m).kind == "system":
                continue
            if skip:
                skip -= 1
                continue
            return next(i for i, x in enumerate(messages) if x is m)
        return len(messages)
