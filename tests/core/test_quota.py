"""GPU quotas: no plan takes a user, account or QOS past the limit Slurm would enforce."""

from __future__ import annotations

import pytest
from two_types import CLUSTER, SETTINGS, cfg

from hopsd.core.model import Assignment, Job, Plan
from hopsd.core.quota import (
    Quota,
    QuotaPolicy,
    group_keys,
    held_back,
    offered,
    with_quota,
    within,
)
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, schedule_step
from hopsd.plugins import get_policy


def job(job_id: str, demands: tuple[int, ...], account: str, **kw: object) -> Job:
    return Job(job_id, demands, 1e6, user="u", account=account, **kw)  # type: ignore[arg-type]


def quota_of(jobs: list[Job], **kw: object) -> Quota:
    groups = {j.id: group_keys(j.user, j.account, "normal") for j in jobs}
    return Quota(groups=groups, **kw)  # type: ignore[arg-type]


def gpus_of(plan: Plan, jobs: list[Job], account: str) -> int:
    mine = {j.id for j in jobs if j.account == account}
    return sum(c.total_gpus for j, c in plan.placements().items() if j in mine)


@pytest.mark.parametrize("name", ["hops", "fifo", "gavel", "sia"])
def test_an_accounts_jobs_are_never_planned_past_its_limit(name: str) -> None:
    jobs = [job(f"a{i}", (1, 2, 4), "lim") for i in range(4)] + [job("b0", (1, 2), "free")]
    quota = quota_of(jobs, limits={"account:lim": 3})
    step = schedule_step(
        Snapshot(0.0, CLUSTER, tuple(jobs)), RoundClock(100.0), with_quota(get_policy(name), quota),
        SETTINGS,
    )  # fmt: skip
    assert 0 < gpus_of(step.plan, jobs, "lim") <= 3
    unlimited = schedule_step(
        Snapshot(0.0, CLUSTER, tuple(jobs)), RoundClock(100.0), get_policy(name), SETTINGS
    )
    assert gpus_of(unlimited.plan, jobs, "lim") > 3  # the limit is what held them back


def test_gpus_held_outside_the_plan_count_against_the_limit() -> None:
    jobs = [job("a0", (1, 2, 4), "lim"), job("a1", (2,), "lim")]
    quota = quota_of(jobs, limits={"qos-user:normal/u": 4}, foreign={"qos-user:normal/u": 3})
    seen = offered(Snapshot(0.0, CLUSTER, tuple(jobs)), quota, fragment=False)
    assert [(j.id, j.demands) for j in seen.jobs] == [("a0", (1,))]


def test_a_per_job_cap_cuts_demands() -> None:
    jobs = [job("a0", (1, 2, 4), "lim")]
    quota = quota_of(jobs, job_caps={"account:lim": 2})
    assert offered(Snapshot(0.0, CLUSTER, tuple(jobs)), quota, fragment=True).jobs[0].demands == (
        1,
        2,
    )


def test_in_a_fragment_running_jobs_count_against_the_limit() -> None:
    jobs = [job("r", (2,), "lim", current=cfg("k1", 2)), job("q", (1, 2), "lim")]
    quota = quota_of(jobs, limits={"account:lim": 3})
    snap = Snapshot(0.0, CLUSTER, tuple(jobs))
    assert offered(snap, quota, fragment=True).jobs[1].demands == (1,)
    assert offered(snap, quota, fragment=False).jobs[1].demands == (1, 2)  # r may be preempted


def test_starts_that_together_pass_the_limit_are_dropped_in_plan_order() -> None:
    jobs = [job("a0", (2,), "lim"), job("a1", (2,), "lim"), job("b0", (2,), "free")]
    starts = [("a0", "k1"), ("a1", "a1"), ("b0", "k1")]
    plan = Plan(start=tuple(Assignment(j, cfg(node, 2)) for j, node in starts))
    kept = within(plan, quota_of(jobs, limits={"account:lim": 3}))
    assert [a.job_id for a in kept.start] == ["a0", "b0"]


