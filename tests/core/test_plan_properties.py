"""Property tests of the planner on small random clusters, checked against brute force."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

from config_space import generate_configurations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hopsd.core.estimator import Estimator
from hopsd.core.gains import normalised_gains
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.priorities import PriorityContext, age
from hopsd.core.rounds import PlannerOptions, plan_round, plan_round_with
from hopsd.core.sensitivity import is_high_sensitivity, probe_nodes, sensitivity_on
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore

EXACT = PlannerOptions(exact=True)
PER_GPU = (50.0, 100.0, 150.0)  # multiples of 50: distinct gains differ by >= 50/(8*150)


@st.composite
def snapshots(
    draw: st.DrawFn,
    max_jobs: int = 4,
    running: bool = True,
    min_jobs: int = 1,
    per_gpu: tuple[float, ...] = PER_GPU,
    sizes: tuple[int, ...] = tuple(range(1, 9)),
) -> Snapshot:
    n_types = draw(st.integers(1, 2))
    types = [GpuType(f"t{i}") for i in range(n_types)]
    sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    nodes = [Node(f"n{i}", f"t{draw(st.integers(0, n_types - 1))}", s) for i, s in enumerate(sizes)]
    cluster = Cluster.build(types, nodes)
    largest = max(cluster.gpus_of_type(t.name) for t in types)
    store = InMemoryThroughputStore()
    free = {n.id: n.gpus for n in nodes}
    jobs: list[Job] = []
    for j in range(draw(st.integers(min_jobs, max_jobs))):
        options = draw(st.sets(st.sampled_from(sizes), min_size=1, max_size=3))
        demands = tuple(sorted(options))
        if demands[0] > largest:
            demands = (1,)
        job_id = f"j{j}"
        for t in types:
            for g in range(1, 9):
                store.set_type_aggregated(job_id, t.name, g, draw(st.sampled_from(per_gpu)))
            for k in range(2, 4):
                store.set_type_distributed(job_id, t.name, k, draw(st.sampled_from(per_gpu)))
        current = None
        if running and draw(st.booleans()):
            spot = next((n for n in nodes if free[n.id] >= demands[0]), None)
            if spot is not None:
                free[spot.id] -= demands[0]
                current = Configuration.of(spot.gpu_type, {spot.id: demands[0]})
        jobs.append(
            Job(
                job_id,
                demands,
                1e6,
                attained_service=draw(st.sampled_from((0.0, 1.0, 2.0, 3.0))),
                current=current,
                samples_done=1.0 if current else 0.0,
            )
        )
    return Snapshot(now=0.0, cluster=cluster, jobs=tuple(jobs), store=store)


BASE = Settings(priority="las", mip_gap=0.0, time_limit_s=10.0)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(snap: Snapshot, plan: Plan) -> None:
    jobs = {j.id: j for j in snap.jobs}
    named = [a.job_id for a in plan.start + plan.keep + plan.move] + list(plan.preempt)
    assert len(named) == len(set(named)), "a job appears twice in the plan"
    for node_id, used in plan.gpus_used().items():
        assert used <= snap.capacity_of(node_id), f"node {node_id} over-allocated"
    for job_id, cfg in plan.placements().items():
        assert cfg.total_gpus in jobs[job_id].demands
        assert all(snap.cluster.node(n).gpu_type == cfg.gpu_type for n in cfg.node_ids)
    for a in plan.start:
        assert jobs[a.job_id].current is None
    for a in plan.keep:
        assert jobs[a.job_id].current == a.config
    running = {j.id for j in snap.running}
    decided = {a.job_id for a in plan.keep + plan.move} | set(plan.preempt)
    assert decided == running, "every running job is kept, moved or preempted"


@FAST
@given(snapshots(), st.sampled_from((0.0, 1.0, 2.0)))
def test_plans_are_well_formed_and_deterministic(snap: Snapshot, lam: float) -> None:
    s = replace(BASE, lam=lam, mip_gap=0.01)
    plan = plan_round(snap, s)
    assert_well_formed(snap, plan)
    assert plan == plan_round(snap, s)


def options(snap: Snapshot, job: Job, est: Estimator) -> list[Configuration]:
    """Every configuration of the job, as step 3 of the method defines them."""
    free = {n.id: snap.capacity_of(n.id) for n in snap.cluster.nodes}
    out: list[Configuration] = []
    for t in sorted(snap.cluster.gpu_types):
        high = is_high_sensitivity(
            sensitivity_on(job, t, probe_nodes(snap.cluster, t), est), BASE.sigma
        )
        out.extend(generate_configurations(job, t, free, snap.cluster, high))
    return out


def fits(snap: Snapshot, configs: list[Configuration]) -> bool:
    used: dict[str, int] = {}
    for cfg in configs:
        for node_id, g in cfg.parts:
            used[node_id] = used.get(node_id, 0) + g
    return all(used[n] <= snap.capacity_of(n) for n in used)


def gain_table(snap: Snapshot, window: list[Job]) -> list[list[tuple[Configuration, float]]]:
    est = Estimator(snap.cluster, snap.store, BASE)
    table = []
    for job in window:
        configs = options(snap, job, est)
        gains = normalised_gains([est.throughput(job, c).samples_per_s for c in configs])
        table.append(list(zip(configs, gains, strict=True)))
    return table


Pick = tuple[tuple[Configuration, float] | None, ...]


def assignments(table: list[list[tuple[Configuration, float]]]) -> Iterator[Pick]:
    yield from itertools.product(*[[None, *row] for row in table])


@FAST
@given(snapshots(max_jobs=3, running=False))
def test_lambda_zero_maximises_total_normalised_throughput(snap: Snapshot) -> None:
    s = replace(BASE, lam=0.0, max_plans=1)
    plan = plan_round_with(snap, s, EXACT)
    window = [next(j for j in snap.jobs if j.id == i) for i in plan.window]
    best = 0.0
    for pick in assignments(gain_table(snap, window)):
        chosen = [p for p in pick if p is not None]
        if fits(snap, [c for c, _ in chosen]):
            best = max(best, sum(g for _, g in chosen))
    assert abs(plan.objective - best) <= 1e-6 * max(best, 1.0)


@FAST
@given(snapshots(3, False, 3, per_gpu=(100.0, 200.0), sizes=(1, 2, 4)))
def test_large_lambda_serves_jobs_greedily_in_priority_order(snap: Snapshot) -> None:
    """Lambda -> infinity is greedy: the first job gets the best it can get at all, the
    second the best it can get given that (compared lexicographically with brute force).

    Waiting times are set so the latency ratios are exactly 1, 0.1, 0.01 (all > 0: no
    bias, whatever the window holds); lambda 3 gives weights 1, 1e-3, 1e-6. Throughputs
    are multiples of 100 up to 800, so a job's distinct gains differ by >= 1/8 and none
    exceeds 8: each job outweighs everything behind it.
    """
    ctx = PriorityContext(0.0, snap.cluster, Estimator(snap.cluster, snap.store, BASE))
    ratios = (1.0, 0.1, 0.01)
    jobs = tuple(replace(j, wait_time=ratios[i] * age(j, ctx)) for i, j in enumerate(snap.jobs))
    snap = replace(snap, jobs=jobs)
    s = replace(BASE, priority="lr", lam=3.0, max_plans=1)
    plan = plan_round_with(snap, s, EXACT)
    window = [next(j for j in snap.jobs if j.id == i) for i in plan.window]
    table = gain_table(snap, window)
    best: tuple[float, ...] = ()
    for pick in assignments(table):
        if fits(snap, [p[0] for p in pick if p is not None]):
            best = max(best, tuple(0.0 if p is None else p[1] for p in pick)[:2])
    placed = plan.placements()
    got = []
    for job, row in zip(window, table, strict=True):
        cfg = placed.get(job.id)
        got.append(0.0 if cfg is None else next(g for c, g in row if c == cfg))
    assert tuple(round(g, 9) for g in got[:2]) == tuple(round(g, 9) for g in best)


@FAST
@given(snapshots(max_jobs=5))
def test_a_preempted_job_never_leaves_a_node_idle_that_it_fits(snap: Snapshot) -> None:
    """Preempting only makes sense to give the GPUs to others: after all plans of the
    round, no node may have as many idle GPUs as a preempted job's smallest demand."""
    plan = plan_round(snap, BASE)
    used = plan.gpus_used()
    idle = {n.id: n.gpus - used.get(n.id, 0) for n in snap.cluster.nodes}
    jobs = {j.id: j for j in snap.jobs}
    for job_id in plan.preempt:
        assert all(free < jobs[job_id].min_demand for free in idle.values()), (job_id, idle)
