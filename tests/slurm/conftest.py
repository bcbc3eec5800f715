"""Shared by the Slurm tests: the live daemon tests' helpers (tests/daemon) for the
job_submit.lua test, and where the cluster's slurmrestd listens for the REST backend."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

NO_SLURMRESTD = (
    "no slurmrestd on this cluster: docker/cluster.sh runs one (auth/jwt) only for "
    "Slurm 24.11 (HOPS_SLURM=24.11), whose `up` exports HOPS_SLURMRESTD_URL and "
    "HOPS_SLURMRESTD_TOKEN_FILE; 22.05's slurmrestd speaks other API versions (v0.0.36-38)"
)


@pytest.fixture
def slurmrestd() -> tuple[str, str]:
    """``(url, token file)`` of the test cluster's slurmrestd, or a skip with the reason."""
    url = os.environ.get("HOPS_SLURMRESTD_URL", "")
    token_file = os.environ.get("HOPS_SLURMRESTD_TOKEN_FILE", "")
    if not (url and token_file and Path(token_file).is_file()):
        print(f"REST backend skipped: {NO_SLURMRESTD}")
        pytest.skip(NO_SLURMRESTD)
    return url, token_file
