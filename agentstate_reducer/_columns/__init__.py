"""The column path: the planner's decision and the counter's warm check made by columns (``map``
over whole lists, string and list operations at C speed) instead of Python code per message.

This package is the one door to speed. Everything in it equals the reference (``planner.plan``,
``messages.read_message``, ``tokens.cache.TokenCounter`` one message at a time) wherever it
answers, and answers None (or falls back to the reference) wherever it cannot; a rule changes
in the reference alone, and the column path then returns None for what it no longer decides the
same way (tests/test_table.py, tests/test_properties.py compare the two with hypothesis).

The surface:

* ``PrefixMemo``: a reducer's one memo of the lists it handled (``memo``: its assumptions);
* ``plan(...) -> (Plan | None, TableState)``: ``planner.plan`` by columns
  (``table.plan_by_table``), with the table read for the memo (and the pinned kinds it read);
* ``count(counter, messages, prior, shared) -> Counted``: a ``TokenCounter``'s counts and
  readings by columns, those of the memo's prefix unchecked (``warm``);
* ``newest_over(costs, amount)``: where the newest messages worth more than ``amount`` start;
* the counter's warm check by columns, installed into ``tokens.cache`` on import.

``AGENTSTATE_REDUCER_REFERENCE=1`` in the environment (read at import) turns the column path
off for the process: every reducer plans with the reference planner and every counter checks
one message at a time. ``use(False)`` / ``use(True)`` switches it at run time (tests).
"""

from __future__ import annotations

import os

from agentstate_reducer._columns import warm
from agentstate_reducer._columns.memo import PrefixMemo, Remembered, Sendable
from agentstate_reducer._columns.table import TableState, newest_over, plan_by_table
from agentstate_reducer._columns.warm import CountColumns, Counted, count
from agentstate_reducer.tokens.cache import use_warm_path

plan = plan_by_table

#: True while the column path is on (see the module docstring)
enabled = os.environ.get("AGENTSTATE_REDUCER_REFERENCE", "").strip().lower() in ("", "0", "false", "no")


def use(on: bool) -> None:
    """Turn the column path on or off for the process (the planner and every counter)."""
    global enabled
    enabled = bool(on)
    use_warm_path(warm.ColumnPath() if enabled else None)


use(enabled)

__all__ = [
    "CountColumns",
    "Counted",
    "PrefixMemo",
    "Remembered",
    "Sendable",
    "TableState",
    "count",
    "enabled",
    "newest_over",
    "plan",
    "use",
]
