"""Per-type demand sets: a type is never offered a count the job's profiles say it cannot hold."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import TINY_CLUSTER, cluster_of, store_of
from test_sim_engine import GuardedEngine

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Configuration, Job
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.plugins import get_policy
from hopsd.sim.cluster_file import parse_cluster
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.profiles import ProfileFileError, parse_profiles
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec

SETTINGS = Settings()


def test_demands_on_keeps_the_counts_a_type_can_hold() -> None:
    job = Job("j", (1, 2, 4, 8), 1.0, max_gpus=(("k80", 0), ("v100", 4)))
    assert job.demands_on("k80") == ()
    assert job.demands_on("v100") == (1, 2, 4)
    assert job.demands_on("a100") == (1, 2, 4, 8)
    with pytest.raises(InvalidInputError, match="per-type GPU limit"):
        Job("j", (1,), 1.0, max_gpus=(("k80", -1),))


@pytest.mark.parametrize("name", ["sia", "gavel", "fifo", "hops"])
def test_no_policy_places_a_job_on_a_type_it_does_not_fit(name: str) -> None:
    # "small" is first in node order and three times as fast, so every policy would
    # put J there; its profiles say the model does not fit one GPU of it.
    cluster = cluster_of(("s0", "small", 4), ("b0", "big", 2))
    store = store_of({("J", "small", 2): 30.0, ("J", "big", 2): 10.0})
    free = Job("J", (2,), 1e6)
    assert (
        get_policy(name)
        .plan(Snapshot(0.0, cluster, (free,), store=store), SETTINGS)
        .placements()["J"]
        .gpu_type
        == "small"
    )
    limited = replace(free, max_gpus=(("small", 0),))
    plan = get_policy(name).plan(Snapshot(0.0, cluster, (limited,), store=store), SETTINGS)
    assert plan.placements() == {"J": Configuration.of("big", {"b0": 2})}


def test_sia_does_not_grow_a_job_past_what_a_type_can_hold_for_it() -> None:
    # K scales linearly and has run on 2 GPUs, so Sia would grow it to the whole node
    # (see test_sia_gives_the_scalable_job_the_whole_node); on this type it can use 2.
    cluster = cluster_of(("n0", "t", 4))
    store = store_of({("K", "t", n): 10.0 for n in (1, 2, 4)})
    on_two = Configuration.of("t", {"n0": 2})
    grows = Job("K", (1, 2, 4), 1e6, current=on_two)
    sia = get_policy("sia")
    assert sia.plan(Snapshot(0.0, cluster, (grows,), store=store), SETTINGS).placements() == {
        "K": Configuration.of("t", {"n0": 4})
    }
    capped = replace(grows, max_gpus=(("t", 2),))
    plan = get_policy("sia").plan(Snapshot(0.0, cluster, (capped,), store=store), SETTINGS)
    assert plan.placements() == {"K": on_two}


def test_sia_never_offers_a_count_beyond_a_types_gpus() -> None:
    # J runs fastest per GPU on "fast" but wants 4 there; "fast" has 2 GPUs.
    cluster = cluster_of(("f0", "fast", 2), ("s0", "slow", 8))
    store = store_of({("J", "fast", 4): 50.0, ("J", "slow", 4): 10.0, ("J", "fast", 2): 1.0})
    job = Job("J", (4,), 1e6)
    plan = get_policy("sia").plan(Snapshot(0.0, cluster, (job,), store=store), SETTINGS)
    assert plan.placements() == {"J": Configuration.of("slow", {"s0": 4})}


LIMITED_MODELS = {
    "models": {
        # does not fit one GPU of "fast": no throughput there at all
        "wide": {"params": 1e3, "batch_size": 10, "throughput": {"slow": 10.0}},
        # fits "fast", but at most two GPUs of it
        "capped": {
            "params": 1e3,
            "batch_size": 10,
            "throughput": {"fast": 40.0, "slow": 10.0},
            "max_gpus": {"fast": 2},
        },
    }
}


def test_profiles_need_a_throughput_only_where_the_model_fits() -> None:
    sim = parse_cluster(TINY_CLUSTER, "tiny", seed=0)
    with pytest.raises(InvalidInputError, match="no throughput for GPU type"):
        GroundTruth(sim.cluster, parse_profiles(LIMITED_MODELS))
    models = {"models": dict(LIMITED_MODELS["models"])}
    models["models"]["wide"] = {**models["models"]["wide"], "max_gpus": {"fast": 0}}
    truth = GroundTruth(sim.cluster, parse_profiles(models))
    assert truth.model("capped").limits() == (("fast", 2),)
    with pytest.raises(InvalidInputError, match="at most 2"):
        truth.throughput("capped", Configuration.of("fast", {"f0": 4}))
    bad = {"models": {"m": {**models["models"]["wide"], "max_gpus": {"fast": -1}}}}
    with pytest.raises(ProfileFileError, match="integer >= 0"):
        parse_profiles(bad)


@pytest.mark.parametrize("name", ["fifo", "gavel", "sia", "hops"])
def test_simulated_jobs_run_only_where_their_model_fits(name: str) -> None:
    # The truth refuses any placement the profiles rule out, so a policy that offered
    # "wide" a fast GPU, or "capped" four of them, would stop this run.
    sim = parse_cluster(TINY_CLUSTER, "tiny", seed=0)
    models = {"models": dict(LIMITED_MODELS["models"])}
    models["models"]["wide"] = {**models["models"]["wide"], "max_gpus": {"fast": 0}}
    truth = GroundTruth(sim.cluster, parse_profiles(models), sim.data_factors)
    jobs = [
        JobSpec("w1", 0.0, (1, 2, 4), 40_000.0, "wide", "u1"),
        JobSpec("c1", 0.0, (2, 4), 60_000.0, "capped", "u2"),
        JobSpec("c2", 100.0, (1, 2, 4), 30_000.0, "capped", "u3"),
        JobSpec("w2", 200.0, (2,), 20_000.0, "wide", "u1"),
    ]
    engine = GuardedEngine(truth, jobs, get_policy(name), EngineConfig())
    result = engine.run()
    assert all(j.status == "done" for j in result.jobs)
    wide = [j for j in result.jobs if j.spec.model == "wide"]
    assert all(j.types_used == {"slow"} for j in wide)
