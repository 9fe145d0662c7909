"""Blob offload under LangGraph's ``DeltaChannel``: the messages channel is rebuilt from stored
writes (``get_delta_channel_history``), which carry references and are read back restored."""

from __future__ import annotations

import base64
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.offload.transform import PREFIX


def _add(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    for update in writes:
        state = add_messages(state, update)  # type: ignore[assignment]
    return state


DeltaState = TypedDict(  # noqa: UP013  (a class body's annotations would be strings here)
    "DeltaState", {"messages": Annotated[list, DeltaChannel(_add)]}, total=False
)


def _graph(saver: Any) -> Any:
    builder = StateGraph(DeltaState)
    builder.add_node("agent", lambda s: {"messages": [AIMessage("seen", id=f"a{len(s['messages'])}")]})
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def test_a_delta_channel_reads_back_its_images(tmp_path: Path) -> None:
    image = base64.b64encode(os.urandom(20_000)).decode()
    conn = sqlite3.connect(tmp_path / "ckpt.sqlite", check_same_thread=False)
    inner = SqliteSaver(conn)
    saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=50, max_messages=100),
                                    offload=BlobOffload(min_bytes=1024))
    graph = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(3):
        block = {"type": "image", "base64": image, "mime_type": "image/png"}
        graph.invoke({"messages": [HumanMessage(content=[{"type": "text", "text": f"q{turn}"}, block],
                                                id=f"h{turn}")]}, config)
    messages = graph.get_state(config).values["messages"]
    assert [m.id for m in messages] == ["h0", "a1", "h1", "a3", "h2", "a5"]
    assert all(_image(m) == image for m in messages if isinstance(m, HumanMessage))
    stored = b"".join(row[0] for row in conn.execute("SELECT value FROM writes"))
    assert image.encode() not in stored and PREFIX.encode() in stored
    assert conn.execute("SELECT COUNT(*) FROM agentstate_blobs").fetchone()[0] == 1


def _image(message: Any) -> Any:
    return message.content[1]["base64"]
