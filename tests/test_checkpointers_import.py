"""``checkpointers`` resolves its public names on first use: importable on a base install, and a
name that needs LangGraph says which extra to install, in one ``ImportError``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import checkpointers

ROOT = Path(__file__).resolve().parent.parent

#: a sitecustomize that makes the interpreter look like a base install: no LangGraph, no LangChain
_HIDE_LANGGRAPH = '''
import sys


class HideLangGraph:
    hidden = ("langgraph", "langchain_core", "langchain")

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.hidden:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, HideLangGraph())
'''


def _run_without_langgraph(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(_HIDE_LANGGRAPH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )


def test_the_hiding_works(tmp_path: Path) -> None:
    """The check below can fail: langgraph is installed here, and the subprocess cannot see it."""
    out = _run_without_langgraph(tmp_path, "import langgraph.checkpoint.base")
    assert out.returncode == 1 and "No module named 'langgraph" in out.stderr


def test_without_langgraph_the_package_and_the_reduction_names_import(tmp_path: Path) -> None:
    code = (
        "import sys, checkpointers\n"
        "from checkpointers import PutReduction, SummaryMemo, areduce_checkpoint, reduce_checkpoint\n"
        "from agentstate_reducer.summary import SummaryMemo as Core\n"
        "assert SummaryMemo is Core\n"
        "print(sorted(m for m in sys.modules if m.startswith('checkpointers')))\n"
    )
    out = _run_without_langgraph(tmp_path, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['checkpointers', 'checkpointers.reduction']"


@pytest.mark.parametrize("name", ["ReducingCheckpointSaver", "StoreArchive", "read_transcript"])
def test_without_langgraph_a_saver_name_raises_one_import_error_naming_the_extra(
    tmp_path: Path, name: str
) -> None:
    out = _run_without_langgraph(tmp_path, f"from checkpointers import {name}")
    assert out.returncode == 1
    # one error, not a ModuleNotFoundError with another raised while handling it
    assert out.stderr.count("Traceback") == 1 and "During handling" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert f"checkpointers.{name} needs LangGraph" in last
    assert 'pip install ".[langgraph]"' in last
    # the same error again on a second try, also through attribute access
    code = (
        "import checkpointers\n"
        "for _ in range(2):\n"
        "    try:\n"
        f"        checkpointers.{name}\n"
        "    except ImportError as exc:\n"
        "        assert type(exc) is ImportError and exc.__cause__ is None, repr(exc)\n"
        "        print(exc)\n"
    )
    again = _run_without_langgraph(tmp_path, code)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count('pip install ".[langgraph]"') == 2


def test_every_public_name_resolves_to_its_module() -> None:
    import checkpointers.archive
    import checkpointers.offload.checkpoint
    import checkpointers.offload.config
    import checkpointers.reduction
    import checkpointers.saver

    modules = (checkpointers.archive, checkpointers.offload.checkpoint, checkpointers.offload.config,
               checkpointers.reduction, checkpointers.saver)
    for name in checkpointers.__all__:
        value = getattr(checkpointers, name)
        assert any(getattr(m, name, None) is value for m in modules), name
        assert name in dir(checkpointers)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'checkpointers' has no attribute 'ReducingSaver'"):
        checkpointers.ReducingSaver  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'ReducingSaver'"):
        from checkpointers import ReducingSaver  # noqa: F401
