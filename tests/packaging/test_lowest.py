"""The lower bounds in pyproject.toml are tested ones: hops at every dependency's lowest
allowed version (constraints/lowest.txt, written by scripts/pin_constraints.py) passes
the suites of the core, the simulator, the ledger (on PostgreSQL too: psycopg at its
lowest), the views, the CLI, the Slurm port (the REST backend: httpx at its lowest) and
the submitit plugin (submitit at its lowest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from packaging_dists import REPO, Dists, make_venv, run

sys.path.insert(0, str(REPO / "scripts"))
from pin_constraints import lower_bounds

LOWEST = REPO / "constraints" / "lowest.txt"
SUITES = (
    "tests/core", "tests/sim", "tests/ledger", "tests/views", "tests/cli", "tests/config",
    "tests/slurm", "tests/submitit",
)  # fmt: skip


def _pins(path: Path) -> dict[str, str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))


def test_the_lowest_constraints_are_the_lower_bounds_of_pyproject() -> None:
    assert _pins(LOWEST) == dict(pin.split("==", 1) for pin in lower_bounds()), (
        "run scripts/pin_constraints.py"
    )


@pytest.mark.slow
def test_hops_at_its_lowest_dependencies_passes_the_pure_suites(
    dists: Dists, tmp_path: Path
) -> None:
    python = make_venv(tmp_path / "env")
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--pre",
         "-c", str(LOWEST), "--find-links", str(dists.folder), f"{dists.scheduler_wheel}[all]",
         "pytest>=8,<10", "hypothesis>=6.100,<7"], tmp_path)  # fmt: skip
    versions = run([str(python), "-m", "pip", "list", "--format=freeze"], tmp_path, err=False)
    installed = dict(line.split("==", 1) for line in versions.splitlines() if "==" in line)
    installed = {canonicalize_name(name): version for name, version in installed.items()}
    for name, low in _pins(LOWEST).items():
        got = installed[canonicalize_name(name)]
        assert Version(got) == Version(low), (name, got, low)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "PYTHONPATH")}
    done = subprocess.run(
        [str(python), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
         "not slurm and not docker", "-o", "addopts=",
         *(str(REPO / suite) for suite in SUITES)],
        # not the checkout: a child Python there would import its hopsd, not the wheel's
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
