"""The forecast: the scheduling step run forward from a live snapshot."""

from __future__ import annotations

import dataclasses

import pytest

from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.policies.hops import HopsSettings
from hopsd.core.settings import Settings
from hopsd.core.snapshot import InFlight, Snapshot
from hopsd.core.step import RoundClock
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.daemon.forecasting import DEFER_AFTER_ADOPTING, Forecaster
from hopsd.sim.forecast import ForecastInput, Hypothetical, forecast, steps_for

NOW = 1_000_000.0
RATE = 100.0  # samples/s per GPU, learned for every job on every node


def _cluster(gpus: int = 2) -> Cluster:
    return Cluster.build([GpuType("a100", speed=1.0)], [Node("n1", "a100", gpus)])


def _store(job_ids: list[str]) -> InMemoryThroughputStore:
    store = InMemoryThroughputStore()
    for job_id in job_ids:
        for gpus in (1, 2):
            store.set_entity_aggregated(job_id, "n1", gpus, RATE)
            store.set_type_aggregated(job_id, "a100", gpus, RATE)
    return store


def _input(
    jobs: list[Job], *, capacity: dict[str, int] | None = None, early_round_lr: float = 0.25
) -> ForecastInput:
    snap = Snapshot(
        now=NOW,
        cluster=_cluster(),
        jobs=tuple(jobs),
        store=_store([j.id for j in jobs] + ["new"]),
        capacity=capacity or {},
    )
    settings = Settings(round_length_s=60.0, restart_penalty_s=10.0)
    own = HopsSettings(early_round_lr=early_round_lr, early_round_gap_s=30.0)
    return ForecastInput(snap, RoundClock(60.0, NOW - 30.0), "hops", settings, policy_settings=own)


def _running(job_id: str, done: float, total: float, gpus: int = 2) -> Job:
    return Job(
        id=job_id,
        demands=(gpus,),
        total_samples=total,
        submit_time=NOW - 100.0,
        samples_done=done,
        attained_service=50.0,
        current=Configuration("a100", (("n1", gpus),)),
    )


def _queued(job_id: str, total: float, submit: float = NOW - 50.0) -> Job:
    return Job(
        id=job_id, demands=(2,), total_samples=total, submit_time=submit, wait_time=NOW - submit
    )


def test_a_running_job_ends_when_its_samples_run_out() -> None:
    out = forecast(_input([_running("r", done=4000.0, total=10_000.0)]))
    # 6000 samples left at 2 GPUs x 100 samples/s: 30 s from now, no move
    assert out["r"].start_at is None
    assert out["r"].end_at == pytest.approx(NOW + 30.0, abs=0.5)


def test_a_waiting_job_starts_when_the_gpus_it_needs_are_freed() -> None:
    jobs = [_running("r", done=4000.0, total=10_000.0), _queued("q", total=12_000.0)]
    out = forecast(_input(jobs))
    start = out["q"].start_at
    assert start is not None
    assert start == pytest.approx(NOW + 30.0, abs=1.0)
    # its first start pays no restart: 12000 samples at 200/s
    assert out["q"].end_at == pytest.approx(start + 60.0, abs=1.0)
    assert (out["q"].gpu_type, out["q"].gpus) == ("a100", 2)


def test_gpus_hops_may_not_use_delay_the_queue() -> None:
    jobs = [_queued("q", total=6000.0)]
    free = forecast(_input(jobs))
    blocked = forecast(_input(jobs, capacity={"n1": 1}))
    assert free["q"].start_at is not None
    assert free["q"].start_at <= NOW + 30.0 + 1e-6  # at the next round at the latest
    assert blocked["q"].start_at is None  # a 2-GPU job never fits the one GPU left
    assert blocked["q"].end_at is None


def test_a_hypothetical_job_is_forecast_behind_the_live_queue() -> None:
    jobs = [_running("r", done=4000.0, total=10_000.0), _queued("q", total=12_000.0)]
    asked = Hypothetical("new", (2,), 6000.0, {"a100": RATE})
    # rounds on the clock alone: an early round for the short new job would serve the
    # queue by its latency ratios at that instant instead (the next test)
    out = forecast(_input(jobs, early_round_lr=0.0), [asked])
    q_end = out["q"].end_at
    new_start = out["new"].start_at
    assert q_end is not None and new_start is not None
    assert new_start >= q_end - 1.0  # q waited longer: the latency-ratio queue serves it first
    assert out["new"].end_at == pytest.approx(new_start + 30.0, abs=1.0)
    assert "new" not in forecast(_input(jobs))


