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
``profile_s / types`` long (or its model's own ``profile_s`` over the types it
is profiled on), on idle GPUs taken before the policy plans; the run trains
the job (its progress counts), each run's end is a restart (counted by the
core's rule, :func:`hopsd.core.accounting.restarts_after`, as Slurm counts
hopsd's requeue of it) and the job's first real start pays one. Types it could
not be profiled on get the measured profile scaled by the types' speeds.
With ``notice_grace_s`` a move or preemption is enacted as hopsd enacts it
under a checkpoint notice: the job runs on for the grace, its target reserved
through the core's in-flight records, then is requeued and placed; ``events``
lists every such action at its instant. ``adoption_s`` delays a new job before
hops sees it (replay uses it for hopsd's queue refresh). A GPU is never handed
to two jobs (checked on every plan).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Mapping, Sequence

from hopsd.core.accounting import Clock, charge, clock_of
from hopsd.core.admission import largest_config, runnable
from hopsd.core.errors import InfeasibleDemandError, InvalidInputError
from hopsd.core.learning import apply_learned, learn
from hopsd.core.model import Configuration, Job
from hopsd.core.nodespeed import SpeedLearner
from hopsd.core.policies import Policy
from hopsd.core.profiling import (
    ProfilingRules,
    profiled_types_of,
    types_to_profile,
)
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
from hopsd.sim.enact import PlanEnactor
from hopsd.sim.engine_config import EngineConfig, SimulationError, by_work
from hopsd.sim.scheduler_view import SchedulerView
from hopsd.sim.state import EngineResult, Flight, JobState, Resumed, RoundStat
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec, reference_rate

EPS = 1e-6

ProgressCallback = Callable[[float, int, int], None]


class Engine(SchedulerView, PlanEnactor):
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
        self.speeds = SpeedLearner(self.store.node_speeds())
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
        self.steps = 0
        self.unmentioned = 0
        self.flights: dict[str, Flight] = {}
        self.events: list[tuple[float, str, str]] = []
        self.clock = RoundClock(self.settings.round_length_s)
        self.early_round = math.inf  # when the policy last asked for an early round
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
            profiling=ProfilingRules(self.config.profile_s > 0, self._profiling_timeout_s()),
            notice=self.config.notice_grace_s > 0,
        )
        self._check_feasible()

    # ----------------------------------------------------------------- setup
    def _profiling_timeout_s(self) -> float:
        """How long a profiling run may take to report: the world's whole phase (never
        reached by a run of ``profile_s / types``), or the longest run of a model with a
        phase of its own (a replayed slow starter), so no run is taken for silent."""
        own = (self._profile_run_s(j) for j in self.jobs if j.model.profile_s is not None)
        return max(self.config.profile_s, *own, EPS)

    def _profile_run_s(self, job: JobState) -> float:
        """How long one of the job's profiling runs lasts, launch to report: its model's
        own phase over the types it is profiled on, else the world's over all types."""
        own = job.model.profile_s
        if own is None:
            return self.profile_run_s
        return own / max(len(types_to_profile(self.cluster, self._core_job(job))), 1)

    def _check_feasible(self) -> None:
        biggest = largest_config(self.cluster)
        for job in self.jobs:
            if not runnable(job.spec.demands, biggest):
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
                next_round = self._round_after(next_round)
                if self.progress is not None:
                    self.progress(self.now, done, len(self.jobs))
            t_arr = (
                arrivals[next_arrival].spec.submit_time
                if next_arrival < len(arrivals)
                else math.inf
            )
            t_next = min(t_arr, self._next_job_event(seen), next_round, self.early_round)
            if t_next > horizon and self.config.partial:
                break  # a forecast: what is known by the horizon, unfinished jobs open
            if t_next > horizon:
                stuck = [j.spec.job_id for j in self.jobs if j.status != "done"]
                raise SimulationError(
                    f"policy {self.policy.name!r} left {len(stuck)} job(s) unfinished past the "
                    f"horizon, e.g. {stuck[:5]}"
                )
            self._advance(t_next)
            while (
                next_arrival < len(arrivals)
                and arrivals[next_arrival].spec.submit_time <= self.now + EPS
            ):
                self._arrive(arrivals[next_arrival])
                next_arrival += 1
            changed, profiling = self._profiling_events()
            ended = self._end_events(seen)
            done += ended
            # requeues whose notice is over go before the step: hopsd takes pending chains
            # first, then decides
            graced = self._end_graces() if self.flights else False
            changed = changed or ended > 0 or graced
            inside_round = self.now < next_round - EPS
            early = self.now >= self.early_round - EPS
            if (changed or profiling or early) and inside_round and self._decide(changed):
                # the policy started a round before the clock's: the clock counts from it
                self._close_round()
                self.rounds.append(RoundStat(start=self.now))
                next_round = self.now + length
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

    def _round_after(self, at: float) -> float:
        """When the round after the one at ``at`` is due: the next of the configured round
        times (a replay's: hopsd's own), else one round length on."""
        times = self.config.round_times
        k = bisect.bisect_right(times, at + EPS)
        return times[k] if k < len(times) else at + self.settings.round_length_s

    def _next_job_event(self, seen: float) -> float:
        """When a job next becomes schedulable, reports a profile or ends (inf: never)."""
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
        t_grace = min((f.until for f in self.flights.values()), default=math.inf)
        return min(t_ready, t_report, t_end, t_grace)

    def _profiling_events(self) -> tuple[bool, bool]:
        """Adopt the jobs hops now sees and take the profiles reported by now.

        Returns (a job became schedulable, anything happened to a profiling job).
        """
        changed = profiling = False
        for job in list(self.active.values()):
            if job.status == "arriving" and job.ready_at <= self.now + EPS:
                changed = self._adopt(job) or changed
                profiling = True
            if job.status == "profiling" and self._report_at(job) <= self.now + EPS:
                self._report_profile(job)
                profiling = True
        return changed, profiling

    def _end_events(self, seen: float) -> int:
        """End the running jobs whose end is seen by now; how many ended."""
        ended = 0
        for job in list(self.active.values()):
            if job.status == "running" and job.finish_eta(self.now, seen) <= self.now + EPS:
                self._finish(job)
                ended += 1
        return ended

    def _settled(self, arrivals_left: bool) -> bool:
        """A forecast's end: every job served (their ends follow) or its rounds used up."""
        cap = self.config.max_rounds
        if cap is not None and len(self.rounds) > cap:
            return True
        steps = self.config.max_steps
        if steps is not None and self.steps >= steps:
            return True
        if not self.config.settle_when_served or arrivals_left or self.flights:
            return False  # work in flight (a requeue under notice) changes who runs
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
            if was.flight is not None:  # reserved by the step until it lands
                self.flights[job_id] = was.flight

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
        return job.config_since + self._profile_run_s(job)

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
        """No profiling runs: the theory layer learns the basic times on every type at once
        (unless the model's are unknown to hops: then it knows the type table only)."""
        job.status = "queued"
        if not job.model.phases_known:
            return
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
        self.flights.pop(job.spec.job_id, None)  # a requeue never comes (hopsd abandons it)
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
        updates = learn(self.store, job_id, cfg, self.cluster, per_gpu)
        apply_learned(self.store, job_id, updates)
        for u in updates:
            self.speeds.note(job_id, cfg.gpu_type, u.layer, u.place, u.size, u.per_gpu)

    # --------------------------------------------------------------- planning
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

    def _decide(self, changed: bool = True) -> bool:
        """Take the core's scheduling step (hopsd takes the same one) and apply its decision;
        True when the step planned a full round.

        Profiling runs that stopped free their GPU at once; the step is then taken
        again so the job's next type is placed in the same instant (hopsd does it
        on its next tick, seconds later). The policy's early round, if it wants
        one, is the instant the simulator wakes for it.
        """
        step = self._step(changed)
        self.steps += 1
        self.clock = step.clock
        self.early_round = math.inf if step.early_round_at is None else step.early_round_at
        stopped = self._apply_profiling(step.profiling)
        if step.kind != IDLE:
            if step.kind == ROUND:
                self.plans += 1
            if step.kind == FRAGMENT or step.refilled:
                self.fragment_plans += 1
            self._apply(step.plan, step.actions)
        if stopped:
            again = self._step(False)
            self.clock = again.clock
            if again.early_round_at is not None:
                self.early_round = min(self.early_round, again.early_round_at)
            self._apply_profiling(again.profiling)
            if again.kind != IDLE:
                self._apply(again.plan, again.actions)
        return step.kind == ROUND

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
