"""DeltaChannel threads on blob savers: a checkpoint kept because it stored a value a kept
checkpoint reads keeps its run's continuation too, so it never looks like a checkpoint a run may
still be extending once its reader is gone; the thread stays flat under ``keep_last`` whatever
the grace.
"""

from __future__ import annotations

from datetime import datetime

from langgraph.checkpoint.base.id import uuid6

from checkpointers.retention import StoredCheckpoint, ThreadState, checkpoint_time, plan_retention

#: one agent turn as deepagents stores it: (source, a step due after it, a new messages value)
_TURN = (
    ("input", True, False),  # names the value the previous turn ended with
    ("loop", True, True),
    ("loop", True, False),
    ("loop", True, True),
    ("loop", True, True),
    ("loop", True, True),  # stores the turn's last value, an after-agent step due
    ("loop", False, False),  # the turn's end: names that value, nothing due
)


def _made(cid: str) -> datetime:
    made = checkpoint_time(cid)
    assert made is not None
    return made


def _retained_thread(turns: int, keep_last: int = 2) -> tuple[StoredCheckpoint, ...]:
    """The checkpoints left after ``turns`` turns, retention running after every put (as a
    ``ReducingCheckpointSaver`` with ``keep_last`` does), all within the default grace."""
    stored: dict[str, StoredCheckpoint] = {}
    blobs: set[tuple[str, str, str]] = set()
    parent: str | None = None
    step = version = 0
    for _ in range(turns):
        for source, due, new_value in _TURN:
            cid = str(uuid6(clock_seq=step))
            if new_value or not blobs:
                version += 1
                blobs.add(("", "messages", str(version)))
            entry = ("messages", str(version))
            stored[cid] = StoredCheckpoint(
                "", cid, delta=True, versions=dict([entry]), parent=parent, loop=source == "loop",
                step=step, due=due, held=frozenset([entry]),
            )
            plan = plan_retention(
                ThreadState("t", tuple(stored.values()), blobs=frozenset(blobs)),
                keep_last=keep_last, protect=[("", cid)], now=_made(cid),
            )
            for gone in plan.checkpoints.get("", ()):
                del stored[gone]
            blobs -= {("", ch, v) for (_, ch), vs in plan.blobs.items() for v in vs}
            parent, step = cid, step + 1
    return tuple(stored.values())


def test_a_delta_thread_under_keep_last_stays_flat_within_the_grace() -> None:
    """Ten turns or forty: the same number of checkpoints left, not one more per turn."""
    assert len(_retained_thread(40)) == len(_retained_thread(10))


def test_a_checkpoint_kept_for_its_stored_value_keeps_its_continuation() -> None:
    """Every checkpoint left but the newest has its run's next step stored after it: none looks
    like one a run may still be extending, so none is spared for an hour."""
    left = _retained_thread(10)
    continued = {c.parent for c in left if c.loop}
    newest = max(c.id for c in left)
    assert [c.step for c in left if c.id != newest and c.id not in continued] == []
