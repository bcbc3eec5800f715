"""When each job will start and finish: the one scheduling step run forward from now.

hopsd's START and ETA, and ``hops submit --test-only``, are this forecast. From
the snapshot a round planned (the queue, the running jobs where they run, what
the estimator knows, the GPUs hops may not use) the simulator's engine runs the
same step with the same policy and settings, round after round, until every
job is served (nothing waits and nothing is in flight: each running job then
ends at its pace where it is), :data:`MAX_ROUNDS` rounds were planned or the
horizon is reached. Jobs progress at the rates the estimator predicts (the
forecast believes hopsd's own estimates; a job never seen at its assumed rate
scaled by each server's learned speed), pay their learned restart price on
every move (a job that learned none, what the live jobs' restarts cost:
:func:`~hopsd.core.gains.typical_restart_s`, the price the planner gives it too) and
``launch_s`` on a first start. New jobs arrive
as the arrival model expects
(:mod:`hopsd.sim.arrivals`: none, or the last window's again), besides the
``extra`` ones asked about; the expected ones are not in the answer.

The figures are compared with what really happened by
``benchmarks/predictions.py``; nothing here reads a clock or the ledger.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from hopsd.core.estimator import Estimator
from hopsd.core.gains import typical_restart_s
from hopsd.core.model import Cluster, Configuration, Job, Plan
from hopsd.core.reserve import flights
from hopsd.core.settings import Settings
from hopsd.core.snapshot import InFlight, Snapshot
from hopsd.core.step import RoundClock, StepOptions
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy
from hopsd.sim.arrivals import ArrivalModel, PastArrival, expected
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.state import EngineResult, Flight, Resumed
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec

#: How far a forecast looks ahead before it leaves the rest unknown ...
HORIZON_S = 7 * 86400.0
#: ... and how many rounds it plans at most (its cost is about one plan per round) ...
MAX_ROUNDS = 200
#: ... and fewer steps (rounds, and the fragments between them) on a long queue: a step
#: costs about its jobs, so steps x jobs stays under this (10,000 queued jobs: 5 steps);
#: the jobs the last step leaves waiting get no START.
MAX_JOB_STEPS = 50_000


@dataclass(frozen=True)
class Hypothetical:
    """A job asked about but not submitted (``hops submit --test-only``).

    ``per_gpu`` is its assumed single-GPU samples/s per type (what hopsd
    assumes of a job it has never seen run: its model's measured rates, else
    the type table); a type left out is one it may not run on.
    """

    id: str
    demands: tuple[int, ...]
    total_samples: float
    per_gpu: Mapping[str, float]
    batch_size: int = 32
    params: float = 25e6
    user: str = ""
    #: seconds it has waited already (a job Slurm has, not adopted yet): it is in the
    #: queue from the start, with that wait; 0: it arrives now, after ``adoption_s``
    waited_s: float = 0.0
    #: seconds from now it is submitted (an arrival the forecast expects)
    after_s: float = 0.0


@dataclass(frozen=True)
class Predicted:
    """A job's forecast, in epoch seconds: next start (None: it runs now), and end.

    None for an end (or a start) the horizon did not reach.
    """

    job_id: str
    start_at: float | None
    end_at: float | None
    gpu_type: str | None = None
    gpus: int = 0


@dataclass(frozen=True)
class ForecastInput:
    """The live state a forecast starts from (what one round of the tick planned)."""

    snapshot: Snapshot
    clock: RoundClock
    policy: str
    settings: Settings
    options: StepOptions = field(default_factory=StepOptions)
    launch_s: float = 0.0
    adoption_s: float = 0.0
    #: a new job's profiling phase (0: planned at once), as hopsd measured it
    profile_s: float = 0.0
    #: Slurm's start of a released run after hops's decision (added to each start
    #: foreseen), and how long after a job's end hopsd sees it (its GPUs free then)
    start_lag_s: float = 0.0
    end_seen_s: float = 0.0
    horizon_s: float = HORIZON_S
    #: the plan this round took from the snapshot, being enacted: the forecast starts
    #: after it (starts launching, moves restarting, preemptions back in the queue)
    plan: Plan | None = None
    #: the policy's own settings ([policies.NAME]; None: its defaults)
    policy_settings: object | None = None
    #: the arrivals it expects, and the jobs of the window that are no longer in the
    #: snapshot (ended): the live ones are in it
    arrivals: ArrivalModel = field(default_factory=ArrivalModel)
    ended: tuple[PastArrival, ...] = ()
    #: when arrivals began to be recorded (None: before the window)
    arrivals_since: float | None = None


@dataclass
class _EstimatedTruth(GroundTruth):
    """Jobs progress at the estimator's answer; a hypothetical job at its model's theory."""

    estimator: Estimator | None = None
    jobs: Mapping[str, Job] = field(default_factory=dict)

    def _known_rates(self, model: str, config: Configuration) -> tuple[float, ...] | None:
        job = self.jobs.get(model)
        if job is None or self.estimator is None:
            return None
        return tuple(self.estimator.per_gpu_on_node(job, n, config)[0] for n, _ in config.parts)

    def _known_single_gpu(self, model: str, gpu_type: str) -> float | None:
        job = self.jobs.get(model)
        if job is None or self.estimator is None:
            return None
        return self.estimator.type_per_gpu(job, gpu_type)

    def _compute(
        self, model: str, config: Configuration, batch_size: int | None
    ) -> tuple[float, tuple[float, ...]]:
        """A job never seen (asked about, or expected to arrive) runs at its model's rate on
        each server scaled by the speed hopsd learned of that server, as hopsd's own
        estimate of it is: at the type's full rate, a half-speed server would finish it
        in the forecast twice as fast as the planner inside the forecast assumed."""
        total, rates = super()._compute(model, config, batch_size)
        if model in self.jobs or self.estimator is None:
            return total, rates
        speed = self.estimator.node_speed
        scaled = tuple(r * speed(n) for r, (n, _) in zip(rates, config.parts, strict=True))
        return min(scaled) * config.total_gpus, scaled


def _runnable(job: Job, cluster: Cluster) -> list[str]:
    """Types the job may run on (its limits exclude the others)."""
    limits = dict(job.max_gpus)
    return [t for t in sorted(cluster.gpu_types) if limits.get(t, 1) > 0]


def _model_of(job: Job, estimator: Estimator, restart_s: float, launch_s: float) -> ModelSpec:
    rates = {t: estimator.type_per_gpu(job, t) for t in _runnable(job, estimator.cluster)}
    return ModelSpec(
        name=job.id,
        params=max(job.params, 0.0),
        batch_size=max(job.batch_size, 1),
        throughput=rates,
        restore_s=job.restart_s if job.restart_s is not None else restart_s,
        launch_s=launch_s,
        max_gpus=dict(job.max_gpus),
    )


def _hypothetical_model(
    h: Hypothetical, cluster: Cluster, launch_s: float, restart_s: float
) -> ModelSpec:
    """A job never seen: its assumed rates; 0 GPUs of the types it may not run on."""
    return ModelSpec(
        name=h.id,
        params=max(h.params, 0.0),
        batch_size=max(h.batch_size, 1),
        throughput=dict(h.per_gpu),
        restore_s=restart_s,
        launch_s=launch_s,
        max_gpus={t: 0 for t in cluster.gpu_types if t not in h.per_gpu},
    )


def _reserved(snapshot: Snapshot) -> dict[str, int]:
    """GPUs of each node hops may not hand out now: held by jobs it does not manage.

    A profiling run's GPU is out of the snapshot's capacity too, but it comes
    back when the run ends; the forecast lets its job join the queue instead.
    """
    out: dict[str, int] = {}
    for node in snapshot.cluster.nodes:
        out[node.id] = node.gpus - snapshot.capacity_of(node.id)
    for p in snapshot.profiling:
        if p.run is not None and p.run.started and out.get(p.run.node, 0) > 0:
            out[p.run.node] -= 1
    return {n: g for n, g in out.items() if g > 0}


def _after_plan(
    was: Resumed, job: Job, plan: Plan, now: float, given: ForecastInput, typical_s: float
) -> Resumed:
    """Where the plan being enacted puts the job, and how long until it trains there."""
    if job.id in plan.preempt:
        return replace(was, status="queued", config=None, has_run=True, busy_until=0.0)
    placed = {a.job_id: a.config for a in (*plan.start, *plan.move)}
    config = placed.get(job.id)
    if config is None:
        return was
    restart = job.restart_s if job.restart_s is not None else typical_s
    busy = restart if was.has_run else given.launch_s
    return replace(was, status="running", config=config, has_run=True, busy_until=now + busy)


def _flights(snapshot: Snapshot) -> dict[str, InFlight]:
    """The snapshot's work in flight by job, unplanned starts included (they run on until
    requeued): what the core's reserve stage would plan around (:func:`flights`)."""
    return {f.job_id: f for f in flights(snapshot)}


