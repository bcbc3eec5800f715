"""The score stage: LR and rho of the planned jobs, at believed sizes, one job's failure its own.

Numbers as in test_sizeclaim: one v100 (speed 2) runs the job at 10 samples/s;
a claim of 64 samples contradicted by 3200 samples of work is believed to be
6000 samples, so a job that waited 30 s has LR 30/600, not the lie's 30/6.4.
"""

from __future__ import annotations

import dataclasses

import pytest

from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.scoring import score_jobs
from hopsd.core.settings import Settings
from hopsd.core.snapshot import InFlight, Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step, scored
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy

CLUSTER = Cluster.build([GpuType("v100", speed=2.0)], [Node("v1", "v100", 4)])
ON_V1 = Configuration("v100", (("v1", 1),))
SETTINGS = Settings(round_length_s=100.0, time_limit_s=5.0, restart_penalty_s=0.0)


def store(*job_ids: str) -> InMemoryThroughputStore:
    found = InMemoryThroughputStore()
    for job_id in job_ids:
        found.set_type_aggregated(job_id, "v100", 1, 10.0)
    return found


LIAR = Job(
    "liar", (1,), 64.0, current=ON_V1, time_limit_s=600.0, run_elapsed_s=320.0,
    attained_service=640.0, wait_time=30.0,
)  # fmt: skip


def test_the_step_scores_a_doubted_job_at_its_believed_size() -> None:
    snapshot = Snapshot(0.0, CLUSTER, (LIAR,), store=store("liar"))
    options = StepOptions(score=True)
    result = schedule_step(snapshot, RoundClock(100.0), get_policy("hops"), SETTINGS, options)
    assert result.scores is not None
    assert result.scores.latency_ratio == {"liar": pytest.approx(30.0 / 600.0)}
    assert "liar" in result.scores.ftf_rho and result.scores.failed == ()
    assert scored(snapshot, SETTINGS, options) == result.scores  # the same stages, unplanned
    plain = schedule_step(snapshot, RoundClock(100.0), get_policy("hops"), SETTINGS)
    assert plain.scores is None  # only callers that record them ask


def test_jobs_in_flight_are_not_scored_and_do_not_share_the_cluster() -> None:
    other = dataclasses.replace(LIAR, id="other", size_doubt="")
    both = Snapshot(0.0, CLUSTER, (LIAR, other), store=store("liar", "other"))
    alone = dataclasses.replace(both, jobs=(other,))
    flying = dataclasses.replace(both, in_flight=(InFlight("liar", runs_on=True),))
    options = StepOptions(score=True)
    got = scored(flying, SETTINGS, options)
    assert set(got.latency_ratio) == {"other"}
    assert got == scored(alone, SETTINGS, options)  # rho's equal share among one job


class Unreadable(InMemoryThroughputStore):
    """A store whose data of one job cannot be read (a corrupt measurement, say)."""

    def profile(self, job_id: str, gpu_type: str) -> None:  # type: ignore[override]
        if job_id == "broken":
            raise RuntimeError("unreadable profile")
        return super().profile(job_id, gpu_type)  # type: ignore[return-value]


def test_a_job_that_cannot_be_scored_costs_only_its_own_figures() -> None:
    broken = Job("broken", (1,), 100.0, wait_time=5.0)
    found = Unreadable()
    found.set_type_aggregated("liar", "v100", 1, 10.0)
    snapshot = Snapshot(0.0, CLUSTER, (LIAR, broken), store=found)
    got = score_jobs(snapshot, SETTINGS)
    assert set(got.latency_ratio) == {"liar"} == set(got.ftf_rho)
    assert [job_id for job_id, _ in got.failed] == ["broken", "broken"]


def test_ended_jobs_get_a_final_lr_only() -> None:
    snapshot = Snapshot(0.0, CLUSTER, (), store=store("done"))
    done = Job("done", (1,), 100.0, wait_time=5.0)  # age 100 / 10 = 10 s
    got = score_jobs(snapshot, SETTINGS, ended=[done])
    assert got.latency_ratio == {"done": pytest.approx(0.5)} and got.ftf_rho == {}
