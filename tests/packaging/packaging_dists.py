"""Building and installing the distributions, for the packaging tests.

The distributions are built once per test run from a copy of this checkout.

The copy is a git repository of its own (one commit of whatever the working
tree holds, tagged ``v0.9.7``), so the version setuptools-scm derives from the
tag is known: a build that ignored the tag, or a package that reports another
version, fails. It does not copy the checkout's ``.git``: in a linked worktree
that is a file naming the shared repository, and the copy's commit and tag
would land there, on the worktree's branch.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TAG_VERSION = "0.9.7"
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "var", "out",
    "site", "_version.py",
)  # fmt: skip
# What setuptools prints when data files or sub-packages are not declared.
PACKAGING_WARNINGS = ("SetuptoolsDeprecationWarning", "is absent from the `packages`", "as data is")
GIT = ["git", "-c", "user.name=hops", "-c", "user.email=hops@localhost",
       "-c", "core.hooksPath=/dev/null"]  # fmt: skip


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, *, err: bool = True) -> str:
    """Run ``cmd``, insist on success, return its stdout (and stderr unless ``err`` is False)."""
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + (done.stderr if err else "")


@dataclass(frozen=True)
class Dists:
    """The wheel and sdist of hops-scheduler and of hops-probe."""

    scheduler_wheel: Path
    scheduler_sdist: Path
    probe_wheel: Path
    probe_sdist: Path
    source: Path  # the tagged copy they were built from

    @property
    def folder(self) -> Path:
        return self.scheduler_wheel.parent


def build(project: Path, out: Path) -> None:
    """``python -m build`` of both kinds into ``out``, without the warnings of a bad layout."""
    log = run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation",
         "--outdir", str(out), str(project)],
        project,
    )  # fmt: skip
    for warning in PACKAGING_WARNINGS:
        assert warning not in log, log


def make_venv(root: Path, python: str = sys.executable) -> Path:
    """A fresh virtual environment with pip (the system's, not this project's)."""
    run([python, "-m", "venv", str(root)], root.parent)
    return root / "bin" / "python"


def pip_install(python: Path, *args: str) -> str:
    """``pip install`` into ``python``'s venv, quietly, at the versions CI tests."""
    return run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "-c", str(REPO / "constraints" / "ci.txt"), *args],
        python.parent,
    )  # fmt: skip
