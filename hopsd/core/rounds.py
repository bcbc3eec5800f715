"""One scheduling round: admit, prioritise, window, configure, solve, place.

:func:`plan_round` is what the simulator and the daemon call at the start of a
round; :func:`plan_fragment` is the within-round re-planning of idle GPUs.
Both are deterministic: the same snapshot and settings give the same plan.

Round model (lease): every running job re-enters planning. Its current
placement is a candidate at full value, any other placement is discounted by
the restart penalty (:mod:`hopsd.core.gains`), and receiving nothing means
preemption. Running jobs behind the service window are not re-placed but may
keep their place: they get their current placement as their only option, so a
job a little behind the boundary is not stopped just to leave GPUs idle.
Jobs named in ``snapshot.pinned`` keep their place unconditionally.

After the main ILP, idle GPUs are planned again by up to
``settings.max_plans - 1`` fragment ILPs over the window's queued jobs that
got nothing, widened by the sensitivity adjustment (:mod:`hopsd.core.fragments`).
``rho_queue`` is estimated on an evenly spaced sample of at most
:data:`RHO_SAMPLE` queued jobs, and a fragment ILP considers at most
:data:`FRAGMENT_JOBS_PER_GPU` jobs per idle GPU from each source, so neither
grows with the length of the queue.

Each ILP is either the per-node model (:mod:`hopsd.core.candidates`; small
clusters, and the exact reference with ``PlannerOptions(exact=True)``) or
the class-level model (:mod:`hopsd.core.classmodel`; clusters of
``class_model_min_nodes`` nodes or more). ``Plan.objective`` is eq. 11 valued
with the main ILP's weights and gains, for the placements its jobs hold once
every plan of the round is applied; ``Plan.notes[0]`` carries the solver's
proven upper bound of the main ILP.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hopsd.core.admission import largest_config, runnable
from hopsd.core.candidates import (
    CandidateSet,
    JobOptions,
    Member,
    PassSpec,
    candidate_set,
    idle_move_factor,
    job_options,
    onto_idle,
    restart_factor,
    same_placement,
    settled_free,
    staying_value,
)
from hopsd.core.capacity import headroom, held_gpus, node_capacity, per_type
from hopsd.core.classmodel import solve_classes
from hopsd.core.errors import InfeasibleDemandError, InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.fragments import sensitivity_adjustment
from hopsd.core.gains import prior_weights, typical_restart_s
from hopsd.core.gcpause import collector_paused
from hopsd.core.ilp import Solution, solve_assignment
from hopsd.core.model import Configuration, Job, Plan
from hopsd.core.plandiff import diff_plan
from hopsd.core.priorities import PriorityContext, get_priority, share_keys
from hopsd.core.sensitivity import is_high_sensitivity, mean_finite, probe_nodes, sensitivity_on
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.window import service_window

#: Queued jobs whose sensitivities estimate rho_queue; an evenly spaced sample of a
#: long queue estimates the mean well and keeps the cost independent of the queue.
RHO_SAMPLE = 256

#: How one pass values a job's placements: (job, prior weight, slowest throughput,
#: factor of a placement that restarts it, preemption price, factor of a move onto
#: idle GPUs) -- see :func:`hopsd.core.candidates.restart_factor`,
#: :func:`hopsd.core.candidates.idle_move_factor` and :mod:`hopsd.core.gains`.
Valuation = tuple[Job, float, float, float, float, float]


#: A fragment plan can start at most one job per idle GPU; it considers this many
#: times that number of waiting jobs (in queue order), and as many admitted ones,
#: so its size follows the idle GPUs rather than the length of the queue.
FRAGMENT_JOBS_PER_GPU = 2


@dataclass(frozen=True, slots=True)
class PlannerOptions:
    """Model-size knobs, not operator settings.

    Clusters of at least ``class_model_min_nodes`` nodes use the class-level
    model (:mod:`hopsd.core.classmodel`), whose size does not grow with the node
    count; smaller ones the per-node model, keeping ``per_group``
    representatives of each group of equivalent configurations
    (:mod:`hopsd.core.configgen`; ``None`` keeps all). ``exact`` forces the
    per-node model with every configuration of every node: the reference the
    benchmark measures the others against.
    """

    per_group: int | None = None
    class_model_min_nodes: int = 24
    exact: bool = False

    def uses_classes(self, n_nodes: int) -> bool:
        """The class-level model serves large clusters unless the exact model is asked for."""
        return not self.exact and n_nodes >= self.class_model_min_nodes

    def representatives(self) -> int | None:
        return None if self.exact else self.per_group


@dataclass(frozen=True)
class PassResult:
    """The placements one ILP decided, by job id, and what it reached."""

    placed: dict[str, tuple[Configuration, bool]]
    solution: Solution
    columns: int
    values: dict[str, Valuation]
    settled: Mapping[str, int]


class RoundPlanner:
    """State of one planning call: estimator, priorities and sensitivities, computed once."""

    def __init__(self, snapshot: Snapshot, settings: Settings, options: PlannerOptions) -> None:
        self.snapshot = snapshot
        self.settings = settings
        self.options = options
        self.cluster = snapshot.cluster
        _check_jobs(snapshot)
        self.estimator = Estimator(self.cluster, snapshot.store, settings)
        priority = get_priority(settings.priority)
        ctx = PriorityContext(snapshot.now, self.cluster, self.estimator, len(snapshot.jobs))
        self.score = {job.id: float(priority(job, ctx)) for job in snapshot.jobs}
        # Order by (prior + bias) * share_factor (priorities.share_keys); the score
        # tie-break keeps the pure priority order exact when every factor is 1.
        keys = share_keys(list(self.score.values()), [j.share_factor for j in snapshot.jobs])
        key = dict(zip(self.score, keys, strict=True))
        self.order = tuple(
            sorted(
                snapshot.jobs,
                key=lambda j: (-key[j.id], -self.score[j.id], j.submit_time, j.id),
            )
        )
        self.queue = tuple(j for j in self.order if j.current is None)
        self.unlearned_restart_s = typical_restart_s(
            (j.restart_s for j in snapshot.jobs), settings.restart_penalty_s
        )
        self._rho: dict[tuple[str, str], float] = {}
        self._probes = {t: probe_nodes(self.cluster, t) for t in sorted(self.cluster.gpu_types)}
        self._job_rho: dict[str, float] = {}

    # -- sensitivities -------------------------------------------------------------

    def rho(self, job: Job, gpu_type: str) -> float:
        """Eq. 10 for the job on a type, once per planning call."""
        key = (job.id, gpu_type)
        if key not in self._rho:
            pair = self._probes[gpu_type]
            self._rho[key] = sensitivity_on(job, gpu_type, pair, self.estimator)
        return self._rho[key]

    def high_sensitivity(self, job: Job, gpu_type: str) -> bool:
        return is_high_sensitivity(self.rho(job, gpu_type), self.settings.sigma)

    def job_rho(self, job: Job) -> float:
        """Mean eq. 10 over the types where it is defined: one number per job (fragment plans)."""
        if job.id not in self._job_rho:
            values = [self.rho(job, t) for t in self._probes if self._probes[t] is not None]
            self._job_rho[job.id] = mean_finite(values) if values else math.inf
        return self._job_rho[job.id]

    # -- capacity --------------------------------------------------------------------

    def free_after(self, held: Sequence[Configuration]) -> dict[str, int]:
        """Usable GPUs per node once ``held`` placements are subtracted."""
        free = headroom(node_capacity(self.snapshot), held_gpus(held))
        for node_id, gpus in free.items():
            if gpus < 0:
                raise InvalidInputError(
                    f"jobs that must keep their place need more GPUs on node {node_id!r} "
                    "than it can give"
                )
        return free

    # -- one ILP ---------------------------------------------------------------------

    def solve_pass(self, members: Sequence[Member], free: dict[str, int]) -> PassResult:
        """One ILP over ``members`` and the idle GPUs ``free``, per node or per class."""
        use_classes = self.options.uses_classes(len(self.cluster.nodes))
        spec = PassSpec(
            free=free,
            settled=settled_free(members, free),
            per_group=1 if use_classes else self.options.representatives(),
            split_settled=not use_classes,
            round_length_s=self.settings.round_length_s,
            restart_penalty_s=self.settings.restart_penalty_s,
            unlearned_restart_s=self.unlearned_restart_s,
            price_restarts=self.settings.price_restarts,
        )
        layouts, options = job_options(
            members, spec, self.cluster, self.estimator, self.snapshot.store, self.high_sensitivity
        )
        values = _valuation(options, spec)
        settled = spec.settled
        if use_classes:
            plan = solve_classes(
                options,
                layouts,
                free,
                self.settings.round_length_s,
                self.settings.restart_penalty_s,
                self.settings.mip_gap,
                self.settings.time_limit_s,
                self.settings.price_restarts,
                self.settings.node_limit,
                spec.settled,
                unlearned_restart_s=self.unlearned_restart_s,
            )
            placed = {options[o].member.job.id: v for o, v in plan.placed.items()}
            return PassResult(placed, plan.solution, plan.columns, values, settled)
        cands = candidate_set(members, options, spec)
        rows = {n.id: r for r, n in enumerate(self.cluster.nodes)}
        capacity = [free[n.id] for n in self.cluster.nodes]
        solution = solve_assignment(
            cands.problem(rows, capacity),
            mip_gap=self.settings.mip_gap,
            time_limit=self.settings.time_limit_s,
            warm_start=cands.keep_columns(),
            node_limit=self.settings.node_limit,
        )
        decoded = _decode(cands, solution)
        return PassResult(decoded, solution, len(cands.columns), values, settled)

    def value_of(self, result: PassResult, placements: Mapping[str, Configuration]) -> float:
        """Eq. 11 objective of ``placements`` as valued by one pass (its weights and G)."""
        total = 0.0
        for job_id, config in placements.items():
            entry = result.values.get(job_id)
            if entry is None:
                continue
            job, weight, basis, factor, stay, idle = entry
            thr = self.estimator.throughput(job, config).samples_per_s
            current = job.current
            if current is not None and same_placement(config, current):
                factor = 1.0
            elif current is not None and idle != factor:
                factor = idle if onto_idle(config, result.settled, current) else factor
            total += weight * thr / basis * factor + stay
        return total

    def members(self, jobs: Sequence[Job], keep_only: frozenset[str] = frozenset()) -> list[Member]:
        keys = share_keys([self.score[j.id] for j in jobs], [j.share_factor for j in jobs])
        weights = prior_weights(keys, self.settings.lam)  # ((prior + bias) * factor) ** lambda
        return [Member(j, w, j.id in keep_only) for j, w in zip(jobs, weights, strict=True)]

    def fits_in(self, idle: dict[str, int]) -> Callable[[Job], bool]:
        """Predicate: the job's minimum demand fits in the idle GPUs of some one type."""
        best = max(per_type(self.cluster, idle).values(), default=0)
        return lambda job: job.min_demand <= best

    # -- fragment plans ----------------------------------------------------------------

    def fragment_passes(
        self,
        window: Sequence[Job],
        placed: dict[str, Configuration],
        free: dict[str, int],
        budget: int,
        dropped: frozenset[str] = frozenset(),
    ) -> tuple[dict[str, Configuration], list[str]]:
        """Up to ``budget`` ILPs over idle GPUs; returns new starts and notes.

        Each fragment plan applies the service window again, to the jobs still
        waiting whose smallest demand fits the idle GPUs, with the idle GPUs as the
        window's total; the sensitivity adjustment then admits jobs from behind it.
        ``dropped`` are running jobs the main plan gave no place: they compete for
        the idle GPUs like queued jobs, so a preemption never leaves GPUs idle that
        the preempted job itself could have kept using.
        """
        starts: dict[str, Configuration] = {}
        notes: list[str] = []
        idle = _subtract(free, placed.values())
        del window  # each fragment plan takes its own window over what still waits
        admitted: list[Job] = []
        rho_queue: float | None = None
        for _ in range(budget):
            capacity = sum(idle.values())
            if capacity == 0:
                break
            fits = self.fits_in(idle)
            cap = FRAGMENT_JOBS_PER_GPU * capacity
            candidates = [
                j
                for j in self.order
                if (not j.running or j.id in dropped)
                and j.id not in placed
                and j.id not in starts
                and fits(j)
            ]
            waiting = list(service_window(candidates, capacity))[:cap]
            inside = {j.id for j in waiting}
            beyond = [j for j in candidates if j.id not in inside]
            pending = [j for j in admitted if j.id not in starts and fits(j)]
            taken = {j.id for j in admitted}
            fresh = [j for j in beyond if j.id not in taken]
            more: tuple[Job, ...] = ()
            if fresh:  # with nobody behind the window there is nobody to admit
                if rho_queue is None:
                    sample = _spread(self.queue, RHO_SAMPLE)
                    rho_queue = mean_finite(self.job_rho(j) for j in sample)
                more = sensitivity_adjustment(
                    waiting + pending, fresh, self.job_rho, rho_queue, fits
                )
            admitted.extend(more)
            jobs = [j for j in waiting if fits(j)] + (pending + list(more))[:cap]
            if not jobs:
                break
            result = self.solve_pass(self.members(jobs), idle)
            new = {job_id: cfg for job_id, (cfg, _) in result.placed.items()}
            if not new:
                break
            starts.update(new)
            idle = _subtract(idle, new.values())
            notes.append(
                f"fragment plan: {len(new)} started, objective {result.solution.objective:.6g}"
            )
        if admitted:
            notes.append("admitted by sensitivity adjustment: " + ", ".join(j.id for j in admitted))
        return starts, notes