def _in_flight(was: Resumed, flight: InFlight, cluster: Cluster, start: float) -> Resumed:
    """A job whose decided actions are still being taken: the engine takes them as its own
    flight, landing when its notice's grace ends (``InFlight.until``, relative to the
    forecast's origin; at the start when not known), and its step plans around it
    meanwhile (:func:`hopsd.core.reserve.reserve`). A job that runs on until it is
    requeued and has nowhere to go will start again."""
    if flight.runs_on and flight.until is not None:
        start = max(start, flight.until)
    nodes = cluster.node_map()
    known = flight.target and all(n in nodes for n, _ in flight.target)
    target = Configuration(nodes[flight.target[0][0]].gpu_type, flight.target) if known else None
    if flight.runs_on and was.config is not None:
        first = was.first_start if target is not None else None
        return replace(was, flight=Flight(start, target, True), first_start=first)
    if was.config is None and target is not None:
        return replace(was, flight=Flight(start, target, False))
    return was


def _requeued(was: Resumed) -> bool:
    """The job runs now but its flight requeues it with nowhere to go: it starts again."""
    return was.flight is not None and was.flight.runs_on and was.flight.target is None


def _resumed(job: Job, origin: float, now: float) -> Resumed:
    if job.current is None:
        return Resumed(
            "queued",
            samples_done=job.samples_done,
            wait_time=job.wait_time,
            attained_service=job.attained_service,
            has_run=job.attained_service > 0,
        )
    return Resumed(
        "running",
        samples_done=job.samples_done,
        wait_time=job.wait_time,
        attained_service=job.attained_service,
        has_run=True,
        config=job.current,
        first_start=now - origin,
    )


