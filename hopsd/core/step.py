"""One scheduling step: the one place where hops decides, whoever asks.

The step runs as named stages, in this order: **reserve** (in-flight work keeps
its GPUs, :mod:`hopsd.core.reserve`), **profile** (the profiling queue),
**evidence** (size claims), **score** (LR and rho, :mod:`hopsd.core.scoring`),
the fair-share factors, **plan** (the policy, with its fragment refill),
**guard** (sparing), validation and **act** (the plan's actions, which start
with a checkpoint notice, the requeues of starts Slurm made without a
decision and the relaunches of failed launches: :mod:`hopsd.core.act`). A
caller that reserved the snapshot already (hopsd, for its figures and quota)
hands the step the reserved one: reserving it again changes nothing.

hopsd (live Slurm), the simulator and replay differ only in where the snapshot
comes from and where the decision goes; each of them calls
:func:`schedule_step` with the snapshot and the round clock, and gets back what
to do. The step owns the rules that used to be written once per caller:

* the **profiling queue** (:mod:`hopsd.core.profiling`): new jobs' short runs
  on each GPU type take idle GPUs first, and the decision says which runs to
  start, stop or hold and whose profiling is over;
* **size claims**: a job whose claimed size its run time or progress contradicts
  is planned with the size Slurm's time limit or its progress gives
  (:mod:`hopsd.core.sizeclaim`), and the step says so;
* the **fair-share factor** of every job, from the owners' decayed usage the
  snapshot carries (:func:`hopsd.core.fairshare.apply_fair_share`);
* the **round clock**: a full round when ``round_length_s`` has passed since
  the last one, otherwise a fragment plan for idle GPUs, and only when
  something changed and a queued job waits;
* **refill**: the GPUs a round plan leaves idle while jobs wait are offered to
  fragment planning at once, in the same step;
* **sparing**: a running job that finishes within ``spare_guard_s`` is never
  moved or preempted (that would waste its restart cost and race its end);
* **validation**: no GPU handed out twice, starts within a job's demand set,
  pinned jobs untouched -- a policy that breaks a rule raises
  :class:`PlanRuleError` instead of reaching Slurm;
* a short **reason per job** (why it starts, moves, waits or was spared).

Policies (hops with its priorities, sia, gavel, fifo) plug in behind
:class:`~hopsd.core.policies.Policy`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from hopsd.core.act import Act, act
from hopsd.core.capacity import free_gpus as unheld
from hopsd.core.capacity import headroom, held_gpus, node_capacity
from hopsd.core.errors import HopsError
from hopsd.core.estimator import Estimator
from hopsd.core.fairshare import FairShareRule, apply_fair_share
from hopsd.core.gcpause import collector_paused
from hopsd.core.model import Assignment, Configuration, Job, Plan
from hopsd.core.policies import Policy
from hopsd.core.profiling import ProfilingDecision, ProfilingRules, WithDerived, profiling_step
from hopsd.core.reserve import reserve
from hopsd.core.scoring import Scores, score_jobs
from hopsd.core.settings import Settings
from hopsd.core.sizeclaim import DOUBT, SizeRule, SizeVerdict, check_sizes
from hopsd.core.snapshot import Snapshot
from hopsd.core.urgency import asked_early_round

ROUND, FRAGMENT, IDLE = "round", "fragment", "idle"


class PlanRuleError(HopsError):
    """A policy's plan breaks a rule every plan must keep (it is never enacted)."""


@dataclass(frozen=True)
class RoundClock:
    """When the last full round ran; the step decides when the next one is due."""

    round_length_s: float
    last_round_at: float | None = None

    def due(self, now: float) -> bool:
        if self.last_round_at is None:
            return True
        return now - self.last_round_at >= self.round_length_s - 1e-6  # float round boundaries

    def after_round(self, now: float) -> RoundClock:
        return dataclasses.replace(self, last_round_at=now)


@dataclass(frozen=True)
class StepOptions:
    """Rules of the step that are not the planner's own settings."""

    spare_guard_s: float = 0.0
    refill_after_round: bool = True
    fragments: bool = True
    profiling: ProfilingRules = field(default_factory=ProfilingRules)
    fairshare: FairShareRule = field(default_factory=FairShareRule)
    sizes: SizeRule = field(default_factory=SizeRule)
    # score every planned job's LR and rho (:mod:`hopsd.core.scoring`) into the result
    score: bool = False
    # moves and preemptions of jobs that can hear it start with a checkpoint notice
    notice: bool = False


