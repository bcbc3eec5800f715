"""``hopsd.sim.replay``: measured truth, cluster and trace from ledger records, and the run."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Configuration, GpuType
from hopsd.core.settings import Settings
from hopsd.ledger.history import JobHistory, LearnedRate, NodeSeen
from hopsd.sim.replay import (
    build_world,
    model_of,
    replay,
    replay_engine_config,
    replay_size,
)
from hopsd.sim.replay_costs import measured_launch, measured_restart_cost
from hopsd.sim.replay_truth import JobRates

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
from live_replay import jct_errors

TYPES = {"k80": GpuType("k80", speed=1.0), "a100": GpuType("a100", speed=4.0)}
NODES = [NodeSeen("a100n1", "a100", 4), NodeSeen("a100n2", "a100", 2), NodeSeen("k80n1", "k80", 4)]


def job(
    job_id: str,
    submit: float,
    end: float | None,
    demands: tuple[int, ...] = (1,),
    samples: float = 1000.0,
    state: str = "done",
) -> JobHistory:
    return JobHistory(
        job_id=job_id,
        slurm_job_id=int(job_id[1:]),
        user="alice",
        state=state,
        submit_time=submit,
        first_start_time=None if end is None else submit + 1,
        end_time=end,
        demands=demands,
        total_samples=samples,
        samples_done=samples if end is not None else 0.0,
        batch_size=32,
        model_name="",
        params=0.0,
        wait_time=1.0,
        restarts=0,
        latency_ratio=0.1,
    )


def test_rates_fall_back_from_exact_to_nearest_to_scaled_type_to_type_table() -> None:
    rates = JobRates(TYPES, reference=100.0)
    assert rates.type_rate("a100", 1) == 400.0  # nothing measured: type table
    rates.add("type_agg", "a100", 2, 300.0)
    assert rates.type_rate("a100", 2) == 300.0  # exact
    assert rates.type_rate("a100", 4) == 300.0  # nearest size
    assert rates.type_rate("k80", 1) == pytest.approx(75.0)  # a100's, scaled by speed 1/4
    rates.add("entity_agg", "a100n2", 2, 150.0)
    assert rates.node_rate("a100n2", "a100", 2, 1) == 150.0  # the server's own measurement
    rates.node_factor = {"a100n1": 0.5}
    assert rates.node_rate("a100n1", "a100", 2, 1) == 150.0  # type rate x server factor


def test_world_replays_every_job_on_the_nodes_allocations_named() -> None:
    jobs = [
        job("j1", 100.0, 120.0),
        job("j2", 110.0, None, state="running"),
        job("j3", 105.0, 140.0),
    ]
    rates = [
        LearnedRate("j1", "type_agg", "a100", 1, 200.0, 3),
        LearnedRate("j1", "entity_agg", "a100n1", 1, 200.0, 3),
        LearnedRate("j1", "entity_agg", "a100n2", 1, 100.0, 3),
    ]
    world = build_world(
        jobs,
        rates,
        NODES,
        types=TYPES,
        reference_throughput=100.0,
        inventory={"a100n2": ("a100", 4)},
    )
    assert [s.job_id for s in world.jobs] == ["1", "2", "3"]
    assert [s.submit_time for s in world.jobs] == [0.0, 10.0, 5.0]
    assert set(world.live) == {"1", "3"}  # compared with the live run
    assert world.load_only == {"2": "running"} and world.skipped == {}
    gpus = {n.id: n.gpus for n in world.truth.cluster.nodes}
    assert gpus == {"a100n1": 4, "a100n2": 4, "k80n1": 4}  # Slurm's count beats the peak
    truth = world.truth
    one = Configuration.of("a100", {"a100n1": 1})
    slow = Configuration.of("a100", {"a100n2": 1})
    assert truth.throughput(model_of("j1"), one) == pytest.approx(200.0)
    assert truth.throughput(model_of("j1"), slow) == pytest.approx(100.0)
    # j3 was never measured: type table, and the slow server's factor other jobs saw
    assert truth.throughput(model_of("j3"), one) == pytest.approx(400.0)
    assert truth.throughput(model_of("j3"), slow) == pytest.approx(200.0)
    # distributed: the slowest server sets the pace
    both = Configuration.of("a100", {"a100n1": 1, "a100n2": 1})
    assert truth.throughput(model_of("j3"), both) == pytest.approx(2 * 200.0)


def test_a_window_with_nothing_finished_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="no finished job"):
        build_world(
            [job("j1", 0.0, None, state="queued")], [], NODES, types=TYPES, reference_throughput=1.0
        )
    with pytest.raises(InvalidInputError, match="no managed node"):
        build_world([job("j1", 0.0, 5.0)], [], [], types=TYPES, reference_throughput=1.0)


def test_unfinished_and_ended_jobs_are_replayed_as_the_load_they_were() -> None:
    """A job still running at the window's end holds the only GPU the finished job needs:
    replaying without it would let the finished job start at once."""
    gpu = [NodeSeen("k80n1", "k80", 1)]
    rates = [
        LearnedRate("j1", "type_agg", "k80", 1, 10.0, 3),
        LearnedRate("j2", "type_agg", "k80", 1, 10.0, 3),
    ]
    jobs = [
        job("j1", 0.0, None, samples=1000.0, state="running"),  # 100 s of work left
        job("j2", 1.0, 200.0, samples=100.0),
        dataclasses.replace(job("j3", 2.0, 50.0, state="cancelled"), samples_done=0.0),  # no work
    ]
    world = build_world(jobs, rates, gpu, types=TYPES, reference_throughput=10.0)
    assert world.load_only == {"1": "running"} and world.skipped == {"cancelled": 1}
    failed = job("j4", 0.0, 30.0, samples=1000.0, state="failed")
    failed = dataclasses.replace(failed, samples_done=250.0)
    assert replay_size(failed) == 250.0
    config = replay_engine_config(
        Settings(round_length_s=8.0, restart_penalty_s=2.0),
        spare_guard_s=2.0,
        adoption_s=0.5,
        measure_after_s=5.0,
    )
    out = replay(world, ["fifo"], config)
    assert out["n_jobs"] == 1 and out["load_only"] == {"running": 1}
    (row,) = out["jobs"]
    assert row["job_id"] == "2"
    assert row["fifo_jct_s"] > 90.0  # it waited for the unfinished job's GPU


@pytest.mark.parametrize("policy", ["hops", "fifo"])
def test_a_lone_job_runs_at_its_measured_rate(policy: str) -> None:
    rates = [LearnedRate("j1", "type_agg", "a100", 1, 50.0, 3)]
    world = build_world(
        [job("j1", 0.0, 30.0, samples=1000.0)], rates, NODES, types=TYPES, reference_throughput=1.0
    )
    config = replay_engine_config(  # hops.conf's reference throughput, as the world's
        Settings(round_length_s=8.0, restart_penalty_s=2.0, reference_throughput=1.0),
        spare_guard_s=2.0,
        adoption_s=0.5,
        measure_after_s=1.0,
    )
    out = replay(world, [policy], config)
    jct = out["jobs"][0][f"{policy}_jct_s"]
    # 1000 samples at 50/s on the a100 it was measured on; at most one round of waiting
    assert 20.0 <= jct <= 20.0 + 0.5 + 8.0 + 1e-6
    errors = jct_errors(out, policy)
    assert errors["live_avg_jct_s"] == 30.0 and errors["jobs"] == 1
    assert errors["avg_jct_error"] == pytest.approx(abs(jct - 30.0) / 30.0)
    assert out["live"]["avg_jct_s"] == 30.0 and out["policies"][policy]["restarts"] == 0


def test_the_restart_cost_is_measured_from_the_placements_and_rates() -> None:
    """j1 (1,000 samples at 10/s on k80n1) ran 0-40 s, was moved at 40 s and ended at
    110 s: 40 + 70 s at 10/s would be 1,100 samples, 100 more than it had, so its one
    relaunch cost 100 / 10 = 10 s. j2 never restarted and tells nothing."""
    from hopsd.ledger.history import PlacementSeen

    gpu = [NodeSeen("k80n1", "k80", 4)]
    rates = [LearnedRate("j1", "type_agg", "k80", 1, 10.0, 3)]
    moved = dataclasses.replace(job("j1", 0.0, 110.0, samples=1000.0), restarts=1)
    world = build_world(
        [moved, job("j2", 0.0, 20.0)], rates, gpu, types=TYPES, reference_throughput=10.0
    )
    one = (("k80n1", 1),)
    placements = [
        PlacementSeen("j1", "start", "k80", one, 0.0),
        PlacementSeen("j1", "keep", "k80", one, 8.0),
        PlacementSeen("j1", "move", "k80", (("k80n1", 1),), 40.0),
        PlacementSeen("j1", "end", None, (), 110.0),
        PlacementSeen("j2", "start", "k80", one, 0.0),
    ]
    assert measured_restart_cost(world, placements) == pytest.approx(10.0)
    assert measured_restart_cost(world, placements[4:]) is None
    charged = build_world(
        [moved], rates, gpu, types=TYPES, reference_throughput=10.0, restart_cost_s=10.0
    )
    assert charged.truth.model(model_of("j1")).restore_s == 10.0


def test_each_job_is_charged_its_measured_launch_before_it_trains() -> None:
    """j1: hopsd decided its start at 2 s and saw it running at 4.5 s, so Slurm started it
    between 3.5 and 4.5 s (1 s ticks): 2 s on average; its probe took 2 s to the first
    iteration: 4 s before it trained (the later move is a restart, not a launch). j2, seen
    at the first tick after its start decision, was launched within that tick: 0.5 s on
    average, and its probe never reported a startup. A job never started has no launch.
    The replayed job ends 4 s later for its launch."""
    from hopsd.ledger.history import PlacementSeen

    one = (("a100n1", 1),)
    j1 = dataclasses.replace(job("j1", 0.0, 30.0), first_start_time=4.5, startup_s=2.0)
    j2 = dataclasses.replace(job("j2", 0.0, 30.0), first_start_time=2.0)
    placements = [
        PlacementSeen("j1", "start", "a100", one, 2.0),
        PlacementSeen("j1", "move", "a100", one, 10.0),
        PlacementSeen("j2", "start", "a100", one, 1.0),
    ]
    launch = measured_launch([j1, j2, job("j3", 0.0, None, state="queued")], placements, 1.0)
    assert launch == {"j1": pytest.approx(4.0), "j2": pytest.approx(0.5)}

    rates = [LearnedRate("j1", "type_agg", "a100", 1, 50.0, 3)]
    config = replay_engine_config(
        Settings(round_length_s=8.0, restart_penalty_s=2.0),
        spare_guard_s=2.0,
        adoption_s=0.5,
        measure_after_s=1.0,
    )
    lone = [job("j1", 0.0, 30.0, samples=1000.0)]
    free = replay(
        build_world(lone, rates, NODES, types=TYPES, reference_throughput=1.0), ["fifo"], config
    )
    charged = replay(
        build_world(
            lone, rates, NODES, types=TYPES, reference_throughput=1.0, launch_s={"j1": 4.0}
        ),
        ["fifo"],
        config,
    )
    assert charged["jobs"][0]["fifo_jct_s"] == pytest.approx(free["jobs"][0]["fifo_jct_s"] + 4.0)


def test_the_first_launch_is_not_counted_as_a_restart() -> None:
    """j1 as in the restart-cost test (1,100 samples' worth of placements for 1,000), but its
    first launch cost 4 s (40 samples): the one relaunch cost (100 - 40) / 10 = 6 s."""
    from hopsd.ledger.history import PlacementSeen

    gpu = [NodeSeen("k80n1", "k80", 4)]
    rates = [LearnedRate("j1", "type_agg", "k80", 1, 10.0, 3)]
    moved = dataclasses.replace(job("j1", 0.0, 110.0, samples=1000.0), restarts=1)
    world = build_world(
        [moved], rates, gpu, types=TYPES, reference_throughput=10.0, launch_s={"j1": 4.0}
    )
    one = (("k80n1", 1),)
    placements = [
        PlacementSeen("j1", "start", "k80", one, 0.0),
        PlacementSeen("j1", "move", "k80", one, 40.0),
        PlacementSeen("j1", "end", None, (), 110.0),
    ]
    assert measured_restart_cost(world, placements) == pytest.approx(6.0)


def test_moves_are_priced_as_hopsd_priced_them_and_charged_what_they_cost() -> None:
    """hopsd priced a job's moves at what its probe told it (startup, checkpoint; the prior
    until the job restarted and had not reported a checkpoint); the replayed planner prices
    them the same, by the replayed job's own restart count, while charging the measured
    restart cost. Without the grace (no pricing rule given) the true cost is the price."""
    from hopsd.sim.engine import Engine
    from hopsd.sim.state import JobState

    silent = dataclasses.replace(job("j1", 0.0, 30.0), startup_s=0.5, restarts=2)
    saved = dataclasses.replace(job("j2", 0.0, 30.0), startup_s=0.5, checkpoint_s=1.0)
    rates = [LearnedRate("j1", "type_agg", "a100", 1, 50.0, 3)]
    world = build_world(
        [silent, saved],
        rates,
        NODES,
        types=TYPES,
        reference_throughput=1.0,
        restart_cost_s=5.0,
        grace_s=3.0,
    )
    m1, m2 = (world.truth.model(model_of(j)) for j in ("j1", "j2"))
    assert m1.restore_s == 5.0  # what a restart costs it in the replay

    def price(model, restarts):  # type: ignore[no-untyped-def]
        spec = next(s for s in world.jobs if s.model == model.name)
        return Engine._restart_price(JobState(spec, model, restarts=restarts))

    assert price(m1, 0) is None  # never restarted, no checkpoint report: the prior
    assert price(m1, 1) == pytest.approx(3.5)  # startup + the whole grace
    assert price(m2, 0) == pytest.approx(1.5)  # startup + its checkpoint
    plain = build_world(
        [silent], rates, NODES, types=TYPES, reference_throughput=1.0, restart_cost_s=5.0
    )
    model = plain.truth.model(model_of("j1"))
    spec = plain.jobs[0]
    assert Engine._restart_price(JobState(spec, model, restarts=1)) == 5.0


def test_each_job_is_profiled_as_long_as_its_own_phase_took_live() -> None:
    """j1 was profiled in 6 s live, j2 in 24 s (a slow starter: each of its runs is 2 s
    beyond the window's whole median phase, and none is taken for silent), j3 has no
    phase of its own: the median, 10 s. Each is profiled on the two types in turn, its
    phase shared among them: requeued at the end of each run, it starts for real when
    its last run ends (adopted at 0.5 s; the cluster is idle). j4 was kept off the k80s
    (``--types a100``): its one run is its whole phase."""
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine

    names = ("j1", "j2", "j3", "j4")
    rates = [LearnedRate(j, "type_agg", "a100", 1, 50.0, 3) for j in names]
    jobs = [job(j, 0.0, 100.0, samples=5000.0) for j in names]
    world = build_world(
        jobs,
        rates,
        NODES,
        types=TYPES,
        reference_throughput=1.0,
        profiled=True,
        profile_phases_s={"j1": 6.0, "j2": 24.0, "j4": 7.0},
        excluded_types={"j4": frozenset({"k80"})},
    )
    config = replay_engine_config(
        Settings(round_length_s=8.0, restart_penalty_s=2.0),
        spare_guard_s=2.0,
        adoption_s=0.5,
        measure_after_s=1.0,
        profile_s=10.0,
    )
    engine = Engine(world.truth, world.jobs, get_policy("fifo"), config)
    result = engine.run()
    requeues = {j: [at for at, who, what in engine.events if who == j and what == "requeue"]
                for j in ("1", "2", "3", "4")}  # fmt: skip
    assert requeues == {
        "1": pytest.approx([3.5, 6.5]),
        "2": pytest.approx([12.5, 24.5]),
        "3": pytest.approx([5.5, 10.5]),
        "4": pytest.approx([7.5]),
    }
    first = {j.spec.job_id: j.first_start for j in result.jobs}
    assert first == pytest.approx({"1": 6.5, "2": 24.5, "3": 10.5, "4": 7.5})


def test_the_replay_rounds_fall_where_hopsd_s_did() -> None:
    """hopsd's rounds fall on its ticks (the first one a round length after the last),
    not exact round lengths apart: the replay takes them from the ledger, then goes on
    one round length apart after the last."""
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine
    from hopsd.sim.replay import round_times_s

    assert round_times_s([1019.0, 1003.0, 998.0], 1000.0) == (3.0, 19.0)
    world = build_world(
        [job("j1", 0.0, 60.0, samples=3000.0)],
        [LearnedRate("j1", "type_agg", "a100", 1, 50.0, 3)],
        NODES,
        types=TYPES,
        reference_throughput=1.0,
    )
    base = replay_engine_config(
        Settings(round_length_s=8.0), spare_guard_s=0.0, adoption_s=0.5, measure_after_s=1.0
    )
    config = dataclasses.replace(base, first_round_s=0.9, round_times=(0.9, 9.9, 18.7))
    result = Engine(world.truth, world.jobs, get_policy("hops"), config).run()
    starts = [r.start for r in result.rounds]
    assert starts[:4] == pytest.approx([0.0, 0.9, 9.9, 18.7])
    assert starts[4] == pytest.approx(26.7)  # then one round length apart


@pytest.mark.parametrize("profiled", [False, True])
def test_a_window_without_profiling_is_planned_from_the_type_table_as_hopsd_did(
    profiled: bool,
) -> None:
    """hopsd without profiling knows no phase times of a new job: it plans it from the type
    table until it measures it running. The replay's estimator knows no more: a job
    handed phase times is priced with communication costs hopsd never assumed."""
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine

    world = build_world(
        [job("j1", 0.0, 30.0, demands=(4,))],
        [LearnedRate("j1", "type_agg", "a100", 4, 50.0, 3)],
        NODES,
        types=TYPES,
        reference_throughput=1.0,
        profiled=profiled,
    )
    config = replay_engine_config(
        Settings(round_length_s=8.0, reference_throughput=1.0),
        spare_guard_s=0.0,
        adoption_s=0.5,
        measure_after_s=100.0,
    )
    # stopped once the job is placed: what the estimator knew of it is still there
    engine = Engine(world.truth, world.jobs, get_policy("hops"), replace(config, max_steps=2))
    engine.run()
    assert engine.jobs[0].status == "running"
    trace_id = world.jobs[0].job_id
    known = [engine.store.profile(trace_id, t) for t in ("a100", "k80")]
    assert all(p is not None for p in known) if profiled else known == [None, None]
