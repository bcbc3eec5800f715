"""The simulation loop: conservation, completion, determinism, restart penalty, fragments."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sim_helpers import tiny_jobs, tiny_truth

from hopsd.core.act import Act
from hopsd.core.model import Assignment, Configuration, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig, SimulationError
from hopsd.sim.metrics import job_records, summarise
from hopsd.sim.workload import JobSpec

POLICIES = ["fifo", "gavel", "sia", "hops"]


# A new job waits 60 s and is then known on every type (no profiling runs): the
# hand-checked timings below are about moves and refills, not profiling.
DELAY_ONLY = EngineConfig(profile_s=0.0, adoption_s=60.0)
DELAY_ONLY_NOISELESS = EngineConfig(measure_noise=0.0, profile_s=0.0, adoption_s=60.0)


class GuardedEngine(Engine):
    """Checks after every plan that no node hands out more GPUs than it has."""

    peak: dict[str, int]

    def _apply(self, plan: Plan, actions: Sequence[Act] = ()) -> None:
        super()._apply(plan, actions)
        self.peak = getattr(self, "peak", {})
        for node in self.cluster.nodes:
            held = sum(
                g
                for j in self.jobs
                if j.config is not None
                for n, g in j.config.parts
                if n == node.id
            )
            assert held == self.used[node.id] <= node.gpus
            self.peak[node.id] = max(self.peak.get(node.id, 0), held)


@pytest.mark.parametrize("name", POLICIES)
def test_every_job_finishes_once_and_gpus_are_conserved(name: str) -> None:
    truth = tiny_truth()
    engine = GuardedEngine(truth, tiny_jobs(), get_policy(name), EngineConfig())
    result = engine.run()
    assert all(j.status == "done" for j in result.jobs)
    known: set[str] = set()  # models an earlier job was profiled on every type with
    for job in sorted(result.jobs, key=lambda j: j.spec.submit_time):
        assert job.samples_done == job.spec.total_samples
        assert job.finish_time is not None and job.first_start is not None
        if job.profiling_runs == 0:  # no run only when its model was measured on both types
            assert job.spec.model in known and not job.profiled
            continue
        # profiling first: at least one run of 60 s / 2 types, on a GPU, before the start
        assert job.first_start >= job.spec.submit_time + 30.0
        assert job.profiled
        if len(job.profiled) == 2:
            known.add(job.spec.model)
    assert any(j.profiling_runs == 0 for j in result.jobs)  # a known model is not profiled again
    assert sum(engine.used.values()) == 0
    assert max(engine.peak.values()) > 0
    records = job_records(truth, result)
    assert sorted(r.job_id for r in records) == sorted(j.job_id for j in tiny_jobs())
    figures = summarise(result, records)
    assert 0 < figures["utilization"] <= 1
    assert figures["avg_wait_h"] >= 30 / 3600 - 1e-9


def test_same_seed_same_run_and_seed_matters() -> None:
    def run(seed: int) -> list[tuple[str, float]]:
        truth = tiny_truth(seed)
        result = Engine(truth, tiny_jobs(), get_policy("hops"), EngineConfig(seed=seed)).run()
        return [(r.job_id, r.finish_s) for r in job_records(truth, result)]

    assert run(3) == run(3)


class RoguePolicy:
    """Starts every queued job on the same node, whatever it holds."""

    name = "rogue"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        node = snapshot.cluster.nodes[0]
        start = tuple(
            Assignment(j.id, Configuration.of(node.gpu_type, {node.id: j.demands[0]}))
            for j in snapshot.queued
        )
        return Plan(start=start)

    plan_fragment = plan


def test_double_booking_is_refused() -> None:
    jobs = [JobSpec("x", 0.0, (4,), 1e6, "toy"), JobSpec("y", 0.0, (4,), 1e6, "toy")]
    with pytest.raises(SimulationError, match=r"GPUs handed out twice.*'f00'"):
        Engine(tiny_truth(), jobs, RoguePolicy(), EngineConfig()).run()


class MoveOncePolicy:
    """Starts the job on the fast node, moves it to a slow node at t = 300."""

    name = "move-once"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        job = snapshot.jobs[0] if snapshot.jobs else None
        if job is None or job.current is None:
            return self.plan_fragment(snapshot, settings)
        if job.current.gpu_type == "fast" and snapshot.now >= 300:
            return Plan(move=(Assignment(job.id, Configuration.of("slow", {"s00": 1})),))
        return Plan(keep=(Assignment(job.id, job.current),))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        start = tuple(
            Assignment(j.id, Configuration.of("fast", {"f00": 1})) for j in snapshot.queued
        )
        return Plan(
            start=start,
            keep=tuple(
                Assignment(j.id, j.current) for j in snapshot.running if j.current is not None
            ),
        )


def test_restart_penalty_hand_checked() -> None:
    # hops adopts the job at 60 s (no profiling runs); 240 s on the fast GPU at 20
    # samples/s = 4,800 samples;
    # the move at 300 s costs 30 s; the remaining 55,200 samples at 10/s take 5,520 s.
    truth = tiny_truth()
    jobs = [JobSpec("solo", 0.0, (1,), 60_000.0, "toy")]
    result = Engine(truth, jobs, MoveOncePolicy(), DELAY_ONLY_NOISELESS).run()
    (job,) = result.jobs
    assert job.first_start == 60.0
    assert job.finish_time == pytest.approx(300 + 30 + 5_520, abs=0.5)
    assert job.restarts == 1
    assert result.moves == 1
    assert job.run_time == pytest.approx(job.finish_time - 60.0)


def test_a_models_own_restore_cost_replaces_the_penalty() -> None:
    # As above, but the model restores in 200 s: the remaining 5,520 s start at 500 s.
    from dataclasses import replace

    truth = tiny_truth()
    truth = type(truth)(
        truth.cluster,
        {**truth.models, "toy": replace(truth.models["toy"], restore_s=200.0)},
        truth.data_factors,
    )
    jobs = [JobSpec("solo", 0.0, (1,), 60_000.0, "toy")]
    result = Engine(truth, jobs, MoveOncePolicy(), DELAY_ONLY_NOISELESS).run()
    assert result.jobs[0].finish_time == pytest.approx(300 + 200 + 5_520, abs=0.5)


def _blocking_jobs() -> list[JobSpec]:
    # x1 is short (8,000 samples at 80/s on the fast node: 100 s); x4 must wait for GPUs.
    return [
        JobSpec("x1", 0.0, (4,), 8_000.0, "toy"),
        JobSpec("x2", 0.0, (4,), 400_000.0, "toy"),
        JobSpec("x3", 0.0, (4,), 400_000.0, "toy"),
        JobSpec("x4", 0.0, (4,), 40_000.0, "toy"),
    ]


def test_fifo_refills_freed_gpus_inside_the_round() -> None:
    result = Engine(tiny_truth(), _blocking_jobs(), get_policy("fifo"), DELAY_ONLY).run()
    by_id = {j.spec.job_id: j for j in result.jobs}
    assert by_id["x1"].first_start == 60.0
    assert by_id["x1"].finish_time == pytest.approx(160.0, abs=0.1)
    assert by_id["x4"].first_start == pytest.approx(160.0, abs=0.1)
    assert result.fragment_plans >= 2


def test_round_based_baselines_start_jobs_only_at_round_boundaries() -> None:
    for name in ("gavel", "sia"):
        result = Engine(tiny_truth(), _blocking_jobs(), get_policy(name), DELAY_ONLY).run()
        starts = [j.first_start for j in result.jobs]
        assert all(s is not None and s % 300 == 0 for s in starts), (name, starts)


class PreemptAllPolicy:
    """Round plans preempt every running job; fragment plans start every queued job."""

    name = "preempt-all"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return Plan(preempt=tuple(j.id for j in snapshot.running))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return MoveOncePolicy().plan_fragment(snapshot, settings)


def test_gpus_a_round_plan_leaves_idle_are_offered_again() -> None:
    # Every round preempts the job and the refill of the same step puts it straight
    # back on the GPU it held: one step, one plan, so the job keeps running (as hopsd
    # would: nothing to enact) instead of paying 30 s each round or waiting for an
    # event. 60,000 samples at 20/s from 60 s: done at 3,060 s.
    jobs = [JobSpec("solo", 0.0, (1,), 60_000.0, "toy")]
    config = DELAY_ONLY_NOISELESS
    result = Engine(tiny_truth(), jobs, PreemptAllPolicy(), config).run()
    (job,) = result.jobs
    assert job.finish_time == pytest.approx(3_060.0, abs=0.5)
    assert job.restarts == result.preemptions == 0
    assert result.fragment_plans >= 10  # a refill after every round


def test_without_refill_a_preempted_job_waits_for_an_event() -> None:
    jobs = [JobSpec("solo", 0.0, (1,), 60_000.0, "toy")]
    config = EngineConfig(refill_after_round=False, max_horizon_s=3_600.0)
    with pytest.raises(SimulationError, match="unfinished past the horizon"):
        Engine(tiny_truth(), jobs, PreemptAllPolicy(), config).run()


def test_usable_idle_gpus_count_only_types_a_waiting_job_fits() -> None:
    # Fast type: one 4-GPU node, 1 busy -> 3 idle. Slow type: two 4-GPU nodes, 2 busy
    # -> 6 idle. A waiting job needing 4 fits only the slow type's idle GPUs: 6 of 9.
    jobs = [JobSpec("q4", 0.0, (4,), 1_000.0, "toy"), JobSpec("q1", 0.0, (1, 2), 1_000.0, "toy")]
    engine = Engine(tiny_truth(), jobs, get_policy("fifo"), EngineConfig())
    fast = [n.id for n in engine.cluster.nodes if n.gpu_type == "fast"]
    slow = [n.id for n in engine.cluster.nodes if n.gpu_type == "slow"]
    engine.used[fast[0]] = 1
    engine.used[slow[1]] = 2
    assert engine._usable_idle() == 0  # nobody waits yet
    q4, q1 = engine.by_id["q4"], engine.by_id["q1"]
    q4.status = "queued"
    engine.active["q4"] = q4
    assert engine._usable_idle() == 6
    q1.status = "queued"
    engine.active["q1"] = q1
    assert engine._usable_idle() == 9


def test_usable_idle_never_exceeds_idle_and_shows_in_the_figures() -> None:
    result = Engine(tiny_truth(), tiny_jobs(), get_policy("gavel"), EngineConfig()).run()
    for stat in result.rounds:
        assert stat.usable_idle_gpu_s <= stat.idle_gpu_s_waiting + 1e-9
    figures = summarise(result, job_records(tiny_truth(), result))
    assert 0.0 <= figures["avg_usable_idle_gpus"] <= figures["avg_idle_gpus"]


class FastOnlyPolicy(MoveOncePolicy):
    """Starts queued jobs on f00 and never moves them."""

    name = "fast-only"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return self.plan_fragment(snapshot, settings)


class WatchedEngine(Engine):
    """Records how many GPUs profiling runs held after every step."""

    held: list[tuple[float, int]]

    def _apply_profiling(self, decision):  # type: ignore[no-untyped-def]
        stopped = super()._apply_profiling(decision)
        self.held = getattr(self, "held", [])
        self.held.append((self.now, sum(self.profiling_used.values())))
        return stopped


def test_profiling_runs_hold_gpus_train_the_job_and_make_its_start_a_restart() -> None:
    # 60 s of profiling over two types: 30 s on one GPU of each, one after the other,
    # training at 20 (fast) and 10 (slow) samples/s: 900 samples. The real start at
    # 60 s is a restart (30 s penalty); the other 2,100 samples at 20/s take 105 s.
    jobs = [JobSpec("solo", 0.0, (1,), 3_000.0, "toy")]
    engine = WatchedEngine(tiny_truth(), jobs, FastOnlyPolicy(), EngineConfig(measure_noise=0.0))
    (job,) = engine.run().jobs
    assert job.profiling_runs == 2 and job.profiled == {"fast", "slow"}
    assert job.first_start == 60.0
    assert job.finish_time == pytest.approx(60 + 30 + 105, abs=0.5)
    assert (0.0, 1) in engine.held and (30.0, 1) in engine.held  # one GPU, each run
    assert engine.held[-1][1] == 0


class FillPolicy(MoveOncePolicy):
    """Puts "f" on all of f00 and "s" on all of s00 and s01; others where GPUs are free."""

    name = "fill"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return self.plan_fragment(snapshot, settings)

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        free = {n.id: snapshot.capacity_of(n.id) for n in snapshot.cluster.nodes}
        for job in snapshot.running:
            assert job.current is not None
            for node, gpus in job.current.parts:
                free[node] -= gpus
        fixed = {
            "f": Configuration.of("fast", {"f00": 4}),
            "s": Configuration.of("slow", {"s00": 4, "s01": 4}),
        }
        start = []
        for job in snapshot.queued:
            cfg = fixed.get(job.id)
            if cfg is None:
                node = next((n for n in snapshot.cluster.nodes if free[n.id] >= 1), None)
                cfg = None if node is None else Configuration.of(node.gpu_type, {node.id: 1})
            if cfg is not None and all(free[n] >= g for n, g in cfg.parts):
                for n, g in cfg.parts:
                    free[n] -= g
                start.append(Assignment(job.id, cfg))
        keep = tuple(Assignment(j.id, j.current) for j in snapshot.running if j.current)
        return Plan(start=tuple(start), keep=keep)


def test_a_job_arriving_while_the_cluster_is_full_is_not_profiled_on_a_busy_gpu() -> None:
    """Profiling only takes idle GPUs: with every GPU busy, no profiling run takes a GPU
    until one frees."""
    jobs = [
        JobSpec("f", 0.0, (4,), 20_000.0, "toy"),  # 4 fast GPUs at 20/s: ends near 400 s
        JobSpec("s", 0.0, (8,), 40_000.0, "toy"),  # 8 slow GPUs at 10/s: ends near 600 s
        JobSpec("late", 100.0, (1,), 1_000.0, "toy"),
    ]
    engine = WatchedEngine(tiny_truth(), jobs, FillPolicy(), EngineConfig(measure_noise=0.0))
    done = {j.spec.job_id: j for j in engine.run().jobs}
    first_end = min(done["f"].finish_time or 0.0, done["s"].finish_time or 0.0)
    assert first_end > 300.0
    busy = [held for at, held in engine.held if 100.0 <= at < first_end - 1e-6]
    assert busy and all(held == 0 for held in busy)  # nothing free: no profiling run
    assert (done["late"].first_start or 0.0) >= first_end


def test_a_profiling_run_is_service_not_waiting_as_hopsd_charges_it() -> None:
    """One job alone: its two 30 s profiling runs hold a GPU and train it, so the
    simulator charges them as service (as hopsd does), never as waiting."""
    job = JobSpec("a", 0.0, (1, 2, 4), 60_000.0, "toy", "u1")
    engine = Engine(tiny_truth(), [job], get_policy("hops"), EngineConfig(profile_s=60.0))
    (done,) = engine.run().jobs
    assert done.profiling_runs == 2 and done.finish_time is not None
    assert done.wait_time < 30.0, done.wait_time  # an idle cluster: it hardly waits at all
    on_gpus = done.finish_time - job.submit_time - done.wait_time
    assert on_gpus >= done.run_time + 60.0 - 1e-6  # the runs' 60 s are on GPUs too


def test_a_model_hopsd_did_not_profile_starts_at_once_and_profiling_runs_pay_their_launch() -> None:
    """Replaying live jobs: one hopsd did not profile (its model was known) is planned at
    once, never profiled; a profiled one's runs train only once launched (5 s each here),
    so of its 60 s of profiling, 50 s train: 250 + 500 = 750 samples, not 900."""
    import dataclasses

    truth = tiny_truth()
    toy = truth.model("toy")
    models = {
        **truth.models,
        "known": dataclasses.replace(toy, name="known", profiled=False),
        "slow_launch": dataclasses.replace(toy, name="slow_launch", launch_s=5.0),
    }
    truth = dataclasses.replace(truth, models=models, _memo={})
    jobs = [
        JobSpec("seen", 0.0, (1,), 3_000.0, "known"),
        JobSpec("new", 0.0, (1,), 3_000.0, "slow_launch"),
    ]
    engine = WatchedEngine(truth, jobs, FastOnlyPolicy(), EngineConfig(measure_noise=0.0))
    result = {j.spec.job_id: j for j in engine.run().jobs}
    assert result["seen"].profiling_runs == 0 and result["seen"].first_start == 0.0
    new = result["new"]
    assert new.profiling_runs == 2 and new.first_start == 60.0
    # 750 samples in profiling; the real start pays its restart (30 s) then 2,250 at 20/s
    assert new.finish_time == pytest.approx(60 + 30 + 2250 / 20, abs=0.5)


def test_measurements_on_two_servers_of_a_type_give_the_planner_a_speed_prior() -> None:
    """The simulator learns per-server speed factors from measurements as hopsd does
    from its ledger, and a prior it was started with (a forecast's) stays for the
    servers its own measurements do not compare."""
    truth = tiny_truth()
    engine = Engine(truth, tiny_jobs(), get_policy("hops"), EngineConfig())
    engine.store.set_node_speeds({"f0": 0.5})
    engine = Engine(truth, tiny_jobs(), get_policy("hops"), EngineConfig(), store=engine.store)
    engine.learn_measurement("a", Configuration.of("slow", {"s0": 1}), 10.0)
    engine.learn_measurement("a", Configuration.of("slow", {"s1": 1}), 4.0)
    snapshot = engine._snapshot(pinned=False)
    assert dict(snapshot.store.node_speeds()) == {"f0": 0.5, "s1": pytest.approx(0.4)}