@dataclass(frozen=True)
class StepResult:
    """What one step decided: the plan (a diff), the clock after it, a reason per job."""

    kind: str
    plan: Plan
    clock: RoundClock
    reasons: Mapping[str, str] = field(default_factory=dict)
    spared: tuple[str, ...] = ()
    idle_gpus_waiting: int = 0
    refilled: bool = False
    profiling: ProfilingDecision = field(default_factory=ProfilingDecision)
    planned: Snapshot | None = None  # what the policy saw (profiling GPUs out, jobs joined)
    # jobs whose claimed size is not believed (:mod:`hopsd.core.sizeclaim`); ``new`` ones
    # are to be recorded and logged once
    doubted: tuple[SizeVerdict, ...] = ()
    # LR and rho of the jobs planned (with ``StepOptions.score``; see :mod:`hopsd.core.scoring`)
    scores: Scores | None = None
    # the step's actions in enacting order (:func:`hopsd.core.act.act`): holds, the
    # plan's, each saying whether a notice comes first, requeues of unplanned starts,
    # relaunches
    actions: tuple[Act, ...] = ()
    # when the policy wants its next round sooner than the clock's, if nothing else
    # happens before (a simulator wakes then; hopsd's ticks come sooner anyway)
    early_round_at: float | None = None

    @property
    def acted(self) -> bool:
        plan = self.plan
        return bool(plan.start or plan.move or plan.preempt)


def schedule_step(
    snapshot: Snapshot,
    clock: RoundClock,
    policy: Policy,
    settings: Settings,
    options: StepOptions | None = None,
    *,
    changed: bool = True,
) -> StepResult:
    """Decide for ``snapshot``: a full round, a fragment plan, or nothing (``idle``).

    In-flight work is reserved first (:func:`hopsd.core.reserve.reserve`), then
    the profiling queue is served (its runs take idle GPUs before the
    policy sees them), then the jobs get their fair-share factors, then the
    policy plans. ``changed`` says whether anything happened since the last
    step (a job arrived, ended or became schedulable); without it, a fragment
    plan could only repeat the last one.
    """
    opts = options or StepOptions()
    snapshot = reserve(snapshot)
    profiling = ProfilingDecision()
    if snapshot.profiling:
        free = free_gpus(snapshot, None)
        profiling = profiling_step(
            snapshot.profiling, snapshot.cluster, free, opts.profiling, snapshot.now
        )
    snapshot, doubted = evidence(snapshot, settings, opts.sizes)
    scores = score_jobs(snapshot, settings) if opts.score else None
    planned = len(snapshot.jobs)
    snapshot = _prepared(snapshot, profiling, opts)
    snapshot, joined = evidence(snapshot, settings, opts.sizes, skip=planned)
    doubted += joined
    changed = changed or bool(profiling.finish)
    result = _plan_step(snapshot, clock, policy, settings, opts, changed)
    reasons = {**profiling.reasons, **result.reasons}
    for verdict in doubted:
        if verdict.job_id in reasons:
            reasons[verdict.job_id] += f" ({DOUBT})"
    return dataclasses.replace(
        result,
        profiling=profiling,
        reasons=reasons,
        planned=snapshot,
        doubted=doubted,
        scores=scores,
        actions=act(
            result.plan,
            snapshot.listening,
            opts.notice,
            snapshot.unplanned,
            snapshot.launch_failures,
            snapshot.pending,
        ),
    )


def evidence(
    snapshot: Snapshot, settings: Settings, rule: SizeRule, *, skip: int = 0
) -> tuple[Snapshot, tuple[SizeVerdict, ...]]:
    """The evidence stage: jobs whose claimed size is contradicted get their believed size
    (:mod:`hopsd.core.sizeclaim`); the first ``skip`` jobs were judged already."""
    estimator = Estimator(snapshot.cluster, snapshot.store, settings)
    jobs, doubted = check_sizes(snapshot.jobs[skip:], estimator, rule)
    if not doubted:
        return snapshot, ()
    return dataclasses.replace(snapshot, jobs=(*snapshot.jobs[:skip], *jobs)), doubted


def scored(snapshot: Snapshot, settings: Settings, options: StepOptions) -> Scores:
    """The score stage as the step takes it (reserve, evidence, score), without planning:
    for a caller that must record the figures although planning failed."""
    believed, _ = evidence(reserve(snapshot), settings, options.sizes)
    return score_jobs(believed, settings)


