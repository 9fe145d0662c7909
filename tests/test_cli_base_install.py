"""On a base install (no LangGraph, no LangChain), the CLI starts: ``--help`` works, and each command
that needs an extra says which one, in one line, with the install command for the checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.test_checkpointers_import import _run_without_langgraph

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = f"import sys\nfrom checkpointers.cli.main import main\nsys.exit(main({list(argv)!r}))\n"
    return _run_without_langgraph(tmp_path, code)


def test_help_and_version_work_without_langgraph(tmp_path: Path) -> None:
    out = _cli(tmp_path, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: agentstate-reducer") and "{demo,inspect,compact}" in out.stdout
    assert out.stderr == ""
    for command in ("demo", "inspect", "compact"):
        sub = _cli(tmp_path, command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert sub.stdout.startswith(f"usage: agentstate-reducer {command}")
    version = _cli(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("agentstate-reducer ")


def test_python_m_checkpointers_cli_runs_the_console_script(tmp_path: Path) -> None:
    out = _run_without_langgraph(
        tmp_path, "import runpy, sys\nsys.argv = ['x', '--help']\nrunpy.run_module('checkpointers.cli')\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: agentstate-reducer")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["demo", "--turns", "2"], "agentstate-reducer demo needs the langgraph extra (module 'lang"),
        (["inspect", "x.sqlite"], "agentstate-reducer inspect needs the sqlite extra (module 'langgraph"),
        (["compact", "x.sqlite"], "agentstate-reducer compact needs the langgraph extra (module 'langgraph"),
        (["inspect", "cosmosdb://127.0.0.1:9/db/c?key=c2VjcmV0"],
         "agentstate-reducer inspect needs the langgraph extra (module 'lang"),
    ],
)  # fmt: skip
def test_a_command_needing_an_extra_says_which_in_one_line(
    tmp_path: Path, argv: list[str], expected: str
) -> None:
    out = _cli(tmp_path, *argv)
    assert out.returncode == 1, out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    extra = expected.split(" needs the ")[1].split(" ")[0]
    assert lines[0].startswith(expected)
    assert lines[0].endswith(f' is missing): pip install ".[{extra}]"')
