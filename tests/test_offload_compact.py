"""``compact`` on a store holding offloaded blobs, through a saver that does not offload by itself
(what ``agentstate-reducer compact`` opens): the new checkpoint names its blobs, retention keeps
exactly those, and the thread reads back whole."""

from __future__ import annotations

import base64
import random
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.compact import compact_store


def test_compact_through_a_bare_saver_keeps_the_blobs_it_names(tmp_path: Path) -> None:
    rng = random.Random(7)
    images = [base64.b64encode(rng.randbytes(20_000)).decode() for _ in range(10)]
    path = tmp_path / "ckpt.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = ReducingCheckpointSaver(SqliteSaver(conn), MessageReducer(min_messages=50, max_messages=100),
                                    offload=BlobOffload())
    builder = StateGraph(MessagesState).add_node("n", lambda s: {"messages": [AIMessage("seen")]})
    builder.add_edge(START, "n")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for i, image in enumerate(images):
        block = {"type": "image", "base64": image, "mime_type": "image/png"}
        graph.invoke({"messages": [HumanMessage(content=[{"type": "text", "text": str(i)}, block])]}, config)
    assert conn.execute("SELECT COUNT(*) FROM agentstate_blobs").fetchone()[0] == 10

    bare = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    report = compact_store(bare, MessageReducer(min_messages=4, max_messages=8), keep_last=1)

    assert [t.action for t in report.threads] == ["compacted"]
    kept = [m for m in graph.get_state(config).values["messages"] if isinstance(m, HumanMessage)]
    assert [_image(m) for m in kept] == [images[int(_text(m))] for m in kept]
    digests = {r[0] for r in conn.execute("SELECT digest FROM agentstate_blobs")}
    named = {r[0] for r in conn.execute("SELECT digest FROM agentstate_blob_refs")}
    assert digests == named and len(digests) == len(kept) == 3


def _image(message: Any) -> Any:
    return message.content[1]["base64"]


def _text(message: Any) -> str:
    return str(message.content[0]["text"])