def test_the_forecast_foresees_the_early_round_a_short_new_job_gets() -> None:
    jobs = [_running("r", done=4000.0, total=10_000.0), _queued("q", total=12_000.0)]
    asked = Hypothetical("new", (2,), 6000.0, {"a100": RATE})
    on_clock = forecast(_input(jobs, early_round_lr=0.0), [asked])["new"].start_at
    early = forecast(_input(jobs), [asked])["new"].start_at
    assert on_clock is not None and early is not None
    assert early < on_clock  # its latency ratio passes 0.25 before the queue would reach it


def test_a_job_in_its_profiling_phase_is_queued_when_the_measured_phase_is_over() -> None:
    """Profiling takes 20 s (as hopsd measured it) and this job began 5 s ago: it joins
    the queue 15 s from now, once, and is not profiled all over again."""
    import dataclasses

    from hopsd.core.profiling import Profilee

    job = _queued("p", total=6000.0, submit=NOW - 5.0)
    base = _input([])
    snap = dataclasses.replace(
        base.snapshot, profiling=(Profilee("p", NOW - 5.0, NOW - 5.0, job=job),)
    )
    given = dataclasses.replace(base, snapshot=snap, profile_s=20.0)
    start = forecast(given)["p"].start_at
    assert start is not None
    # idle GPUs: a fragment plan starts it at once (profiled again, it would start 20 s later)
    assert start == pytest.approx(NOW + 15.0, abs=1.0)


def test_hopsd_sees_an_end_a_tick_late_and_slurm_starts_a_release_after_a_lag() -> None:
    """The running job ends at +30 s; hopsd frees its GPUs when it sees the end (+0.75 s)
    and Slurm starts the next run 2 s after hops releases it: the waiting job starts at
    +32.75 s, while the running job's end stays where it is."""
    import dataclasses

    jobs = [_running("r", done=4000.0, total=10_000.0), _queued("q", total=12_000.0)]
    given = dataclasses.replace(_input(jobs), start_lag_s=2.0, end_seen_s=0.75)
    out = forecast(given)
    assert out["r"].end_at == pytest.approx(NOW + 30.0, abs=0.01)
    assert out["q"].start_at == pytest.approx(NOW + 32.75, abs=0.01)
    assert out["q"].end_at == pytest.approx(NOW + 30.75 + 60.0, abs=0.01)


def test_a_profiling_job_on_its_profiling_gpu_is_forecast_not_refused() -> None:
    """The planner's view of a profiling job may carry the GPU of its profiling run: that
    is no placement, and the forecast still runs (it failed on it once, live)."""
    import dataclasses

    from hopsd.core.profiling import Profilee

    job = dataclasses.replace(
        _queued("p", total=6000.0, submit=NOW - 5.0), current=Configuration("a100", (("n1", 1),))
    )
    base = _input([])
    snap = dataclasses.replace(
        base.snapshot, profiling=(Profilee("p", NOW - 5.0, NOW - 5.0, job=job),)
    )
    out = forecast(dataclasses.replace(base, snapshot=snap, profile_s=20.0))
    assert out["p"].start_at is not None and out["p"].end_at is not None


def test_the_forecast_plans_with_the_policy_s_own_settings() -> None:
    """FIFO behind a blocked 2-GPU head: with backfill a short 1-GPU job starts at the
    next round on the GPU the running job leaves free; strict FIFO only after the head."""
    import dataclasses

    from hopsd.core.policies.fifo import FifoSettings

    small = Job(id="s", demands=(1,), total_samples=1000.0, submit_time=NOW - 10.0)
    jobs = [_running("r", 4000.0, 10_000.0, gpus=1), _queued("head", 12_000.0), small]
    fifo = dataclasses.replace(_input(jobs), policy="fifo", policy_settings=None)
    easy = forecast(fifo)
    strict = forecast(dataclasses.replace(fifo, policy_settings=FifoSettings(backfill=False)))
    starts = {
        name: (out["s"].start_at, out["head"].start_at)
        for name, out in (("easy", easy), ("strict", strict))
    }
    assert None not in starts["easy"] + starts["strict"]
    assert starts["easy"][0] < starts["easy"][1]  # type: ignore[operator]
    assert starts["strict"][0] >= starts["strict"][1]  # type: ignore[operator]


