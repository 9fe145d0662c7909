"""Compaction of stored threads: a reduced copy of a thread's latest checkpoint, written as a new
checkpoint through the saver's public API (``agentstate-reducer compact`` runs it per thread).

>>> from checkpointers.compact import compact_thread
>>> result = compact_thread(saver, "thread-1", reducer)        # doctest: +SKIP
>>> result.action, result.messages_before, result.messages_after  # doctest: +SKIP
('compacted', 120, 37)

Invariants:

* a stored checkpoint is never edited: the new one goes on top of the latest, with the messages
  channel reduced and its version bumped (savers that store channel values as blobs store a value
  only under a new version); everything else (other channels, ``versions_seen``,
  ``updated_channels``) is copied, so the thread resumes exactly where it was;
* until the put commits, the old checkpoint stays the latest: an interruption leaves the thread as
  it was, and a second run skips threads already within bounds;
* a thread with pending writes (interrupted, or running) is skipped: the writes belong to the
  latest checkpoint and would be lost under a new one, changing what a resume does;
* the new checkpoint's metadata carries ``{"agentstate_reducer": COMPACT_MARKER}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6

from agentstate_reducer import MessageReducer

from .reduction import reduce_checkpoint

__all__ = ["COMPACT_MARKER", "ThreadCompaction", "checkpoint_messages", "compact_thread", "supports_prune"]

#: ``metadata["agentstate_reducer"]`` of the checkpoints ``compact_thread`` writes.
COMPACT_MARKER = "compact"


@dataclass(frozen=True)
class ThreadCompaction:
    """What ``compact_thread`` did (or, in a dry run, would do) to one thread."""

    thread_id: str
    #: "compacted", "would compact" (dry run), "skipped" or "failed"
    action: str
    reason: str | None = None  # why it was skipped or failed; "within bounds" when nothing to prune
    messages_before: int | None = None
    messages_after: int | None = None
    tokens_before: int | None = None  # by the ``count_tokens`` given, else None
    tokens_after: int | None = None
    checkpoint_id: str | None = None  # the new checkpoint ("compacted" only)


def checkpoint_messages(checkpoint_tuple: CheckpointTuple | None, messages_key: str) -> list[Any] | None:
    """The messages list of a checkpoint tuple, or None (no checkpoint, no such list)."""
    if checkpoint_tuple is None:
        return None
    value = (checkpoint_tuple.checkpoint.get("channel_values") or {}).get(messages_key)
    return value if isinstance(value, list) else None


def supports_prune(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver`` implements ``prune()`` (the base class only raises)."""
    return type(saver).prune is not BaseCheckpointSaver.prune


def _root_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def compact_thread(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    reducer: MessageReducer,
    *,
    messages_key: str = "messages",
    dry_run: bool = False,
    count_tokens: Callable[[Any], int] | None = None,
) -> ThreadCompaction:
    """Reduce the latest checkpoint of ``thread_id``'s root namespace and write the result as a new
    checkpoint on top of it (see the module docstring); ``dry_run``: write nothing, report what
    would change. The new checkpoint is read back through the saver: if it is not the latest (a run
    wrote meanwhile, or this machine's clock is behind the writer's), the result is "failed" and the
    thread reads as before. ``count_tokens`` (one message -> tokens) fills the token fields."""

    def tokens(messages: list[Any]) -> int | None:
        return None if count_tokens is None else sum(count_tokens(m) for m in messages)

    latest = saver.get_tuple(_root_config(thread_id))
    if latest is None:
        return ThreadCompaction(thread_id, "skipped", "no checkpoint in the root namespace")
    if latest.pending_writes:
        return ThreadCompaction(
            thread_id,
            "skipped",
            "pending writes (interrupted or running); compact it once the run has finished",
        )
    messages = checkpoint_messages(latest, messages_key)
    if messages is None:
        return ThreadCompaction(thread_id, "skipped", f"no {messages_key!r} list in the latest checkpoint")
    old = latest.checkpoint
    versions = old.get("channel_versions") or {}
    new_versions = {messages_key: saver.get_next_version(versions.get(messages_key), None)}
    step = int((latest.metadata or {}).get("step", -1))
    draft = copy_checkpoint(old)
    draft["id"] = str(uuid6(clock_seq=step + 1))
    draft["ts"] = datetime.now(timezone.utc).isoformat()
    draft["channel_versions"] = {**versions, **new_versions}
    config = _root_config(thread_id, old["id"])
    reduced, put_report = reduce_checkpoint(reducer, config, draft, new_versions, messages_key=messages_key)
    stats = put_report.stats
    if stats is None or not stats.pruned_count:
        count = tokens(messages)
        return ThreadCompaction(
            thread_id, "skipped", "within bounds", len(messages), len(messages), count, count
        )
    after = reduced["channel_values"][messages_key]
    planned = ThreadCompaction(
        thread_id, "would compact", None, len(messages), len(after), tokens(messages), tokens(after)
    )
    if dry_run:
        return planned
    metadata: dict[str, Any] = {
        k: v for k, v in (latest.metadata or {}).items() if k not in ("source", "step", "writes")
    }
    metadata.update(source="update", step=step + 1, agentstate_reducer=COMPACT_MARKER)
    metadata.setdefault("parents", {})
    saver.put(config, reduced, metadata, new_versions)  # type: ignore[arg-type]
    # Read it back through the saver: what a graph will load next.
    check = saver.get_tuple(_root_config(thread_id))
    stored = checkpoint_messages(check, messages_key)
    if (
        check is None
        or check.checkpoint["id"] != reduced["id"]
        or stored is None
        or len(stored) != len(after)
    ):
        found = None if check is None else check.checkpoint["id"]
        return replace(
            planned,
            action="failed",
            reason=f"the latest checkpoint read back is {found}, not the new {reduced['id']} (a run wrote "
            "meanwhile, or this machine's clock is behind the writer's); the thread reads as before, "
            "re-run compact",
        )
    return replace(planned, action="compacted", checkpoint_id=reduced["id"])
