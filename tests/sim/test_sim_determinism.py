"""A simulation is a function of its inputs and seed: separate processes agree job by job,
and no plan depends on how fast the machine solved it.

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
from sim_helpers import tiny_jobs, tiny_truth

from hopsd.core.settings import Settings
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig

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


def _finishes(policy: str, time_limit_s: float, by_work: bool) -> tuple[tuple[str, float], ...]:
    config = EngineConfig(settings=Settings(time_limit_s=time_limit_s), solver_by_work=by_work)
    result = Engine(tiny_truth(), tiny_jobs(), get_policy(policy), config).run()
    return tuple((j.spec.job_id, j.finish_time or 0.0) for j in result.jobs)


@pytest.mark.parametrize("policy", ["hops", "sia"])
def test_plans_do_not_depend_on_the_solver_clock(policy: str) -> None:
    """A solve cut short by seconds would change with the machine's speed and load; the
    simulator bounds the solver by work instead, so even an absurd time limit is moot."""
    assert _finishes(policy, 1e-9, by_work=True) == _finishes(policy, 10.0, by_work=True)


def test_a_clock_limited_solver_would_change_the_plans() -> None:
    """The same absurd limit with the solver on the clock: Sia's plans change."""
    assert _finishes("sia", 1e-9, by_work=False) != _finishes("sia", 10.0, by_work=False)
