"""A process that is SIGKILLed in the middle of ``ReducingSession`` replacing its stored items.

``python -m tests.session_kill_child KIND DB STORE`` opens the session ``s`` of the SQLite file
``DB`` with the Agents SDK's session class ``KIND`` (``SQLiteSession`` or ``AsyncSQLiteSession``),
wraps it in a ``ReducingSession`` (``min_messages=4, max_messages=8``) archiving what it prunes
into the LangGraph SQLite store ``STORE``, and adds one user message, which triggers a reduction.

Every SQLite connection the process opens traces its statements; the first insert into the
session's message table that comes after a delete from it (old items removed, survivors not yet
written) kills the process with SIGKILL before that insert runs: the boundary between the two
steps of the replacement, inside whatever transaction the session runs them in.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from typing import Any

from agents.extensions.memory.async_sqlite_session import AsyncSQLiteSession
from agents.memory.sqlite_session import SQLiteSession
from langgraph.store.sqlite.aio import AsyncSqliteStore

from agentstate_reducer.sessions import ReducingSession
from checkpointers.archive import StoreArchive

NEW_ITEM = {"role": "user", "content": "q4"}

_deleted = False


def _watch(statement: str) -> None:
    global _deleted
    text = " ".join(statement.split()).upper()
    if text.startswith("DELETE FROM AGENT_MESSAGES"):
        _deleted = True
    elif _deleted and text.startswith("INSERT INTO AGENT_MESSAGES"):
        os.kill(os.getpid(), signal.SIGKILL)


_connect = sqlite3.connect


def _traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)
    conn.set_trace_callback(_watch)
    return conn


async def main(kind: str, db: str, store_path: str) -> None:
    sqlite3.connect = _traced_connect  # type: ignore[assignment]
    inner: Any = SQLiteSession("s", db) if kind == "SQLiteSession" else AsyncSQLiteSession("s", db)
    async with AsyncSqliteStore.from_conn_string(store_path) as store:
        await store.setup()
        archive = StoreArchive(store)
        session = ReducingSession(inner, min_messages=4, max_messages=8, on_prune=[archive])
        await session.add_items([NEW_ITEM])
    print("the replacement finished without reaching the kill point", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