def forecast(given: ForecastInput, extra: Sequence[Hypothetical] = ()) -> dict[str, Predicted]:
    """Each job's predicted next start and end (see the module docstring)."""
    snap = given.snapshot
    now = snap.now
    store = copy.deepcopy(snap.store) if isinstance(snap.store, InMemoryThroughputStore) else None
    estimator = Estimator(snap.cluster, snap.store, given.settings)
    jobs = list(snap.jobs) + [p.job for p in snap.profiling if p.job is not None]
    origin = min([j.submit_time for j in jobs] + [now])
    models: dict[str, ModelSpec] = {}
    specs: list[JobSpec] = []
    resumed: dict[str, Resumed] = {}
    ready_at = now + given.adoption_s - origin
    # a job in its profiling phase joins the queue when the phase hopsd measured is over
    profiling = {
        p.job_id: now - origin + max(given.profile_s - (now - p.since), 0.0) for p in snap.profiling
    }
    flying = _flights(snap)
    restart_s = typical_restart_s((j.restart_s for j in jobs), given.settings.restart_penalty_s)
    for job in jobs:
        if job.samples_done >= job.total_samples:
            continue
        models[job.id] = _model_of(job, estimator, restart_s, given.launch_s)
        specs.append(_spec(job.id, job.submit_time - origin, job, job.total_samples))
        was = _resumed(job, origin, now)
        if given.plan is not None:
            was = _after_plan(was, job, given.plan, now - origin, given, restart_s)
        if job.id in flying:
            flight = flying[job.id]
            if flight.until is not None:
                flight = replace(flight, until=flight.until - origin)
            was = _in_flight(was, flight, snap.cluster, now - origin)
        if job.id in profiling:
            # its profiling run's GPU is not a placement: it is queued when profiling ends
            was = replace(
                was,
                status="arriving",
                config=None,
                busy_until=0.0,
                ready_at=profiling[job.id],
                profiled=True,
            )
        resumed[job.id] = was
    coming = _expected(given, jobs, estimator)
    for h in (*extra, *coming):
        models[h.id] = _hypothetical_model(h, snap.cluster, given.launch_s, restart_s)
        submit = now - origin + h.after_s
        specs.append(JobSpec(h.id, submit, h.demands, h.total_samples, h.id, h.user, h.batch_size))
        if h.waited_s > 0:
            resumed[h.id] = Resumed("arriving", wait_time=h.waited_s, ready_at=ready_at)
    if not specs:
        return {}
    truth = _EstimatedTruth(snap.cluster, models, estimator=estimator, jobs={j.id: j for j in jobs})
    result = _run(given, truth, specs, resumed, store, origin)
    out = _predictions(result, origin, resumed, given.start_lag_s)
    for h in coming:
        del out[h.id]
    return out


