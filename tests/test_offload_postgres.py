"""Blob offload on a real PostgreSQL saver: a string channel is kept by PostgresSaver inside the
checkpoint's JSONB, so a reference must be text JSONB accepts."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver

pytestmark = pytest.mark.postgres


def test_a_string_channel_kept_in_jsonb_round_trips(pg_url: str) -> None:
    image = base64.b64encode(random.Random(3).randbytes(6_000)).decode()
    with PostgresSaver.from_conn_string(pg_url) as inner:
        inner.setup()
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=5, max_messages=10),
                                        offload=BlobOffload(min_bytes=1024))
        checkpoint: Any = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [], "img": image}
        checkpoint["channel_versions"] = {"messages": "1", "img": "1"}
        config: Any = {"configurable": {"thread_id": "jsonb", "checkpoint_ns": ""}}
        saved = saver.put(config, checkpoint, {"step": 0}, {"messages": "1", "img": "1"})

        assert saver.get_tuple(saved).checkpoint["channel_values"]["img"] == image  # type: ignore[union-attr]
        raw = inner.get_tuple(saved)
        assert raw is not None and raw.checkpoint["channel_values"]["img"] != image
