"""Trust, then verify: a claimed size contradicted by run time or progress is not believed.

Hand-worked numbers: one v100 node (speed 2.0) of 4 GPUs; the job runs at 10
samples/s on one GPU, so a speed-scaled GPU-second stands for 10 / (1 * 2) = 5
samples. With the default rule (2x, 300 s) a claim of 64 samples holds until
the work done passes 2 * 64 + 300 * 10 = 3128 samples, i.e. an attained
service of 625.6.
"""

from __future__ import annotations

import dataclasses

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.priorities import PriorityContext, latency_ratio
from hopsd.core.settings import Settings
from hopsd.core.sizeclaim import DOUBT, SizeRule, check_sizes, judge, progress_doubt
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy

CLUSTER = Cluster.build([GpuType("v100", speed=2.0)], [Node("v1", "v100", 4)])
ON_V1 = Configuration("v100", (("v1", 1),))
SETTINGS = Settings(round_length_s=100.0, time_limit_s=5.0, restart_penalty_s=0.0)
RULE = SizeRule()


def store(*job_ids: str) -> InMemoryThroughputStore:
    found = InMemoryThroughputStore()
    for job_id in job_ids:
        found.set_type_aggregated(job_id, "v100", 1, 10.0)
    return found


def estimator(*job_ids: str) -> Estimator:
    return Estimator(CLUSTER, store(*job_ids), SETTINGS)


def liar(**kw: object) -> Job:
    base = Job("liar", (1,), 64.0, current=ON_V1, time_limit_s=600.0, run_elapsed_s=320.0)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_a_claim_holds_until_the_run_passes_twice_its_need_plus_the_slack() -> None:
    assert judge(liar(attained_service=620.0), estimator("liar"), RULE) is None  # 3100 <= 3128
    verdict = judge(liar(attained_service=640.0), estimator("liar"), RULE)  # 3200 > 3128
    assert verdict is not None and verdict.new
    assert verdict.reason == (
        f"{DOUBT}: ran about 320 s, more than 2x the 6 s its 64 samples need at the "
        "estimated 10 samples/s plus 300 s; sized from its time limit (600 s)"
    )
    # done 3200 + (600 - 320) s left * 10 samples/s
    assert verdict.believed == pytest.approx(6000.0)


def test_without_a_time_limit_the_job_is_taken_to_be_half_done() -> None:
    verdict = judge(liar(attained_service=640.0, time_limit_s=None), estimator("liar"), RULE)
    assert verdict is not None and verdict.believed == pytest.approx(6400.0)
    assert verdict.reason.endswith("sized as half done (no time limit)")


def test_progress_beyond_the_claim_is_not_believed_at_once() -> None:
    assert judge(liar(samples_done=67.0), estimator("liar"), RULE) is None  # within 5 %
    verdict = judge(liar(samples_done=70.0), estimator("liar"), RULE)
    assert verdict is not None
    assert "reported 70 samples done, more than the 64 claimed" in verdict.reason
    assert verdict.believed == pytest.approx(70.0 + 280 * 10.0)


def test_a_doubt_is_kept_while_the_job_waits_and_sized_from_a_whole_limit() -> None:
    said = f"{DOUBT}: from an earlier step"
    queued = liar(current=None, attained_service=640.0, run_elapsed_s=0.0, size_doubt=said)
    verdict = judge(queued, estimator("liar"), RULE)
    assert verdict is not None and not verdict.new and verdict.reason == said
    # eq. 9's rate at its mean demand: 1 / (1 / 10) = 10/s; done 640 * 5 = 3200; 600 s left
    assert verdict.believed == pytest.approx(3200.0 + 600 * 10.0)


def test_an_honest_job_and_a_switched_off_rule_change_nothing() -> None:
    honest = liar(total_samples=1e5, attained_service=640.0)
    jobs, verdicts = check_sizes([honest], estimator("liar"), RULE)
    assert verdicts == () and jobs == (honest,)
    jobs, verdicts = check_sizes([liar(attained_service=1e6)], estimator("liar"), SizeRule(0))
    assert verdicts == () and jobs[0].total_samples == 64.0


def test_after_the_rule_a_liar_ranks_no_higher_than_an_honest_job_of_its_size() -> None:
    est = estimator("liar", "honest")
    ctx = PriorityContext(0.0, CLUSTER, est)
    caught = liar(attained_service=640.0, wait_time=30.0)
    (believed,), _ = check_sizes([caught], est, RULE)
    # an honest job of the size the liar really is (it did 3200 and may run its limit out)
    honest = dataclasses.replace(caught, id="honest", total_samples=6000.0)
    assert latency_ratio(caught, ctx) == pytest.approx(30.0 / 6.4)  # the lie: LR 4.7
    assert latency_ratio(believed, ctx) == pytest.approx(latency_ratio(honest, ctx))
    assert latency_ratio(believed, ctx) == pytest.approx(30.0 / 600.0)


@pytest.mark.parametrize("kw", [{"factor": 0.5}, {"slack_s": -1.0}, {"progress_tolerance": 0.9}])
def test_bad_rules_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        SizeRule(**kw)


def step(running: Job, rule: SizeRule) -> tuple[list[str], list[str]]:
    """One full round: ``running`` holds the only GPU wanted; ``waiting`` queued 60 s."""
    one_gpu = Cluster.build([GpuType("v100", speed=2.0)], [Node("v1", "v100", 1)])
    waiting = Job("waiting", (1,), 3000.0, wait_time=60.0)
    snapshot = Snapshot(0.0, one_gpu, (running, waiting), store=store(running.id, "waiting"))
    options = StepOptions(sizes=rule)
    result = schedule_step(snapshot, RoundClock(100.0), get_policy("hops"), SETTINGS, options)
    placed = sorted(result.plan.placements())
    return placed, [v.job_id for v in result.doubted]


def test_in_the_step_a_lie_gains_nothing_over_an_honest_submission() -> None:
    caught = liar(attained_service=640.0, wait_time=30.0)
    honest = dataclasses.replace(caught, id="honest", total_samples=6000.0)
    # believed, the lie keeps the GPU against a job that waited twice as long
    assert step(caught, SizeRule(0))[0] == ["liar"]
    # an honest submission of the same job gives the GPU to the waiting job
    assert step(honest, RULE) == (["waiting"], [])
    # with the rule the liar is planned exactly as the honest job, and the step says why
    assert step(caught, RULE) == (["waiting"], ["liar"])


def test_progress_alone_is_judged_by_the_same_rule_where_hopsd_reads_it() -> None:
    said = progress_doubt(70.0, 64.0, RULE)
    assert said == f"{DOUBT}: reported 70 samples done, more than the 64 claimed"
    assert progress_doubt(67.0, 64.0, RULE) == "" and progress_doubt(70.0, 64.0, SizeRule(0)) == ""
