"""One job's life, charged by hopsd and by the simulator: the same waiting, service and restarts.

The life: submitted, profiled on a k80 and then on an a100 (waiting between the
two runs), queued, run on two a100s, moved to two k80s, preempted, resumed on
two a100s, completed. hopsd's accounting (``Reconciler._advance`` and its
following of Slurm, fed by the in-memory Slurm) and the simulator's
(``Engine._advance``/``_charge`` and its event handlers) are driven through it;
both charge by the core's rule (:mod:`hopsd.core.accounting`) and LR and FTF
are the core's (:mod:`hopsd.core.metrics`) over what each world charged.

The test plays Slurm and the scheduler's decisions (where and when the job
runs); what is under test is only how each world turns that life into numbers.

Where the worlds legitimately differ: hopsd sees Slurm once per tick and
charges each interval between two ticks to the state the job was in at the
first of them, while the simulator charges from event to event. With a tick
at every event the figures are equal; with a coarser tick they are exactly the
simulator's figures for the life as hopsd saw it, each event moved to the
first tick at or after it -- the difference is only the tick granularity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pytest
from daemon_fakeport import FakeClock, FakePort
from spool_tick import make_tick, row_of
from sqlalchemy.orm import Session, sessionmaker
from tick_steps import observe_and_reconcile

import hopsd.sim.engine as engine_module
from hopsd.config import HopsConfig
from hopsd.core.accounting import Clock, clock_of
from hopsd.core.metrics import finish_time_fairness_of, latency_ratio_of
from hopsd.core.model import Assignment, Cluster, Configuration, Plan
from hopsd.core.profiling import ProfilingDecision, ProfilingRun
from hopsd.daemon.observe import observe
from hopsd.daemon.snapshot_builder import build_cluster_view
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import JobState
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.metrics import job_records, true_age
from hopsd.sim.profiles import parse_profiles
from hopsd.sim.state import EngineResult, RoundStat
from hopsd.sim.state import JobState as SimJob
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec
from hopsd.slurm.port import Placement
from hopsd.slurm.tag import HopsTag

SUBMIT = 1000.0
TAG = HopsTag((1, 2), 6000.0)  # an age of 250 s on this cluster: LR and FTF near 1
MODELS = {
    "models": {
        "toy": {"params": 1e3, "batch_size": 10, "throughput": {"k80": 10.0, "a100": 40.0}},
    }
}
Parts = tuple[tuple[str, int], ...]
Sessions = sessionmaker[Session]


@dataclass(frozen=True)
class Event:
    """Something that happens to the job ``at`` seconds after its submission."""

    at: float
    kind: str  # profile | stop | queue | start | move | preempt | finish
    parts: Parts = ()


LIFE = (
    Event(10.0, "profile", (("slow1", 1),)),
    Event(30.0, "stop"),
    Event(35.0, "profile", (("fast1", 1),)),
    Event(50.0, "stop"),
    Event(50.0, "queue"),
    Event(70.0, "start", (("fast1", 2),)),
    Event(100.0, "move", (("slow1", 2),)),
    Event(130.0, "preempt"),
    Event(160.0, "start", (("fast2", 2),)),
    Event(200.0, "finish"),
)


@dataclass(frozen=True)
class Account:
    """What one world charged the job and the figures it derives from that."""

    wait_s: float
    service_gpu_s: float
    service_norm: float
    restarts: int
    jct_s: float
    latency_ratio: float
    ftf_rho: float


Worlds = Callable[[float], tuple[Account, Account]]


# -- hopsd ---------------------------------------------------------------------------------


def _place(port: FakePort, job: int, parts: Parts) -> None:
    """hopsd's placement of a held job (update, release), on the in-memory Slurm."""
    partition = next(n.partition for n in port.nodes if n.name == parts[0][0])
    port.update_pending(job, Placement(partition, parts))
    port.release(job)


def _on_slurm(port: FakePort, job: int, event: Event) -> None:
    """What Slurm sees of the event (``queue`` is the ledger's alone)."""
    if event.kind in ("profile", "start"):
        _place(port, job, event.parts)
    elif event.kind in ("stop", "preempt"):
        port.requeue_hold(job)
    elif event.kind == "move":
        port.requeue_hold(job)
        _place(port, job, event.parts)
    elif event.kind == "finish":
        port.finish(job)


def _profiling_over(tick: Tick, job: int) -> None:
    """The profiling queue's end of the job's profiling: it joins the waiting queue."""
    with tick.ledger.unit() as unit:
        unit.transition(str(job), JobState.QUEUED, tick.clock(), "profiling over")


