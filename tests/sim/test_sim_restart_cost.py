"""A model's restart cost: charged by the simulator, priced by the planner."""

from __future__ import annotations

import itertools

import pytest
from sim_helpers import TINY_CLUSTER

from hopsd.core.gains import (
    learned_restart_s,
    preemption_price,
    restart_discount,
    unreported_restart_s,
)
from hopsd.core.settings import Settings
from hopsd.plugins import get_policy
from hopsd.sim.cluster_file import parse_cluster
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.profiles import parse_profiles
from hopsd.sim.state import EngineResult
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec


def _workload() -> list[JobSpec]:
    """Long jobs start on the slow nodes while short ones hold the fast node, then it frees up."""
    jobs = [JobSpec(f"short{i}", 0.0, (4,), 30_000.0, "quick", f"v{i}") for i in range(2)]
    jobs += [JobSpec(f"long{i}", 10.0, (4,), 2_000_000.0, "m", f"u{i}") for i in range(2)]
    return jobs


def _run(restore_s: float, engine: type[Engine] = Engine) -> EngineResult:
    sim = parse_cluster(TINY_CLUSTER, "tiny", seed=0)
    models = {
        "models": {
            "m": {
                "params": 1e3,
                "batch_size": 10,
                "throughput": {"fast": 15.0, "slow": 10.0},
                "restore_s": restore_s,
            },
            "quick": {"params": 1e3, "batch_size": 10, "throughput": {"fast": 40.0, "slow": 10.0}},
        }
    }
    truth = GroundTruth(sim.cluster, parse_profiles(models), sim.data_factors)
    config = EngineConfig(settings=Settings(round_length_s=600.0, restart_penalty_s=30.0))
    return engine(truth, _workload(), get_policy("hops"), config).run()


def test_a_dear_restart_is_moved_no_more_often_than_a_cheap_one() -> None:
    cheap, dear = _run(25.0), _run(250.0)
    assert all(j.status == "done" for j in (*cheap.jobs, *dear.jobs))
    cheap_moves = cheap.moves + cheap.preemptions
    dear_moves = dear.moves + dear.preemptions
    assert cheap_moves > 0
    assert dear_moves <= cheap_moves


def test_a_long_job_with_a_dear_restart_takes_the_fast_node_once_it_lies_idle() -> None:
    """The fast node frees up while both long jobs (12 h of work left) hold slow nodes.
    Weighed over one round (250 s of a 600 s round) the 1.5x faster node was worth less
    than staying, and it lay idle until the end; weighed over the time the job has held
    its place, a long job moves onto it once that pays the restart back."""
    moved: list[tuple[float, str, str]] = []

    class Moves(Engine):
        def _apply(self, plan, actions=()) -> None:  # type: ignore[no-untyped-def]
            moved.extend((self.now, a.job_id, a.config.gpu_type) for a in plan.move)
            super()._apply(plan, actions)

    result = _run(250.0, Moves)
    short_end = max(j.finish_time or 0.0 for j in result.jobs if j.spec.job_id.startswith("short"))
    assert any(t > short_end and job.startswith("long") and to == "fast" for t, job, to in moved)


def test_learned_restart_cost_is_the_notice_wait_plus_the_startup() -> None:
    assert learned_restart_s(None, None, 120.0) is None  # nothing measured: the prior
    assert learned_restart_s(12.0, 8.0, 120.0) == 20.0  # checkpointed on notice
    assert learned_restart_s(None, 8.0, 120.0) == 128.0  # ignores the notice: the grace
    # never restarted, so never asked to checkpoint: no evidence it ignores notices yet
    assert learned_restart_s(None, 8.0, 120.0, restarts=0) is None


class _Recording(Engine):
    """Notes the time of every plan that moves or preempts."""

    churn_at: list[float]

    def _apply(self, plan, actions=()) -> None:  # type: ignore[no-untyped-def]
        if plan.move or plan.preempt:
            self.churn_at = [*getattr(self, "churn_at", []), self.now]
        super()._apply(plan, actions)


@pytest.mark.parametrize("rule", [True, pytest.param(False, marks=pytest.mark.xfail(strict=True))])
def test_equal_jobs_do_not_swap_places_round_after_round(rule: bool) -> None:
    """Five identical 4-GPU jobs on 16 GPUs, 60 s rounds, 30 s restarts.

    A swap gains nothing but costs both jobs a restart; a preemption is priced at
    the preempted job's restart cost and a resume is discounted by the resumed
    job's (``Settings.price_restarts``), so the waiting job displaces a running
    one only once its priority is ahead by both.
    """
    cluster = {
        "gpu_types": {"a100": {"b_link": 4e9, "b_net": 1e9, "speed": 1.0}},
        "node_groups": [{"prefix": "n", "count": 4, "gpu_type": "a100", "gpus": 4}],
    }
    sim = parse_cluster(cluster, "c", seed=0)
    model = {"params": 1e3, "batch_size": 10, "throughput": {"a100": 10.0}}
    truth = GroundTruth(sim.cluster, parse_profiles({"models": {"m": model}}), sim.data_factors)
    jobs = [JobSpec(f"j{i}", 0.0, (4,), 200_000.0, "m", f"u{i}") for i in range(5)]
    settings = Settings(round_length_s=60.0, restart_penalty_s=30.0, price_restarts=rule)
    engine = _Recording(truth, jobs, get_policy("hops"), EngineConfig(settings=settings))
    result = engine.run()
    assert all(j.status == "done" for j in result.jobs)
    rounds = max(j.finish_time or 0.0 for j in result.jobs) / 60.0
    churn = getattr(engine, "churn_at", [])
    # measured: 9 preemptions in 122 rounds; without the prices 117 in 121 (every round)
    assert result.preemptions + result.moves <= rounds / 5
    gaps = [b - a for a, b in itertools.pairwise(churn)]
    assert all(gap >= 2 * 60.0 for gap in gaps), gaps  # never in two rounds running


def test_a_job_without_the_probe_is_taken_to_lose_its_run_on_a_restart() -> None:
    assert unreported_restart_s(0.0, 30.0) == 30.0  # just started: the prior
    assert unreported_restart_s(400.0, 30.0) == 400.0  # all it did since it started
    # past a round, a move is worth nothing and a preemption costs a whole round
    assert restart_discount(300.0, unreported_restart_s(400.0, 30.0)) == 0.0
    assert preemption_price(300.0, unreported_restart_s(400.0, 30.0)) == 1.0