def _prepared(snapshot: Snapshot, profiling: ProfilingDecision, opts: StepOptions) -> Snapshot:
    """The snapshot the policy sees: profiling GPUs taken out, jobs whose profiling just
    ended queued (with their derived profiles), fair-share factors set."""
    over = {job_id for job_id, _ in profiling.finish}
    joining = tuple(p for p in snapshot.profiling if p.job_id in over and p.job is not None)
    if joining:
        jobs = (
            *snapshot.jobs,
            *(dataclasses.replace(p.job, current=None) for p in joining if p.job),
        )
        store = WithDerived(snapshot.store, snapshot.cluster, {p.job_id: p for p in joining})
        snapshot = dataclasses.replace(snapshot, jobs=jobs, store=store)
    if profiling.reserved:
        free = free_gpus(snapshot, None)  # a run never takes a GPU a running job holds
        runs = {n: min(gpus, free.get(n, 0)) for n, gpus in profiling.reserved.items()}
        capacity = headroom(node_capacity(snapshot), runs)
        snapshot = dataclasses.replace(snapshot, capacity=capacity)
    if snapshot.usage is not None:
        jobs = apply_fair_share(snapshot.jobs, snapshot.usage, opts.fairshare)
        snapshot = dataclasses.replace(snapshot, jobs=jobs)
    return snapshot


@collector_paused
def _plan_step(
    snapshot: Snapshot,
    clock: RoundClock,
    policy: Policy,
    settings: Settings,
    opts: StepOptions,
    changed: bool,
) -> StepResult:
    now = snapshot.now
    if clock.due(now) and not snapshot.jobs:
        return StepResult(IDLE, Plan(), clock.after_round(now))  # the boundary passes anyway
    early = _early_round_at(policy, snapshot, settings, clock)
    if clock.due(now) or (early is not None and early <= now + 1e-6):
        plan = policy.plan(snapshot, settings)
        validate_plan(snapshot, plan, fragment=False)
        plan, spared = spare_finishing(plan, snapshot, settings, opts.spare_guard_s)
        refilled = False
        if opts.fragments and opts.refill_after_round and _idle_with_queue(snapshot, plan):
            after = applied(snapshot, plan)
            extra = policy.plan_fragment(after, settings)
            validate_plan(after, extra, fragment=True)
            plan, refilled = merge_refill(snapshot, plan, extra), True
        next_clock = clock.after_round(now)
        result = _result(ROUND, plan, snapshot, next_clock, spared, refilled)
        next_early = None
        if hasattr(policy, "early_round_at"):  # the jobs still queued once the plan is taken
            next_early = _early_round_at(policy, applied(snapshot, plan), settings, next_clock)
        return dataclasses.replace(result, early_round_at=next_early)
    if opts.fragments and changed and _idle_with_queue(snapshot, None):
        pinned = dataclasses.replace(snapshot, pinned=frozenset(j.id for j in snapshot.running))
        plan = policy.plan_fragment(pinned, settings)
        validate_plan(pinned, plan, fragment=True)
        result = _result(FRAGMENT, plan, snapshot, clock, (), False)
        return dataclasses.replace(result, early_round_at=early)
    return StepResult(IDLE, Plan(keep=_keeps(snapshot)), clock, early_round_at=early)


def _early_round_at(
    policy: Policy, snapshot: Snapshot, settings: Settings, clock: RoundClock
) -> float | None:
    return asked_early_round(policy, snapshot, settings, clock.last_round_at)


def _result(
    kind: str,
    plan: Plan,
    snapshot: Snapshot,
    clock: RoundClock,
    spared: tuple[str, ...],
    refilled: bool,
) -> StepResult:
    return StepResult(
        kind,
        plan,
        clock,
        reasons=explain(snapshot, plan, spared),
        spared=spared,
        idle_gpus_waiting=idle_while_waiting(snapshot, plan),
        refilled=refilled,
    )


def _keeps(snapshot: Snapshot) -> tuple[Assignment, ...]:
    return tuple(Assignment(j.id, j.current) for j in snapshot.running if j.current is not None)


# -- free GPUs: the one definition ------------------------------------------------------


def free_gpus(snapshot: Snapshot, plan: Plan | None) -> dict[str, int]:
    """GPUs per node nobody holds once ``plan`` is applied (running jobs as now if None)."""
    if plan is None:
        used = held_gpus(j.current for j in snapshot.running if j.current is not None)
    else:
        used = plan.gpus_used()
    return unheld(node_capacity(snapshot), used)


def _idle_with_queue(snapshot: Snapshot, plan: Plan | None) -> bool:
    placed = set(plan.placements()) if plan is not None else set()
    waiting = [j for j in snapshot.queued if j.id not in placed]
    if plan is not None:
        waiting += [j for j in snapshot.running if j.id in plan.preempt]
    return bool(waiting) and sum(free_gpus(snapshot, plan).values()) > 0