def live_life(
    tick: Tick, port: FakePort, clock: FakeClock, life: tuple[Event, ...], every_s: float
) -> int:
    """Drive hopsd through ``life``, ticking every ``every_s`` seconds from the submission.

    Slurm changes at each event's instant; hopsd sees it at its next tick. The
    end of profiling is the profiling queue's, taken in the tick that follows it.
    """
    job = port.add_job(TAG, user="alice", submit_time=SUBMIT)
    tick.reconciler.profile_new_jobs = True
    clock.now = SUBMIT
    observe_and_reconcile(tick)
    end = max(e.at for e in life)
    ticks = [every_s * k for k in range(1, math.ceil(end / every_s) + 1)]
    instants = sorted({*ticks, *(e.at for e in life)})
    queue_due = False
    for at in instants:
        clock.now = SUBMIT + at
        for event in (e for e in life if e.at == at):
            queue_due = queue_due or event.kind == "queue"
            _on_slurm(port, job, event)
        if at in ticks:
            observe_and_reconcile(tick)
            if queue_due:
                _profiling_over(tick, job)
                queue_due = False
    return job


def live_account(sessions: Sessions, job: int, truth: GroundTruth, sim: SimJob) -> Account:
    """hopsd's ledger row, with LR and FTF by the core's metrics over what it charged."""
    row = row_of(sessions, job)
    assert row.state == JobState.DONE and row.end_time is not None
    jct = row.end_time - row.submit_time
    age = true_age(truth, sim)
    return Account(
        wait_s=row.wait_time,
        service_gpu_s=row.service_gpu_s,
        service_norm=row.service_norm,
        restarts=row.restarts,
        jct_s=jct,
        latency_ratio=latency_ratio_of(row.wait_time, age),
        ftf_rho=finish_time_fairness_of(jct, independent_s(truth.cluster, sim, age)),
    )


def independent_s(cluster: Cluster, job: SimJob, age: float) -> float:
    """The job's time alone on its equal share of the cluster (it is the only job)."""
    demands = job.spec.demands
    share = min(float(demands[-1]), float(cluster.total_gpus))
    return age * (sum(demands) / len(demands)) / share


# -- the simulator -------------------------------------------------------------------------


def _config(cluster: Cluster, parts: Parts) -> Configuration:
    return Configuration(cluster.node(parts[0][0]).gpu_type, parts)


def _in_engine(engine: Engine, js: SimJob, event: Event) -> None:
    """The engine's own handler of the event, as its step's decision would call it."""
    job_id = js.spec.job_id
    cluster = engine.cluster
    if event.kind == "profile":
        gpu_type = cluster.node(event.parts[0][0]).gpu_type
        run = ProfilingRun(job_id, gpu_type, event.parts[0][0])
        engine._apply_profiling(ProfilingDecision(start=(run,)))
    elif event.kind == "stop":
        engine._report_profile(js)
        engine._apply_profiling(ProfilingDecision(stop=((job_id, "profiled"),)))
    elif event.kind == "queue":
        engine._apply_profiling(ProfilingDecision(finish=((job_id, "profiling over"),)))
    elif event.kind == "start":
        engine._apply(Plan(start=(Assignment(job_id, _config(cluster, event.parts)),)))
    elif event.kind == "move":
        engine._apply(Plan(move=(Assignment(job_id, _config(cluster, event.parts)),)))
    elif event.kind == "preempt":
        engine._apply(Plan(preempt=(job_id,)))
    elif event.kind == "finish":
        engine._finish(js)


def sim_life(truth: GroundTruth, life: tuple[Event, ...]) -> tuple[Engine, SimJob]:
    """Drive the simulator's engine through ``life``: charge up to each event, then enact it."""
    spec = JobSpec("j", SUBMIT, TAG.demands, TAG.total_samples, "toy", "alice")
    engine = Engine(truth, [spec], get_policy("fifo"), EngineConfig(profile_s=60.0))
    engine.rounds.append(RoundStat(start=0.0))
    (js,) = engine.jobs
    engine._advance(SUBMIT)
    engine._arrive(js)
    engine._adopt(js)
    for event in sorted(life, key=lambda e: e.at):
        engine._advance(SUBMIT + event.at)
        _in_engine(engine, js, event)
    return engine, js


def sim_account(engine: Engine, js: SimJob, truth: GroundTruth) -> Account:
    """The simulator's counters, with LR and FTF as its metrics compute them."""
    result = EngineResult("fifo", engine.jobs, engine.rounds, engine.total_gpus, 0, 0, 0, 0, 0)
    (record,) = job_records(truth, result)
    return Account(
        wait_s=js.wait_time,
        service_gpu_s=js.service_gpu_s,
        service_norm=js.attained_service,
        restarts=js.restarts,
        jct_s=record.jct_s,
        latency_ratio=record.latency_ratio,
        ftf_rho=record.ftf_rho,
    )


