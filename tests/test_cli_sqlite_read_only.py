"""``inspect`` and ``compact --dry-run`` read SQLite without writing anything.

The database is opened read-only (``mode=ro``, or ``immutable=1`` for a WAL database without a
log) and never set up: the file's bytes, its modification time and its journal mode stay as they
were, and no file appears beside it. The tests run as root, where ``chmod 0444`` does not stop a
write, so they compare the folder (names, bytes, mtimes) before and after instead, and show that
the connection the CLI reads through refuses writes.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

import checkpointers.cli.main as cli
from checkpointers.cli.demo_graph import build_demo_graph, turn_input
from checkpointers.cli.stores import open_checkpoint_db
from tests.test_cli import ERROR, only_line, seed_threads

ROLLBACK, WAL = b"\x01\x01", b"\x02\x02"  # header bytes 18-19: the journal mode


def read_only_runs(url: str) -> list[list[str]]:
    reduce = ["--max-messages", "6", "--min-messages", "2"]
    return [
        ["inspect", url],
        ["inspect", url, "--json"],
        ["compact", url, "--dry-run", *reduce],
        ["compact", url, "--dry-run", "--json", *reduce],
    ]


def folder_state(folder: Path, *, skip: tuple[str, ...] = ()) -> dict[str, tuple[bytes, int]]:
    """Every file in ``folder`` with its bytes and modification time (``skip``: bytes not compared)."""
    return {
        p.name: (b"" if p.name in skip else p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


def journal_bytes(path: Path) -> bytes:
    return path.read_bytes()[18:20]


def seeded(folder: Path, threads: dict[str, int]) -> Path:
    db = folder / "cp.sqlite"
    seed_threads(f"sqlite:///{db}", threads)
    return db


def run_all(url: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    outputs = []
    for argv in read_only_runs(url):
        assert cli.main(argv) == 0, capsys.readouterr().err
        outputs.append(capsys.readouterr().out)
    return outputs


def test_rollback_journal_database_read_only_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = seeded(tmp_path, {"long": 5, "short": 1})
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    db.chmod(0o444)
    assert journal_bytes(db) == ROLLBACK and [p.name for p in tmp_path.iterdir()] == ["cp.sqlite"]
    before = folder_state(tmp_path)

    inspect, as_json, dry_run, _ = run_all(f"sqlite:///{db}", capsys)

    assert [line.split()[0] for line in inspect.splitlines()[3:5]] == ["long", "short"]
    assert '"checkpoints": 6' in as_json
    assert "1 thread would compact" in dry_run
    assert folder_state(tmp_path) == before  # no -wal, -shm or -journal; same bytes and mtime
    assert journal_bytes(db) == ROLLBACK
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_wal_database_closed_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No -wal file: read as immutable (mode=ro alone would create -wal and -shm and leave them)."""
    db = seeded(tmp_path, {"long": 5})
    assert journal_bytes(db) == WAL and [p.name for p in tmp_path.iterdir()] == ["cp.sqlite"]
    before = folder_state(tmp_path)
    outputs = run_all(str(db), capsys)
    assert "1 thread would compact" in outputs[2]
    assert folder_state(tmp_path) == before
    assert journal_bytes(db) == WAL


