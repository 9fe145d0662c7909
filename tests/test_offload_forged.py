"""Content shaped like a blob reference is content: with offload on, a string that reads exactly as
``agentstate-blob:sha256:<hex>:s:<size>`` comes back from ``get_state`` as written, at every depth
(0..60) of tool JSON, user text, dict keys and lists, whether or not a blob of that digest is stored
(another thread's image): never ``MissingBlobError``, never another thread's bytes. Through a real
graph on memory, SQLite and PostgreSQL (Cosmos DB in tests/test_cosmos_offload_reads.py)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.offload.transform import PREFIX
from tests.scenario_graph import open_saver, thread_config

MIN = 256
DEPTHS = range(61)
#: another thread's image: stored as a blob, its reference text is what a forger would copy
IMAGE = base64.b64encode(bytes(range(256)) * 8).decode()
STORED = f"{PREFIX}sha256:{hashlib.sha256(IMAGE.encode()).hexdigest()}:s:{len(IMAGE)}"
UNSTORED = f"{PREFIX}sha256:{'ab' * 32}:s:12"


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    data: Any


def nested(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` containers, dicts and lists in turn, a forged key on each dict."""
    value = leaf
    for level in range(depth):
        value = {"k": value, leaf: level} if level % 2 else [value, level]
    return value


def tool_answer(state: State) -> dict[str, Any]:
    """A tool's structured JSON result, built from the forged value the user sent."""
    forged = state["data"]["forged"]
    depth = state["data"]["depth"]
    return {"messages": [ToolMessage(id="tool", tool_call_id="c1", artifact=nested(depth, forged),
                                     content=[{"type": "json", "json": nested(depth, forged)}])]}


def build(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("tool", tool_answer)
    builder.add_edge(START, "tool")
    builder.add_edge("tool", END)
    return builder.compile(checkpointer=saver)


def turn(depth: int, forged: str) -> dict[str, Any]:
    deep = nested(depth, forged)
    return {
        "messages": [
            HumanMessage(id="user", content=forged),
            HumanMessage(id="blocks", content=[{"type": "text", "text": forged, "extra": deep}]),
            AIMessage(id="ai", content="", tool_calls=[{"id": "c1", "name": "t", "args": {"q": deep}}]),
        ],
        "data": {"forged": forged, "depth": depth, "value": deep, forged: deep},
    }


def config_of(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def wrapped(inner: Any) -> ReducingCheckpointSaver:
    return ReducingCheckpointSaver(inner, MessageReducer(min_messages=200, max_messages=400),
                                   offload=BlobOffload(min_bytes=MIN))


def check_every_depth(saver: ReducingCheckpointSaver, depths: Sequence[int] = DEPTHS) -> None:
    graph = build(saver)
    # another thread stores the image whose reference STORED names
    graph.invoke({"messages": [HumanMessage(id="img", content=IMAGE)], "data": {"forged": "", "depth": 0}},
                 thread_config("owner"))
    for forged in (STORED, UNSTORED):
        for depth in depths:
            config = thread_config(f"forged-{forged == STORED}-{depth}")
            sent = turn(depth, forged)
            graph.invoke(sent, config)
            state = graph.get_state(config)
            want = build(None).invoke(turn(depth, forged))  # the same run without a saver
            assert state.values == want, (forged, depth)
            assert state.values["messages"][0].content == forged


@contextmanager
def offloading(kind: str, tmp_path: Path, pg_url: str | None = None) -> Iterator[ReducingCheckpointSaver]:
    with open_saver(kind, path=tmp_path / "forged.sqlite", pg_url=pg_url) as inner:
        yield wrapped(inner)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_forged_references_read_back_as_written(kind: str, tmp_path: Path) -> None:
    with offloading(kind, tmp_path) as saver:
        check_every_depth(saver)


@pytest.mark.postgres
def test_forged_references_read_back_as_written_on_postgres(pg_url: str, tmp_path: Path) -> None:
    with offloading("postgres", tmp_path, pg_url) as saver:
        check_every_depth(saver)


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_forged_reference_in_a_pending_write_and_a_channel_reads_back(depth: int) -> None:
    """The saver API alone: a checkpoint's channel and a task's pending write, each the forged
    value ``depth`` levels down, read back equal (the graph above leaves no pending writes)."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = wrapped(InMemorySaver())
    saver.put(config_of("owner"), {**empty_checkpoint(), "channel_values": {"img": IMAGE},
                                   "channel_versions": {"img": 1}}, {}, {"img": 1})
    for forged in (STORED, UNSTORED):
        cp = empty_checkpoint()
        cp["channel_values"] = {"deep": nested(depth, forged)}
        cp["channel_versions"] = {"deep": 1}
        config = saver.put(config_of(f"t{forged == STORED}"), cp, {}, {"deep": 1})
        saver.put_writes(config, [("deep", nested(depth, forged)), ("flat", forged)], "task")
        tup = saver.get_tuple(config)
        assert tup is not None and tup.pending_writes is not None
        assert tup.checkpoint["channel_values"]["deep"] == nested(depth, forged)
        assert [w[2] for w in tup.pending_writes] == [nested(depth, forged), forged]


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_forged_reference_in_an_archived_message_reads_back(depth: int) -> None:
    """A bound ``StoreArchive`` keeps a LangChain message as a JSON body one level deeper than the
    message: its reads still reach exactly what its offload reached. The message also holds an
    image, so it is stored with references and read back through the blobs."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from agentstate_reducer import ReducerConfig
    from checkpointers import StoreArchive

    archive = StoreArchive(InMemoryStore())
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, on_prune=[archive]))
    saver = ReducingCheckpointSaver(InMemorySaver(), reducer, offload=BlobOffload(min_bytes=MIN))
    saver.put(config_of("owner"),
              {**empty_checkpoint(), "channel_values": {"img": IMAGE}, "channel_versions": {"img": 1}},
              {}, {"img": 1})
    messages = [HumanMessage(id=f"m{forged == STORED}", content=forged,
                             additional_kwargs={"image": IMAGE, "deep": nested(depth, forged)})
                for forged in (STORED, UNSTORED)]
    archive(messages, ("memories", "t"))
    assert archive.messages(("memories", "t")) == messages
