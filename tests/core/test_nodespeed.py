"""The per-server speed prior: learned from other jobs, used where a job has no entity figure."""

from __future__ import annotations

import pytest

from hopsd.core.configgen import shared_layout
from hopsd.core.estimator import Estimator
from hopsd.core.learning import ENTITY_AGGREGATED, TYPE_AGGREGATED
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.nodespeed import (
    SpeedEvidence,
    SpeedLearner,
    evidence_of,
    speed_factors,
    speed_prior,
)
from hopsd.core.profiling import Profilee
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, schedule_step
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy

# The demo's test cluster (docker/conf/slurm.conf.in, hops.conf of the test cluster).
DEMO = Cluster.build(
    [GpuType("k80", speed=1.0), GpuType("v100", speed=2.0), GpuType("a100", speed=4.0)],
    [
        Node("k80n1", "k80", 2),
        Node("v100n1", "v100", 4),
        Node("v100n2", "v100", 4),
        Node("a100n1", "a100", 4),
        Node("a100n2", "a100", 4),
    ],
)
DEMO_TYPES = {n.id: n.gpu_type for n in DEMO.nodes}
SETTINGS = Settings(round_length_s=8.0, restart_penalty_s=3.0, time_limit_s=5.0)


def sweep_job(job_id: str, gpu_type: str, samples: float) -> Job:
    """A one-GPU run of the demo's learning-rate sweep, kept to one GPU type (--types)."""
    others = tuple((t, 0) for t in sorted(DEMO.gpu_types) if t != gpu_type)
    return Job(job_id, (1,), samples, max_gpus=others)


def measured(store: InMemoryThroughputStore, job_id: str, node: str, per_gpu: float) -> None:
    """A one-GPU figure on ``node`` as hopsd learns it from a profiling run or a run report."""
    store.set_entity_aggregated(job_id, node, 1, per_gpu)
    gpu_type = DEMO_TYPES[node]
    best = max(per_gpu, store.type_aggregated(job_id, gpu_type, 1) or 0.0)
    store.set_type_aggregated(job_id, gpu_type, 1, best)


def demo_prior(rows: list[tuple[str, str, int, float]]) -> dict[str, float]:
    return speed_prior(evidence_of(rows, DEMO_TYPES))


# Ledger rows of the demo run learned before the sweep: job 35 ran on both v100
# servers at one GPU (368 vs 181 samples/s); no job had run on both a100 servers
# at one size yet.
BEFORE_SWEEP = [("35", "v100n1", 1, 368.46), ("35", "v100n2", 1, 181.29)]
# ... and once a sweep run had run on both a100 servers.
AFTER_A100 = [*BEFORE_SWEEP, ("37", "a100n1", 1, 779.9), ("37", "a100n2", 1, 394.8)]


def placed_nodes(
    store: InMemoryThroughputStore, jobs: tuple[Job, ...], capacity: dict[str, int] | None = None
) -> dict[str, str]:
    snapshot = Snapshot(now=1000.0, cluster=DEMO, jobs=jobs, store=store, capacity=capacity or {})
    result = schedule_step(snapshot, RoundClock(8.0), get_policy("hops"), SETTINGS)
    return {job_id: cfg.node_ids[0] for job_id, cfg in result.plan.placements().items()}


@pytest.mark.parametrize(
    "capacity",
    [
        {},
        {"v100n1": 3, "v100n2": 3},  # each profiling run's GPU not yet given back
        {"v100n1": 4, "v100n2": 2},
    ],
)
def test_demo_v100_sweep_runs_go_to_the_server_other_jobs_found_fast(
    capacity: dict[str, int],
) -> None:
    """The demo's rounds 72-73: sweep runs 39 (profiled on v100n1) and 40 (profiled on
    v100n2) were both started on v100n2 although job 35 had shown it runs at half
    v100n1's pace, because neither had a figure of its own for the other server and
    the type layer is the same for both servers."""
    store = InMemoryThroughputStore()
    measured(store, "39", "v100n1", 395.6)
    measured(store, "40", "v100n2", 198.6)
    store.set_node_speeds(demo_prior(BEFORE_SWEEP))
    jobs = (sweep_job("39", "v100", 8000), sweep_job("40", "v100", 8000))
    assert placed_nodes(store, jobs, capacity) == {"39": "v100n1", "40": "v100n1"}


