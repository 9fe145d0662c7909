"""``agentstate-reducer inspect`` on stores with offloaded blobs (``BlobOffload``): the blob bytes
per thread and in the summary, on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

import checkpointers.cli.main as cli
from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from checkpointers.cli.render import human_bytes
from tests.test_cli import open_saver


def image(seed: str, size: int = 6000) -> str:
    """Deterministic base64 "image" text of ``size`` characters."""
    raw = b"".join(hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(size // 32 + 1))
    return base64.b64encode(raw).decode()[:size]


def conversation(thread: str, images: int) -> list[Any]:
    out: list[Any] = []
    for i in range(images):
        out.append(HumanMessage(
            [{"type": "text", "text": f"look {i}"},
             {"type": "image", "base64": image(f"{thread}-{i}"), "mime_type": "image/png"}],
            id=f"{thread}-h{i}"))
        out.append(AIMessage(f"seen {i}", id=f"{thread}-a{i}"))
    return out


def put_thread(saver: Any, thread: str, images: int) -> None:
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": conversation(thread, images)}
    checkpoint["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    saver.put(config, checkpoint, {"source": "loop", "step": 1}, checkpoint["channel_versions"])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return str(request.getfixturevalue("postgres_server").new_database("cli_offload"))


def seed(url: str, *, offload: bool) -> None:
    with open_saver(url) as inner:
        inner.setup()
        saver = ReducingCheckpointSaver(inner, MessageReducer(min_messages=20, max_messages=40),
                                        offload=BlobOffload(min_bytes=1024) if offload else None)
        put_thread(saver, "two", 2)
        put_thread(saver, "three", 3)


def test_inspect_reports_the_offloaded_blob_bytes_per_thread(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url, offload=True)
    report = cli.execute(["inspect", url])
    by_thread = {t.thread_id: t.blob_bytes for t in report.threads}
    assert by_thread == {"two": 2 * 6000, "three": 3 * 6000}
    assert report.summary()["blob_bytes"] == 5 * 6000
    out = capsys.readouterr().out
    header = out.splitlines()[1]
    assert header.split()[-2:] == ["blob", "bytes"]
    assert f", {human_bytes(5 * 6000)} in offloaded blobs" in out
    as_json = cli.execute(["inspect", url, "--json"]).as_json()
    assert [t["blob_bytes"] for t in as_json["threads"]] == [by_thread[t["thread_id"]]
                                                             for t in as_json["threads"]]
    assert as_json["summary"]["blob_bytes"] == 5 * 6000


def test_inspect_of_a_store_without_blobs_reports_zero_and_no_column(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url, offload=False)
    report = cli.execute(["inspect", url])
    assert [t.blob_bytes for t in report.threads] == [0, 0]
    assert report.summary()["blob_bytes"] == 0
    out = capsys.readouterr().out
    assert "blob bytes" not in out and "offloaded blobs" not in out
