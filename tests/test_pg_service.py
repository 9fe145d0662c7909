"""Prove the PostgreSQL fixtures give a real, working server (no mocks)."""

from __future__ import annotations

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from psycopg.rows import dict_row

from tests.pg_service import PostgresServer

pytestmark = pytest.mark.postgres


def _user_tables(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return [r["table_name"] for r in rows]


def test_server_answers(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute("SELECT version() AS v, current_database() AS db").fetchone()
    assert row is not None
    assert row["v"].startswith("PostgreSQL ")
    assert pg_url.endswith("/" + row["db"])
    assert row["db"].startswith("test_pg_service_")


def test_new_database_is_distinct_and_empty(postgres_server: PostgresServer) -> None:
    url_a = postgres_server.new_database("iso")
    url_b = postgres_server.new_database("iso")
    assert url_a != url_b
    assert _user_tables(url_a) == [] and _user_tables(url_b) == []

    # A table made in one database must not be visible in the other.
    with psycopg.connect(url_a, autocommit=True) as conn:
        conn.execute("CREATE TABLE only_in_a (id int)")
    assert _user_tables(url_a) == ["only_in_a"]
    assert _user_tables(url_b) == []


def test_langgraph_postgres_saver_roundtrip(pg_url: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": ["hello"]}
        # Non-primitive values are stored as blobs keyed by channel version, so declare one.
        checkpoint["channel_versions"] = {"messages": 1}
        config: RunnableConfig = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        saved = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"messages": 1})

        got = saver.get_tuple(saved)
        assert got is not None
        assert got.checkpoint["id"] == checkpoint["id"]
        assert got.checkpoint["channel_values"] == {"messages": ["hello"]}
        assert got.metadata["step"] == -1
        # Latest-checkpoint lookup by thread alone must find the same one.
        latest = saver.get_tuple({"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}})
        assert latest is not None and latest.checkpoint["id"] == checkpoint["id"]
