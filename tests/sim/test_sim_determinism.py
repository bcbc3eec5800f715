"""A simulation is a function of its inputs and seed: separate processes agree job by job.

Python salts the hash of every string per process (``PYTHONHASHSEED``), so a
set of job or node names, or a dict keyed by object identity, iterates in a
different order in each process. If any decision of the engine or of a policy
followed such an order, two runs of the same seed would part ways at the
first tie it broke; these tests run the same simulation in processes with
different hash salts and compare every job's record.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

POLICIES = ("hops", "sia", "gavel", "fifo")

_RUN = """
import contextlib, sys
from hopsd.sim.run import simulate
with contextlib.redirect_stdout(sys.stderr):
    simulate({preset!r}, policies={policies!r}, seed={seed}, out_dir={out!r})
"""


def _run(tmp: Path, hash_seed: str, preset: str, seed: int) -> Path:
    """Simulate in a fresh interpreter with the given hash salt; returns its output dir."""
    out = tmp / f"hash-{hash_seed}"
    code = _RUN.format(preset=preset, policies=list(POLICIES), seed=seed, out=str(out))
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.parametrize("seed", [2])
def test_paper64_identical_across_hash_salts(tmp_path: Path, seed: int) -> None:
    first = _run(tmp_path, "0", "paper-64", seed)
    second = _run(tmp_path, "4242", "paper-64", seed)
    for policy in POLICIES:
        a = (first / f"jobs_{policy}.csv").read_text()
        b = (second / f"jobs_{policy}.csv").read_text()
        assert a.count("\n") > 10, f"{policy}: too few job records to compare"
        differ = [(x, y) for x, y in zip(a.splitlines(), b.splitlines(), strict=True) if x != y]
        assert not differ, f"{policy}: first differing job record:\n{differ[0][0]}\n{differ[0][1]}"
