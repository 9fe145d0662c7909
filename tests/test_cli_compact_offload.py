"""``agentstate-reducer compact --offload [--dry-run]`` on a real SQLite file and a real PostgreSQL
database written without offload: the stored rows end up holding references, each image is stored
once, and the store reads back, through a saver with offload on, exactly as it read before."""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

import checkpointers.cli.main as cli
from agentstate_reducer import MessageReducer
from checkpointers import BlobOffload, ReducingCheckpointSaver
from tests.test_cli import ERROR, dump_rows, only_line, open_saver
from tests.test_cli_offload import image
from tests.test_offload_retention import _named, _stored

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

IMAGES = [image(f"img-{i}", 6000) for i in range(3)]
PHOTO = {"cover": {"type": "image", "base64": image("photo", 7000), "mime_type": "image/png"}}
AVATAR = "data:image/png;base64," + image("avatar", 5000)
#: every offloaded value, as the bytes of its blob
BLOBS = sorted(v.encode() for v in (*IMAGES, PHOTO["cover"]["base64"], AVATAR))
THREADS = ("a", "b")


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=20, max_messages=40)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return str(request.getfixturevalue("postgres_server").new_database("cli_compact_offload"))


def picture(i: int) -> dict[str, Any]:
    return {"type": "image", "base64": IMAGES[i], "mime_type": "image/png"}


def write_thread(saver: Any, thread: str) -> None:
    """Five checkpoints as a graph stores them: the messages channel grows for four steps (each a
    new version), ``photo`` is set once and read by every checkpoint (PostgreSQL: one
    checkpoint_blobs row they share), ``avatar`` is a data URL string (PostgreSQL: inline in the
    checkpoint's JSONB) until the fifth step clears it, which changes nothing else (PostgreSQL: that
    checkpoint reads only rows the others hold); pending writes with images on the first and the
    last checkpoint."""
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[Any] = []
    versions: dict[str, Any] = {}
    configs = []
    for step in range(5):
        if step < 4:
            messages = [*messages,
                        HumanMessage([{"type": "text", "text": f"look {step}"}, picture(step % 3)],
                                     id=f"{thread}-h{step}"),
                        AIMessage(f"seen {step}", id=f"{thread}-a{step}")]
            new = {"messages": saver.get_next_version(versions.get("messages"), None)}
        else:
            new = {"avatar": saver.get_next_version(versions.get("avatar"), None)}
        if step == 0:
            new.update(photo=saver.get_next_version(None, None), avatar=saver.get_next_version(None, None))
        versions.update(new)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages, "photo": PHOTO,
                                        "avatar": AVATAR if step < 4 else "", "step": step}
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, new)
        configs.append(config)
    for config, task in ((configs[0], "task-0"), (configs[-1], "task-9")):
        saver.put_writes(config, [
            ("messages", [HumanMessage([{"type": "text", "text": "and this"}, picture(1)], id=f"w-{task}")]),
            ("step", 9),
        ], task)


def seed(url: str) -> None:
    with open_saver(url) as saver:
        saver.setup()
        for thread in THREADS:
            write_thread(saver, thread)


def recorded(url: str, offload: BlobOffload | None = None) -> list[Any]:
    """Every checkpoint of every thread as a graph reads it (``list`` and each ``get_tuple``),
    through a ``ReducingCheckpointSaver`` (with ``offload`` when given)."""
    out: list[Any] = []
    with open_saver(url) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), offload=offload)
        for thread in THREADS:
            # listed whole first: SqliteSaver holds its lock while a listing is open
            for tup in list(saver.list({"configurable": {"thread_id": thread}})):
                got = saver.get_tuple(tup.config)
                assert got is not None
                for t in (tup, got):
                    out.append((t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes))
    return out


def raw_values(url: str) -> bytes:
    """Every stored checkpoint, channel value and write, as stored."""
    if url.startswith("sqlite:///"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):])
        try:
            rows = [*conn.execute("SELECT checkpoint FROM checkpoints"),
                    *conn.execute("SELECT value FROM writes")]
        finally:
            conn.close()
        return b"".join(bytes(r[0]) for r in rows if r[0] is not None)
    import psycopg

    with psycopg.connect(url) as pg:
        rows = [*pg.execute("SELECT convert_to(checkpoint::text, 'UTF8') FROM checkpoints"),
                *pg.execute("SELECT blob FROM checkpoint_blobs WHERE blob IS NOT NULL"),
                *pg.execute("SELECT blob FROM checkpoint_writes WHERE blob IS NOT NULL")]
    return b"".join(bytes(r[0]) for r in rows)


def blob_rows(url: str) -> list[bytes]:
    with open_saver(url) as inner:
        conn = inner.conn
        rows = conn.execute("SELECT data FROM agentstate_blobs").fetchall()
    return sorted(bytes(r[0] if isinstance(r, tuple) else r["data"]) for r in rows)