def test_an_expected_arrival_goes_ahead_of_a_long_waiting_job() -> None:
    """A short 2-GPU job was submitted 5 s ago and has ended; with the ``recent`` model
    one like it is expected 10 s from now, before the running job frees the GPUs at
    +25 s: the latency-ratio queue serves the short one first, so the long job waiting
    starts later than the forecast without arrivals says. The expected job is not in
    the answer."""
    import dataclasses

    from hopsd.sim.arrivals import ArrivalModel, PastArrival

    jobs = [
        _running("r", done=7000.0, total=12_000.0),
        _queued("q", total=120_000.0, submit=NOW - 1.0),
    ]
    plain = forecast(_input(jobs))
    ended = (PastArrival(NOW - 5.0, (2,), 10.0, "u"),)
    model = ArrivalModel("recent", window_s=10.0)
    seen = forecast(dataclasses.replace(_input(jobs), arrivals=model, ended=ended))
    assert set(seen) == {"r", "q"}
    plain_start, start = plain["q"].start_at, seen["q"].start_at
    assert plain_start == pytest.approx(NOW + 25.0, abs=1.0)
    assert start is not None and start > plain_start + 5.0


def test_a_long_queue_caps_the_forecast_s_steps_and_leaves_the_last_jobs_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each step costs about its jobs: steps x jobs is capped, the jobs beyond get no START."""
    assert steps_for(10) is None and steps_for(10_000) == 5
    jobs = [_queued(f"q{i}", 6000.0) for i in range(6)]  # one at a time, a minute each
    full = forecast(_input(jobs))
    assert all(full[j.id].start_at is not None for j in jobs)
    monkeypatch.setattr("hopsd.sim.forecast.MAX_JOB_STEPS", 3 * 7)  # 3 steps for 7 jobs
    capped = forecast(_input([*jobs, _queued("q6", 6000.0)]))
    assert capped["q0"].start_at == full["q0"].start_at
    assert capped["q6"].start_at is None


def test_a_costly_forecast_waits_ten_times_its_cost_before_the_next() -> None:
    forecaster = Forecaster()
    forecaster.last_at, forecaster.cost_s = NOW, 0.1  # cheap: whenever due
    assert forecaster.due(True, NOW + 1.0, 3600.0)
    forecaster.cost_s = 5.0  # costly: not before 50 s have passed, change or not
    assert not forecaster.due(True, NOW + 49.0, 3600.0)
    assert forecaster.due(True, NOW + 51.0, 3600.0)


def test_a_tick_adopting_a_long_queue_leaves_its_forecast_to_the_next() -> None:
    forecaster = Forecaster()
    assert not forecaster.due(True, NOW, 3600.0, adopted=DEFER_AFTER_ADOPTING)
    assert forecaster.owed
    # the next tick forecasts even though nothing changed and no round has passed
    forecaster.last_at, forecaster.cost_s = NOW - 1.0, 0.1
    assert forecaster.due(False, NOW + 1.0, 3600.0)
    assert forecaster.due(True, NOW + 1.0, 3600.0, adopted=DEFER_AFTER_ADOPTING - 1)


def test_a_placement_in_flight_lands_before_the_queue_is_planned() -> None:
    """hopsd decided q's start (its release is under way): q runs there first, and the
    queue is planned around it (the core's reserve stage, in the forecast's own step)."""
    jobs = [_queued("w", total=6000.0, submit=NOW - 500.0), _queued("q", total=6000.0)]
    given = _input(jobs)
    flying = dataclasses.replace(given.snapshot, in_flight=(InFlight("q", target=(("n1", 2),)),))
    out = forecast(dataclasses.replace(given, snapshot=flying))
    q, w = out["q"], out["w"]
    assert q.start_at == pytest.approx(NOW, abs=1.0)
    assert q.end_at is not None and w.start_at is not None
    assert w.start_at >= q.end_at - 1.0  # behind q, although it waited longer


def test_a_job_requeued_under_notice_starts_again_in_the_forecast() -> None:
    """A preemption (or an unplanned start) in flight: the job is requeued, so it has a
    start to come, not "runs now" on GPUs it is about to leave."""
    jobs = [_running("p", done=0.0, total=6000.0), _queued("q", total=6000.0, submit=NOW - 500)]
    given = _input(jobs)
    flying = dataclasses.replace(given.snapshot, in_flight=(InFlight("p", runs_on=True),))
    out = forecast(dataclasses.replace(given, snapshot=flying))
    assert out["p"].start_at is not None and out["q"].start_at is not None
    assert out["q"].start_at == pytest.approx(NOW, abs=1.0)  # p's GPUs are q's at once


def test_a_job_under_notice_keeps_its_gpus_until_its_grace_ends_in_the_forecast() -> None:
    """The notice's end is known (``InFlight.until``): the preempted job runs on until then,
    and the job waiting for its GPUs starts then, not at once (p runs 3000 s more)."""
    jobs = [_running("p", done=0.0, total=600_000.0), _queued("q", total=6000.0, submit=NOW - 500)]
    given = _input(jobs)
    notice = InFlight("p", runs_on=True, until=NOW + 600.0)
    flying = dataclasses.replace(given.snapshot, in_flight=(notice,))
    out = forecast(dataclasses.replace(given, snapshot=flying))
    assert out["q"].start_at == pytest.approx(NOW + 600.0, abs=1.0)
    # p trained on during the grace: it ends 3000 s of work plus its restart from now
    assert out["p"].end_at is not None and out["p"].end_at < NOW + 3000.0 + 60.0


def test_a_job_never_seen_runs_at_the_learned_speed_of_the_server_it_gets() -> None:
    """hopsd learned that n2 runs at half its type's speed: a job asked about that can only
    get n2 finishes in twice the time of its rate, not at the type's full rate (on old code
    the forecast's planner assumed half speed while its jobs ran at full speed)."""
    cluster = Cluster.build(
        [GpuType("a100", speed=1.0)], [Node("n1", "a100", 2), Node("n2", "a100", 2)]
    )
    store = InMemoryThroughputStore()
    store.set_node_speeds({"n2": 0.5})
    settings = Settings(round_length_s=60.0, restart_penalty_s=10.0)

    def end_on(free: str) -> float:
        held = {"n1": 0, "n2": 2} if free == "n2" else {"n1": 2, "n2": 0}
        snap = Snapshot(now=NOW, cluster=cluster, jobs=(), store=store, capacity=held)
        given = ForecastInput(snap, RoundClock(60.0, NOW - 30.0), "hops", settings)
        out = forecast(given, [Hypothetical("new", (2,), 6000.0, {"a100": RATE})])["new"]
        assert out.start_at is not None and out.end_at is not None
        return out.end_at - out.start_at

    # 6000 samples on 2 GPUs at 100/s each: 30 s on the full-speed server, 60 s on n2
    assert end_on("n1") == pytest.approx(30.0, abs=1.0)
    assert end_on("n2") == pytest.approx(60.0, abs=1.0)


