"""Share factors: ``(prior + bias) * share_factor`` orders jobs and weights the ILP."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.gains import prior_weights
from hopsd.core.model import Cluster, GpuType, Job, Node
from hopsd.core.priorities import PriorityContext, get_priority, order_jobs, share_keys
from hopsd.core.rounds import PlannerOptions, RoundPlanner, plan_round
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore

# One node of 4 GPUs: two jobs that each need all 4 cannot both run.
CLUSTER = Cluster.build([GpuType("t")], [Node("n1", "t", 4)])
LR = Settings(priority="lr", lam=1.0, mip_gap=0.0, time_limit_s=10.0)
LAS = replace(LR, priority="las")


def store_for(*job_ids: str) -> InMemoryThroughputStore:
    store = InMemoryThroughputStore()
    for job_id in job_ids:
        store.set_type_aggregated(job_id, "t", 1, 10.0)
        store.set_type_aggregated(job_id, "t", 4, 10.0)
    return store


def twins(factor_a: float = 1.0, factor_b: float = 1.0, **kw: float) -> tuple[Job, Job]:
    """Two identical 4-GPU jobs; ``a`` was submitted first, so it wins every tie."""
    a = Job("a", (4,), 1e5, submit_time=0.0, share_factor=factor_a, **kw)  # type: ignore[arg-type]
    b = Job("b", (4,), 1e5, submit_time=1.0, share_factor=factor_b, **kw)  # type: ignore[arg-type]
    return a, b


def snapshot(*jobs: Job) -> Snapshot:
    return Snapshot(now=100.0, cluster=CLUSTER, jobs=jobs, store=store_for(*(j.id for j in jobs)))


def weights(snap: Snapshot, settings: Settings) -> dict[str, float]:
    planner = RoundPlanner(snap, settings, PlannerOptions())
    return {m.job.id: m.weight for m in planner.members(list(planner.order))}


def started(snap: Snapshot, settings: Settings) -> list[str]:
    return [a.job_id for a in plan_round(snap, settings).start]


# -- the key itself --------------------------------------------------------------------


def test_share_keys_by_hand() -> None:
    # all priorities > 0: no bias, the factor multiplies the priority
    assert share_keys([2.0, 1.0], [1.0, 2.0]) == pytest.approx([2.0, 2.0])
    # LAS -10 and -30: bias 30.01, biased 20.01 and 0.01, then times the factors
    assert share_keys([-10.0, -30.0], [1.0, 1.0]) == pytest.approx([20.01, 0.01])
    assert share_keys([-10.0, -30.0], [1.0, 3000.0]) == pytest.approx([20.01, 30.0])
    # a zero priority also gets the bias (eq. 11 adds it unless all are > 0)
    assert share_keys([0.0, 1.0], [2.0, 1.0]) == pytest.approx([0.02, 1.01])


def test_share_keys_refuse_bad_factors() -> None:
    with pytest.raises(InvalidInputError):
        share_keys([1.0], [0.0])
    with pytest.raises(InvalidInputError):
        share_keys([1.0, 2.0], [1.0])


@pytest.mark.parametrize("factor", [0.0, -1.0, math.nan, math.inf])
def test_job_refuses_a_share_factor_that_is_not_positive_and_finite(factor: float) -> None:
    with pytest.raises(InvalidInputError, match="share_factor"):
        Job("j", (1,), 10.0, share_factor=factor)


# -- latency ratio: equal priorities, factors 2 vs 1 -----------------------------------


def test_equal_lr_priorities_tie_goes_to_the_earlier_job_without_factors() -> None:
    snap = snapshot(*twins(wait_time=50.0))
    assert weights(snap, LR) == {"a": 1.0, "b": 1.0}
    assert started(snap, LR) == ["a"]


def test_factor_two_flips_the_order_and_doubles_the_weight() -> None:
    a, b = twins(factor_b=2.0, wait_time=50.0)
    snap = snapshot(a, b)
    # keys LR and 2 LR: b first; weights (LR / 2LR) ** 1 = 0.5 and 1
    assert weights(snap, LR) == pytest.approx({"a": 0.5, "b": 1.0})
    assert weights(snap, replace(LR, lam=2.0)) == pytest.approx({"a": 0.25, "b": 1.0})
    assert started(snap, LR) == ["b"]
    ctx = PriorityContext(100.0, CLUSTER, Estimator(CLUSTER, snap.store, LR), 2)
    assert order_jobs([a, b], get_priority("lr"), ctx) == (b, a)
    assert order_jobs(twins(wait_time=50.0), get_priority("lr"), ctx)[0].id == "a"


# -- least attained service: negative priorities, with the bias --------------------------


def test_negative_las_priorities_are_biased_before_the_factor() -> None:
    a = Job("a", (4,), 1e5, submit_time=0.0, attained_service=10.0)
    b = Job("b", (4,), 1e5, submit_time=1.0, attained_service=30.0)
    # priorities -10 and -30, bias 30.01: keys 20.01 and 0.01
    assert weights(snapshot(a, b), LAS) == pytest.approx({"a": 1.0, "b": 0.01 / 20.01})
    assert started(snapshot(a, b), LAS) == ["a"]
    # b's factor 3000 makes its key 30.0 > 20.01: b goes first, a weighs 20.01 / 30
    b_favoured = replace(b, share_factor=3000.0)
    assert weights(snapshot(a, b_favoured), LAS) == pytest.approx({"a": 20.01 / 30.0, "b": 1.0})
    assert started(snapshot(a, b_favoured), LAS) == ["b"]
    # a smaller factor keeps the order: 0.01 * 1000 = 10 < 20.01
    b_less = replace(b, share_factor=1000.0)
    assert started(snapshot(a, b_less), LAS) == ["a"]


def test_factors_of_one_give_exactly_the_weights_of_the_priority_alone() -> None:
    jobs = (
        Job("a", (4,), 1e5, attained_service=3.0),
        Job("b", (4,), 1e5, attained_service=0.5),
        Job("c", (4,), 1e5, attained_service=7.0),
    )
    got = weights(snapshot(*jobs), replace(LAS, lam=1.7))
    expected = prior_weights([-0.5, -3.0, -7.0], 1.7)  # b, a, c: the LAS order
    assert list(got) == ["b", "a", "c"]
    assert list(got.values()) == expected