def _spread(jobs: Sequence[Job], at_most: int) -> Sequence[Job]:
    """At most ``at_most`` jobs evenly spaced along ``jobs`` (all of them when fewer)."""
    if len(jobs) <= at_most:
        return jobs
    step = len(jobs) / at_most
    return [jobs[int(i * step)] for i in range(at_most)]


def _subtract(free: dict[str, int], held: Iterable[Configuration]) -> dict[str, int]:
    return headroom(free, held_gpus(held))


def _valuation(options: Sequence[JobOptions], spec: PassSpec) -> dict[str, Valuation]:
    """Per job: (job, prior weight, slowest throughput, restart factor, preemption price,
    factor of a move onto idle GPUs)."""
    out: dict[str, Valuation] = {}
    round_s = spec.round_length_s
    for o in options:
        job = o.member.job
        cost = spec.move_cost(job)
        stay = staying_value(o, round_s, cost) if spec.price_restarts else 0.0
        factor = restart_factor(job, round_s, cost, spec.price_restarts)
        idle = idle_move_factor(o, round_s, cost, spec.restart_penalty_s, factor)
        out[job.id] = (job, o.member.weight, o.basis, factor, stay, idle)
    return out


def _decode(cands: CandidateSet, solution: Solution) -> dict[str, tuple[Configuration, bool]]:
    out: dict[str, tuple[Configuration, bool]] = {}
    for c in solution.chosen:
        col = cands.columns[c]
        out[cands.members[col.member].job.id] = (col.config, col.keep)
    return out


