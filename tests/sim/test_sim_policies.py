"""Baselines on tiny literal clusters, with the expected allocations worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sim_helpers import cluster_of, store_of

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Configuration, Job
from hopsd.core.policies.common import pack, rigid_demand
from hopsd.core.policies.gavel import GAVEL, max_min_allocation
from hopsd.core.policies.sia import Column as SiaColumn
from hopsd.core.policies.sia import realloc_factor, sia_weight, undominated
from hopsd.core.rounds import plan_round
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.plugins import get_policy, policy_names, register_policy

SETTINGS = Settings()


def test_registry_lists_every_policy_and_refuses_unknown_names() -> None:
    names = policy_names()
    for expected in (
        "hops",
        "hops-ftf",
        "hops-las",
        "hops-sjf",
        "hops-srtf",
        "gavel",
        "sia",
        "fifo",
        "gavel-arrival",
        "sia-arrival",
    ):
        assert expected in names
    with pytest.raises(InvalidInputError, match="unknown policy 'slurm'; known: fifo"):
        get_policy("slurm")
    with pytest.raises(InvalidInputError, match="already registered"):
        register_policy(replace(GAVEL, name="fifo"))


def test_rigid_demand_is_the_lower_median() -> None:
    assert rigid_demand(Job("a", (1, 2, 4), 1.0)) == 2
    assert rigid_demand(Job("b", (1, 2, 4, 8), 1.0)) == 2
    assert rigid_demand(Job("c", (16,), 1.0)) == 16


def test_pack_prefers_one_node_then_fewest_nodes() -> None:
    cluster = cluster_of(("a", "t", 8), ("b", "t", 8), ("c", "t", 8))
    # Best fit: the fullest node that still holds all 3.
    assert pack(cluster, "t", 3, {"a": 8, "b": 4, "c": 6}) == Configuration.of("t", {"b": 3})
    # 10 GPUs: the two emptiest nodes.
    assert pack(cluster, "t", 10, {"a": 2, "b": 6, "c": 5}) == Configuration.of(
        "t", {"b": 6, "c": 4}
    )
    assert pack(cluster, "t", 14, {"a": 2, "b": 6, "c": 5}) is None


# ------------------------------------------------------------------ FIFO
def test_fifo_first_fit_in_submission_order() -> None:
    cluster = cluster_of(("A0", "x", 4), ("B0", "y", 4))
    jobs = (
        Job("j1", (4,), 100.0, submit_time=0),
        Job("j2", (1, 2, 4), 100.0, submit_time=1),  # median 2
        Job("j3", (2,), 100.0, submit_time=2),
        Job("j4", (1,), 100.0, submit_time=3),  # nothing left
    )
    plan = get_policy("fifo").plan(Snapshot(0.0, cluster, jobs), SETTINGS)
    assert plan.placements() == {
        "j1": Configuration.of("x", {"A0": 4}),
        "j2": Configuration.of("y", {"B0": 2}),
        "j3": Configuration.of("y", {"B0": 2}),
    }


def test_fifo_easy_backfill_respects_the_head_reservation() -> None:
    cluster = cluster_of(("A0", "x", 4), ("A1", "x", 4), ("B0", "y", 4))
    running = Job("r1", (4,), 40_000.0, current=Configuration.of("x", {"A0": 4}))
    jobs = (
        running,
        Job("h", (8,), 1e6, submit_time=0),  # blocked: needs all of type x
        Job("long", (4,), 80_000.0, submit_time=1),  # 2,000 s > reservation at 1,000 s
        Job("short", (4,), 20_000.0, submit_time=2),  # 500 s: ends before the reservation
    )
    rates = {(j, "x", 4): 10.0 for j in ("r1", "h", "long", "short")}
    rates[("h", "x", 8)] = 10.0
    plan = get_policy("fifo").plan(Snapshot(0.0, cluster, jobs, store=store_of(rates)), SETTINGS)
    assert [a.job_id for a in plan.start] == ["short"]
    assert plan.start[0].config == Configuration.of("x", {"A1": 4})
    assert [a.job_id for a in plan.keep] == ["r1"]


# ----------------------------------------------------------------- Gavel
def test_gavel_max_min_lp_hand_solved() -> None:
    # Job A: 2 on fast, 1 on slow; job B: 3 on fast, 1 on slow; one GPU of each type.
    # Proportional shares: P_A = 1.5, P_B = 2. With f the fast share of A,
    # (1 + f) / 1.5 = (3 - 2 f) / 2 gives f = 0.5: everybody gets half of each type.
    x = max_min_allocation(np.array([[2.0, 1.0], [3.0, 1.0]]), [1, 1], [1, 1])
    assert x == pytest.approx(np.array([[0.5, 0.5], [0.5, 0.5]]), abs=1e-6)


def test_gavel_weights_each_job_by_its_scale_factor() -> None:
    # Jobs of 1, 1, 2 and 4 GPUs with equal (linear) scaling on one 4-GPU type.
    # Gavel maximises min_m T_m * s_m * X_m / P_m; here T_m / P_m = 1, so the optimum
    # gives every job the same GPU-time s_m * X_m = 1: X = 1, 1, 1/2, 1/4. Without the
    # scale factor every job would get the same time share, 4 / 8 = 1/2.
    thr = np.array([[10.0], [10.0], [20.0], [40.0]])
    x = max_min_allocation(thr, [1, 1, 2, 4], [4])
    assert x[:, 0] == pytest.approx([1.0, 1.0, 0.5, 0.25], abs=1e-6)


def test_gavel_alternates_types_to_honour_the_time_fractions() -> None:
    cluster = cluster_of(("F0", "fast", 1), ("S0", "slow", 1))
    store = store_of(
        {("A", "fast", 1): 2.0, ("A", "slow", 1): 1.0, ("B", "fast", 1): 3.0, ("B", "slow", 1): 1.0}
    )
    gavel = get_policy("gavel")
    jobs = (Job("A", (1,), 1e6), Job("B", (1,), 1e6))
    first = gavel.plan(Snapshot(0.0, cluster, jobs, store=store), SETTINGS).placements()
    assert first == {
        "A": Configuration.of("fast", {"F0": 1}),
        "B": Configuration.of("slow", {"S0": 1}),
    }
    jobs = tuple(replace(j, current=first[j.id]) for j in jobs)
    second = gavel.plan(Snapshot(300.0, cluster, jobs, store=store), SETTINGS)
    assert second.placements() == {
        "A": Configuration.of("slow", {"S0": 1}),
        "B": Configuration.of("fast", {"F0": 1}),
    }
    assert len(second.move) == 2
    # Inside a round Gavel starts nothing.
    assert gavel.plan_fragment(Snapshot(400.0, cluster, jobs, store=store), SETTINGS).start == ()


def test_gavel_uses_the_median_as_a_rigid_demand() -> None:
    cluster = cluster_of(("F0", "fast", 8))
    store = store_of({("A", "fast", n): 10.0 for n in (1, 2, 4)})
    plan = get_policy("gavel").plan(
        Snapshot(0.0, cluster, (Job("A", (1, 2, 4), 1e6),), store=store), SETTINGS
    )
    assert plan.placements()["A"].total_gpus == 2


# ------------------------------------------------------------------- Sia
def test_sia_weights_and_realloc_factor_by_hand() -> None:
    assert sia_weight(1.0, 1.0) == pytest.approx(0.1)  # 1.1 - 1
    assert sia_weight(4.0, 1.0) == pytest.approx(0.6)  # 1.1 - 0.5
    assert sia_weight(2.0, 1.0) == pytest.approx(1.1 - 0.71)  # 2^-0.5 rounded
    assert realloc_factor(300.0, 1, 30.0) == pytest.approx(270 / 330)
    assert realloc_factor(20.0, 5, 30.0) == 1.0


def test_sia_gives_the_scalable_job_the_whole_node() -> None:
    # J1 scales linearly over {1, 2, 4}: weights 0.1 / 0.39 / 0.6. J2 (rigid 2): 0.1.
    # J1@4 alone (0.6) beats J1@2 + J2@2 (0.49). J1 already runs on 2 GPUs, so the
    # growth rule (at most twice the GPUs seen) lets it have 4.
    cluster = cluster_of(("n0", "t", 4))
    store = store_of(
        {("J1", "t", 1): 10.0, ("J1", "t", 2): 10.0, ("J1", "t", 4): 10.0, ("J2", "t", 2): 10.0}
    )
    jobs = (
        Job("J1", (1, 2, 4), 1e6, current=Configuration.of("t", {"n0": 2})),
        Job("J2", (2,), 1e6),
    )
    plan = get_policy("sia").plan(Snapshot(0.0, cluster, jobs, store=store), SETTINGS)
    assert plan.placements() == {"J1": Configuration.of("t", {"n0": 4})}


def test_sia_grows_a_job_to_at_most_twice_the_gpus_it_was_seen_on() -> None:
    # A linearly scaling job alone on 16 GPUs: its best weight is at 16 GPUs, but Sia
    # starts it at its smallest demand and at most doubles it each round.
    cluster = cluster_of(("n0", "t", 8), ("n1", "t", 8))
    demands = (1, 2, 3, 4, 8, 16)
    store = store_of({("J", "t", n): 10.0 for n in demands})
    sia = get_policy("sia")
    job = Job("J", demands, 1e9)
    counts = []
    for r in range(5):
        plan = sia.plan(Snapshot(300.0 * r, cluster, (job,), store=store), SETTINGS)
        cfg = plan.placements()["J"]
        counts.append(cfg.total_gpus)
        job = replace(job, current=cfg)
    assert counts == [1, 2, 4, 8, 16]


def test_sia_growth_steps_over_gaps_in_the_demand_set() -> None:
    from hopsd.core.policies.sia import growth_cap

    assert growth_cap((1, 2, 4), 0) == 1
    assert growth_cap((2, 5, 8), 2) == 5  # nothing in (2, 4]: the next count
    assert growth_cap((2, 5, 8), 5) == 10
    assert growth_cap((2, 3, 8), 2) == 4  # 3 lies within twice what was seen
    assert growth_cap((4,), 4) == 8


def test_sia_does_not_move_a_job_while_it_restores() -> None:
    # t=0: J arrives, K runs on "fast"; both run three times (J) and twice (K) as fast
    # there. Sia gives J the fast GPUs and moves K to "slow", where K restores its
    # checkpoint for 250 s. At t=60 J is gone and K would gain by moving back to fast,
    # but it is still restoring, so it keeps its GPUs; after the restore it moves.
    cluster = cluster_of(("F0", "fast", 2), ("S0", "slow", 2))
    store = store_of(
        {
            ("J", "fast", 2): 30.0,
            ("J", "slow", 2): 10.0,
            ("K", "fast", 2): 40.0,
            ("K", "slow", 2): 20.0,
        }
    )
    settings = replace(SETTINGS, restart_penalty_s=250.0, round_length_s=60.0)
    fast = Configuration.of("fast", {"F0": 2})
    slow = Configuration.of("slow", {"S0": 2})
    sia = get_policy("sia")
    k_on_fast = Job("K", (2,), 1e9, current=fast)
    first = sia.plan(
        Snapshot(0.0, cluster, (Job("J", (2,), 1e9), k_on_fast), store=store), settings
    )
    assert first.placements() == {"J": fast, "K": slow}
    k_on_slow = replace(k_on_fast, current=slow)
    restoring = sia.plan(Snapshot(60.0, cluster, (k_on_slow,), store=store), settings)
    assert [a.job_id for a in restoring.keep] == ["K"] and restoring.move == ()
    restored = sia.plan(Snapshot(3000.0, cluster, (k_on_slow,), store=store), settings)
    assert restored.placements() == {"K": fast}


# ------------------------------------------------------------------ Hops
def test_hops_variants_pass_their_priority_and_lambda() -> None:
    cluster = cluster_of(("n0", "t", 4), ("n1", "t", 4))
    store = store_of({("a", "t", n): 10.0 for n in (1, 2, 4)} | {("b", "t", 2): 10.0})
    jobs = (Job("a", (1, 2, 4), 5e4, wait_time=50.0), Job("b", (2,), 1e5, wait_time=10.0))
    snap = Snapshot(100.0, cluster, jobs, store=store)
    policy = get_policy("hops-ftf")
    assert policy.plan(snap, SETTINGS) == plan_round(
        snap, replace(SETTINGS, priority="ftf", lam=2.0)
    )
    assert get_policy("hops").plan(snap, SETTINGS).placements()


def test_sia_drops_columns_a_cheaper_column_of_the_same_type_beats() -> None:
    # Type a: 1 GPU 0.5, 2 GPUs 0.4 (dominated by 1), 4 GPUs 0.7, 8 GPUs 0.7 (not better).
    # Type b: 2 GPUs 0.3, 4 GPUs 0.6. Type a's weights do not dominate type b's columns.
    cols = [
        SiaColumn(0, "a", 8, 0.7),
        SiaColumn(0, "a", 2, 0.4),
        SiaColumn(0, "b", 4, 0.6),
        SiaColumn(0, "a", 1, 0.5),
        SiaColumn(0, "a", 4, 0.7),
        SiaColumn(0, "b", 2, 0.3),
    ]
    kept = {(c.gpu_type, c.count) for c in undominated(cols)}
    assert kept == {("a", 1), ("a", 4), ("b", 2), ("b", 4)}


def test_sia_solution_is_within_the_gap_of_the_exact_optimum() -> None:
    # Random Sia-shaped instances: the rounded LP (or the MILP it falls back to) must be
    # feasible and within settings.mip_gap of the exact ILP optimum (gap 0).
    from hopsd.core.ilp import AssignmentProblem, solve_assignment
    from hopsd.core.policies.sia import round_relaxation, solve_columns

    rng = np.random.default_rng(7)
    types = ["a", "b", "c"]
    capacity = {"a": 32, "b": 24, "c": 16}
    for _ in range(20):
        n_jobs = int(rng.integers(5, 40))
        columns = [
            SiaColumn(j, t, int(n), round(float(rng.uniform(0.05, 0.8)), 2))
            for j in range(n_jobs)
            for t in types
            for n in (1, 2, 4, 8)
            if rng.random() < 0.7
        ]
        picked = solve_columns(columns, n_jobs, types, capacity, SETTINGS)
        assert len({columns[c].job for c in picked}) == len(picked)
        for t in types:
            assert sum(columns[c].count for c in picked if columns[c].gpu_type == t) <= capacity[t]
        row = {t: i for i, t in enumerate(types)}
        exact = solve_assignment(
            AssignmentProblem(
                n_jobs,
                [c.job for c in columns],
                [c.weight for c in columns],
                [((row[c.gpu_type], c.count),) for c in columns],
                [capacity[t] for t in types],
            ),
            mip_gap=0.0,
            time_limit=30.0,
        )
        got = sum(columns[c].weight for c in picked)
        assert got >= (1 - SETTINGS.mip_gap) * exact.objective - 1e-9
        _, rounded, bound = round_relaxation(columns, n_jobs, types, capacity)
        assert rounded <= exact.objective + 1e-9 <= bound + 2e-9
