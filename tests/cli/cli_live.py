"""What the CLI's live tests need: the Slurm test cluster, root, and directories of a given mode."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def need_cluster_and_root(what: str) -> None:
    """Skips the test unless the test cluster is up and this process may do ``what`` (root)."""
    if not os.environ.get("SLURM_CONF"):
        pytest.skip("SLURM_CONF is not set: start the test cluster with docker/cluster.sh up")
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root")


@contextmanager
def temp_dir(prefix: str, mode: int) -> Iterator[Path]:
    """A fresh directory of ``mode`` (pytest's own tmp is root-only), removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix=prefix))
    where.chmod(mode)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)