def _work_s(job: Job, estimator: Estimator) -> float:
    """A live job's whole work in normalised GPU-seconds, at the estimator's rates (the
    mean over the types it may run on)."""
    types = _runnable(job, estimator.cluster)
    speeds = estimator.cluster.gpu_types
    each = [job.total_samples * speeds[t].speed / estimator.type_per_gpu(job, t) for t in types]
    return sum(each) / len(each) if each else 0.0


def _expected(
    given: ForecastInput, jobs: Sequence[Job], estimator: Estimator
) -> list[Hypothetical]:
    """The arrivals the model expects, as jobs asked about (every type at the reference
    rate scaled by its speed)."""
    if given.arrivals.mode == "none":
        return []
    live = [
        PastArrival(j.submit_time, j.demands, _work_s(j, estimator), j.user, j.batch_size, j.params)
        for j in jobs
    ]
    rate = given.settings.reference_throughput
    per_gpu = {t: rate * g.speed for t, g in given.snapshot.cluster.gpu_types.items()}
    return [
        Hypothetical(
            f"expected-{i}",
            e.shape.demands,
            e.shape.work_s * rate,
            per_gpu,
            max(e.shape.batch_size, 1),
            e.shape.params,
            e.shape.user,
            after_s=e.after_s,
        )
        for i, e in enumerate(
            expected(
                given.arrivals, [*live, *given.ended], given.snapshot.now, given.arrivals_since
            )
        )
    ]


def _spec(job_id: str, submit: float, job: Job, total: float) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        submit_time=max(submit, 0.0),
        demands=job.demands,
        total_samples=total,
        model=job_id,
        user=job.user,
        batch_size=max(job.batch_size, 1),
    )


def steps_for(jobs: int) -> int | None:
    """Steps a forecast of ``jobs`` jobs may take (:data:`MAX_JOB_STEPS`; None: no cap
    below the rounds' own)."""
    cap = MAX_JOB_STEPS // max(jobs, 1)
    return None if cap >= 4 * MAX_ROUNDS else max(cap, 1)


def _run(
    given: ForecastInput,
    truth: GroundTruth,
    specs: Sequence[JobSpec],
    resumed: Mapping[str, Resumed],
    store: InMemoryThroughputStore | None,
    origin: float,
) -> EngineResult:
    start = given.snapshot.now - origin
    last = given.clock.last_round_at
    length = given.settings.round_length_s
    first_round = start if last is None else max(last + length - origin, start)
    config = EngineConfig(
        settings=given.settings,
        profile_s=given.profile_s,
        adoption_s=given.adoption_s,
        profile_noise=0.0,
        measure_noise=0.0,
        measure_after_s=math.inf,
        spare_guard_s=given.options.spare_guard_s,
        max_horizon_s=given.horizon_s,
        start_s=start,
        first_round_s=first_round,
        partial=True,
        settle_when_served=True,
        max_rounds=MAX_ROUNDS,
        max_steps=steps_for(len(specs)),
        seen_after_end_s=given.end_seen_s,
    )
    engine = Engine(
        truth,
        specs,
        get_policy(given.policy, given.policy_settings),
        config,
        resumed=resumed,
        store=store,
        reserved=_reserved(given.snapshot),
    )
    return engine.run()


def _predictions(
    result: EngineResult, origin: float, resumed: Mapping[str, Resumed], lag: float
) -> dict[str, Predicted]:
    """Epoch times (``origin`` is sim time 0). Slurm starts a run ``lag`` after the
    decision; an end is not moved (the launch the engine charges holds that lag
    already). A job placed now (running, or started by the plan) has no start to come."""
    out: dict[str, Predicted] = {}
    for js in result.jobs:
        was = resumed.get(js.spec.job_id)
        runs_now = was is not None and was.status == "running" and not _requeued(was)
        start = None if runs_now or js.first_start is None else js.first_start + origin + lag
        done = js.finish_time
        end = done + origin if done is not None and math.isfinite(done) else None
        first = js.first_config
        out[js.spec.job_id] = Predicted(
            js.spec.job_id,
            start,
            end,
            first.gpu_type if first is not None and start is not None else None,
            first.total_gpus if first is not None and start is not None else 0,
        )
    return out
