"""The simulator enacts a preemption as hopsd does under a checkpoint notice.

One k80 node of 4 GPUs; L runs on it from t=0 and the round at t=10 preempts
it for S. Without a grace L is requeued and S released at once. With a grace
of 25 s L is given notice, trains on, and is requeued at t=35; S, released at
t=10 as hopsd releases it, starts when L's GPUs are free; the rounds between
plan neither job and hand none of the node's GPUs to W, queued at t=15.
"""

from __future__ import annotations

import pytest
from sim_helpers import ScriptedPolicy, notice_config

from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Node, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.sim.engine import Engine
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec

CLUSTER = Cluster.build([GpuType("k80")], [Node("n1", "k80", 4)])
ALL = Configuration("k80", (("n1", 4),))
ROUND = 10.0


class Scripted(ScriptedPolicy):
    """The scripted plans (L is started by the fragment plan after its arrival at t=0, the
    round at t=0 having found no job), noting each round's jobs and n1's free GPUs."""

    def __init__(self, plans: dict[float, Plan]) -> None:
        super().__init__(plans)
        self.seen: dict[float, tuple[list[str], int]] = {}

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        self.seen[snapshot.now] = ([j.id for j in snapshot.jobs], snapshot.capacity_of("n1"))
        return super().plan(snapshot, settings)


def run(grace: float, l_samples: float = 1e7) -> tuple[Engine, Scripted]:
    policy = Scripted(
        {
            0.0: Plan(start=(Assignment("L", ALL),)),
            ROUND: Plan(start=(Assignment("S", ALL),), preempt=("L",)),
        }
    )
    truth = GroundTruth(CLUSTER, {"m": ModelSpec("m", 1e3, 10, {"k80": 10.0})})
    jobs = [
        JobSpec("L", 0.0, (4,), l_samples, "m"),
        JobSpec("S", 5.0, (4,), 1e7, "m"),
        JobSpec("W", 15.0, (1,), 1e7, "m"),  # would take any GPU left free
    ]
    engine = Engine(truth, jobs, policy, notice_config(grace, 5, ROUND))  # type: ignore[arg-type]
    engine.run()
    return engine, policy


def test_without_a_grace_a_preemption_is_instant() -> None:
    engine, _ = run(0.0)
    assert engine.events[:3] == [
        (0.0, "L", "release"),
        (10.0, "L", "requeue"),
        (10.0, "S", "release"),
    ]
    assert engine.preemptions == 1


def test_under_notice_the_job_trains_on_and_its_gpus_stay_its_own() -> None:
    engine, policy = run(25.0)
    assert engine.events[:4] == [
        (0.0, "L", "release"),
        (10.0, "S", "release"),  # released at once (hopsd's order); starts once L has left
        (10.0, "L", "notice"),
        (35.0, "L", "requeue"),
    ]
    # L and S in flight: neither planned, and none of the node's GPUs is W's to take
    assert policy.seen[20.0] == (["W"], 0) and policy.seen[30.0] == (["W"], 0)
    assert policy.seen[40.0][0] == ["L", "S", "W"]  # L queued again, S running
    assert engine.preemptions == 1 and engine.by_id["L"].restarts == 1
    assert engine.by_id["S"].first_start == pytest.approx(35.0)
    # L trained through the grace: 35 s on its GPUs, not 10
    rate = engine.truth.throughput("m", ALL, 10)
    assert engine.by_id["L"].samples_done == pytest.approx(35.0 * rate)


def test_a_job_that_ends_during_its_notice_is_never_requeued() -> None:
    rate = GroundTruth(CLUSTER, {"m": ModelSpec("m", 1e3, 10, {"k80": 10.0})}).throughput(
        "m", ALL, 10
    )
    engine, _ = run(25.0, l_samples=20.0 * rate)  # ends at t=20, inside the grace
    actions = [(at, job, what) for at, job, what in engine.events if job == "L"]
    assert actions == [(0.0, "L", "release"), (10.0, "L", "notice")]
    assert engine.by_id["S"].first_start == pytest.approx(20.0)  # its GPUs came free then
    assert engine.preemptions == 0
