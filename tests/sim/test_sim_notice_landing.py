"""A start waiting for GPUs under notice lands early only on GPUs no in-flight work holds.

Under a notice's grace a start onto GPUs a noticed job still holds is released at
once and starts once they are free. When a job ends during a grace, GPUs come
free before the grace is over, and a waiting start may take them then; but not
GPUs some other in-flight work holds or will take (the core's reserve stage
says which, :func:`hopsd.core.reserve.landing`). Two scenarios, one k80 node of 4
GPUs each (and an a100 node in the second), scripted plans, a grace of 25 s:

* *freed twice over*: P and Q (2 GPUs each) are preempted at t=10 for A (2), B
  and C (1 each), all three waiting for P's and Q's GPUs. P ends at t=20; its two
  GPUs are promised to three starts while Q still holds two. Judging each start
  alone against the free GPUs would start all three (6 of 4 handed out); they
  all land at t=35, when Q is requeued.
* *a move's target*: M is moved at t=10 from the a100s onto the k80 node's free
  GPU, under notice until t=35. At t=20 J (1 GPU) is preempted there for W.
  The node's free GPU is M's reserved target: W waits for J's requeue (t=45),
  and M lands at t=35 on its GPU, never handed to W before.

Either way, no node ever holds more GPUs than it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sim_helpers import ScriptedPolicy, notice_config

from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Node, Plan
from hopsd.sim.engine import Engine
from hopsd.sim.state import JobState
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec

ROUND = 10.0
GRACE = 25.0
MODEL = ModelSpec("m", 1e3, 10, {"k80": 10.0, "a100": 80.0})
BIG = 1e9  # samples: no job ends unless the scenario says so


def k80(gpus: int) -> Configuration:
    return Configuration("k80", (("k1", gpus),))


class Checked(Engine):
    """The engine, noting the most GPUs any node held at once (after each booking)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.peak: dict[str, int] = {}
        super().__init__(*args, **kwargs)

    def _occupy(self, job: JobState, cfg: Configuration, *, real: bool = True) -> None:
        super()._occupy(job, cfg, real=real)
        self.peak = {n: max(self.peak.get(n, 0), used) for n, used in self.used.items()}


def run(cluster: Cluster, jobs: Sequence[JobSpec], plans: dict[float, Plan]) -> Checked:
    truth = GroundTruth(cluster, {"m": MODEL})
    engine = Checked(truth, jobs, ScriptedPolicy(plans), notice_config(GRACE, 6, ROUND))
    engine.run()
    return engine


def test_gpus_freed_during_a_grace_are_not_given_to_every_start_waiting_for_them() -> None:
    cluster = Cluster.build([GpuType("k80")], [Node("k1", "k80", 4)])
    rate = GroundTruth(cluster, {"m": MODEL}).throughput("m", k80(2), 10)
    jobs = [
        JobSpec("P", 0.0, (2,), 20.0 * rate, "m"),  # ends at t=20, inside its grace
        JobSpec("Q", 0.0, (2,), BIG, "m"),
        *(JobSpec(j, 5.0, (n,), BIG, "m") for j, n in (("A", 2), ("B", 1), ("C", 1))),
    ]
    two = Configuration("k80", (("k1", 2),))
    one = Configuration("k80", (("k1", 1),))
    plans = {
        0.0: Plan(start=(Assignment("P", two), Assignment("Q", two))),
        ROUND: Plan(
            start=(Assignment("A", two), Assignment("B", one), Assignment("C", one)),
            preempt=("P", "Q"),
        ),
    }
    engine = run(cluster, jobs, plans)
    assert engine.by_id["P"].finish_time == pytest.approx(20.0)
    assert engine.peak["k1"] <= 4
    # P's GPUs came free at t=20 but Q held the rest of what the three were promised
    for job_id in "ABC":
        assert engine.by_id[job_id].first_start == pytest.approx(ROUND + GRACE)
    assert engine.used["k1"] == 4


def test_a_waiting_start_never_takes_the_target_reserved_for_a_move() -> None:
    cluster = Cluster.build(
        [GpuType("k80"), GpuType("a100", speed=3.0)],
        [Node("k1", "k80", 4), Node("a1", "a100", 4)],
    )
    jobs = [
        JobSpec("M", 0.0, (1,), BIG, "m"),
        JobSpec("J", 0.0, (1,), BIG, "m"),
        JobSpec("K", 0.0, (2,), BIG, "m"),
        JobSpec("W", 15.0, (1,), BIG, "m"),
    ]
    plans = {
        0.0: Plan(
            start=(
                Assignment("M", Configuration("a100", (("a1", 1),))),
                Assignment("J", k80(1)),
                Assignment("K", k80(2)),
            )
        ),
        ROUND: Plan(move=(Assignment("M", k80(1)),)),  # onto k1's free GPU, under notice
        2 * ROUND: Plan(start=(Assignment("W", k80(1)),), preempt=("J",)),
    }
    engine = run(cluster, jobs, plans)
    assert engine.peak["k1"] <= 4
    moved = [(at, what) for at, job, what in engine.events if job == "M"]
    assert moved[1:] == [(10.0, "notice"), (35.0, "requeue"), (35.0, "release")]
    assert engine.by_id["M"].config == k80(1)
    # W waited for J's GPU, not for the one M's move had reserved
    assert engine.by_id["W"].first_start == pytest.approx(2 * ROUND + GRACE)
    assert engine.by_id["J"].status == "queued" and engine.used["k1"] == 4
