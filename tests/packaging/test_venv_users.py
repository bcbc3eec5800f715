"""A venv users cannot run hops from is named at install time, with the fix.

Live, as the unprivileged ``nobody``: a venv whose Python sits under a private
directory (as pyenv's under /root does) gives every user "Permission denied"
before hops can say a word, so ``scripts/install.sh`` runs
``scripts/venv_users.sh``, which tries the venv's Python as that user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "scripts" / "venv_users.sh"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="trying as another user needs root")


def _venv(where: Path, python: Path) -> Path:
    (where / "venv" / "bin").mkdir(parents=True)
    (where / "venv" / "bin" / "python").symlink_to(python)
    return where / "venv"


def _check(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CHECK), str(venv)], capture_output=True, text=True)


def test_a_venv_on_a_private_python_is_refused_with_the_fix(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(sys.executable)
    result = _check(_venv(tmp_path, private / "python3"))
    assert result.returncode == 1
    assert "not usable by other users" in result.stderr
    assert "PYTHON=/usr/bin/python3" in result.stderr


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system Python")
def test_a_venv_on_the_system_python_passes() -> None:
    where = Path(tempfile.mkdtemp(prefix="hops-venv-"))  # pytest's own tmp is root's only
    try:
        where.chmod(0o755)
        assert _check(_venv(where, Path("/usr/bin/python3"))).returncode == 0
    finally:
        shutil.rmtree(where)