def _check_jobs(snapshot: Snapshot) -> None:
    """Typed errors for input no plan can serve."""
    cluster = snapshot.cluster
    largest = largest_config(cluster)
    for job in snapshot.jobs:
        if not runnable(job.demands, largest):
            raise InfeasibleDemandError(
                f"job {job.id!r} needs at least {job.min_demand} GPUs but the largest GPU type "
                f"of the cluster has {largest}"
            )
    running = {j.id for j in snapshot.running}
    unknown = sorted(snapshot.pinned - running)
    if unknown:
        raise InvalidInputError(f"pinned jobs are not running: {', '.join(unknown)}")


def _assemble(
    planner: RoundPlanner,
    window: Sequence[Job],
    main: PassResult | None,
    starts: dict[str, Configuration],
    pinned: frozenset[str],
    notes: list[str],
) -> Plan:
    placed = main.placed if main is not None else {}
    final = {job_id: config for job_id, (config, _) in placed.items()}
    for job_id, config in starts.items():
        final.setdefault(job_id, config)
    plan = diff_plan(
        planner.order, final, pinned=pinned, notes=notes, window=tuple(j.id for j in window)
    )
    if main is None:
        return plan
    held = {a.job_id: a.config for a in (*plan.start, *plan.keep, *plan.move)}
    return dataclasses.replace(plan, objective=planner.value_of(main, held))


