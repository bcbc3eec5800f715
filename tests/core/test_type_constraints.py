"""GPU-type constraints: admitted against the managed types, never broken by any policy."""

from __future__ import annotations

import pytest

from hopsd.core.admission import admit, allowed_types, type_limits
from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.profiling import OVER_ALL_TYPES, Profilee, ProfilingRules, profiling_step
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import PlanRuleError, RoundClock, schedule_step, validate_plan
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy

# a100 is by far the fastest: an unconstrained job would always go there
CLUSTER = Cluster.build(
    [GpuType("k80", speed=1.0), GpuType("v100", speed=2.0), GpuType("a100", speed=6.0)],
    [Node("k1", "k80", 8), Node("v1", "v100", 4), Node("a1", "a100", 4)],
)
MANAGED = {"k80": 8, "v100": 4, "a100": 4}
SETTINGS = Settings(round_length_s=100.0, time_limit_s=5.0)


def test_unknown_type_is_refused_naming_it() -> None:
    got = admit((1,), 1e6, 32, largest_config=8, max_demand=64, per_type=MANAGED, types=("h100",))
    assert not got.admitted
    assert got.refusal == "unknown GPU type h100 (managed types: a100, k80, v100)"
    typo = admit(
        (1,), 1e6, 32, largest_config=8, max_demand=64, per_type=MANAGED, exclude_types=("K80",)
    )
    assert "unknown GPU type K80" in typo.refusal


def test_constraints_that_leave_no_type_are_refused() -> None:
    got = admit(
        (1,),
        1e6,
        32,
        largest_config=8,
        max_demand=64,
        per_type=MANAGED,
        types=("a100",),
        exclude_types=("a100",),
    )
    assert got.refusal == "--types and --exclude-types leave no GPU type to run on"
    everything = allowed_types((), ("k80", "v100", "a100"), MANAGED)
    assert everything[0] == () and everything[1]


def test_only_allowed_types_count_towards_the_largest_configuration() -> None:
    # 8 GPUs fit on k80 only; excluding k80 leaves at most 4
    assert admit((8,), 1e6, 32, largest_config=8, max_demand=64, per_type=MANAGED).admitted
    got = admit(
        (4, 8), 1e6, 32, largest_config=8, max_demand=64, per_type=MANAGED, exclude_types=("k80",)
    )
    assert got.demands == (4,)
    refused = admit(
        (8,), 1e6, 32, largest_config=8, max_demand=64, per_type=MANAGED, exclude_types=("k80",)
    )
    assert "exceeds the largest configuration" in refused.refusal


def test_type_limits_ban_every_type_not_allowed() -> None:
    assert type_limits(("a100", "v100"), (), sorted(MANAGED)) == (("k80", 0),)
    assert type_limits((), ("k80",), sorted(MANAGED)) == (("k80", 0),)
    assert type_limits(("a100", "v100"), ("v100",), sorted(MANAGED)) == (("k80", 0), ("v100", 0))
    job = Job("j", (1, 2), 1e6).with_limits((("k80", 0),))
    assert job.demands_on("k80") == () and job.demands_on("a100") == (1, 2)
    # the tighter limit wins when a profile already caps the type
    capped = Job("j", (1, 2), 1e6, max_gpus=(("v100", 1),)).with_limits((("v100", 0),))
    assert capped.demands_on("v100") == ()


def test_plan_validation_rejects_a_job_on_a_type_it_excludes() -> None:
    job = Job("j", (1,), 1e6).with_limits((("a100", 0),))
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=(job,))
    bad = Plan(start=(Assignment("j", Configuration("a100", (("a1", 1),))),))
    with pytest.raises(PlanRuleError, match="GPU-type limits exclude"):
        validate_plan(snapshot, bad, fragment=False)
    validate_plan(
        snapshot,
        Plan(start=(Assignment("j", Configuration("v100", (("v1", 1),))),)),
        fragment=False,
    )
    running = Job("r", (1,), 1e6, current=Configuration("k80", (("k1", 1),))).with_limits(
        (("a100", 0),)
    )
    moved = Plan(move=(Assignment("r", Configuration("a100", (("a1", 1),))),))
    with pytest.raises(PlanRuleError, match="GPU-type limits exclude"):
        validate_plan(Snapshot(now=0.0, cluster=CLUSTER, jobs=(running,)), moved, fragment=False)


@pytest.mark.parametrize("policy", ["hops", "hops-lr", "sia", "gavel", "fifo"])
def test_no_policy_places_a_constrained_job_on_an_excluded_type(policy: str) -> None:
    """The fast a100s are free, yet jobs excluding them never land there, whatever the policy."""
    jobs = tuple(
        Job(f"x{i}", (1, 2, 4), 1e6, submit_time=float(i), user=f"u{i}").with_limits(
            type_limits((), ("a100",), sorted(MANAGED))
        )
        for i in range(3)
    ) + tuple(
        Job(f"o{i}", (1, 2), 1e6, submit_time=float(i), user="v").with_limits(
            type_limits(("k80",), (), sorted(MANAGED))
        )
        for i in range(2)
    )
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=jobs, store=InMemoryThroughputStore())
    result = schedule_step(snapshot, RoundClock(100.0), get_policy(policy), SETTINGS)
    placed = result.plan.placements()
    assert placed, "something must be started on the idle cluster"
    for job_id, config in placed.items():
        if job_id.startswith("x"):
            assert config.gpu_type != "a100", (job_id, config)
        else:
            assert config.gpu_type == "k80", (job_id, config)


def test_profiling_never_runs_a_job_on_a_type_it_excludes() -> None:
    job = Job("j", (1,), 1e6).with_limits(type_limits(("k80",), (), sorted(MANAGED)))
    rules = ProfilingRules(enabled=True, timeout_s=10.0)
    free = {"k1": 0, "v1": 4, "a1": 4}  # only excluded types have free GPUs
    got = profiling_step([Profilee("j", 0.0, 0.0, job=job)], CLUSTER, free, rules, 1.0)
    assert got.start == ()
    done = profiling_step(
        [Profilee("j", 0.0, 0.0, profiled=frozenset({"k80"}), runs=1, job=job)],
        CLUSTER,
        free,
        rules,
        1.0,
    )
    assert done.start == () and done.finish == (("j", OVER_ALL_TYPES),)