def test_a_job_that_learned_no_restart_pays_what_restarts_cost_the_others() -> None:
    """The round's plan moves p, which has learned nothing of its restarts; the job beside it
    learned that a restart costs 40 s here. p's move then costs 40 s in the forecast, not
    the 10 s prior (on old code its end came 30 s early, whatever the cluster measured)."""
    cluster = Cluster.build(
        [GpuType("a100", speed=1.0)],
        [Node("n1", "a100", 2), Node("n2", "a100", 2), Node("n3", "a100", 2)],
    )
    settings = Settings(round_length_s=60.0, restart_penalty_s=10.0)
    store = InMemoryThroughputStore()
    for job_id in ("p", "r"):
        for node in ("n1", "n2", "n3"):
            store.set_entity_aggregated(job_id, node, 2, RATE)
        store.set_type_aggregated(job_id, "a100", 2, RATE)
    moved = Plan(move=(Assignment("p", Configuration("a100", (("n2", 2),))),))

    def p_end(neighbour_restart_s: float | None) -> float:
        p = _running("p", done=0.0, total=6000.0)
        r = dataclasses.replace(
            _running("r", done=0.0, total=600_000.0),
            current=Configuration("a100", (("n3", 2),)),
            restart_s=neighbour_restart_s,
        )
        snap = Snapshot(now=NOW, cluster=cluster, jobs=(p, r), store=store)
        given = ForecastInput(snap, RoundClock(60.0, NOW), "hops", settings, plan=moved)
        out = forecast(given)["p"]
        assert out.end_at is not None
        return out.end_at

    # 6000 samples at 2 GPUs x 100/s: 30 s of work, after the move's restart
    assert p_end(None) == pytest.approx(NOW + 30.0 + 10.0, abs=2.0)
    assert p_end(40.0) == pytest.approx(NOW + 30.0 + 40.0, abs=2.0)


def test_a_job_requeued_under_notice_on_an_idle_cluster_pays_its_restart() -> None:
    """Every job runs, but p's notice requeues it: the forecast is not over until that
    lands (on old code it stopped as soon as every job ran, so p ran on to its end)."""
    cluster = Cluster.build([GpuType("a100", speed=1.0)], [Node("n1", "a100", 4)])
    settings = Settings(round_length_s=60.0, restart_penalty_s=10.0)
    p = _running("p", done=0.0, total=6000.0)
    snap = Snapshot(
        now=NOW,
        cluster=cluster,
        jobs=(p,),
        store=_store(["p"]),
        in_flight=(InFlight("p", runs_on=True),),
    )
    out = forecast(ForecastInput(snap, RoundClock(60.0, NOW - 30.0), "hops", settings))["p"]
    assert out.start_at is not None and out.end_at is not None
    # 30 s of work, after the restart its requeue costs
    assert out.end_at >= out.start_at + 30.0 + 10.0 - 1.0
