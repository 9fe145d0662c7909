"""The version is written once, in pyproject.toml; the package reports the installed metadata's."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import agentstate_reducer

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def pyproject_version() -> str:
    found = re.findall(r'^version = "([^"]+)"$', PYPROJECT.read_text(), flags=re.M)
    assert len(found) == 1, f"expected one version line in pyproject.toml, found {found}"
    return found[0]


def test_version_is_pyprojects() -> None:
    from agentstate_reducer import __version__

    assert __version__ == agentstate_reducer.__version__ == pyproject_version(), (
        "agentstate_reducer.__version__ differs from pyproject.toml: reinstall the checkout "
        "(pip install -e .) after changing the version"
    )


def test_version_is_not_written_in_the_package() -> None:
    for path in Path(agentstate_reducer.__file__).parent.rglob("*.py"):
        assert not re.search(r"^__version__\s*=", path.read_text(), flags=re.M), path


def test_version_falls_back_when_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.delitem(vars(agentstate_reducer), "__version__", raising=False)
    monkeypatch.setattr(metadata, "version", not_installed)
    assert agentstate_reducer.__version__ == "0+unknown"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        agentstate_reducer.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_import_does_not_load_importlib_metadata() -> None:
    code = "import sys, agentstate_reducer; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
