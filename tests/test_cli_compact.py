"""``agentstate-reducer compact`` with retention: --keep-last, --older-than, --vacuum, --dry-run,
--yes and --force on real SQLite files, PostgreSQL databases and the local Cosmos DB server."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import checkpointers.cli.main as cli
from agentstate_reducer import MessageReducer
from checkpointers.cli.demo_graph import build_demo_graph, turn_input
from checkpointers.cli.render import human_bytes
from tests.test_cli import (  # noqa: F401  (store_url is a fixture)
    ERROR,
    cosmos_url,
    dump_rows,
    latest,
    message_ids,
    only_line,
    open_saver,
    seed_threads,
    store_url,
    turn_dicts,
)

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

NUMBERS = ("checkpoints_before", "checkpoints_after", "checkpoints_written", "checkpoints_deleted",
           "writes_deleted", "blobs_deleted", "threads_trimmed", "threads_deleted", "kept_whole")


def numbers(report: Any) -> list[Any]:
    return [getattr(report, n) for n in NUMBERS]


def sqlite_file_bytes(path: Path) -> int:
    """The file (and its WAL) after a WAL checkpoint, measured here, not by the CLI."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def full_ids(url: str, thread_id: str) -> list[str]:
    return message_ids(latest(url, thread_id))


def reduced_tail(ids_before: list[str], url: str, thread_id: str) -> None:
    """The latest state's messages are a tail of the thread's messages (after the system prompt,
    which the reducer keeps), ending with the thread's last message, within the reducer's bounds."""
    after = message_ids(latest(url, thread_id))
    assert 20 <= len(after) <= 40
    body = after[1:] if after[0] == ids_before[0] else after
    assert body == ids_before[len(ids_before) - len(body):]


def vacuum_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("vacuumed: ")]
    return line


def test_keep_last_1_on_a_100_turn_bare_sqlite_file_shrinks_it_5x(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bare.sqlite"
    url = f"sqlite:///{path}"
    seed_threads(url, {"t": 100})
    ids_before = full_ids(url, "t")
    assert len(ids_before) == 400
    expected = [m.id for m in MessageReducer(min_messages=20, max_messages=40).reduce(
        latest(url, "t").checkpoint["channel_values"]["messages"]).surviving]
    size_before = sqlite_file_bytes(path)
    report = cli.execute(["compact", url, "--keep-last", "1", "--yes"])
    size_after = sqlite_file_bytes(path)
    assert report.database_bytes_before == size_before
    assert report.database_bytes_after == size_after
    assert size_after * 5 <= size_before, (size_before, size_after)
    assert report.vacuumed and report.checkpoints_after == 1
    # the vacuum line reports the file's size before and after, as measured
    assert (report.vacuum_bytes_before, report.vacuum_bytes_after) == (size_before, size_after)
    assert vacuum_line(capsys.readouterr().out) == (
        f"vacuumed: VACUUM; the database file (with its -wal) went {human_bytes(size_before)} -> "
        f"{human_bytes(size_after)}: {human_bytes(size_before - size_after)} returned to the file system"
    )
    assert message_ids(latest(url, "t")) == expected
    reduced_tail(ids_before, url, "t")
    # idempotent: nothing left to do
    again = cli.execute(["compact", url, "--keep-last", "1", "--yes"])
    assert (again.checkpoints_deleted, again.checkpoints_written, again.checkpoints_after) == (0, 0, 1)
    assert sqlite_file_bytes(path) == size_after
    # the thread goes on from the reduced state
    with open_saver(url) as saver:
        graph = build_demo_graph(saver)
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke(turn_input(101), config)
        assert [m.id for m in graph.get_state(config).values["messages"]][-4:] == [
            m["id"] for m in turn_dicts(101)]


def pg_database_size(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as pg:
        row = pg.execute("SELECT pg_database_size(current_database())").fetchone()
    assert row is not None
    return int(row[0])


def assert_vacuum_reported(report: Any, out: str, size_after: int) -> None:
    """The vacuum line states what pg_database_size did, and promises nothing else."""
    before, after = report.vacuum_bytes_before, report.vacuum_bytes_after
    assert after == size_after
    assert before is not None and before > report.database_bytes_before  # the whole database
    line = vacuum_line(out)
    assert line.startswith(
        "vacuumed: VACUUM (ANALYZE) of the checkpoint tables; the database (pg_database_size) went "
        f"{human_bytes(before)} -> {human_bytes(after)}: "
    )
    if after < before:
        assert line.endswith(f"{human_bytes(before - after)} returned to the file system")
    else:
        assert "the freed pages stay with the tables" in line and "returned to" not in line
    assert "freed space is returned" not in out


@pytest.mark.postgres
def test_keep_last_1_with_vacuum_on_postgres(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(request.getfixturevalue("postgres_server").new_database("cli_compact"))
    seed_threads(url, {"t": 100})
    ids_before = full_ids(url, "t")
    dry = cli.execute(["compact", url, "--keep-last", "1", "--vacuum", "--dry-run"])
    assert "vacuumed" not in capsys.readouterr().out and dry.vacuum_bytes_after is None
    report = cli.execute(["compact", url, "--keep-last", "1", "--vacuum", "--yes"])
    assert_vacuum_reported(report, capsys.readouterr().out, pg_database_size(url))
    assert numbers(dry) == numbers(report)
    assert report.vacuumed and report.checkpoints_after == 1
    assert report.database_bytes_before is not None and report.database_bytes_after is not None
    # measured: 1,548,288 -> 368,640 bytes; what stays is mostly index and empty-relation pages,
    # which VACUUM (not VACUUM FULL, which locks the tables) does not give back
    assert report.database_bytes_after * 4 <= report.database_bytes_before
    reduced_tail(ids_before, url, "t")
    again = cli.execute(["compact", url, "--keep-last", "1", "--vacuum", "--yes"])
    assert_vacuum_reported(again, capsys.readouterr().out, pg_database_size(url))
    assert (again.checkpoints_deleted, again.checkpoints_written) == (0, 0)


@pytest.mark.cosmos
def test_keep_last_1_on_cosmos(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    url = cosmos_url(request, monkeypatch)
    seed_threads(url, {"t": 30, "u": 3})
    ids_before = full_ids(url, "t")
    dry = cli.execute(["compact", url, "--keep-last", "1", "--dry-run"])
    report = cli.execute(["compact", url, "--keep-last", "1", "--yes"])
    assert numbers(dry) == numbers(report)
    assert report.checkpoints_after == 2 and report.blobs_deleted > 0
    assert report.database_bytes_before is not None and report.database_bytes_after is not None
    assert report.database_bytes_after * 5 <= report.database_bytes_before
    reduced_tail(ids_before, url, "t")
    again = cli.execute(["compact", url, "--keep-last", "1", "--yes"])
    assert (again.checkpoints_deleted, again.blobs_deleted, again.checkpoints_written) == (0, 0, 0)
    assert again.database_bytes_after == report.database_bytes_after


def test_dry_run_predicts_the_run_with_older_than_and_keep_last(store_url: str) -> None:  # noqa: F811
    # "old" was last written 3 days ago, the others now: ages stated, not waited for
    three_days_ago = datetime.now(timezone.utc) - timedelta(days=3)
    seed_threads(store_url, {"old": 3}, written_at=three_days_ago)
    seed_threads(store_url, {"long": 14, "short": 3})
    assert latest(store_url, "old").checkpoint["ts"] == three_days_ago.isoformat()
    before = dump_rows(store_url)
    args = ["compact", store_url, "--older-than", "2d", "--keep-last", "2"]
    dry = cli.execute([*args, "--dry-run"])
    assert dump_rows(store_url) == before
    assert dry.threads_deleted == ["old"] and sorted(dry.threads_trimmed) == ["long", "short"]
    real = cli.execute([*args, "--yes"])
    assert numbers(dry) == numbers(real)
    assert latest(store_url, "old") is None
    # what remains is newer than a day: nothing more to delete
    again = cli.execute(["compact", store_url, "--older-than", "1d", "--keep-last", "2", "--yes"])
    assert (again.checkpoints_deleted, again.threads_deleted, again.checkpoints_written) == (0, [], 0)


def test_pending_writes_keep_a_thread_whole_unless_force(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"busy": 6, "idle": 6})
    with open_saver(url) as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "busy", "checkpoint_ns": ""}})
        saver.put_writes(tup.config, [("messages", [])], task_id="task-1")
    report = cli.execute(["compact", url, "--keep-last", "1", "--yes"])
    assert list(report.kept_whole) == ["busy"] and report.threads_trimmed == ["idle"]
    with open_saver(url) as saver:
        assert len(list(saver.list({"configurable": {"thread_id": "busy"}}))) > 1
    forced = cli.execute(["compact", url, "--keep-last", "1", "--yes", "--force"])
    assert forced.threads_trimmed == ["busy"] and forced.kept_whole == {}
    with open_saver(url) as saver:
        kept = list(saver.list({"configurable": {"thread_id": "busy"}}))
    assert len(kept) == 1 and kept[0].pending_writes  # the latest checkpoint keeps its writes
    busy = next(t for t in forced.threads if t.thread_id == "busy")
    assert busy.action == "skipped" and busy.reason is not None and busy.reason.startswith("pending writes")


@pytest.mark.parametrize(
    ("value", "ok"),
    [("30d", True), ("12h", True), ("90m", True), ("45s", True), ("2w", True),
     ("30", False), ("1y", False), ("d", False)],
)  # fmt: skip
def test_older_than_forms(value: str, ok: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 2})
    code = cli.main(["compact", url, f"--older-than={value}", "--dry-run"])
    err = capsys.readouterr().err
    if ok:
        assert code == 0, err
    else:
        assert code == 2 and f"argument --older-than: {value!r} is not a duration" in err
        assert "e.g. 30d, 12h, 90m" in err


