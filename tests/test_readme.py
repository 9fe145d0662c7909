"""Every Python example in README.md and docs/*.md runs, as a reader would paste them.

README.md's blocks run in order in one namespace (later examples use names earlier ones define,
like a notebook). Each docs page continues the README: its blocks run in order in a copy of the
namespace the README's blocks left, so a page may use the README's names but not another page's.
The only names the test provides are the ones the guide says come from the reader's environment:
``DB_URI`` (a PostgreSQL URL) and the ``COSMOSDB_ENDPOINT`` / ``COSMOSDB_KEY`` variables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOC_PAGES = sorted(path for path in DOCS.glob("*.md") if path.name != "README.md")


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def run_blocks(path: Path, namespace: dict[str, Any]) -> None:
    label = path.relative_to(ROOT)
    for number, block in enumerate(python_blocks(path.read_text()), start=1):
        try:
            exec(compile(block, f"{label} python block {number}", "exec"), namespace)
        except Exception as exc:
            first = block.strip().splitlines()[0]
            raise AssertionError(f"{label} python block {number} ({first!r}) failed: {exc!r}") from exc


def test_readme_has_the_two_commands_and_examples() -> None:
    text = README.read_text()
    assert 'pip install ".[langgraph]" && agentstate-reducer demo' in text
    assert "bash scripts/test.sh" in text
    assert len(python_blocks(text)) >= 5
    assert sum(len(python_blocks(page.read_text())) for page in DOC_PAGES) >= 5


def test_every_docs_page_is_linked_from_the_index_and_the_readme() -> None:
    assert DOC_PAGES, "docs/ has no pages"
    index = (DOCS / "README.md").read_text()
    readme = README.read_text()
    for page in DOC_PAGES:
        assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"
        assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_readme_and_docs_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str, cosmos_server: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COSMOSDB_ENDPOINT", cosmos_server.endpoint)
    monkeypatch.setenv("COSMOSDB_KEY", cosmos_server.key)
    namespace: dict[str, Any] = {"__name__": "readme", "DB_URI": pg_url}
    run_blocks(README, namespace)
    for page in DOC_PAGES:
        run_blocks(page, {**namespace, "__name__": f"docs.{page.stem}"})
