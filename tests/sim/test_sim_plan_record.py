"""hops's plans on a class-model-sized workload, held against a recorded run.

Planning-speed work (caches, fewer estimator calls, faster model building) must
not change a single decision. This replays a seeded workload on paper-512's
cluster scaled to 256 GPUs (32 nodes: every plan uses the class-level model) and
compares every job's first start, finish time and restart count, exactly, with
``tests/fixtures/plans/hops-256.json``, recorded before such work. A change meant
to alter plans re-records it (with the solver versions it was made with: another
HiGHS or numpy may break ties between equal plans otherwise, and the record is
then not a fair test, so it is skipped)::

    PYTHONPATH=. .venv/bin/python tests/sim/test_sim_plan_record.py
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from hopsd.plugins import get_policy
from hopsd.sim.cluster_file import parse_cluster
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.run import build_truth, preset_path
from hopsd.sim.workload import PRESETS, generate

RECORD = Path(__file__).resolve().parent.parent / "fixtures" / "plans" / "hops-256.json"
SEED = 3
JOBS = 90
RATE = 50.0


def _cluster_256() -> dict[str, Any]:
    """paper-512's cluster with every server group halved."""
    with preset_path("paper-512.toml").open("rb") as f:
        cluster: dict[str, Any] = tomllib.load(f)
    for group in cluster["node_groups"]:
        group["count"] //= 2
    return cluster


def _run() -> dict[str, list[float | int | None]]:
    truth = build_truth(parse_cluster(_cluster_256(), "256-gpu", seed=SEED))
    specs = generate(replace(PRESETS["paper-512"], n_jobs=JOBS, jobs_per_hour=RATE), truth, SEED)
    result = Engine(truth, specs, get_policy("hops"), EngineConfig(seed=SEED)).run()
    return {j.spec.job_id: [j.first_start, j.finish_time, j.restarts] for j in result.jobs}


def _solvers() -> dict[str, str]:
    return {name: version(name) for name in ("highspy", "numpy")}


def test_hops_plans_match_the_record() -> None:
    record = json.loads(RECORD.read_text())
    if record["solvers"] != _solvers():
        pytest.skip(f"recorded with {record['solvers']}, this is {_solvers()}")
    recorded = record["jobs"]
    got = _run()
    assert len(got) == JOBS
    differ = [k for k in recorded if recorded[k] != got.get(k)]
    assert not differ, f"{len(differ)} jobs differ, first {differ[0]}: {got[differ[0]]}"
    assert got == recorded


if __name__ == "__main__":
    made = {"solvers": _solvers(), "jobs": _run()}
    RECORD.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