def idle_while_waiting(snapshot: Snapshot, plan: Plan) -> int:
    """GPUs the plan leaves idle although some queued job stays unplaced (0 otherwise)."""
    placed = plan.placements()
    if all(j.id in placed for j in snapshot.queued):
        return 0
    return sum(free_gpus(snapshot, plan).values())


# -- applying a plan to a snapshot (for the refill) -----------------------------------


def applied(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """The snapshot as it will be once ``plan`` is enacted, every placed job pinned."""
    placements = plan.placements()
    preempted = set(plan.preempt)
    jobs: list[Job] = []
    for job in snapshot.jobs:
        current: Configuration | None = placements.get(job.id)
        if current is None and job.current is not None and job.id not in preempted:
            current = job.current  # a running job the plan did not mention stays
        jobs.append(dataclasses.replace(job, current=current))
    pinned = frozenset(j.id for j in jobs if j.current is not None)
    return dataclasses.replace(snapshot, jobs=tuple(jobs), pinned=pinned)


def merge_refill(snapshot: Snapshot, round_plan: Plan, refill: Plan) -> Plan:
    """One plan from a round plan and the fragment plan that filled what it left idle.

    A job the round preempted and the refill started again is a move (or a keep,
    when it lands where it was).
    """
    current = {j.id: j.current for j in snapshot.running}
    preempted = set(round_plan.preempt)
    starts = list(round_plan.start)
    moves = list(round_plan.move)
    keeps = list(round_plan.keep)
    still_preempted = set(preempted)
    for a in refill.start:
        if a.job_id not in preempted:
            starts.append(a)
            continue
        still_preempted.discard(a.job_id)
        (keeps if current.get(a.job_id) == a.config else moves).append(a)
    return dataclasses.replace(
        round_plan,
        start=tuple(starts),
        keep=tuple(keeps),
        move=tuple(moves),
        preempt=tuple(j for j in round_plan.preempt if j in still_preempted),
    )


# -- sparing jobs about to finish -----------------------------------------------------


def spare_finishing(
    plan: Plan, snapshot: Snapshot, settings: Settings, guard_s: float
) -> tuple[Plan, tuple[str, ...]]:
    """Keep running jobs the plan would requeue although they finish within ``guard_s``.

    Starts that no longer fit once those jobs stay are dropped, last first, and a
    move onto a spared job's GPUs is undone (:func:`_make_room`): the plan never
    hands a GPU out twice.
    """
    if guard_s <= 0:
        return plan, ()
    estimator = Estimator(snapshot.cluster, snapshot.store, settings)
    jobs = {j.id: j for j in snapshot.jobs}

    def finishing(job_id: str) -> bool:
        job = jobs.get(job_id)
        if job is None or job.current is None:
            return False
        try:
            rate = estimator.throughput(job, job.current).samples_per_s
        except (HopsError, ArithmeticError, ValueError):
            return False  # a job whose data cannot be estimated is simply not spared
        return rate > 0 and job.remaining_samples / rate < guard_s

    spared = tuple(j for j in (*plan.preempt, *(a.job_id for a in plan.move)) if finishing(j))
    if not spared:
        return plan, ()
    keep = list(plan.keep)
    for job_id in spared:
        current = jobs[job_id].current
        assert current is not None
        keep.append(Assignment(job_id, current))
    spared_plan = dataclasses.replace(
        plan,
        keep=tuple(keep),
        move=tuple(a for a in plan.move if a.job_id not in spared),
        preempt=tuple(j for j in plan.preempt if j not in spared),
    )
    return _make_room(spared_plan, snapshot), spared


def _make_room(plan: Plan, snapshot: Snapshot) -> Plan:
    """Undo the last start, then the last move, landing on an overbooked node, until none is.

    A spared job keeps GPUs the plan had handed to a start or to another job's
    move; an undone move leaves that job where it runs (which may in turn crowd
    a later start or move there). Every running job back where it runs always
    fits, so this ends with a plan that hands no GPU out twice.
    """
    jobs = {j.id: j for j in snapshot.jobs}
    while True:
        headroom = _headroom(snapshot, _with_unmentioned(snapshot, plan))
        over = {n for n, v in headroom.items() if v < 0}
        if not over:
            return plan
        starts = [a for a in plan.start if any(n in over for n, _ in a.config.parts)]
        if starts:
            plan = dataclasses.replace(plan, start=tuple(a for a in plan.start if a != starts[-1]))
            continue
        moves = [a for a in plan.move if any(n in over for n, _ in a.config.parts)]
        if not moves:
            return plan  # the policy's own plan was valid; nothing else can crowd a node
        back = moves[-1]
        current = jobs[back.job_id].current
        assert current is not None
        plan = dataclasses.replace(
            plan,
            move=tuple(a for a in plan.move if a != back),
            keep=(*plan.keep, Assignment(back.job_id, current)),
        )


def _headroom(snapshot: Snapshot, plan: Plan) -> dict[str, int]:
    return headroom(node_capacity(snapshot), plan.gpus_used())


# -- the rules every plan keeps ------------------------------------------------------


def validate_plan(snapshot: Snapshot, plan: Plan, *, fragment: bool) -> None:
    """Raise :class:`PlanRuleError` when ``plan`` breaks a rule (see the module docstring)."""
    jobs = {j.id: j for j in snapshot.jobs}
    named = [a.job_id for a in (*plan.start, *plan.keep, *plan.move)] + list(plan.preempt)
    if len(named) != len(set(named)):
        raise PlanRuleError("a job is named twice in one plan")
    for a in plan.start:
        job = jobs.get(a.job_id)
        if job is None or job.current is not None:
            raise PlanRuleError(f"job {a.job_id!r} started but it is not queued")
        if a.config.total_gpus not in job.demands:
            raise PlanRuleError(
                f"job {a.job_id!r} given {a.config.total_gpus} GPUs, outside {job.demands}"
            )
        _check_type(job, a.config)
    for a in plan.keep:
        job = jobs.get(a.job_id)
        if job is None or job.current != a.config:
            raise PlanRuleError(f"job {a.job_id!r} kept somewhere it does not run")
    for job_id in [a.job_id for a in plan.move] + list(plan.preempt):
        job = jobs.get(job_id)
        if job is None or job.current is None:
            raise PlanRuleError(f"job {job_id!r} moved or preempted but it is not running")
        if fragment or job_id in snapshot.pinned:
            raise PlanRuleError(f"job {job_id!r} is pinned and cannot be moved or preempted")
    for a in plan.move:
        if a.config.total_gpus not in jobs[a.job_id].demands:
            raise PlanRuleError(f"job {a.job_id!r} moved to a size outside its demand set")
        _check_type(jobs[a.job_id], a.config)
    over = {
        n: -v for n, v in _headroom(snapshot, _with_unmentioned(snapshot, plan)).items() if v < 0
    }
    if over:
        raise PlanRuleError(f"GPUs handed out twice: over capacity by {over}")


def _check_type(job: Job, config: Configuration) -> None:
    """A job goes only where its GPU-type limits let it run (constraints, does-not-fit)."""
    if config.total_gpus not in job.demands_on(config.gpu_type):
        raise PlanRuleError(
            f"job {job.id!r} placed on {config.total_gpus} {config.gpu_type} GPUs, "
            "which its GPU-type limits exclude"
        )


def _with_unmentioned(snapshot: Snapshot, plan: Plan) -> Plan:
    """The plan plus running jobs it does not mention (they keep their GPUs)."""
    mentioned = set(plan.placements()) | set(plan.preempt)
    extra = tuple(
        Assignment(j.id, j.current)
        for j in snapshot.running
        if j.current is not None and j.id not in mentioned
    )
    return dataclasses.replace(plan, keep=(*plan.keep, *extra))


# -- reasons users see ---------------------------------------------------------------


def _where(config: Configuration) -> str:
    return f"{config.gpu_type} " + "+".join(f"{n}:{g}" for n, g in config.parts)


def explain(snapshot: Snapshot, plan: Plan, spared: tuple[str, ...]) -> dict[str, str]:
    """A short reason for every job of the snapshot."""
    reasons: dict[str, str] = {}
    for a in plan.start:
        reasons[a.job_id] = f"started on {_where(a.config)}"
    for a in plan.move:
        reasons[a.job_id] = f"moved to {_where(a.config)}"
    for job_id in plan.preempt:
        reasons[job_id] = "preempted for jobs of higher priority"
    for job_id in spared:
        reasons[job_id] = "kept in place: finishes before a move would pay off"
    free = sum(free_gpus(snapshot, plan).values())
    for job in snapshot.jobs:
        if job.id in reasons:
            continue
        if job.current is not None:
            reasons[job.id] = f"running on {_where(job.current)}"
        elif free < job.min_demand:
            reasons[job.id] = f"waiting: {free} GPUs free, needs at least {job.min_demand}"
        else:
            reasons[job.id] = "waiting: GPUs that fit go to jobs of higher priority"
    return reasons
