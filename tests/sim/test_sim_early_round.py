"""The simulator wakes for the policy's early round and counts its clock from it."""

from __future__ import annotations

from hopsd.core.model import Cluster, GpuType, Node
from hopsd.core.policies.hops import HopsSettings
from hopsd.core.settings import Settings
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec

CLUSTER = Cluster.build([GpuType("k80")], [Node("n1", "k80", 4)])
ROUND = 300.0


def run(bound: float) -> Engine:
    """A long elastic job takes the whole node at t=0; a short one arrives at t=20."""
    truth = GroundTruth(CLUSTER, {"m": ModelSpec("m", 1e3, 10, {"k80": 10.0})})
    jobs = [
        JobSpec("long", 0.0, (1, 2, 4), 2e5, "m"),
        JobSpec("short", 20.0, (1,), 3e3, "m"),
    ]
    policy = get_policy("hops", HopsSettings(early_round_lr=bound, early_round_gap_s=0.0))
    config = EngineConfig(
        settings=Settings(round_length_s=ROUND, restart_penalty_s=0.0, time_limit_s=5.0),
        profile_s=0.0,
    )
    engine = Engine(truth, jobs, policy, config)
    engine.run()
    return engine


def _short(engine: Engine) -> tuple[float, float]:
    job = next(j for j in engine.jobs if j.spec.job_id == "short")
    assert job.first_start is not None
    return job.first_start, job.wait_time


def test_on_the_clock_alone_the_short_job_waits_for_the_next_round() -> None:
    start, _ = _short(run(0.0))
    assert start >= ROUND


def test_an_early_round_starts_the_short_job_when_its_lr_passes_the_bound() -> None:
    engine = run(0.25)
    start, wait = _short(engine)
    assert 20.0 < start < ROUND
    assert any(abs(r.start - start) < 1e-6 for r in engine.rounds)  # a round began there
    # the next round is a round length after the early one, not at the old boundary
    later = [r.start for r in engine.rounds if r.start > start]
    assert later and abs(later[0] - (start + ROUND)) < 1e-6
    assert wait < ROUND - 20.0
