"""Every Python example in README.md runs, in order, as a reader would paste them.

The blocks share one namespace (later examples use names earlier ones define, like a notebook).
The only names the test provides are the ones the README says come from the reader's environment:
``DB_URI`` (a PostgreSQL URL) and the ``COSMOSDB_ENDPOINT`` / ``COSMOSDB_KEY`` variables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_has_the_two_commands_and_examples() -> None:
    text = README.read_text()
    assert 'pip install ".[langgraph]" && agentstate-reducer demo' in text
    assert "bash scripts/test.sh" in text
    assert len(python_blocks(text)) >= 8


def test_readme_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str, cosmos_server: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COSMOSDB_ENDPOINT", cosmos_server.endpoint)
    monkeypatch.setenv("COSMOSDB_KEY", cosmos_server.key)
    namespace: dict[str, Any] = {"__name__": "readme", "DB_URI": pg_url}
    for number, block in enumerate(python_blocks(README.read_text()), start=1):
        try:
            exec(compile(block, f"README.md python block {number}", "exec"), namespace)
        except Exception as exc:
            first = block.strip().splitlines()[0]
            raise AssertionError(f"README python block {number} ({first!r}) failed: {exc!r}") from exc
