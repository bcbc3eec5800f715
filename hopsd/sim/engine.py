"""The trace-driven simulation loop: arrivals, profiling, rounds, fragments, completions.

Time advances from event to event (arrival, end of profiling, job end, round
start). At each of them the engine takes the core's scheduling step
(:func:`hopsd.core.step.schedule_step`), the very step hopsd takes on a live
cluster: at every round start the policy plans the whole cluster; when a job
ends or a new job becomes schedulable inside a round, the policy plans the idle
GPUs with every running job pinned. Jobs progress at their *true*
throughput (:mod:`hopsd.sim.truth`); the scheduler only ever sees the
:class:`InMemoryThroughputStore`, fed with noisy profiles from a job's
profiling runs and noisy measurements of the configurations jobs actually ran
in, learned by the core's one rule (:mod:`hopsd.core.learning`) as hopsd
learns them.

The idle GPUs a round plan leaves while jobs wait (including jobs the plan
itself preempted) are offered to the policy's fragment planning right away
(``refill_after_round``); round-based baselines answer that with no change.

Costs modelled: a job that is moved, or restarted after a preemption, makes no
progress for ``restart_penalty_s`` (or its model's own ``restore_s``). A new job
is profiled under the core's profiling rules (:mod:`hopsd.core.profiling`, the
ones hopsd follows): short runs on one GPU of each type in turn, each
``profile_s / types`` long, on idle GPUs taken before the policy plans; the
run trains the job (its progress counts), each run's end is a restart (counted
by the core's rule, :func:`hopsd.core.accounting.restarts_after`, as Slurm counts
hopsd's requeue of it) and the job's first real start pays one. Types it could
not be profiled on get the measured profile scaled by the types' speeds.
``adoption_s`` delays a new job before hops sees it (replay uses it for hopsd's
queue refresh). A GPU is never handed to two jobs (checked on every plan).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hopsd.core.accounting import Clock, RunEnd, charge, clock_of, restarts_after
from hopsd.core.capacity import headroom, node_sizes, per_type
from hopsd.core.errors import HopsError, InfeasibleDemandError, InvalidInputError
from hopsd.core.learning import apply_learned, learn
from hopsd.core.model import Configuration, Job, Plan
from hopsd.core.policies import Policy
from hopsd.core.profiling import (
    KnownProfile,
    Profilee,
    ProfilingDecision,
    ProfilingRules,
    RunInFlight,
    derived_profiles,
    profiled_types_of,
)
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import (
    FRAGMENT,
    IDLE,
    ROUND,
    PlanRuleError,
    RoundClock,
    StepOptions,
    StepResult,
    schedule_step,
)
from hopsd.core.throughput import InMemoryThroughputStore, Mixture, PhaseProfile
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec, reference_rate

EPS = 1e-6

ProgressCallback = Callable[[float, int, int], None]


class SimulationError(HopsError):
    """The simulation cannot go on (a job can never run, a policy broke the rules)."""


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of the simulated world (the planner's own knobs live in ``settings``)."""

    settings: Settings = field(default_factory=Settings)
    profile_s: float = 60.0  # all of a job's profiling runs; 0: profiles known at arrival
    adoption_s: float = 0.0
    profile_noise: float = 0.03
    measure_noise: float = 0.03
    measure_after_s: float = 60.0
    fragments: bool = True
    refill_after_round: bool = True
    # Running jobs ending within this many seconds are not moved or preempted. hopsd
    # spares within max(restart penalty, two ticks); the published simulators the
    # baselines follow spare nothing, so 0 here unless a run asks for it.
    spare_guard_s: float = 0.0
    max_horizon_s: float = 60 * 86400.0
    seed: int = 0
    # The solver stops on work done (branch-and-bound nodes), never on seconds: a
    # time limit would let a busy or slow machine cut a solve short and change a plan.
    solver_by_work: bool = True
    # A forecast begins mid-life: at ``start_s`` the resumed jobs are on the cluster, and
    # the first round is due at ``first_round_s`` (the live round clock's next round).
    start_s: float = 0.0
    first_round_s: float = 0.0
    partial: bool = False  # stop at the horizon with jobs unfinished instead of failing
    # A forecast stops planning once nothing waits or arrives (each running job then ends
    # at its pace where it is) and after ``max_rounds`` rounds (the rest left open).
    settle_when_served: bool = False
    max_rounds: int | None = None
    # A job that ended frees its GPUs this much later (hopsd sees an end at its next
    # tick); its recorded end is when it ended.
    seen_after_end_s: float = 0.0


