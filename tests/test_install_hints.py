"""Every install hint the code prints installs this project, from the checkout.

The package index holds a different project named ``agentstate-reducer``: a hint like
``pip install 'agentstate-reducer[cosmosdb]'`` run where this project is not installed fetches that
one, and in an environment that has this project would replace it. Hints say
``pip install ".[extra]"`` (run in the checkout) instead. The README and docs are checked by
tests/test_readme.py.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for folder in ("agentstate_reducer", "checkpointers", "tests", "benchmarks", "scripts")
    if (ROOT / folder).is_dir()
    for path in (ROOT / folder).rglob("*")
    if path.suffix in {".py", ".sh"} and "node_modules" not in path.parts
)
# `pip install` followed by the distribution's name (quoted or not, with or without extras)
BY_NAME = re.compile(r"""pip install (?:-U |--upgrade )?['"]?agentstate-reducer\b""")


def test_the_sources_are_found() -> None:
    names = {path.name for path in SOURCES}
    assert {"errors.py", "sync.py", "aio.py", "_base.py"} <= names


def test_no_hint_installs_the_distribution_by_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in SOURCES
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if BY_NAME.search(line) or re.search(r"""\(or ['"]agentstate-reducer\[""", line)
    ]
    assert not offenders, "install hints that fetch the index's other project:\n" + "\n".join(offenders)