@pytest.mark.parametrize("spelling", ["separate", "joined"])
def test_a_negative_or_zero_older_than_says_why_it_is_refused(
    spelling: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 2})
    before = dump_rows(url)
    form = "a whole number > 0 and a unit, e.g. 30d, 12h, 90m (units: s, m, h, d, w)"
    for value, why in [
        ("-5d", f"'-5d' is negative: --older-than AGE deletes the threads idle for longer than AGE, so "
                f"AGE is {form}; --older-than 5d deletes those idle longer than 5 days"),
        ("-1h", f"'-1h' is negative: --older-than AGE deletes the threads idle for longer than AGE, so "
                f"AGE is {form}; --older-than 1h deletes those idle longer than 1 hour"),
        ("0d", f"'0d' is zero: every thread would count as idle and be deleted; use {form}"),
    ]:  # fmt: skip
        option = ["--older-than", value] if spelling == "separate" else [f"--older-than={value}"]
        assert cli.main(["compact", url, *option, "--yes"]) == 2
        err = capsys.readouterr().err
        assert err.splitlines()[-1] == f"agentstate-reducer compact: error: argument --older-than: {why}"
        assert "expected one argument" not in err
    assert dump_rows(url) == before


def test_keep_last_says_the_allowed_range_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 2})
    why = (
        "--keep-last N keeps each thread's newest N checkpoints, N >= 1: a thread's latest checkpoint "
        "is the state it resumes from, so it always stays (--keep-last 1 keeps only it; --older-than "
        "deletes whole idle threads)"
    )
    for value, what in [("0", "is too small"), ("-2", "is too small"), ("two", "is not a whole number")]:
        assert cli.main(["compact", url, "--keep-last", value, "--dry-run"]) == 2
        assert f"argument --keep-last: {value!r} {what}: {why}" in capsys.readouterr().err
    assert cli.main(["compact", url, "--prune-old", "--keep-last", "3", "--yes"]) == 2
    assert only_line(capsys.readouterr().err).startswith(ERROR + "--prune-old means --keep-last 1")


def test_reports_say_durations_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 4})
    prunes = {}
    options = (["--older-than", "30d"], ["--older-than", "36h", "--keep-last", "2"], ["--keep-last", "2"])
    for option in options:
        report = cli.execute(["compact", url, *option, "--dry-run"])
        (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("prune: ")]
        prunes[" ".join(option)] = (line, report.older_than, report.older_than_seconds)
    assert prunes == {
        "--older-than 30d": (
            "prune: would delete 0 checkpoints (0 pending writes, 0 stored values): "
            "0 whole threads idle longer than 30 days", "30 days", 30 * 86400),
        "--older-than 36h --keep-last 2": (
            "prune: would delete 2 checkpoints (0 pending writes, 0 stored values): 1 thread trimmed "
            "to the newest 2 checkpoints; 0 whole threads idle longer than 1 day 12 hours",
            "1 day 12 hours", 36 * 3600),
        "--keep-last 2": (
            "prune: would delete 2 checkpoints (0 pending writes, 0 stored values): 1 thread trimmed "
            "to the newest 2 checkpoints", None, None),
    }  # fmt: skip
    cli.main(["compact", url, "--older-than", "2w", "--dry-run", "--json"])
    assert json.loads(capsys.readouterr().out)["older_than"] == "14 days"


def _on_a_terminal(args: list[str], answer: str) -> tuple[int, str]:
    """Run the CLI with a terminal as stdin, answer its question, return (exit code, output)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "checkpointers.cli", *args], stdin=follower, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).resolve().parent.parent,
    )
    os.close(follower)
    os.write(leader, answer.encode())
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, out


@pytest.mark.parametrize("answer", ["n\n", "y\n"])
def test_a_terminal_is_asked_before_deleting(answer: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"t": 6})
    before = dump_rows(url)
    code, out = _on_a_terminal(["compact", url, "--keep-last", "1"], answer)
    assert "agentstate-reducer compact will delete" in out and "Delete them? [y/N]" in out
    if answer.startswith("n"):
        assert code == 1 and "nothing was changed (not confirmed)" in out
        assert dump_rows(url) == before
    else:
        assert code == 0, out
        with open_saver(url) as saver:
            assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 1


def test_compact_without_deleting_says_the_store_grows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"a": 20, "b": 20})
    notes = {}
    for dry in (["--dry-run"], []):
        report = cli.execute(["compact", url, *dry])
        out = capsys.readouterr().out
        notes[bool(dry)] = [line for line in out.splitlines() if line.startswith("note: ")]
        assert report.checkpoints_after == report.checkpoints_before + 2
    tail = (
        "nothing: the older checkpoints stay, so the store grows and frees no space. The next run of "
        "each thread loads the reduced state; to free the space, run compact again with --keep-last 1 "
        "(each thread keeps only its reduced latest checkpoint) or --keep-last N"
    )
    assert notes == {
        True: [f"note: would write 2 reduced checkpoints and would delete {tail}"],
        False: [f"note: wrote 2 reduced checkpoints and deleted {tail}"],
    }
    # a second run compacts nothing, and says nothing; --keep-last deletes, and says nothing either
    for option in ([], ["--keep-last", "1", "--yes"]):
        cli.main(["compact", url, *option, "--json"])
        assert json.loads(capsys.readouterr().out)["note"] is None