#: Branch-and-bound nodes per solve in a simulation. On paper-512 every solve of
#: hops and Sia closes the 1 % gap at the root node, so the limit only guards
#: against a pathological model running on unbounded.
SIM_NODE_LIMIT = 10_000


def by_work(settings: Settings) -> Settings:
    """``settings`` with the solver bounded by nodes instead of seconds (same on every machine)."""
    nodes = settings.node_limit or SIM_NODE_LIMIT
    return replace(settings, time_limit_s=math.inf, node_limit=nodes)


@dataclass
class JobState:
    """Everything the simulator tracks about one job."""

    spec: JobSpec
    model: ModelSpec
    status: str = "pending"  # pending | arriving | profiling | queued | running | done
    ready_at: float = math.inf
    config: Configuration | None = None
    rate: float = 0.0
    samples_done: float = 0.0
    attained_service: float = 0.0  # GPU-seconds normalised by the types' speeds
    service_gpu_s: float = 0.0
    wait_time: float = 0.0
    run_time: float = 0.0
    penalty_until: float = 0.0
    config_since: float = 0.0
    has_run: bool = False
    restarts: int = 0
    first_start: float | None = None
    first_config: Configuration | None = None
    trained_at: float | None = None  # when its last sample was trained (its end)
    finish_time: float | None = None
    active_integral_at_submit: float = 0.0
    active_integral_at_finish: float = 0.0
    types_used: set[str] = field(default_factory=set)
    profiled: set[str] = field(default_factory=set)
    profiling_since: float = 0.0
    profiling_runs: int = 0

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size or self.model.batch_size

    def finish_eta(self, now: float, seen_after_s: float = 0.0) -> float:
        """When the job ends at its pace (plus ``seen_after_s``: when its end is seen)."""
        if self.status != "running" or self.rate <= 0:
            return math.inf
        if seen_after_s > 0 and self.trained_at is not None:
            return self.trained_at + seen_after_s
        left = self.spec.total_samples - self.samples_done
        return max(now, self.penalty_until) + max(left, 0.0) / self.rate + seen_after_s


@dataclass(frozen=True)
class Resumed:
    """A job already on the cluster when the run begins (a forecast from the live state).

    ``status`` is ``queued`` or ``running`` (on ``config``, without progress until
    ``busy_until``: a restart under way) or ``arriving`` (in its profiling phase,
    queued at ``ready_at``). The counters carry on from what hopsd charged so far.
    """

    status: str
    samples_done: float = 0.0
    wait_time: float = 0.0
    attained_service: float = 0.0
    restarts: int = 0
    has_run: bool = False
    config: Configuration | None = None
    busy_until: float = 0.0
    ready_at: float = 0.0
    first_start: float | None = None
    #: an arriving job whose profiling is under way live: at ``ready_at`` it is queued
    #: knowing every type, not profiled again
    profiled: bool = False

    def __post_init__(self) -> None:
        if self.status not in ("queued", "running", "arriving"):
            raise InvalidInputError(
                f"a resumed job is queued, running or arriving, not {self.status!r}"
            )
        if (self.status == "running") != (self.config is not None):
            raise InvalidInputError("a resumed job has a configuration exactly when it runs")


@dataclass
class RoundStat:
    """What one round looked like (for the idle-GPU metric and the time-line plot)."""

    start: float
    idle_gpu_s_waiting: float = 0.0
    usable_idle_gpu_s: float = 0.0  # idle GPUs of types where some waiting job's R1 fits
    waiting_s: float = 0.0
    used_gpu_s: float = 0.0
    duration: float = 0.0
    effective_throughput: float = 0.0  # reference-GPU equivalents of work done per second


