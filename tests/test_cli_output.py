"""What the CLI shows a new user: the demo's chart files and their paths checked before the run,
the terminal chart's legend and labels, progress without a terminal, help and usage texts, store
labels that paste back as URLs, and warnings and missing extras as one line."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import checkpointers.cli.demo as demo_module
import checkpointers.cli.main as cli
from checkpointers.cli.render import Progress, ascii_chart
from checkpointers.cli.urls import parse_store_url
from tests.test_cli import open_saver, seed_threads

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

ROOT = Path(__file__).resolve().parent.parent

ERROR = "agentstate-reducer: error: "
TITLE = "Stored bytes of the thread after each turn (running total, 3 turns)"


def only_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# --- demo --plot -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "magic", "title"),
    [
        ("growth.png", b"\x89PNG\r\n\x1a\n", b"Title\x00" + TITLE.encode()),
        ("growth.svg", b"<?xml", f"<dc:title>{TITLE}".encode()),
        ("growth.PDF", b"%PDF-", b"/Title (" + TITLE.replace("(", "\\(").replace(")", "\\)").encode()),
    ],
)
def test_plot_writes_the_format_its_extension_names(
    name: str, magic: bytes, title: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / name
    cli.execute(["demo", "--turns", "3", "--db-dir", str(tmp_path), "--plot", str(target)])
    data = target.read_bytes()
    assert data.startswith(magic)
    assert title in data  # the title says what each point is: the running total
    if name.endswith(".svg"):
        assert b"<svg" in data and b"\x89PNG" not in data
    assert capsys.readouterr().out.rstrip().endswith(f"chart written to {target}")


@pytest.mark.parametrize(
    ("plot", "expected"),
    [
        ("missing/growth.png", "--plot '{d}/missing/growth.png': directory '{d}/missing' does not exist"),
        ("", "--plot '{d}/' is a directory: give a file name such as growth.png"),
        ("growth.jpg", "--plot '{d}/growth.jpg' has extension '.jpg': the chart is written as .png"),
        ("growth", "--plot '{d}/growth' has no extension: the chart is written as .png, .svg or .pdf"),
    ],
)  # fmt: skip
def test_a_plot_path_that_cannot_be_written_is_refused_before_the_run(
    plot: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db_dir = tmp_path / "db"
    db_dir.mkdir()
    target = f"{tmp_path}/{plot}"
    argv = ["demo", "--turns", "2", "--db-dir", str(db_dir), "--plot", target]
    assert cli.main(argv) == 2
    assert only_line(capsys.readouterr().err).startswith(ERROR + expected.format(d=tmp_path))
    assert list(db_dir.iterdir()) == []  # the run never started


def test_a_db_dir_that_cannot_hold_the_files_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for db_dir, why in [
        ("/proc/nope", "cannot create a folder in '/proc' (No such file or directory)"),
        (f"{a_file}/sub", f"{str(a_file)!r} is a file, not a folder"),
        (str(a_file), "is a file, not a folder: give a folder"),
    ]:
        assert cli.main(["demo", "--turns", "1", "--db-dir", db_dir]) == 2
        line = only_line(capsys.readouterr().err)
        assert line.startswith(f"{ERROR}--db-dir {db_dir!r}") and why in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_chart_that_fails_after_the_run_is_reported_after_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    real_write = demo_module.write_chart

    def folder_gone_meanwhile(path: str, *args: Any, **kwargs: Any) -> None:
        shutil.rmtree(out_dir)  # removed while the demo ran: the real write then fails
        real_write(path, *args, **kwargs)

    monkeypatch.setattr(demo_module, "write_chart", folder_gone_meanwhile)
    argv = ["demo", "--turns", "2", "--db-dir", str(tmp_path), "--plot", str(out_dir / "g.png")]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert "bare/reduced" in captured.out and "chart written" not in captured.out
    assert only_line(captured.err) == (
        f"{ERROR}the results above are complete, but the chart could not be written to "
        f"'{out_dir / 'g.png'}': No such file or directory"
    )


# --- the terminal chart ----------------------------------------------------------------------


def test_each_y_label_sits_on_the_row_its_value_is_drawn_on() -> None:
    chart = ascii_chart([("a", "*", [0, 50, 100])], width=3, height=12).splitlines()
    rows = {line.split("|")[0].strip(): line.split("|", 1)[1] for line in chart if "|" in line}
    assert rows["100 B"] == "  *"
    assert rows["50 B"] == " *"
    assert rows["0 B"] == "*"


def test_the_legend_names_the_overlap_glyph_when_the_lines_overlap() -> None:
    apart = ascii_chart([("bare", "*", [0, 100]), ("reduced", "o", [100, 0])], width=2, height=4)
    assert apart.splitlines()[-1].strip() == "* bare   o reduced"
    together = ascii_chart([("bare", "*", [0, 100]), ("reduced", "o", [0, 50])], width=2, height=4)
    assert together.splitlines()[-1].strip() == "* bare   o reduced   @ both"
    assert together.splitlines()[-4].endswith("|@")


# --- a reader that goes away (| head) -------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "streams"),
    [
        (["inspect", "{url}"], "stdout"),
        (["inspect", "{url}", "--json"], "stdout"),
        (["--help"], "stdout"),
        (["compact", "{url}", "--keep-last", "1", "--yes"], "stdout"),
        (["compact", "{url}", "--keep-last", "1", "--yes"], "stdout and stderr"),
        (["inspect", "{url}", "--thread", "x"], "stdout and stderr"),  # a usage error, unread
    ],
)
def test_a_reader_that_went_away_ends_the_command_quietly(
    argv: list[str], streams: str, tmp_path: Path
) -> None:
    """``agentstate-reducer inspect ... | head -5``: once the reader has gone, the command writes
    nothing more, prints no error and no traceback, and exits 141 (128 + SIGPIPE) like the
    other tools of a pipeline. The work is done all the same."""
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    seed_threads(url, {"a": 3, "b": 3})
    read_end, write_end = os.pipe()
    os.close(read_end)  # a reader that is already gone: every write to the pipe fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "checkpointers.cli", *(a.replace("{url}", url) for a in argv)],
            stdout=write_end, stderr=write_end if streams != "stdout" else subprocess.PIPE,
            text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr in ("", None)
    if argv[0] == "compact":
        with open_saver(url) as saver:
            for thread_id in ("a", "b"):
                assert len(list(saver.list({"configurable": {"thread_id": thread_id}}))) == 1


def test_progress_stops_when_its_reader_went_away() -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    with Progress(3, "bare", stream=Gone(), enabled=True) as bar:
        for _ in range(3):
            bar.update()
    assert bar.done == 3 and bar.silenced


# --- progress without a terminal, and the temporary database ---------------------------------


def test_without_a_terminal_progress_is_a_plain_line_every_few_seconds() -> None:
    def clock(*seconds: float) -> Callable[[], float]:  # the times the bar reads, in turn
        return iter(seconds).__next__

    stream = io.StringIO()
    with Progress(4, "   bare", stream=stream, every=5.0, clock=clock(0, 2, 6, 9, 12)) as bar:
        for _ in range(4):
            bar.update()
    # a line when 5 s have passed since the last one; none for the last update (the run is done)
    assert stream.getvalue().splitlines() == ["bare: 2/4 after 6 s"]
    quiet = io.StringIO()
    with Progress(3, "bare", stream=quiet, every=60.0, clock=clock(0, 10, 20, 30)) as bar:
        for _ in range(3):
            bar.update()
    assert quiet.getvalue() == ""  # a run shorter than the interval prints nothing


def test_the_default_demo_says_how_to_keep_its_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli.execute(["demo", "--turns", "2"])
    out = capsys.readouterr().out
    assert "the two SQLite files were temporary and are deleted; --db-dir DIR keeps them" in out
    cli.execute(["demo", "--turns", "2", "--db-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "temporary" not in out and f"kept: sqlite:///{tmp_path / 'demo-bare.sqlite'}" in out


# --- usage and help --------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["inspect", "x.db"], ["compact", "x.db"], ["demo"]])
def test_an_unknown_option_shows_the_usage_of_its_subcommand(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*command, "--bogus", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: agentstate-reducer {command[0]} [-h]")
    assert err.strip().splitlines()[-1] == (
        f"agentstate-reducer {command[0]}: error: unrecognized arguments: --bogus 1"
    )


def test_inspect_help_describes_store_and_groups_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", "--help"]) == 0
    out = capsys.readouterr().out
    assert "reducer:" not in out and "\nmessages and tokens:\n" in out
    store_line = next(line for line in out.splitlines() if line.strip().startswith("STORE "))
    assert "the checkpoint store" in store_line
    assert "sqlite:////absolute/path" in out and "cosmosdb://host:port/database/container" in out
    assert "***" not in out  # the forms hold no password for the output's redaction to hide


# --- store labels ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["cosmosdb:///demodb/ckpt", "cosmosdb://localhost:8081/demodb/ckpt", "cosmosdb://[::1]:8081/d/c"]
)
def test_a_cosmosdb_store_label_pastes_back_as_the_same_url(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSMOSDB_KEY", "c2VjcmV0LWtleQ==")
    monkeypatch.setenv("COSMOSDB_ENDPOINT", "https://localhost:8081/")
    parsed = parse_store_url(url)
    assert parsed.label == url
    again = parse_store_url(parsed.label)
    assert (again.endpoint, again.database, again.container) == (
        parsed.endpoint,
        parsed.database,
        parsed.container,
    )


def test_an_incomplete_cosmosdb_url_is_echoed_as_given(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSMOSDB_KEY", "c2VjcmV0LWtleQ==")
    assert cli.main(["inspect", "cosmosdb://"]) == 2
    assert only_line(capsys.readouterr().err).startswith(f"{ERROR}bad Cosmos DB URL 'cosmosdb://': use ")


# --- token counting from the command line ----------------------------------------------------


def test_token_counter_tiktoken_without_the_extra_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # what `import tiktoken` meets without the extra
    argv = ["demo", "--turns", "2", "--db-dir", str(tmp_path), "--token-counter", "tiktoken"]
    assert cli.main(argv) == 1
    assert only_line(capsys.readouterr().err) == (
        "agentstate-reducer --token-counter tiktoken needs the tokens extra (module 'tiktoken' is "
        'missing): pip install ".[tokens]"'
    )


def test_a_warning_is_one_line_like_the_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"no_such_encoding_{uuid.uuid4().hex[:8]}"
    argv = [
        "demo",
        "--turns",
        "2",
        "--db-dir",
        str(tmp_path),
        "--token-counter",
        "tiktoken",
        "--encoding",
        name,
    ]
    assert cli.main(argv) == 0
    assert only_line(capsys.readouterr().err) == (
        f"agentstate-reducer: warning: agentstate_reducer: tiktoken could not load encoding {name!r} "
        "(tiktoken knows no encoding of that name); counting with the chars/4 heuristic. Pass a name "
        "such as 'o200k_base', or encoding=/token_counter="
    )
