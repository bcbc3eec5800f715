"""The trace-driven simulation loop: arrivals, profiling, rounds, fragments, completions.

Time advances from event to event (arrival, end of profiling, job end, round
start). At each of them the engine takes the core's scheduling step
(:func:`hopsd.core.step.schedule_step`), the very step hopsd takes on a live
cluster: at every round start the policy plans the whole cluster; when a job
ends or a new job becomes schedulable inside a round, the policy plans the idle
GPUs with every running job pinned. Jobs progress at their *true*
throughput (:mod:`hopsd.sim.truth`); the scheduler only ever sees the
:class:`InMemoryThroughputStore`, fed with noisy profiles after a job's
profiling and noisy measurements of the configurations jobs actually ran in.

The idle GPUs a round plan leaves while jobs wait (including jobs the plan
itself preempted) are offered to the policy's fragment planning right away
(``refill_after_round``); round-based baselines answer that with no change.

Costs modelled: a job that is moved, or restarted after a preemption, makes no
progress for ``restart_penalty_s`` (or its model's own ``restore_s``); a new job
spends ``profile_s`` profiling (short runs on every GPU type, in parallel,
outside the scheduled GPUs) before it can be scheduled. A GPU is never handed
to two jobs (checked on every plan).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hopsd.core.errors import HopsError, InfeasibleDemandError, InvalidInputError
from hopsd.core.model import Configuration, Job, Plan
from hopsd.core.policies import Policy
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import (
    FRAGMENT,
    IDLE,
    ROUND,
    PlanRuleError,
    RoundClock,
    StepOptions,
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
    profile_s: float = 60.0
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


@dataclass
class JobState:
    """Everything the simulator tracks about one job."""

    spec: JobSpec
    model: ModelSpec
    status: str = "pending"  # pending | profiling | queued | running | done
    ready_at: float = math.inf
    config: Configuration | None = None
    rate: float = 0.0
    samples_done: float = 0.0
    attained_service: float = 0.0
    wait_time: float = 0.0
    run_time: float = 0.0
    penalty_until: float = 0.0
    config_since: float = 0.0
    has_run: bool = False
    restarts: int = 0
    first_start: float | None = None
    finish_time: float | None = None
    active_integral_at_submit: float = 0.0
    active_integral_at_finish: float = 0.0
    types_used: set[str] = field(default_factory=set)

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size or self.model.batch_size

    def finish_eta(self, now: float) -> float:
        if self.status != "running" or self.rate <= 0:
            return math.inf
        left = self.spec.total_samples - self.samples_done
        return max(now, self.penalty_until) + max(left, 0.0) / self.rate


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
    ) -> None:
        self.truth = truth
        self.cluster = truth.cluster
        self.policy = policy
        self.config = config or EngineConfig()
        self.settings = self.config.settings
        self.progress = progress
        self.rng = random.Random(f"engine-{self.config.seed}")
        self.store = InMemoryThroughputStore()
        self.used: dict[str, int] = {n.id: 0 for n in self.cluster.nodes}
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
        self._ref_rate = {m: reference_rate(truth, m) for m in {j.spec.model for j in self.jobs}}
        self._sums: dict[tuple[str, ...], tuple[float, int]] = {}
        self.rounds: list[RoundStat] = []
        self.preemptions = 0
        self.moves = 0
        self.plans = 0
        self.fragment_plans = 0
        self.unmentioned = 0
        self.clock = RoundClock(self.settings.round_length_s)
        self.step_options = StepOptions(
            spare_guard_s=self.config.spare_guard_s,
            refill_after_round=self.config.refill_after_round,
            fragments=self.config.fragments,
        )
        self._check_feasible()

    # ----------------------------------------------------------------- setup
    def _check_feasible(self) -> None:
        per_type: dict[str, int] = {}
        for node in self.cluster.nodes:
            per_type[node.gpu_type] = per_type.get(node.gpu_type, 0) + node.gpus
        biggest = max(per_type.values(), default=0)
        for job in self.jobs:
            if job.spec.demands[0] > biggest:
                raise InfeasibleDemandError(
                    f"job {job.spec.job_id!r} needs at least {job.spec.demands[0]} GPUs but no "
                    f"GPU type has more than {biggest}"
                )

    # ------------------------------------------------------------------ loop
    def run(self) -> EngineResult:
        length = self.settings.round_length_s
        next_round = 0.0
        arrivals = list(self.jobs)
        next_arrival = 0
        done = 0
        horizon = (self.jobs[-1].spec.submit_time if self.jobs else 0.0) + self.config.max_horizon_s
        while done < len(self.jobs):
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
                (j.ready_at for j in self.active.values() if j.status == "profiling"),
                default=math.inf,
            )
            t_end = min(
                (j.finish_eta(self.now) for j in self.active.values() if j.status == "running"),
                default=math.inf,
            )
            t_next = min(t_arr, t_ready, t_end, next_round)
            if t_next > horizon:
                stuck = [j.spec.job_id for j in self.jobs if j.status != "done"]
                raise SimulationError(
                    f"policy {self.policy.name!r} left {len(stuck)} job(s) unfinished past the "
                    f"horizon, e.g. {stuck[:5]}"
                )
            self._advance(t_next)
            changed = False
            while (
                next_arrival < len(arrivals)
                and arrivals[next_arrival].spec.submit_time <= self.now + EPS
            ):
                self._arrive(arrivals[next_arrival])
                next_arrival += 1
            for job in list(self.active.values()):
                if job.status == "profiling" and job.ready_at <= self.now + EPS:
                    self._profiled(job)
                    changed = True
            for job in list(self.active.values()):
                if job.status == "running" and job.finish_eta(self.now) <= self.now + EPS:
                    self._finish(job)
                    done += 1
                    changed = True
            inside_round = self.now < next_round - EPS
            if changed and inside_round:
                self._decide()
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

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt <= 0:
            return
        used = sum(self.used.values())
        waiting = any(j.status == "queued" for j in self.active.values())
        for job in self.active.values():
            if job.status == "running":
                assert job.config is not None
                productive = max(0.0, t - max(self.now, job.penalty_until))
                job.samples_done = min(
                    job.samples_done + job.rate * productive, job.spec.total_samples
                )
                job.run_time += dt
                speed = self.cluster.gpu_types[job.config.gpu_type].speed
                job.attained_service += job.config.total_gpus * speed * dt
            elif job.status in ("queued", "profiling"):
                job.wait_time += dt
        stat = self.rounds[-1]
        stat.used_gpu_s += used * dt
        if waiting:
            stat.waiting_s += dt
            stat.idle_gpu_s_waiting += (self.total_gpus - used) * dt
            stat.usable_idle_gpu_s += self._usable_idle() * dt
        self.active_integral += self.n_active * dt
        self.now = t

    # ---------------------------------------------------------------- events
    def _arrive(self, job: JobState) -> None:
        job.status = "profiling"
        job.ready_at = job.spec.submit_time + self.config.profile_s
        job.active_integral_at_submit = self.active_integral
        self.n_active += 1
        self.active[job.spec.job_id] = job

    def _noisy(self, value: float, sigma: float) -> float:
        return value * math.exp(self.rng.gauss(0.0, sigma)) if sigma > 0 else value

    def _profiled(self, job: JobState) -> None:
        """Profiling ends: the theory layer learns the basic times on every type (with noise)."""
        job.status = "queued"
        sigma = self.config.profile_noise
        for gpu_type in sorted(self.cluster.gpu_types):
            nodes = self.cluster.nodes_of_type(gpu_type)
            if not nodes or not job.model.runs_on(gpu_type):
                continue
            true = job.model.profile(gpu_type, self.truth.factor(nodes[0].id), job.batch_size)
            data = true.data
            noisy_data = Mixture(
                data.p_hit,
                self._noisy(data.mu_hit, sigma),
                data.sigma_hit,
                self._noisy(data.mu_miss, sigma),
                data.sigma_miss,
            )
            self.store.set_profile(
                job.spec.job_id,
                gpu_type,
                PhaseProfile(
                    t_f=self._noisy(true.t_f, sigma),
                    t_b=self._noisy(true.t_b, sigma),
                    t_u=self._noisy(true.t_u, sigma),
                    pattern=true.pattern,
                    data=noisy_data,
                ),
            )

    def _finish(self, job: JobState) -> None:
        self._measure(job)
        self._release(job)
        job.status = "done"
        job.samples_done = job.spec.total_samples
        job.finish_time = self.now
        job.active_integral_at_finish = self.active_integral
        self.n_active -= 1
        del self.active[job.spec.job_id]
        self.store.forget_job(job.spec.job_id)
        self._forget_sums(job.spec.job_id)

    # ---------------------------------------------------------- measurements
    def _record(self, key: tuple[str, ...], value: float) -> float:
        total, count = self._sums.get(key, (0.0, 0))
        self._sums[key] = (total + value, count + 1)
        return (total + value) / (count + 1)

    def _forget_sums(self, job_id: str) -> None:
        for key in [k for k in self._sums if k[1] == job_id]:
            del self._sums[key]

    def _measure(self, job: JobState) -> None:
        """Report the per-node pace of a job's current configuration, if it ran long enough."""
        cfg = job.config
        if cfg is None:
            return
        productive = self.now - max(job.config_since, job.penalty_until)
        if productive < self.config.measure_after_s:
            return
        rates = self.truth.node_rates(job.spec.model, cfg, job.batch_size)
        jid = job.spec.job_id
        noisy = [self._noisy(r, self.config.measure_noise) for r in rates]
        if cfg.distributed:
            for (node_id, _), value in zip(cfg.parts, noisy, strict=True):
                mean = self._record(("ed", jid, node_id, str(cfg.n_nodes)), value)
                self.store.set_entity_distributed(jid, node_id, cfg.n_nodes, mean)
            mean = self._record(("td", jid, cfg.gpu_type, str(cfg.n_nodes)), min(noisy))
            self.store.set_type_distributed(jid, cfg.gpu_type, cfg.n_nodes, mean)
        else:
            node_id = cfg.parts[0][0]
            mean = self._record(("ea", jid, node_id, str(cfg.total_gpus)), noisy[0])
            self.store.set_entity_aggregated(jid, node_id, cfg.total_gpus, mean)
            mean = self._record(("ta", jid, cfg.gpu_type, str(cfg.total_gpus)), noisy[0])
            self.store.set_type_aggregated(jid, cfg.gpu_type, cfg.total_gpus, mean)

    # --------------------------------------------------------------- planning
    def _snapshot(self, pinned: bool) -> Snapshot:
        jobs: list[Job] = []
        running: list[str] = []
        for js in self.active.values():
            if js.status not in ("queued", "running"):
                continue
            jobs.append(
                Job(
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
                    current=js.config,
                    max_gpus=js.model.limits(),
                )
            )
            if js.status == "running":
                running.append(js.spec.job_id)
        return Snapshot(
            now=self.now,
            cluster=self.cluster,
            jobs=tuple(jobs),
            store=self.store,
            pinned=frozenset(running) if pinned else frozenset(),
        )

    def _usable_idle(self) -> int:
        """Idle GPUs a waiting job could start on: those of every type whose idle GPUs
        hold the smallest minimum demand among the waiting jobs."""
        smallest = min(
            (j.spec.demands[0] for j in self.active.values() if j.status == "queued"),
            default=0,
        )
        if smallest == 0:
            return 0
        idle: dict[str, int] = {}
        for node in self.cluster.nodes:
            idle[node.gpu_type] = idle.get(node.gpu_type, 0) + node.gpus - self.used[node.id]
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

    def _decide(self) -> None:
        """Take the core's scheduling step (hopsd takes the same one) and apply its plan."""
        try:
            step = schedule_step(
                self._snapshot(pinned=False),
                self.clock,
                self.policy,
                self.settings,
                self.step_options,
            )
        except PlanRuleError as exc:
            raise SimulationError(f"policy {self.policy.name!r}: {exc}") from exc
        self.clock = step.clock
        if step.kind == IDLE:
            return
        if step.kind == ROUND:
            self.plans += 1
        if step.kind == FRAGMENT or step.refilled:
            self.fragment_plans += 1
        self._apply(step.plan)

    def _release(self, job: JobState) -> None:
        if job.config is None:
            return
        for node_id, gpus in job.config.parts:
            self.used[node_id] -= gpus
            assert self.used[node_id] >= 0, f"node {node_id} released below zero"
        job.config = None
        job.rate = 0.0

    def _occupy(self, job: JobState, cfg: Configuration) -> None:
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
        job.types_used.add(cfg.gpu_type)
        if job.first_start is None:
            job.first_start = self.now

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
            js.restarts += 1
            self.preemptions += 1
        for a in plan.move:
            self._release(self.by_id[a.job_id])
        for a in plan.move:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.penalty_until = self.now + self._restart_cost(js)
            js.restarts += 1
            self.moves += 1
        for a in plan.start:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.status = "running"
            if js.has_run:
                js.penalty_until = self.now + self._restart_cost(js)
            js.has_run = True
