"""Checks every framework integration's tests share (stdlib only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_WITHOUT = """
import sys
BLOCKED = {packages!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + '.') for p in BLOCKED):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
try:
    import {module}
except ImportError as exc:
    print(exc)
else:
    raise SystemExit('imported')
"""


def import_error_without(packages: tuple[str, ...], module: str) -> str:
    """The ImportError text of ``import module`` in a fresh interpreter in which no module of
    ``packages`` (dotted names, each with its submodules) can be found; the check fails when the
    import succeeds."""
    code = _WITHOUT.format(packages=packages, module=module)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout
