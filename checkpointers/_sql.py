"""One SQL statement of a flow, shared by every layer that speaks SQL to a saver's database
(retention's ``checkpointers.retention.sql``, offload's ``checkpointers.offload.sql``): a flow
yields a ``Sql`` and the backend running it in its transaction sends back the rows (as tuples)
when it ``fetch``-es, else the row count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["Sql"]


class Sql(NamedTuple):
    text: str
    params: Sequence[Any]
    fetch: bool = False