def test_jobs_whose_profiling_just_ended_are_planned_with_the_prior() -> None:
    """As in the demo, the sweep runs were planned in the very step that ended their
    profiling, through the store that adds their derived profiles."""
    store = InMemoryThroughputStore()
    measured(store, "39", "v100n1", 395.6)
    measured(store, "40", "v100n2", 198.6)
    store.set_node_speeds(demo_prior(BEFORE_SWEEP))
    profilees = tuple(
        Profilee(
            job_id,
            submit_time=990.0,
            since=990.0,
            profiled=frozenset({"v100"}),
            runs=1,
            job=sweep_job(job_id, "v100", 8000),
        )
        for job_id in ("39", "40")
    )
    snapshot = Snapshot(now=1000.0, cluster=DEMO, jobs=(), store=store, profiling=profilees)
    result = schedule_step(snapshot, RoundClock(8.0), get_policy("hops"), SETTINGS)
    placed = {job_id: cfg.node_ids[0] for job_id, cfg in result.plan.placements().items()}
    assert placed == {"39": "v100n1", "40": "v100n1"}


def test_demo_a100_sweep_runs_avoid_a100n2_once_its_speed_is_known() -> None:
    """Round 71 with the a100 factor known: one run profiled on each server, both
    belong on a100n1 (the one profiled on a100n2 is expected twice as fast there)."""
    store = InMemoryThroughputStore()
    measured(store, "41", "a100n1", 779.9)
    measured(store, "42", "a100n2", 395.1)
    store.set_node_speeds(demo_prior(AFTER_A100))
    jobs = (sweep_job("41", "a100", 16000), sweep_job("42", "a100", 16000))
    assert placed_nodes(store, jobs) == {"41": "a100n1", "42": "a100n1"}


def test_factors_compare_only_jobs_measured_on_two_servers_of_a_type_at_one_size() -> None:
    rows = [
        ("a", "v100n1", 1, 400.0),
        ("a", "v100n2", 1, 200.0),
        ("b", "v100n1", 1, 300.0),
        ("b", "v100n2", 1, 180.0),
        ("c", "v100n2", 1, 50.0),  # one server only: says nothing of the server
        ("d", "v100n1", 2, 90.0),  # another size than d's other row
        ("d", "v100n2", 1, 500.0),
    ]
    factors = speed_factors(rows, DEMO_TYPES)
    assert factors["v100n1"] == (1.0, 2)
    assert factors["v100n2"] == (pytest.approx(0.55), 2)  # median of 0.5 and 0.6


def ratios(**per_node: list[float]) -> SpeedEvidence:
    """Evidence giving each node the listed ratios to a sibling running at 100."""
    evidence = SpeedEvidence()
    for node, values in per_node.items():
        for i, ratio in enumerate(values):
            evidence.note(f"{node}-{i}", "t", 1, "best", 100.0)
            evidence.note(f"{node}-{i}", "t", 1, node, 100.0 * ratio)
    return evidence


def test_prior_ignores_noise_and_rounds_slower_servers() -> None:
    prior = speed_prior(ratios(b=[0.93], e=[0.85, 0.85], c=[0.492], d=[0.001]))
    assert prior == {"c": pytest.approx(0.5), "d": pytest.approx(0.05)}


def test_prior_takes_the_slowdown_every_compared_job_felt() -> None:
    """A slow disk halves data-bound jobs and leaves compute-bound ones alone: the
    median says 0.5, but a compute-bound job would be misjudged by half."""
    evidence = ratios(disk=[0.5, 0.45, 1.0], cpu=[0.5, 0.55, 0.6])
    assert evidence.factors()["disk"] == (0.5, 3)  # what hops nodes shows
    assert speed_prior(evidence) == {"cpu": pytest.approx(0.6)}