# -- the two worlds side by side -----------------------------------------------------------


def assert_same(live: Account, sim: Account) -> None:
    """Equal figure by figure (to float tolerance), naming the first that differs."""
    for name in Account.__dataclass_fields__:
        got, want = getattr(live, name), getattr(sim, name)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9), f"{name}: hopsd {got}, sim {want}"


def expected_charge(life: tuple[Event, ...], cluster: Cluster) -> tuple[float, float, float]:
    """Wait, GPU-seconds and normalised service read off the life itself, segment by segment.

    Between submission and the end the job either holds the GPUs of its last
    placement (a profiling run or a run) or waits for its next one.
    """
    wait = gpu_s = norm = 0.0
    since, parts = 0.0, ()
    for event in sorted(life, key=lambda e: e.at):
        dt = event.at - since
        if parts:
            gpus = sum(g for _, g in parts)
            gpu_s += gpus * dt
            norm += gpus * cluster.gpu_types[cluster.node(parts[0][0]).gpu_type].speed * dt
        else:
            wait += dt
        since = event.at
        if event.kind in ("profile", "start", "move"):
            parts = event.parts
        elif event.kind in ("stop", "preempt", "finish"):
            parts = ()
    return wait, gpu_s, norm


def seen_at_ticks(life: tuple[Event, ...], every_s: float) -> tuple[Event, ...]:
    """The life as hopsd sees it ticking every ``every_s``: each event at the tick after it."""
    return tuple(Event(every_s * math.ceil(e.at / every_s), e.kind, e.parts) for e in life)


@pytest.fixture
def truth(config: HopsConfig, port: FakePort, clock: FakeClock) -> GroundTruth:
    """The simulator's world on the very cluster hopsd builds from the in-memory Slurm."""
    view = build_cluster_view(observe(port, clock).nodes, config, {})
    return GroundTruth(view.cluster, parse_profiles(MODELS))


def worlds(
    config: HopsConfig,
    port: FakePort,
    sessions: Sessions,
    clock: FakeClock,
    truth: GroundTruth,
    every_s: float,
) -> tuple[Account, Account]:
    tick = make_tick(config, port, sessions, clock)
    job = live_life(tick, port, clock, LIFE, every_s)
    engine, js = sim_life(truth, seen_at_ticks(LIFE, every_s))
    return live_account(sessions, job, truth, js), sim_account(engine, js, truth)


@pytest.fixture
def both(
    config: HopsConfig, port: FakePort, sessions: Sessions, clock: FakeClock, truth: GroundTruth
) -> Worlds:
    """The life in both worlds, hopsd ticking every given number of seconds."""
    return partial(worlds, config, port, sessions, clock, truth)


def test_hopsd_and_the_simulator_charge_one_life_alike(both: Worlds, truth: GroundTruth) -> None:
    """A tick at every event (and every 5 s between): the two worlds' figures are equal,
    and are what the life itself says (profiling is service, both runs' gaps are waiting,
    every requeue is a restart)."""
    live, sim = both(5.0)
    assert_same(live, sim)
    wait, gpu_s, norm = expected_charge(LIFE, truth.cluster)
    assert (sim.wait_s, sim.service_gpu_s, sim.service_norm) == pytest.approx((wait, gpu_s, norm))
    requeues = sum(e.kind in ("stop", "move", "preempt") for e in LIFE)
    assert sim.restarts == requeues
    assert sim.jct_s == max(e.at for e in LIFE)


def test_a_coarse_tick_differs_only_by_when_hopsd_sees_the_events(
    both: Worlds, truth: GroundTruth
) -> None:
    """Ticking every 7 s, hopsd's figures differ from the life's, and are exactly the
    simulator's for the life with each event moved to the tick that saw it."""
    live, sim = both(7.0)
    assert_same(live, sim)
    wait, _, _ = expected_charge(LIFE, truth.cluster)
    assert live.wait_s != pytest.approx(wait)  # the granularity shows: the test is not vacuous


def test_the_comparison_notices_profiling_charged_as_waiting_in_one_world(
    both: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule the identity rests on, broken in the simulator alone: the test fails."""

    def profiling_waits(status: str, holds_gpus: bool) -> Clock:
        return Clock.WAITING if status == "profiling" else clock_of(status, holds_gpus)

    monkeypatch.setattr(engine_module, "clock_of", profiling_waits)
    live, sim = both(5.0)
    with pytest.raises(AssertionError, match="wait_s"):
        assert_same(live, sim)
