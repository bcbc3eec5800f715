"""A venv users cannot run hops from is named at install time, with the fix for its cause.

Live, as the unprivileged ``nobody``: a venv whose Python sits under a private
directory (as pyenv's under /root does), or which lies under one itself, gives
every user "Permission denied" before hops can say a word, so
``scripts/install.sh`` runs ``scripts/venv_users.sh``, which tries the venv's
Python as that user and names the directory that stops it. Each venv here is
made in a directory every user can traverse (pytest's own temporary directory
is root's only, which would make every venv in it unusable for that reason
alone), and a private directory only where a case puts one. Before the venv
exists, ``scripts/venv_python.sh`` chooses the Python install.sh makes it from.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "scripts" / "venv_users.sh"
VENV_PYTHON = CHECK.with_name("venv_python.sh")
SYSTEM_PYTHON = Path("/usr/bin/python3")
PYENV_PYTHONS = sorted(glob.glob("/root/.pyenv/versions/3.1[1-9]*/bin/python3"))
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="trying as another user needs root")


def _nobody_can_run(command: list[str]) -> bool:
    return subprocess.run(["runuser", "-u", "nobody", "--", *command]).returncode == 0


@pytest.fixture
def public() -> Iterator[Path]:
    """A fresh directory below /tmp that every user can traverse."""
    where = Path(tempfile.mkdtemp(prefix="hops-venv-"))
    where.chmod(0o755)
    assert _nobody_can_run(["test", "-x", str(where)])
    try:
        yield where
    finally:
        shutil.rmtree(where)


def _venv(where: Path, python: Path) -> Path:
    (where / "venv" / "bin").mkdir(parents=True)
    (where / "venv" / "bin" / "python").symlink_to(python)
    return where / "venv"


def _private(where: Path) -> Path:
    where.mkdir(mode=0o700)
    return where


def _check(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CHECK), str(venv)], capture_output=True, text=True)


def test_a_venv_on_a_private_python_is_refused_with_the_fix(public: Path) -> None:
    home = _private(public / "home")
    (home / "python3").symlink_to(sys.executable)
    result = _check(_venv(public, home / "python3"))
    assert result.returncode == 1
    assert "not usable by other users" in result.stderr
    assert f"cannot enter {home} (" in result.stderr and "way to its Python" in result.stderr
    assert "PYTHON=/usr/bin/python3" in result.stderr


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system Python")
def test_a_venv_under_a_private_directory_is_told_to_move_not_to_change_python(
    public: Path,
) -> None:
    """Another Python cannot help a venv users cannot reach: the fix is where it lies."""
    checkout = _private(public / "checkout")
    result = _check(_venv(checkout, SYSTEM_PYTHON))
    assert result.returncode == 1
    assert f"cannot enter {checkout} (" in result.stderr
    assert "venv's own path" in result.stderr and "where every user can reach it" in result.stderr
    assert "PYTHON=" not in result.stderr


@pytest.mark.skipif(not PYENV_PYTHONS, reason="no pyenv Python under /root")
def test_a_venv_on_pyenvs_python_under_root_names_root(public: Path) -> None:
    if _nobody_can_run(["test", "-x", "/root"]):
        pytest.skip("/root is open to other users here")
    result = _check(_venv(public, Path(PYENV_PYTHONS[-1])))
    assert result.returncode == 1
    assert "cannot enter /root (" in result.stderr and "way to its Python" in result.stderr
    assert "venv's own path" not in result.stderr


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system Python")
def test_a_venv_on_the_system_python_passes(public: Path) -> None:
    assert _check(_venv(public, SYSTEM_PYTHON)).returncode == 0


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system Python")
def test_install_makes_the_venv_from_a_public_python_when_python3_is_reached_privately(
    public: Path,
) -> None:
    """python3 found through a link in a private directory: the venv would link to that
    path (its base executable, not the file it resolves to), which users cannot run."""
    home = _private(public / "home")
    (home / "python3").symlink_to(SYSTEM_PYTHON)
    (public / "bin").mkdir()
    (public / "bin" / "python3").symlink_to(home / "python3")
    env = {**os.environ, "PATH": f"{public / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHON", None)
    chosen = subprocess.run(["bash", str(VENV_PYTHON)], env=env, capture_output=True, text=True)
    assert chosen.stdout.strip() == str(SYSTEM_PYTHON)
    (public / "bin" / "python3").unlink()
    (public / "bin" / "python3").symlink_to(SYSTEM_PYTHON)  # reached openly: kept
    chosen = subprocess.run(["bash", str(VENV_PYTHON)], env=env, capture_output=True, text=True)
    assert chosen.stdout.strip() == "python3"