@dataclass
class EngineResult:
    """Raw outcome of one run; :mod:`hopsd.sim.metrics` turns it into figures."""

    policy: str
    jobs: list[JobState]
    rounds: list[RoundStat]
    total_gpus: int
    preemptions: int
    moves: int
    plans: int
    fragment_plans: int
    unmentioned_running: int
    wall_planning_s: float = 0.0


class Engine:
    """One policy replaying one workload on one simulated cluster."""

    def __init__(
        self,
        truth: GroundTruth,
        jobs: Sequence[JobSpec],
        policy: Policy,
        config: EngineConfig | None = None,
        progress: ProgressCallback | None = None,
        *,
        resumed: Mapping[str, Resumed] | None = None,
        store: InMemoryThroughputStore | None = None,
        reserved: Mapping[str, int] | None = None,
    ) -> None:
        self.truth = truth
        self.cluster = truth.cluster
        self.policy = policy
        self.config = config or EngineConfig()
        self.settings = self.config.settings
        if self.config.solver_by_work:
            self.settings = by_work(self.settings)
        self.progress = progress
        self.rng = random.Random(f"engine-{self.config.seed}")
        self.store = store if store is not None else InMemoryThroughputStore()
        self.resumed = dict(resumed or {})
        # GPUs no policy may hand out (a forecast: held by jobs hops does not manage)
        self.reserved = {n: g for n, g in (reserved or {}).items() if g > 0}
        self.used: dict[str, int] = {n.id: self.reserved.get(n.id, 0) for n in self.cluster.nodes}
        self.total_gpus = self.cluster.total_gpus
        self.now = 0.0
        self.active_integral = 0.0
        self.n_active = 0
        self.jobs = [
            JobState(spec, truth.model(spec.model))
            for spec in sorted(jobs, key=lambda s: (s.submit_time, s.job_id))
        ]
        self.by_id = {j.spec.job_id: j for j in self.jobs}
        self.active: dict[str, JobState] = {}  # arrived, not finished (arrival order)
        if len(self.by_id) != len(self.jobs):
            raise InvalidInputError("job ids in the workload are not unique")
        unknown = sorted(set(self.resumed) - set(self.by_id))
        if unknown:
            raise InvalidInputError(f"resumed job(s) not in the workload: {unknown[:5]}")
        self._ref_rate = {m: reference_rate(truth, m) for m in {j.spec.model for j in self.jobs}}
        self._limits: dict[str, tuple[tuple[str, int], ...]] = {}
        self._core_jobs: dict[str, tuple[tuple[object, ...], Job]] = {}
        self.rounds: list[RoundStat] = []
        self.preemptions = 0
        self.moves = 0
        self.plans = 0
        self.fragment_plans = 0
        self.unmentioned = 0
        self.clock = RoundClock(self.settings.round_length_s)
        if self.config.first_round_s > self.config.start_s:  # a round ran before the start
            self.clock = RoundClock(
                self.settings.round_length_s,
                self.config.first_round_s - self.settings.round_length_s,
            )
        self.profiling_used: dict[str, int] = {n.id: 0 for n in self.cluster.nodes}
        # Profiles measured per (model, per-GPU batch), newest per type: what hopsd finds in
        # its ledger for a job naming its model (they outlive the jobs that measured them).
        self.known: dict[tuple[str, int], dict[str, PhaseProfile]] = {}
        n_types = max(len(profiled_types_of(self.cluster)), 1)
        self.profile_run_s = self.config.profile_s / n_types
        self.step_options = StepOptions(
            spare_guard_s=self.config.spare_guard_s,
            refill_after_round=self.config.refill_after_round,
            fragments=self.config.fragments,
            profiling=ProfilingRules(self.config.profile_s > 0, max(self.config.profile_s, EPS)),
        )
        self._check_feasible()

    # ----------------------------------------------------------------- setup
    def _check_feasible(self) -> None:
        biggest = max(per_type(self.cluster, node_sizes(self.cluster)).values(), default=0)
        for job in self.jobs:
            if job.spec.demands[0] > biggest:
                raise InfeasibleDemandError(
                    f"job {job.spec.job_id!r} needs at least {job.spec.demands[0]} GPUs but no "
                    f"GPU type has more than {biggest}"
                )

    # ------------------------------------------------------------------ loop
    def run(self) -> EngineResult:
        length = self.settings.round_length_s
        self.now = self.config.start_s
        next_round = max(self.config.first_round_s, self.now)
        if next_round > self.now:
            self.rounds.append(RoundStat(start=self.now))  # the live round under way
        self._resume()
        arrivals = [j for j in self.jobs if j.spec.job_id not in self.resumed]
        next_arrival = 0
        done = 0
        last = max(self.jobs[-1].spec.submit_time, self.now) if self.jobs else self.now
        horizon = last + self.config.max_horizon_s
        seen = self.config.seen_after_end_s
        while done < len(self.jobs):
            if self._settled(next_arrival < len(arrivals)):
                break
            if self.now >= next_round - EPS:
                self._start_round(next_round)
                next_round += length
                if self.progress is not None:
                    self.progress(self.now, done, len(self.jobs))
            t_arr = (
                arrivals[next_arrival].spec.submit_time
                if next_arrival < len(arrivals)
                else math.inf
            )
            t_ready = min(
                (j.ready_at for j in self.active.values() if j.status == "arriving"),
                default=math.inf,
            )
            t_report = min(
                (self._report_at(j) for j in self.active.values() if j.status == "profiling"),
                default=math.inf,
            )
            running = (j for j in self.active.values() if j.status == "running")
            t_end = min((j.finish_eta(self.now, seen) for j in running), default=math.inf)
            t_next = min(t_arr, t_ready, t_report, t_end, next_round)
            if t_next > horizon and self.config.partial:
                break  # a forecast: what is known by the horizon, unfinished jobs open
            if t_next > horizon:
                stuck = [j.spec.job_id for j in self.jobs if j.status != "done"]
                raise SimulationError(
                    f"policy {self.policy.name!r} left {len(stuck)} job(s) unfinished past the "
                    f"horizon, e.g. {stuck[:5]}"
                )
            self._advance(t_next)
            changed = profiling = False
            while (
                next_arrival < len(arrivals)
                and arrivals[next_arrival].spec.submit_time <= self.now + EPS
            ):
                self._arrive(arrivals[next_arrival])
                next_arrival += 1
            for job in list(self.active.values()):
                if job.status == "arriving" and job.ready_at <= self.now + EPS:
                    changed = self._adopt(job) or changed
                    profiling = True
                if job.status == "profiling" and self._report_at(job) <= self.now + EPS:
                    self._report_profile(job)
                    profiling = True
            for job in list(self.active.values()):
                if job.status == "running" and job.finish_eta(self.now, seen) <= self.now + EPS:
                    self._finish(job)
                    done += 1
                    changed = True
            inside_round = self.now < next_round - EPS
            if (changed or profiling) and inside_round:
                self._decide(changed)
        self._close_round()
        return EngineResult(
            policy=self.policy.name,
            jobs=self.jobs,
            rounds=self.rounds,
            total_gpus=self.total_gpus,
            preemptions=self.preemptions,
            moves=self.moves,
            plans=self.plans,
            fragment_plans=self.fragment_plans,
            unmentioned_running=self.unmentioned,
        )

    def _settled(self, arrivals_left: bool) -> bool:
        """A forecast's end: every job served (their ends follow) or its rounds used up."""
        cap = self.config.max_rounds
        if cap is not None and len(self.rounds) > cap:
            return True
        if not self.config.settle_when_served or arrivals_left:
            return False
        if any(j.status != "running" for j in self.active.values()):
            return False
        for job in self.active.values():
            job.finish_time = job.finish_eta(self.now)
        return True

    def _resume(self) -> None:
        """Put the resumed jobs where the live cluster has them, at the start time."""
        for job_id, was in self.resumed.items():
            job = self.by_id[job_id]
            self._arrive(job)
            job.samples_done = was.samples_done
            job.wait_time = was.wait_time
            job.attained_service = was.attained_service
            job.restarts = was.restarts
            job.has_run = was.has_run or was.config is not None
            job.ready_at = was.ready_at
            job.status = was.status
            if was.config is not None:
                self._occupy(job, was.config)
                job.penalty_until = was.busy_until
            if was.first_start is not None:
                job.first_start = was.first_start

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt <= 0:
            return
        used = sum(self.used.values())
        waiting = any(j.status == "queued" for j in self.active.values())
        for job in self.active.values():
            config = job.config
            if job.status == "running":
                assert config is not None
                if self.config.seen_after_end_s > 0 and job.trained_at is None:
                    at = job.finish_eta(self.now)  # its last sample, at its pace
                    job.trained_at = at if at <= t + EPS else None
                productive = max(0.0, t - max(self.now, job.penalty_until))
                job.samples_done = min(
                    job.samples_done + job.rate * productive, job.spec.total_samples
                )
                job.run_time += dt
            elif job.status == "profiling" and config is not None:  # a profiling run trains
                productive = max(0.0, t - max(self.now, job.penalty_until))  # once launched
                job.samples_done = min(
                    job.samples_done + job.rate * productive, job.spec.total_samples
                )
            self._charge(job, dt)
        stat = self.rounds[-1]
        stat.used_gpu_s += used * dt
        if waiting:
            stat.waiting_s += dt
            stat.idle_gpu_s_waiting += (self.total_gpus - used) * dt
            stat.usable_idle_gpu_s += self._usable_idle() * dt
        self.active_integral += self.n_active * dt
        self.now = t

    def _charge(self, job: JobState, dt: float) -> None:
        """The core's rule (:mod:`hopsd.core.accounting`), as the daemon charges a job."""
        config = job.config
        clock = clock_of(job.status, config is not None)
        if clock is Clock.ON_GPUS and config is not None:
            speed = self.cluster.gpu_types[config.gpu_type].speed
            cost = charge(clock, dt, config.total_gpus, speed)
            job.attained_service += cost.service_norm
            job.service_gpu_s += cost.service_gpu_s
        else:
            job.wait_time += charge(clock, dt).wait_s

    # ---------------------------------------------------------------- events
    def _arrive(self, job: JobState) -> None:
        job.status = "arriving"
        job.ready_at = job.spec.submit_time + self.config.adoption_s
        job.active_integral_at_submit = self.active_integral
        self.n_active += 1
        self.active[job.spec.job_id] = job

    def _adopt(self, job: JobState) -> bool:
        """hops sees the job: it is profiled, or (no profiling) queued knowing every type.

        True when the job is schedulable at once.
        """
        was = self.resumed.get(job.spec.job_id)
        skip = (was is not None and was.profiled) or not job.model.profiled
        if self.config.profile_s > 0 and not skip:
            job.status = "profiling"
            job.profiling_since = self.now
            return False
        self._profiled(job)
        return True

    def _report_at(self, job: JobState) -> float:
        """When the job's profiling run in flight reports its profile (inf: none due)."""
        if job.config is None or job.config.gpu_type in job.profiled:
            return math.inf
        return job.config_since + self.profile_run_s

    def _report_profile(self, job: JobState) -> None:
        """The profiling run's report: the measured (noisy) profile of the run's type."""
        assert job.config is not None
        gpu_type = job.config.gpu_type
        node_id = job.config.parts[0][0]
        measured = self._noisy_profile(job, gpu_type, node_id)
        self.store.set_profile(job.spec.job_id, gpu_type, measured)
        job.profiled.add(gpu_type)
        self.known.setdefault((job.spec.model, job.batch_size), {})[gpu_type] = measured

    def _noisy(self, value: float, sigma: float) -> float:
        return value * math.exp(self.rng.gauss(0.0, sigma)) if sigma > 0 else value

    def _profiled(self, job: JobState) -> None:
        """No profiling runs: the theory layer learns the basic times on every type at once."""
        job.status = "queued"
        for gpu_type in sorted(self.cluster.gpu_types):
            nodes = self.cluster.nodes_of_type(gpu_type)
            if nodes and job.model.runs_on(gpu_type):
                profile = self._noisy_profile(job, gpu_type, nodes[0].id)
                self.store.set_profile(job.spec.job_id, gpu_type, profile)

    def _noisy_profile(self, job: JobState, gpu_type: str, node_id: str) -> PhaseProfile:
        """The job's true basic times on a node of ``gpu_type``, as a profile measures them."""
        sigma = self.config.profile_noise
        true = job.model.profile(gpu_type, self.truth.factor(node_id), job.batch_size)
        data = true.data
        noisy_data = Mixture(
            data.p_hit,
            self._noisy(data.mu_hit, sigma),
            data.sigma_hit,
            self._noisy(data.mu_miss, sigma),
            data.sigma_miss,
        )
        return PhaseProfile(
            t_f=self._noisy(true.t_f, sigma),
            t_b=self._noisy(true.t_b, sigma),
            t_u=self._noisy(true.t_u, sigma),
            pattern=true.pattern,
            data=noisy_data,
        )

    def _finish(self, job: JobState) -> None:
        self._measure(job)
        self._release(job)
        job.status = "done"
        job.samples_done = job.spec.total_samples
        seen_late = self.config.seen_after_end_s > 0 and job.trained_at is not None
        job.finish_time = job.trained_at if seen_late else self.now
        job.active_integral_at_finish = self.active_integral
        self.n_active -= 1
        del self.active[job.spec.job_id]
        self.store.forget_job(job.spec.job_id)

    # ---------------------------------------------------------- measurements
    def _measure(self, job: JobState) -> None:
        """Report the job's per-GPU pace in its current configuration, if it ran long enough.

        The pace is what hopsd measures: a distributed job runs at its slowest
        node's. It is learned by the core's one rule, as hopsd learns it.
        """
        cfg = job.config
        if cfg is None:
            return
        productive = self.now - max(job.config_since, job.penalty_until)
        if productive < self.config.measure_after_s:
            return
        rates = self.truth.node_rates(job.spec.model, cfg, job.batch_size)
        per_gpu = min(self._noisy(r, self.config.measure_noise) for r in rates)
        self.learn_measurement(job.spec.job_id, cfg, per_gpu)

    def learn_measurement(self, job_id: str, cfg: Configuration, per_gpu: float) -> None:
        """What the scheduler learns from one measured pace (the core's rule, as hopsd)."""
        apply_learned(self.store, job_id, learn(self.store, job_id, cfg, self.cluster, per_gpu))

    # --------------------------------------------------------------- planning
    def _core_job(self, js: JobState) -> Job:
        """The job as the core sees it; the same object again while nothing it holds changed
        (several steps often fall on one instant, and every step asks for every job)."""
        current = js.config if js.status == "running" else None
        state = (
            js.samples_done,
            js.attained_service,
            js.wait_time,
            current,
            js.batch_size,
            js.restarts,
        )
        cached = self._core_jobs.get(js.spec.job_id)
        if cached is not None and cached[0] == state:
            return cached[1]
        limits = self._limits.get(js.spec.model)
        if limits is None:
            limits = self._limits[js.spec.model] = js.model.limits()
        job = Job(
            id=js.spec.job_id,
            demands=js.spec.demands,
            total_samples=js.spec.total_samples,
            batch_size=js.batch_size,
            params=js.model.params,
            submit_time=js.spec.submit_time,
            user=js.spec.user,
            samples_done=min(js.samples_done, js.spec.total_samples),
            attained_service=js.attained_service,
            wait_time=js.wait_time,
            current=current,
            max_gpus=limits,
            restart_s=Engine._restart_price(js),
        )
        self._core_jobs[js.spec.job_id] = (state, job)
        return job

    @staticmethod
    def _restart_price(js: JobState) -> float | None:
        """What the planner prices a move of the job at: its model's restart cost (None:
        the prior), or, replaying a live job, what hopsd would have learned of it by now."""
        if js.model.priced_as is not None:
            return js.model.priced_as.price(js.restarts)
        return js.model.restore_s

    def _snapshot(self, pinned: bool) -> Snapshot:
        jobs: list[Job] = []
        running: list[str] = []
        profiling: list[JobState] = []
        for js in self.active.values():
            if js.status == "profiling":
                profiling.append(js)
            if js.status not in ("queued", "running") or self._ending(js):
                continue
            jobs.append(self._core_job(js))
            if js.status == "running":
                running.append(js.spec.job_id)
        return Snapshot(
            now=self.now,
            cluster=self.cluster,
            jobs=tuple(jobs),
            store=self.store,
            pinned=frozenset(running) if pinned else frozenset(),
            capacity=self._left_by_profiling(),
            profiling=tuple(self._profilee(js) for js in profiling),
        )

    def _ending(self, js: JobState) -> bool:
        """Trained to its end, not yet seen ended (``seen_after_end_s``): out of every plan,
        its GPUs still held, as hopsd leaves a completing job."""
        return js.trained_at is not None and self.config.seen_after_end_s > 0

    def _left_by_profiling(self) -> dict[str, int]:
        """What the policy may hand out of the nodes profiling runs (or reserved GPUs) use
        (the rest: all)."""
        taken = {n: gpus for n, gpus in self.profiling_used.items() if gpus}
        for node_id, gpus in self.reserved.items():
            taken[node_id] = taken.get(node_id, 0) + gpus
        for js in self.active.values():
            if self._ending(js) and js.config is not None:
                for node_id, gpus in js.config.parts:
                    taken[node_id] = taken.get(node_id, 0) + gpus
        return headroom({n: self.cluster.node(n).gpus for n in taken}, taken)

    def _profilee(self, js: JobState) -> Profilee:
        """A profiling job as the core's profiling rules see it (its runs always start)."""
        run = None
        if js.config is not None:
            cfg = js.config
            run = RunInFlight(cfg.gpu_type, cfg.parts[0][0], js.config_since, True)
        return Profilee(
            js.spec.job_id,
            js.spec.submit_time,
            js.profiling_since,
            frozenset(js.profiled),
            frozenset(),
            run,
            js.profiling_runs,
            self._core_job(js),
            self._known(js),
        )

    def _known(self, js: JobState) -> tuple[KnownProfile, ...]:
        """Profiles of the job's model measured by earlier jobs (at its batch size)."""
        found = self.known.get((js.spec.model, js.batch_size), {})
        return tuple(KnownProfile(t, p) for t, p in sorted(found.items()))

    def _usable_idle(self) -> int:
        """Idle GPUs a waiting job could start on: those of every type whose idle GPUs
        hold the smallest minimum demand among the waiting jobs."""
        smallest = min(
            (j.spec.demands[0] for j in self.active.values() if j.status == "queued"),
            default=0,
        )
        if smallest == 0:
            return 0
        idle = per_type(self.cluster, headroom(node_sizes(self.cluster), self.used))
        return sum(n for n in idle.values() if n >= smallest)

    def _close_round(self) -> None:
        if self.rounds:
            stat = self.rounds[-1]
            stat.duration = self.now - stat.start

    def _start_round(self, at: float) -> None:
        self._close_round()
        self.rounds.append(RoundStat(start=at))
        for job in self.active.values():
            if job.status == "running":
                self._measure(job)
        self._decide()
        self.rounds[-1].effective_throughput = sum(
            j.rate / self._ref_rate[j.spec.model]
            for j in self.active.values()
            if j.status == "running"
        )

    def _decide(self, changed: bool = True) -> None:
        """Take the core's scheduling step (hopsd takes the same one) and apply its decision.

        Profiling runs that stopped free their GPU at once; the step is then taken
        again so the job's next type is placed in the same instant (hopsd does it
        on its next tick, seconds later).
        """
        step = self._step(changed)
        self.clock = step.clock
        stopped = self._apply_profiling(step.profiling)
        if step.kind != IDLE:
            if step.kind == ROUND:
                self.plans += 1
            if step.kind == FRAGMENT or step.refilled:
                self.fragment_plans += 1
            self._apply(step.plan)
        if stopped:
            again = self._step(False)
            self.clock = again.clock
            self._apply_profiling(again.profiling)
            if again.kind != IDLE:
                self._apply(again.plan)

    def _step(self, changed: bool) -> StepResult:
        try:
            return schedule_step(
                self._snapshot(pinned=False),
                self.clock,
                self.policy,
                self.settings,
                self.step_options,
                changed=changed,
            )
        except PlanRuleError as exc:
            raise SimulationError(f"policy {self.policy.name!r}: {exc}") from exc

    def _apply_profiling(self, decision: ProfilingDecision) -> bool:
        """Enact the profiling queue's decision on the simulated cluster; True if a run stopped."""
        for job_id, _ in decision.stop:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
        for job_id, _ in decision.hold:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.restarts = restarts_after(js.restarts, RunEnd.UNSTARTED)
        for job_id, _ in decision.finish:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.status = "queued"
            self._derive(js)
        for run in decision.start:
            js = self.by_id[run.job_id]
            cfg = Configuration(run.gpu_type, ((run.node, 1),))
            self.profiling_used[run.node] += 1
            self._occupy(js, cfg, real=False)
            js.penalty_until = self.now + js.model.launch_s  # each run launches first
            js.profiling_runs += 1
            js.has_run = True  # its first real start is a restart
        return bool(decision.stop)

    def _release_profiling(self, js: JobState) -> None:
        if js.config is None:
            return
        for node_id, gpus in js.config.parts:
            self.profiling_used[node_id] -= gpus
        self._release(js)

    def _derive(self, js: JobState) -> None:
        """Profiles of the types a job was not profiled on: its model's known ones, else
        scaled from a measured one (the core's rule, as hopsd writes them)."""
        own = {t: p for t in js.profiled if (p := self.store.profile(js.spec.job_id, t))}
        for gpu_type, profile in derived_profiles(self.cluster, own, self._known(js)).items():
            self.store.set_profile(js.spec.job_id, gpu_type, profile)

    def _release(self, job: JobState) -> None:
        if job.config is None:
            return
        for node_id, gpus in job.config.parts:
            self.used[node_id] -= gpus
            assert self.used[node_id] >= 0, f"node {node_id} released below zero"
        job.config = None
        job.rate = 0.0

    def _occupy(self, job: JobState, cfg: Configuration, *, real: bool = True) -> None:
        for node_id, gpus in cfg.parts:
            self.used[node_id] += gpus
            cap = self.cluster.node(node_id).gpus
            if self.used[node_id] > cap:
                raise SimulationError(
                    f"policy {self.policy.name!r} double-booked node {node_id!r}: "
                    f"{self.used[node_id]} GPUs of {cap} handed out"
                )
        job.config = cfg
        job.rate = self.truth.throughput(job.spec.model, cfg, job.batch_size)
        job.config_since = self.now
        if not real:
            return  # a profiling run: not the job's start
        job.types_used.add(cfg.gpu_type)
        if job.first_start is None:
            job.first_start = self.now
            job.first_config = cfg

    def _restart_cost(self, job: JobState) -> float:
        """Seconds without progress after a move or restart: the model's own, else the penalty."""
        own = job.model.restore_s
        return own if own is not None else self.settings.restart_penalty_s

    def _apply(self, plan: Plan) -> None:
        """Enact a validated plan on the simulated cluster (the step checked its rules)."""
        mentioned = {a.job_id for a in (*plan.keep, *plan.move)} | set(plan.preempt)
        self.unmentioned += sum(
            1
            for j in self.active.values()
            if j.status == "running" and j.spec.job_id not in mentioned
        )
        for job_id in plan.preempt:
            js = self.by_id[job_id]
            self._release(js)
            js.status = "queued"
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
            self.preemptions += 1
        for a in plan.move:
            self._release(self.by_id[a.job_id])
        for a in plan.move:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.penalty_until = self.now + self._restart_cost(js)
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
            self.moves += 1
        for a in plan.start:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.status = "running"
            if js.has_run:
                js.penalty_until = self.now + self._restart_cost(js)
            elif js.model.launch_s > 0:
                js.penalty_until = self.now + js.model.launch_s  # launch until it trains
            js.has_run = True
