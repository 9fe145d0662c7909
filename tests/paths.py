"""The planner's two paths, for tests that run one case on each: the column path and the
reference planner (``AGENTSTATE_REDUCER_REFERENCE=1`` runs a whole suite on the reference)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from agentstate_reducer import _columns


@contextmanager
def column_path(on: bool) -> Iterator[None]:
    """The column path on (``on``) or off (the reference planner alone), then as it was."""
    was = _columns.enabled
    _columns.use(on)
    try:
        yield
    finally:
        _columns.use(was)
