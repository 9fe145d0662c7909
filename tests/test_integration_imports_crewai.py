"""Without crewai, ``agentstate_reducer.integrations.crewai`` raises one ImportError naming the
extra, and the rest of the package imports. (A finder hides crewai, so this holds whether or not
it is installed; the CrewAI tests themselves run in their own environment, tests/crewai.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_HIDE_CREWAI = '''
import sys


class HideCrewAI:
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] == "crewai":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, HideCrewAI())
'''


def _run_without_crewai(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(_HIDE_CREWAI)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )


def test_without_crewai_the_module_names_the_extra(tmp_path: Path) -> None:
    out = _run_without_crewai(tmp_path, "from agentstate_reducer.integrations.crewai import ReducerHook")
    assert out.returncode == 1
    assert out.stderr.count("Traceback") == 1 and "During handling" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ReducerHook needs the 'crewai' package")
    assert 'pip install ".[crewai]"' in last


def test_without_crewai_the_package_and_the_shared_layer_import(tmp_path: Path) -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "from agentstate_reducer.integrations import _common\n"
        "print(any(m.partition('.')[0] == 'crewai' for m in sys.modules))\n"
    )
    out = _run_without_crewai(tmp_path, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
