"""The editable install scripts/test.sh runs (`pip install -e .`) is quiet and puts the checkout
itself on sys.path; a wheel holds only the two packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agentstate_reducer", "checkpointers")


def _copy_project(target: Path) -> Path:
    """The files a build reads, in a folder of their own (the build writes its egg-info there)."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, target / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600, check=False
    )


def test_an_editable_install_prints_no_warning_and_links_the_checkout(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    # A throwaway environment of its own: pip must never touch the one running the tests (with
    # --prefix or --target it would uninstall this project from it first).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    done = _pip("--python", str(python), "install", "-q", "--no-deps", "-e", str(project))
    assert done.returncode == 0, done.stderr
    assert "Editable installation" not in done.stderr and "Warning" not in done.stderr, done.stderr
    (pth,) = [p for p in venv.rglob("*.pth") if "agentstate_reducer" in p.name]
    assert pth.read_text().strip() == str(project)


def test_a_wheel_holds_only_the_two_packages(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    done = _pip("wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(project))
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" not in name}
    assert tops == set(PACKAGES)