def fingerprint(url: str) -> Any:
    """The SQLite file's bytes (hashed, with its side files), or every PostgreSQL row."""
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        return [(p.name, hashlib.sha256(p.read_bytes()).hexdigest())
                for p in sorted(path.parent.iterdir()) if p.name.startswith(path.name)]
    return dump_rows(url)


def offload_numbers(report: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(report.offload).items() if k != "dry_run"}


def test_compact_offload_rewrites_the_store_so_it_reads_back_the_same(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url)
    before = recorded(url)
    assert any(IMAGES[0].encode() in v for v in [raw_values(url)])

    untouched = fingerprint(url)
    dry = cli.execute(["compact", url, "--offload", "--min-bytes", "1024", "--dry-run"])
    assert fingerprint(url) == untouched  # not one byte written
    assert "would rewrite" in capsys.readouterr().out

    done = cli.execute(["compact", url, "--offload", "--min-bytes", "1024"])
    out = capsys.readouterr().out
    assert offload_numbers(dry) == offload_numbers(done)
    assert done.offload is not None and not done.offload.dry_run
    # each image stored once in the blob table, whatever number of rows and threads held it
    assert (done.offload.blobs_stored, done.offload.blob_bytes_stored) == (5, sum(map(len, BLOBS)))
    for t in done.offload.threads:
        assert (t.checkpoints, t.writes, t.blobs) == (5, 2, 5)
        assert t.bytes_after * 5 < t.bytes_before
    raw = raw_values(url)
    assert not any(v[:64] in raw for v in BLOBS)
    assert b"agentstate-blob:sha256:" in raw
    assert blob_rows(url) == BLOBS
    # read through a saver with offload on: exactly what a graph read before
    assert recorded(url, BlobOffload(min_bytes=1024)) == before
    assert "offload: rewrote" in out and "ReducingCheckpointSaver(saver, reducer, offload=BlobOffload(" in out
    if url.startswith("sqlite:///"):
        assert done.vacuumed and done.database_bytes_after is not None
        assert done.database_bytes_before is not None
        assert done.database_bytes_after < done.database_bytes_before
    else:
        assert "--vacuum runs VACUUM (ANALYZE) now" in out

    report = cli.execute(["inspect", url])
    assert report.summary()["blob_bytes"] == sum(map(len, BLOBS))
    assert {t.thread_id: t.blob_bytes for t in report.threads} == {t: sum(map(len, BLOBS)) for t in THREADS}

    # a second run: nothing to do, nothing written
    rows, blobs = dump_rows(url), blob_rows(url)
    again = cli.execute(["compact", url, "--offload", "--min-bytes", "1024"])
    assert again.offload is not None and again.offload.rows == 0 and again.offload.blobs_stored == 0
    assert [t.bytes_before for t in again.offload.threads] == [0, 0]
    assert dump_rows(url) == rows and blob_rows(url) == blobs
    assert recorded(url, BlobOffload(min_bytes=1024)) == before


def test_retention_after_compact_offload_keeps_exactly_the_blobs_named(url: str) -> None:
    seed(url)
    cli.execute(["compact", url, "--offload", "--min-bytes", "1024"])
    cli.execute(["compact", url, "--keep-last", "1", "--force", "--yes"])
    with open_saver(url) as inner:
        assert _stored(inner) == _named(inner) != set()
        saver = ReducingCheckpointSaver(inner, reducer(), offload=BlobOffload(min_bytes=1024), keep_last=1,
                                        retention_every=1)
        for thread in THREADS:
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            tup = saver.get_tuple(config)
            assert tup is not None
            messages: Any = tup.checkpoint["channel_values"]["messages"]
            humans: list[Any] = [m for m in messages if isinstance(m, HumanMessage)]
            assert [m.content[1]["base64"] for m in humans] == [IMAGES[s % 3] for s in range(4)]
            # PostgreSQL: the photo's checkpoint_blobs row, rewritten under the first checkpoint,
            # is named by the latest too, so retention kept its blob
            assert tup.checkpoint["channel_values"]["photo"] == PHOTO
            # the wrapper's own retention on the offloaded store: a new turn, then keep_last=1
            values = {**tup.checkpoint["channel_values"], "messages": messages[:2]}
            checkpoint: Any = {**tup.checkpoint, "id": str(uuid6(clock_seq=5)), "channel_values": values}
            old = tup.checkpoint["channel_versions"]["messages"]
            versions = {"messages": saver.get_next_version(old, None)}
            checkpoint["channel_versions"] = {**tup.checkpoint["channel_versions"], **versions}
            saver.put(tup.config, checkpoint, {"source": "loop", "step": 5}, versions)
        assert _stored(inner) == _named(inner) != set()


def test_compact_keeps_blobs_named_by_checkpoints_a_bare_saver_wrote(url: str) -> None:
    """A saver without offload on an offloaded store copies the references it reads into its new
    checkpoints without recording them: compact's deletions must still keep those blobs."""
    seed(url)
    cli.execute(["compact", url, "--offload", "--min-bytes", "1024"])
    with open_saver(url) as bare:  # the slip: one service not switched to offload
        for thread in THREADS:
            tup = bare.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            assert tup is not None
            old = tup.checkpoint["channel_versions"]["messages"]
            versions = {"messages": bare.get_next_version(old, None)}
            checkpoint: Any = {**tup.checkpoint, "id": str(uuid6(clock_seq=7)),
                               "channel_versions": {**tup.checkpoint["channel_versions"], **versions}}
            bare.put(tup.config, checkpoint, {"source": "loop", "step": 5}, versions)
    cli.execute(["compact", url, "--keep-last", "1", "--force", "--yes"])
    with open_saver(url) as inner:
        assert _stored(inner) == _named(inner) != set()
        saver = ReducingCheckpointSaver(inner, reducer(), offload=BlobOffload(min_bytes=1024))
        for thread in THREADS:
            tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            assert tup is not None  # raises MissingBlobError when compact collected the images
            messages: Any = tup.checkpoint["channel_values"]["messages"]
            humans: list[Any] = [m for m in messages if isinstance(m, HumanMessage)]
            assert [m.content[1]["base64"] for m in humans] == [IMAGES[s % 3] for s in range(4)]


def test_tool_min_bytes_offloads_long_tool_results_too(tmp_path: Path) -> None:
    from langchain_core.messages import ToolMessage

    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    result = "rows: " + ", ".join(str(i) for i in range(800))  # plain text, not base64
    with open_saver(url) as saver:
        saver.setup()
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [
            AIMessage("", id="call", tool_calls=[{"id": "c1", "name": "query", "args": {}}]),
            ToolMessage(result, tool_call_id="c1", id="result")]}
        checkpoint["channel_versions"] = {"messages": saver.get_next_version(None, None)}
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {"step": 0},
                  checkpoint["channel_versions"])
    plain = cli.execute(["compact", url, "--offload", "--dry-run"])
    assert plain.offload is not None and plain.offload.rows == 0  # binary content only, by default
    done = cli.execute(["compact", url, "--offload", "--tool-min-bytes", "2000"])
    assert done.offload is not None
    assert (done.offload.blobs_stored, done.offload.blob_bytes_stored) == (1, len(result))
    assert result[:64].encode() not in raw_values(url)
    with open_saver(url) as inner:
        saver = ReducingCheckpointSaver(inner, reducer(), offload=BlobOffload(tool_min_bytes=2000))
        tup = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert tup is not None and tup.checkpoint["channel_values"] == checkpoint["channel_values"]


def test_a_reference_to_a_missing_blob_stops_the_run_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    seed(url)
    cli.execute(["compact", url, "--offload", "--min-bytes", "1024"])
    digest = hashlib.sha256(PHOTO["cover"]["base64"].encode()).hexdigest()
    conn = sqlite3.connect(tmp_path / "store.sqlite")
    with conn:
        conn.execute("DELETE FROM agentstate_blobs WHERE digest = ?", (digest,))
    conn.close()
    rows = dump_rows(url)
    assert cli.main(["compact", url, "--offload", "--min-bytes", "1024"]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(ERROR + "compact --offload stopped: checkpoint ")
    assert f"of thread 'a' (namespace '') names blob sha256:{digest}" in line
    assert line.endswith("nothing of this one was written")
    assert dump_rows(url) == rows
    # without --offload, a compaction reads the thread: the whole error, with what to do
    assert cli.main(["compact", url, "--dry-run"]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(ERROR + "MissingBlobError: checkpoint ") and digest in line
    assert "Restore it from a backup, or delete the thread (delete_thread)" in line
    assert dump_rows(url) == rows


def test_bad_offload_options_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    seed(url)
    untouched = fingerprint(url)
    for option, message in [
        (["--offload", "--min-bytes", "0"], "argument --min-bytes: '0' is too small"),
        (["--offload", "--min-bytes", "-5"], "argument --min-bytes: '-5' is too small"),
        (["--offload", "--tool-min-bytes", "big"], "argument --tool-min-bytes: 'big' is not a whole number"),
    ]:
        assert cli.main(["compact", url, *option]) == 2
        assert message in capsys.readouterr().err
    assert cli.main(["compact", url, "--min-bytes", "100"]) == 2
    assert only_line(capsys.readouterr().err) == (
        ERROR + "--min-bytes only applies with --offload; nothing was changed")
    assert fingerprint(url) == untouched

    # refused before it is opened: nothing listens on port 1
    monkeypatch.setenv("COSMOSDB_KEY", "a-key-never-sent")
    assert cli.main(["compact", "cosmosdb://127.0.0.1:1/db/checkpoints", "--offload"]) == 2
    line = only_line(capsys.readouterr().err)
    assert line.startswith(ERROR + "compact --offload rewrites SQLite and PostgreSQL stores in place; a "
                           "Cosmos DB store keeps a checkpoint in chunked items that it cannot rewrite yet")
