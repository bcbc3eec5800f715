"""plan_round / plan_fragment end to end on literal small clusters, with hand-worked plans."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hopsd.core.errors import InfeasibleDemandError, InvalidInputError
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.rounds import PlannerOptions, plan_fragment, plan_round, plan_round_with
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore

EXACT = Settings(priority="las", mip_gap=0.0, time_limit_s=10.0)


def two_type_cluster() -> Cluster:
    return Cluster.build(
        [GpuType("fast"), GpuType("slow")], [Node("a", "fast", 4), Node("b", "slow", 4)]
    )


def job(job_id: str, demands: tuple[int, ...], attained: float = 0.0, **kw: object) -> Job:
    return Job(job_id, demands, 1e6, attained_service=attained, **kw)  # type: ignore[arg-type]


def where(plan: Plan) -> dict[str, dict[str, int]]:
    return {job_id: cfg.as_dict() for job_id, cfg in plan.placements().items()}


def table_snapshot() -> Snapshot:
    """A gain-matrix example in the spirit of the method's Table 1 (per-GPU samples/s).

    j1 (2,4): fast2 220, fast4 360, slow2 100, slow4 180 -> G = 2.2, 3.6, 1.0, 1.8
    j2 (4):   fast4 300, slow4 120                       -> G = 2.5, 1.0
    j3 (2,4): fast2 100, fast4 180, slow2 60, slow4 110  -> G = 5/3, 3.0, 1.0, 11/6
    LAS priorities 0, -1, -2 -> bias 2.01 -> shifted 2.01, 1.01, 0.01.
    """
    store = InMemoryThroughputStore()
    per_gpu = {
        "j1": {("fast", 2): 110, ("fast", 4): 90, ("slow", 2): 50, ("slow", 4): 45},
        "j2": {("fast", 4): 75, ("slow", 4): 30},
        "j3": {("fast", 2): 50, ("fast", 4): 45, ("slow", 2): 30, ("slow", 4): 27.5},
    }
    for job_id, table in per_gpu.items():
        for (gpu_type, gpus), thr in table.items():
            store.set_type_aggregated(job_id, gpu_type, gpus, float(thr))
    jobs = (job("j1", (2, 4), 0.0), job("j2", (4,), 1.0), job("j3", (2, 4), 2.0))
    return Snapshot(now=0.0, cluster=two_type_cluster(), jobs=jobs, store=store)


def test_table_example_lambda_one() -> None:
    # weights 1, 1.01/2.01, 0.01/2.01. j1 fast4 + j2 slow4 = 3.6 + 0.50249 = 4.10249
    # beats j1 fast4 + j3 slow4 = 3.6 + 0.00912 and j1 slow4 + j2 fast4 = 1.8 + 1.2562.
    plan = plan_round(table_snapshot(), replace(EXACT, lam=1.0))
    assert where(plan) == {"j1": {"a": 4}, "j2": {"b": 4}}
    assert plan.objective == pytest.approx(3.6 + 1.01 / 2.01)
    assert plan.window == ("j1", "j2", "j3")  # R1 sums 2, 6, 8: j3 reaches 8 and is included


def test_table_example_lambda_zero_maximises_normalised_throughput() -> None:
    # all weights 1: j1 fast4 + j3 slow4 = 3.6 + 11/6 = 5.4333 is the best pairing
    # (j1 fast2 + j3 fast2 + j2 slow4 = 2.2 + 5/3 + 1 = 4.8667; j1 slow4 + j3 fast4 = 4.8)
    plan = plan_round(table_snapshot(), replace(EXACT, lam=0.0))
    assert where(plan) == {"j1": {"a": 4}, "j3": {"b": 4}}
    assert plan.objective == pytest.approx(3.6 + 11.0 / 6.0)


def one_type_two_nodes(per_gpu: dict[str, float], running_on: str | None) -> Snapshot:
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4), Node("b", "t", 4)])
    store = InMemoryThroughputStore()
    for node_id, thr in per_gpu.items():
        store.set_entity_aggregated("r", node_id, 4, thr)
    current = Configuration.of("t", {running_on: 4}) if running_on else None
    r = Job("r", (4,), 1e6, current=current, samples_done=10.0)
    return Snapshot(now=0.0, cluster=cluster, jobs=(r,), store=store)


def test_running_job_stays_when_moving_gains_less_than_the_restart_penalty() -> None:
    # keep: G = 1 (100 is the slowest); move to b: 105/100 * (300 - 30)/300 = 0.945 < 1
    snap = one_type_two_nodes({"a": 100.0, "b": 105.0}, running_on="a")
    plan = plan_round(snap, EXACT)
    assert [a.job_id for a in plan.keep] == ["r"] and plan.move == ()


def test_running_job_moves_when_the_gain_outweighs_the_penalty() -> None:
    # move: 200/100 * 0.9 = 1.8 > keep 1.0
    snap = one_type_two_nodes({"a": 100.0, "b": 200.0}, running_on="a")
    plan = plan_round(snap, EXACT)
    assert [(a.job_id, a.config.as_dict()) for a in plan.move] == [("r", {"b": 4})]


def test_without_penalty_even_a_small_gain_moves_the_job() -> None:
    snap = one_type_two_nodes({"a": 100.0, "b": 105.0}, running_on="a")
    plan = plan_round(snap, replace(EXACT, restart_penalty_s=0.0))
    assert [a.config.as_dict() for a in plan.move] == [{"b": 4}]


def preemption_snapshot(pinned: frozenset[str] = frozenset()) -> Snapshot:
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4)])
    low = Job("low", (4,), 1e6, attained_service=100.0, current=Configuration.of("t", {"a": 4}))
    high = Job("high", (4,), 1e6, attained_service=0.0)
    return Snapshot(now=0.0, cluster=cluster, jobs=(low, high), pinned=pinned)


def test_low_priority_running_job_is_preempted_for_a_high_priority_one() -> None:
    plan = plan_round(preemption_snapshot(), EXACT)
    assert plan.preempt == ("low",)
    assert [a.job_id for a in plan.start] == ["high"]


def test_pinned_running_job_keeps_its_place() -> None:
    plan = plan_round(preemption_snapshot(frozenset({"low"})), EXACT)
    assert [a.job_id for a in plan.keep] == ["low"]
    assert plan.start == () and plan.preempt == ()


def fragment_snapshot(q2_split_per_gpu: float) -> Snapshot:
    """Two 4-GPU nodes, r and s hold 3 each: one idle GPU per node.

    q1 (R1 = 4) heads the queue and is highly sensitive (100 / 50 = 2);
    q2 (R1 = 2) is behind the window boundary (R1 sums 3, 6, 10 >= 8).
    """
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4), Node("b", "t", 4)])
    store = InMemoryThroughputStore()
    for job_id, split in (("q1", 50.0), ("q2", q2_split_per_gpu), ("r", 50.0), ("s", 50.0)):
        store.set_type_aggregated(job_id, "t", 1, 100.0)
        store.set_type_distributed(job_id, "t", 2, split)
    jobs = (
        Job("r", (3,), 1e6, submit_time=0.0, current=Configuration.of("t", {"a": 3})),
        Job("s", (3,), 1e6, submit_time=1.0, current=Configuration.of("t", {"b": 3})),
        Job("q1", (4,), 1e6, submit_time=2.0),
        Job("q2", (2,), 1e6, submit_time=3.0, attained_service=5.0),
    )
    return Snapshot(now=0.0, cluster=cluster, jobs=jobs, store=store)


def test_fragment_plan_starts_a_low_sensitivity_job_from_behind_the_round_window() -> None:
    # q1 heads the queue but needs 4 GPUs; the fragment plan's own window over the
    # jobs that fit the 2 idle GPUs holds q2 (rho 100/95 = 1.053 < sigma), which
    # may be split over the two idle GPUs.
    plan = plan_fragment(fragment_snapshot(95.0), EXACT)
    assert sorted(a.job_id for a in plan.keep) == ["r", "s"]
    assert [(a.job_id, a.config.as_dict()) for a in plan.start] == [("q2", {"a": 1, "b": 1})]
    assert plan.window == ("r", "s", "q1")


def test_fragment_plan_admits_nobody_when_the_candidate_is_sensitive_too() -> None:
    # rho(q2) = 2 = rho_queue: not below it, so no admission; q1 does not fit 1+1 GPUs
    plan = plan_fragment(fragment_snapshot(50.0), EXACT)
    assert plan.start == ()
    assert sorted(a.job_id for a in plan.keep) == ["r", "s"]


def test_equal_priorities_are_ordered_by_submit_time_then_id() -> None:
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 2)])
    jobs = (
        Job("b", (1,), 1e6, submit_time=5.0),
        Job("c", (1,), 1e6, submit_time=1.0),
        Job("a", (1,), 1e6, submit_time=5.0),
    )
    plan = plan_round(Snapshot(now=0.0, cluster=cluster, jobs=jobs), EXACT)
    assert plan.window == ("c", "a")


def test_same_input_same_plan() -> None:
    snap = table_snapshot()
    assert plan_round(snap, EXACT) == plan_round(snap, EXACT)


def test_job_larger_than_every_gpu_type_is_an_infeasible_demand() -> None:
    snap = Snapshot(now=0.0, cluster=two_type_cluster(), jobs=(job("huge", (5, 8)),))
    with pytest.raises(InfeasibleDemandError, match="huge"):
        plan_round(snap, EXACT)


def test_job_that_fits_the_cluster_but_not_the_idle_gpus_just_waits() -> None:
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4)])
    snap = Snapshot(now=0.0, cluster=cluster, jobs=(job("w", (4,)),), capacity={"a": 2})
    plan = plan_round(snap, EXACT)
    assert plan.start == () and plan.window == ("w",)


def test_pinning_a_job_that_is_not_running_is_refused() -> None:
    snap = Snapshot(
        now=0.0, cluster=two_type_cluster(), jobs=(job("q", (1,)),), pinned=frozenset({"q"})
    )
    with pytest.raises(InvalidInputError, match="not running"):
        plan_round(snap, EXACT)


def test_unknown_priority_name_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="unknown priority"):
        plan_round(table_snapshot(), replace(EXACT, priority="nope"))


def test_empty_queue_gives_an_empty_plan() -> None:
    plan = plan_round(Snapshot(now=0.0, cluster=two_type_cluster(), jobs=()), EXACT)
    assert plan.placements() == {} and plan.window == ()


def test_running_job_behind_the_window_keeps_its_place_when_nobody_needs_it() -> None:
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4), Node("b", "t", 2)])
    jobs = (
        Job("qa", (4,), 1e6, submit_time=0.0),
        Job("qb", (3,), 1e6, attained_service=1.0),
        Job("r", (2,), 1e6, attained_service=100.0, current=Configuration.of("t", {"b": 2})),
    )
    plan = plan_round(Snapshot(now=0.0, cluster=cluster, jobs=jobs), EXACT)
    assert plan.window == ("qa", "qb")  # R1 sums 4, 7 >= 6: r is behind the boundary
    assert [(a.job_id, a.config.as_dict()) for a in plan.start] == [("qa", {"a": 4})]
    assert [a.job_id for a in plan.keep] == ["r"]


@pytest.mark.parametrize("plan_with", [plan_round, plan_fragment])
@pytest.mark.parametrize("restart_s", [0.0, 299.0, 300.0, 1e4])
def test_a_preempted_job_resumes_on_idle_gpus_whatever_its_restart_costs(
    plan_with: object, restart_s: float
) -> None:
    """A job that ran before pays its restart whenever it resumes: waiting saves none of
    it. Valued at nothing once the restart reached a round, it stayed queued on an
    idle cluster for good; it must take the GPUs nobody else wants."""
    cluster = Cluster.build([GpuType("t")], [Node("a", "t", 4)])
    store = InMemoryThroughputStore()
    store.set_type_aggregated("r", "t", 4, 100.0)
    resumed = Job("r", (4,), 1e6, samples_done=10.0, restart_s=restart_s)
    snap = Snapshot(now=0.0, cluster=cluster, jobs=(resumed,), store=store)
    settings = Settings(round_length_s=300.0, restart_penalty_s=30.0, price_restarts=True)
    plan = plan_with(snap, settings)  # type: ignore[operator]
    assert where(plan) == {"r": {"a": 4}}


@pytest.mark.parametrize(
    "options",
    [PlannerOptions(exact=True), PlannerOptions(per_group=2, class_model_min_nodes=1)],
    ids=["per-node", "classes"],
)
@pytest.mark.parametrize(
    ("held_s", "left_s", "moves"),
    [
        (3600.0, 40000.0, True),  # held an hour, hours to go: 3x pays 250 s back
        (0.0, 40000.0, False),  # just placed: one round, a move worth 50/300 of its gain
        (3600.0, 200.0, False),  # about to end: nothing to pay the restart back with
    ],
)
def test_a_long_job_moves_to_idle_faster_gpus_once_it_held_its_place(
    options: PlannerOptions, held_s: float, left_s: float, moves: bool
) -> None:
    """A running job on slow GPUs, three times faster ones idle, its restart 250 s of a
    300 s round. Weighed over one round the move is worth a sixth of its gain, and a
    long job stayed for hours where it was; weighed over how long it has held its
    place (at most the rest of its run) it moves, unless it is new there or ends soon."""
    cluster = two_type_cluster()
    store = InMemoryThroughputStore()
    store.set_type_aggregated("r", "slow", 4, 60.0)  # 240 samples/s
    store.set_type_aggregated("r", "fast", 4, 180.0)  # 720 samples/s
    total = 1e8
    running = Job(
        "r",
        (4,),
        total,
        samples_done=total - 240.0 * left_s,
        current=Configuration.of("slow", {"b": 4}),
        restart_s=250.0,
        run_elapsed_s=held_s,
    )
    snap = Snapshot(now=0.0, cluster=cluster, jobs=(running,), store=store)
    settings = Settings(round_length_s=300.0, mip_gap=0.0, time_limit_s=10.0)
    plan = plan_round_with(snap, settings, options)
    assert where(plan) == {"r": {"a": 4} if moves else {"b": 4}}


@pytest.mark.parametrize(
    "options",
    [PlannerOptions(exact=True), PlannerOptions(per_group=2, class_model_min_nodes=1)],
    ids=["per-node", "classes"],
)
@pytest.mark.parametrize(("others_learned_s", "moves"), [(None, True), (7.0, False)])
def test_a_job_that_learned_no_restart_is_priced_at_what_restarts_cost_here(
    options: PlannerOptions, others_learned_s: float | None, moves: bool
) -> None:
    """A running job that never restarted, three times faster GPUs idle, rounds of 8 s.
    At the operator's 2 s prior the move is worth most of a round's gain and it moves;
    once the other jobs learned that a restart here costs 7 s, that is its price too,
    and the move is not worth a round."""
    cluster = Cluster.build(
        [GpuType("fast"), GpuType("slow")],
        [Node("a", "fast", 4), Node("b", "slow", 4), Node("c", "slow", 4)],
    )
    store = InMemoryThroughputStore()
    store.set_type_aggregated("r", "slow", 4, 60.0)
    store.set_type_aggregated("r", "fast", 4, 180.0)
    for other in ("l1", "l2"):
        store.set_type_aggregated(other, "slow", 2, 60.0)
        store.set_type_aggregated(other, "fast", 2, 60.0)
    running = Job("r", (4,), 1e8, current=Configuration.of("slow", {"b": 4}))
    others = tuple(
        Job(
            other,
            (2,),
            1e8,
            current=Configuration.of("slow", {"c": 2}),
            restart_s=others_learned_s,
            run_elapsed_s=60.0,
        )
        for other in ("l1", "l2")
    )
    snap = Snapshot(now=0.0, cluster=cluster, jobs=(running, *others), store=store)
    settings = Settings(round_length_s=8.0, restart_penalty_s=2.0, mip_gap=0.0, time_limit_s=10.0)
    plan = plan_round_with(snap, settings, options)
    assert where(plan)["r"] == ({"a": 4} if moves else {"b": 4})
    assert where(plan)["l1"] == {"c": 2} and where(plan)["l2"] == {"c": 2}