def test_measured_pairs_keep_their_figure_and_others_are_scaled_from_their_source() -> None:
    store = InMemoryThroughputStore()
    measured(store, "j", "a100n2", 400.0)  # the job's only figure: on the slow server
    store.set_node_speeds({"a100n2": 0.5})
    est = Estimator(DEMO, store, SETTINGS)
    job = Job("j", (1,), 1e5)
    slow = est.throughput(job, Configuration.of("a100", {"a100n2": 1}))
    fast = est.throughput(job, Configuration.of("a100", {"a100n1": 1}))
    assert (slow.per_gpu, slow.source) == (400.0, "entity")
    assert (fast.per_gpu, fast.source) == (pytest.approx(800.0), "type")
    # the admin's table stands for a full-speed server
    table = est.throughput(job, Configuration.of("v100", {"v100n1": 1}))
    store.set_node_speeds({"a100n2": 0.5, "v100n2": 0.5})
    est = Estimator(DEMO, store, SETTINGS)
    halved = est.throughput(job, Configuration.of("v100", {"v100n2": 1}))
    assert table.source == halved.source == "table"
    assert halved.per_gpu == pytest.approx(table.per_gpu * 0.5)


def test_without_a_prior_the_estimates_are_the_method_s() -> None:
    store = InMemoryThroughputStore()
    measured(store, "j", "a100n2", 400.0)
    est = Estimator(DEMO, store, SETTINGS)
    job = Job("j", (1,), 1e5)
    assert est.throughput(job, Configuration.of("a100", {"a100n1": 1})).per_gpu == 400.0
    assert est.speed_key(Configuration.of("a100", {"a100n1": 1})) == ()


def test_distributed_pace_is_scaled_by_its_slowest_node() -> None:
    store = InMemoryThroughputStore()
    # measured across both a100 servers: the pace of the slow one
    for node in ("a100n1", "a100n2"):
        store.set_entity_distributed("j", node, 2, 300.0)
    store.set_type_distributed("j", "a100", 2, 300.0)
    store.set_node_speeds({"a100n2": 0.5})
    est = Estimator(DEMO, store, SETTINGS)
    job = Job("j", (2,), 1e5)
    known = est.throughput(job, Configuration.of("a100", {"a100n1": 1, "a100n2": 1}))
    assert known.per_gpu == 300.0  # measured there: kept


def test_learner_keeps_the_seed_for_nodes_its_evidence_does_not_compare() -> None:
    store = InMemoryThroughputStore()
    learner = SpeedLearner({"a100n2": 0.5, "v100n2": 0.5})
    learner.note("j", "v100", ENTITY_AGGREGATED, "v100n1", 1, 100.0)
    learner.note("j", "v100", TYPE_AGGREGATED, "v100", 1, 100.0)  # not a server's figure
    learner.note("j", "v100", ENTITY_AGGREGATED, "v100n2", 1, 97.0)
    learner.refresh(store)
    assert store.node_speeds() == {"a100n2": 0.5}  # v100n2 now compared: full speed


def test_evidence_outlives_nothing_it_was_not_told() -> None:
    evidence = SpeedEvidence()
    evidence.note("j", "v100", 1, "v100n1", 100.0)
    assert evidence.factors() == {}


def test_a_layout_shared_between_planning_calls_is_not_reused_across_priors() -> None:
    free = {n.id: n.gpus for n in DEMO.nodes}
    plain = shared_layout(DEMO, "v100", free)
    slow = shared_layout(DEMO, "v100", free, speeds={"v100n2": 0.5})
    assert plain.speed == (1.0, 1.0) and slow.speed == (1.0, 0.5)
    assert shared_layout(DEMO, "v100", free, speeds={"v100n2": 0.5}) is slow