@collector_paused
def plan_round_with(snapshot: Snapshot, settings: Settings, options: PlannerOptions) -> Plan:
    """:func:`plan_round` with explicit model-size options (the benchmark's exact baseline)."""
    planner = RoundPlanner(snapshot, settings, options)
    pinned_jobs = [j for j in planner.order if j.id in snapshot.pinned]
    free = planner.free_after([j.current for j in pinned_jobs if j.current is not None])
    open_jobs = [j for j in planner.order if j.id not in snapshot.pinned]
    window = service_window(open_jobs, sum(free.values()))
    window_ids = {j.id for j in window}
    behind = [j for j in open_jobs if j.running and j.id not in window_ids]
    members = planner.members(list(window) + behind, frozenset(j.id for j in behind))
    main = planner.solve_pass(members, free)
    notes = [
        f"main plan: {main.columns} columns, optimal={main.solution.optimal}, "
        f"bound={main.solution.bound:.9g}"
    ]
    placed = {job_id: cfg for job_id, (cfg, _) in main.placed.items()}
    dropped = frozenset(j.id for j in open_jobs if j.running and j.id not in placed)
    starts, more = planner.fragment_passes(window, placed, free, settings.max_plans - 1, dropped)
    return _assemble(planner, window, main, starts, snapshot.pinned, notes + more)


def plan_round(snapshot: Snapshot, settings: Settings) -> Plan:
    """Plan one round: keep/move/preempt running jobs, start queued ones, fill fragments."""
    return plan_round_with(snapshot, settings, PlannerOptions())


@collector_paused
def plan_fragment_with(snapshot: Snapshot, settings: Settings, options: PlannerOptions) -> Plan:
    """:func:`plan_fragment` with explicit model-size options."""
    planner = RoundPlanner(snapshot, settings, options)
    running = [j for j in planner.order if j.current is not None]
    free = planner.free_after([j.current for j in running if j.current is not None])
    total = sum(snapshot.capacity_of(n.id) for n in snapshot.cluster.nodes)
    window = service_window(planner.order, total)
    starts, notes = planner.fragment_passes(window, {}, free, settings.max_plans)
    pinned = frozenset(j.id for j in running)
    return _assemble(planner, window, None, starts, pinned, notes)


def plan_fragment(snapshot: Snapshot, settings: Settings) -> Plan:
    """Start queued jobs on idle GPUs only; every running job keeps its place."""
    return plan_fragment_with(snapshot, settings, PlannerOptions())