def test_wal_database_with_a_running_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Commits still in the -wal file are read, and nothing is folded into the database file."""
    db = tmp_path / "cp.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph = build_demo_graph(saver)
        for turn in (1, 2, 3):
            graph.invoke(turn_input(turn), {"configurable": {"thread_id": "live"}}, durability="exit")
        assert Path(f"{db}-wal").stat().st_size > 0 and Path(f"{db}-shm").exists()
        before = folder_state(tmp_path, skip=("cp.sqlite-shm",))  # readers take marks in -shm

        inspect, *_ = run_all(f"sqlite:///{db}", capsys)

        assert inspect.splitlines()[3].split()[:3] == ["live", "3", "12"]
        assert folder_state(tmp_path, skip=("cp.sqlite-shm",)) == before
        # The writer carries on, unaware of the reader.
        graph.invoke(turn_input(4), {"configurable": {"thread_id": "live"}}, durability="exit")
        assert len(graph.get_state({"configurable": {"thread_id": "live"}}).values["messages"]) == 16


def test_wal_log_without_its_index_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, copy = tmp_path / "src", tmp_path / "copy"
    src.mkdir()
    copy.mkdir()
    with SqliteSaver.from_conn_string(str(src / "cp.sqlite")) as saver:
        build_demo_graph(saver).invoke(turn_input(1), {"configurable": {"thread_id": "t"}})
        for name in ("cp.sqlite", "cp.sqlite-wal"):  # what a crashed writer leaves, minus its -shm
            shutil.copy(src / name, copy / name)
    before = folder_state(copy)
    assert cli.main(["inspect", str(copy / "cp.sqlite")]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(
        f"{ERROR}{str(copy / 'cp.sqlite')!r} has a write-ahead log (cp.sqlite-wal) without "
    )
    assert folder_state(copy) == before  # no -shm created


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_the_read_only_store_refuses_writes_and_is_never_set_up(tmp_path: Path, journal: str) -> None:
    db = seeded(tmp_path, {"t": 2})
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.close()
    with open_checkpoint_db(f"sqlite:///{db}", create=False, read_only=True, feature="test") as store:
        assert store.saver.is_setup  # its methods will not call setup()
        with pytest.raises(sqlite3.OperationalError, match="attempt to write a readonly database"):
            store.saver.conn.execute("CREATE TABLE x (y)")
        assert [r.thread_id for r in store.threads()] == ["t"]


def test_database_from_before_task_path_is_read_without_migrating_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """setup() would add the writes.task_path column; the read-only commands read it as it is."""
    db = seeded(tmp_path, {"busy": 3, "idle": 2})
    with SqliteSaver.from_conn_string(str(db)) as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "busy", "checkpoint_ns": ""}})
        assert tup is not None
        saver.put_writes(tup.config, [("messages", [])], task_id="task-1")
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE old AS SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type,"
        " value FROM writes; DROP TABLE writes; ALTER TABLE old RENAME TO writes; VACUUM;"
    )
    conn.close()
    before = folder_state(tmp_path)
    assert cli.main(["compact", str(db), "--dry-run", "--max-messages", "6", "--min-messages", "2"]) == 0
    out = capsys.readouterr().out
    assert "busy" in out and "pending writes" in out  # the old table's writes were read
    assert folder_state(tmp_path) == before


def _checkpoints_table_only(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
        " checkpoint, metadata)"
    )
    conn.close()


def _wrong_columns(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE checkpoints (thread_id, x); CREATE TABLE writes (y);")
    conn.close()


NOT_CHECKPOINTS: dict[str, tuple[Callable[[Path], object], str]] = {
    "empty-file": (lambda p: p.write_bytes(b""), "it is an empty file (check the path)"),
    "text-file": (lambda p: p.write_text("hello " * 1000), "it is not an SQLite file (check the path)"),
    "truncated-header": (
        lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20),
        "it is not an SQLite",
    ),
    "no-tables": (
        lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.close(),
        "it is an SQLite database without the checkpoints and writes tables (check the path)",
    ),
    "no-writes-table": (_checkpoints_table_only, "it is an SQLite database without the writes table"),
    "wrong-columns": (
        _wrong_columns,
        "its checkpoints table has no column checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,",
    ),
}


@pytest.mark.parametrize("kind", NOT_CHECKPOINTS)
@pytest.mark.parametrize("command", [["inspect"], ["compact", "--dry-run"], ["compact"]])
def test_not_a_checkpoint_database_is_one_line_and_left_alone(
    kind: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, reason = NOT_CHECKPOINTS[kind]
    path = tmp_path / "x.sqlite"
    make(path)
    before = folder_state(tmp_path)
    assert cli.main([command[0], str(path), *command[1:]]) == 1
    line = only_line(capsys.readouterr().err)
    assert line.startswith(
        f"{ERROR}{str(path)!r} is not a LangGraph checkpoint database (SqliteSaver): {reason}"
    )
    assert folder_state(tmp_path) == before
    assert os.listdir(tmp_path) == ["x.sqlite"]


# --- commands that write, on a file or folder they cannot write ------------------------------

_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_IMMUTABLE_FL = 0x80086601, 0x40086602, 0x10


def _set_immutable(path: Path, on: bool) -> None:
    import fcntl
    import struct

    fd = os.open(path, os.O_RDONLY)
    try:
        (flags,) = struct.unpack("i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, struct.pack("i", 0)))
        flags = flags | _FS_IMMUTABLE_FL if on else flags & ~_FS_IMMUTABLE_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("i", flags))
    finally:
        os.close(fd)


@contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """``path`` (a file or a folder) made unwritable for this process: immutable (``chattr +i``)
    when it runs as root, whom permission bits do not stop; read-only by its mode otherwise."""
    mode = path.stat().st_mode
    as_root = os.geteuid() == 0
    if as_root:
        _set_immutable(path, True)
    else:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        if as_root:
            _set_immutable(path, False)
        else:
            path.chmod(mode)


WRITING_RUNS = [
    ["compact", "{url}", "--keep-last", "1", "--yes"],
    ["compact", "{url}", "--max-messages", "6", "--min-messages", "2"],
    ["demo", "--turns", "1", "--store", "{url}"],
]


@pytest.mark.parametrize("what", ["file", "folder"])
@pytest.mark.parametrize("journal", ["wal", "rollback"])
def test_a_writing_command_on_an_unwritable_database_says_so_before_writing(
    what: str, journal: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    db = seeded(folder, {"t": 4})
    if journal == "rollback":
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=DELETE")
    before = folder_state(folder)
    if what == "file":
        expected = (
            f"{str(db)!r} is read-only (no write permission, an immutable file or a read-only file "
            "system), and agentstate-reducer {command} writes to it: make it writable (chmod u+w "
            f"{db}; lsattr shows an immutable 'i', chattr -i removes it), or copy it somewhere "
            "writable; agentstate-reducer inspect and compact --dry-run only read it"
        )
    else:
        expected = (
            f"cannot write in the folder {str(folder)!r} (no write permission, an immutable folder or "
            "a read-only file system): SQLite creates its -wal and -shm (or -journal) files beside the "
            "database while agentstate-reducer {command} writes; make the folder writable, or copy the "
            "database somewhere writable; agentstate-reducer inspect and compact --dry-run only read it"
        )
    with unwritable(db if what == "file" else folder):
        for argv in WRITING_RUNS:
            assert cli.main([a.replace("{url}", f"sqlite:///{db}") for a in argv]) == 1
            line = only_line(capsys.readouterr().err)
            assert line == ERROR + expected.replace("{command}", argv[0])
        outputs = run_all(f"sqlite:///{db}", capsys)  # reading still works
    assert "1 thread, 4 checkpoints" in outputs[0]
    assert folder_state(folder) == before  # nothing written, no -wal/-shm/-journal left behind