def test_no_limit_leaves_the_policy_as_it_is() -> None:
    policy = get_policy("fifo")
    assert with_quota(policy, Quota()) is policy
    assert isinstance(with_quota(policy, Quota(limits={"account:x": 1})), QuotaPolicy)


def test_a_job_is_kept_off_types_whose_partition_would_not_start_it() -> None:
    long = job("long", (1,), "x", time_limit_s=600.0)
    short = job("short", (1,), "x", time_limit_s=60.0)
    moving = job("moving", (1,), "x", time_limit_s=600.0, current=cfg("a1", 1))
    quota = Quota(max_time_s={"k80": 300.0, "a100": 300.0})
    seen = {j.id: j for j in offered(
        Snapshot(0.0, CLUSTER, (long, short, moving)), quota, fragment=False).jobs}  # fmt: skip
    assert seen["long"].demands_on("k80") == () and seen["long"].demands_on("a100") == ()
    assert seen["short"].demands_on("k80") == (1,)
    # a running job keeps its own type (it runs there) but is moved nowhere too short
    assert seen["moving"].demands_on("a100") == (1,) and seen["moving"].demands_on("k80") == ()
    step = schedule_step(
        Snapshot(0.0, CLUSTER, (long, short)), RoundClock(100.0),
        with_quota(get_policy("hops"), Quota(max_time_s={"a100": 300.0})), SETTINGS,
    )  # fmt: skip
    assert step.plan.placements()["long"].gpu_type == "k80"


def test_a_running_job_is_never_grown_past_its_groups_limit() -> None:
    running = job("r", (1, 2, 4), "lim", current=cfg("k1", 1))
    quota = quota_of([running], limits={"account:lim": 1})
    seen = offered(Snapshot(0.0, CLUSTER, (running,)), quota, fragment=False).jobs[0]
    assert seen.demands == (1,)
    step = schedule_step(
        Snapshot(0.0, CLUSTER, (running,)), RoundClock(100.0),
        with_quota(get_policy("hops"), quota), SETTINGS,
    )  # fmt: skip
    assert step.plan.placements()["r"].total_gpus == 1
    over = quota_of([running], limits={"account:lim": 0})  # the limit fell below its size
    assert offered(Snapshot(0.0, CLUSTER, (running,)), over, fragment=False).jobs[0].demands == (1,)


def test_a_later_start_that_still_fits_is_kept() -> None:
    jobs = [job("big", (2,), "lim"), job("bigger", (4,), "lim"), job("small", (1,), "lim")]
    starts = [("big", "k1", 2), ("bigger", "a1", 4), ("small", "k1", 1)]
    plan = Plan(start=tuple(Assignment(j, cfg(node, g)) for j, node, g in starts))
    kept = within(plan, quota_of(jobs, limits={"account:lim": 3}))
    assert [a.job_id for a in kept.start] == ["big", "small"]


def test_a_job_the_quota_keeps_out_is_told_why() -> None:
    jobs = [job("over", (2,), "lim"), job("fits", (1,), "lim"), job("long", (1,), "x",
            time_limit_s=900.0)]  # fmt: skip
    quota = quota_of(jobs, limits={"account:lim": 1}, max_time_s={"k80": 60.0, "a100": 60.0})
    why = held_back(Snapshot(0.0, CLUSTER, tuple(jobs)), quota, Plan())
    assert why == {
        "over": "waiting: Slurm's GPU limit of account:lim leaves 1 GPUs, needs at least 2",
        "long": "waiting: its time limit is above the MaxTime of every partition",
    }

    # a job that fits alone waits because the plan gave its account's GPUs to another
    plan = Plan(start=(Assignment("fits", cfg("k1", 1)),))
    also = [job("also", (1,), "lim"), jobs[1]]
    why = held_back(
        Snapshot(0.0, CLUSTER, tuple(also)), quota_of(also, limits={"account:lim": 1}), plan
    )
    assert why == {
        "also": "waiting: Slurm's GPU limit of account:lim leaves 0 GPUs, needs at least 1"
    }
