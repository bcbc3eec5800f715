"""Turning jobs and idle GPUs into ILP columns: configurations, throughputs and values.

One planning pass (the main plan or a fragment plan) first gathers
:class:`JobOptions` for every job it plans: the configuration groups of every
GPU type (:mod:`hopsd.core.configgen`), one throughput estimate per group (the
group's configurations are interchangeable for the job, so one estimate serves
all) and the normalised gains. The per-node model turns them into a
:class:`CandidateSet` valued per eq. 11 (:mod:`hopsd.core.gains`); the
class-level model (:mod:`hopsd.core.classmodel`) uses the same options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Protocol, cast

from hopsd.core.configgen import ConfigGroup, TypeLayout, shared_layout
from hopsd.core.estimator import Estimator
from hopsd.core.gains import (
    move_cost_s,
    normalised_gains,
    preemption_price,
    restart_discount,
    resume_discount,
)
from hopsd.core.ilp import AssignmentProblem
from hopsd.core.model import Cluster, Configuration, Job
from hopsd.core.throughput import ThroughputStore


class EntityIndex(Protocol):
    """Optional fast path a store may offer: the nodes it holds entity-layer data for."""

    def entity_nodes(self, job_id: str) -> frozenset[str]: ...


def same_placement(a: Configuration, b: Configuration) -> bool:
    """Equal placements, whatever order their parts were listed in."""
    return a.gpu_type == b.gpu_type and a.as_dict() == b.as_dict()


@lru_cache(maxsize=64)
def _index_type(cls: type) -> bool:
    return hasattr(cls, "entity_nodes") and callable(cls.entity_nodes)


def _has_index(store: ThroughputStore) -> bool:
    """``isinstance(store, EntityIndex)``, answered once per store class (it is slow)."""
    return _index_type(type(store))


def entity_nodes(job: Job, store: ThroughputStore) -> frozenset[str]:
    """Nodes on which the store knows this very job (entity layer).

    Such nodes are not interchangeable with their peers for this job. When the
    store offers an :class:`EntityIndex` it is asked; otherwise the nodes the
    job runs on now stand in for it: that is where its measurements come from,
    and probing every node of the cluster for every job would cost more than
    the rest of the round. A node the job ran on before is then treated like
    its peers -- the estimate for the group still uses the estimator's
    top-down lookup on the representative node.
    """
    if _has_index(store):
        return cast(EntityIndex, store).entity_nodes(job.id)
    if job.current is None:
        return frozenset()
    return frozenset(job.current.node_ids)


@dataclass(frozen=True)
class Member:
    """A job planned in a pass. ``keep_only``: its current placement is its only option."""

    job: Job
    weight: float
    keep_only: bool = False


@dataclass(frozen=True)
class Column:
    """One ILP column: a job (index into the members) in a configuration."""

    member: int
    config: Configuration
    throughput: float
    keep: bool


@dataclass
class CandidateSet:
    """Columns of one pass, plus the ILP built from them."""

    members: tuple[Member, ...]
    columns: list[Column] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def problem(self, node_rows: Mapping[str, int], capacity: Sequence[int]) -> AssignmentProblem:
        usage = [[(node_rows[n], g) for n, g in col.config.parts] for col in self.columns]
        return AssignmentProblem(
            n_jobs=len(self.members),
            col_job=[col.member for col in self.columns],
            value=self.values,
            usage=usage,
            capacity=capacity,
        )

    def keep_columns(self) -> list[int]:
        return [c for c, col in enumerate(self.columns) if col.keep]


@dataclass(frozen=True)
class PassSpec:
    """What a pass needs besides its members: idle GPUs and the knobs that shape columns.

    ``settled``: idle GPUs per node if every running member kept its place;
    ``split_settled``: whether that tells node classes apart (it helps the
    per-node model pick representatives, but would only fragment the classes of
    the class-level model, which places kept jobs exactly anyway).
    ``restart_penalty_s`` is the operator's prior, the reference a move onto idle
    GPUs is weighed against (:func:`idle_move_factor`); ``unlearned_restart_s`` what a
    job that learned no restart of its own is charged for one.
    """

    free: Mapping[str, int]
    settled: Mapping[str, int]
    per_group: int | None
    split_settled: bool
    round_length_s: float
    restart_penalty_s: float
    unlearned_restart_s: float
    price_restarts: bool = False

    def move_cost(self, job: Job) -> float:
        """What a move of ``job`` costs: its own restart cost, else what restarts cost here
        (:func:`~hopsd.core.gains.typical_restart_s`)."""
        return move_cost_s(job.restart_s, self.unlearned_restart_s)


def _keep_fits(job: Job, free: Mapping[str, int]) -> bool:
    current = job.current
    if current is None or current.total_gpus not in job.demands:
        return False
    return all(free.get(n, 0) >= g for n, g in current.parts)


def settled_free(members: Sequence[Member], free: Mapping[str, int]) -> dict[str, int]:
    """Idle GPUs per node if every running member whose place still fits kept it."""
    out = dict(free)
    for member in members:
        current = member.job.current
        if current is not None and _keep_fits(member.job, out):
            for node_id, gpus in current.parts:
                out[node_id] -= gpus
    return out


@dataclass(frozen=True)
class JobOptions:
    """One member's configuration groups with their throughputs and normalised gains.

    ``basis`` is the job's slowest option (the denominator of G); ``keep_gain`` the
    gain of its current placement when that is still possible.
    """

    index: int
    member: Member
    groups: tuple[ConfigGroup, ...]
    throughputs: tuple[float, ...]
    gains: tuple[float, ...]
    keep_gain: float | None
    distinct: frozenset[str]
    basis: float


def _layouts(cluster: Cluster, spec: PassSpec, estimator: Estimator) -> list[TypeLayout]:
    settled = spec.settled if spec.split_settled else None
    speeds = {n.id: estimator.node_speed(n.id) for n in cluster.nodes}
    layouts = [
        shared_layout(cluster, t, spec.free, settled, speeds) for t in sorted(cluster.gpu_types)
    ]
    return [lay for lay in layouts if lay.total_idle > 0]


def job_options(
    members: Sequence[Member],
    spec: PassSpec,
    cluster: Cluster,
    estimator: Estimator,
    store: ThroughputStore,
    high_sensitivity: Callable[[Job, str], bool],
) -> tuple[list[TypeLayout], list[JobOptions]]:
    """Step 3 and the gain normalisation for every member of a pass.

    A keep-only member (a running job behind the window) has its current place
    as its only option; its G is taken against the slowest of its
    minimum-demand configurations, which saves estimating options it cannot get.
    """
    layouts = _layouts(cluster, spec, estimator)
    out: list[JobOptions] = []
    for index, member in enumerate(members):
        job = member.job
        distinct = entity_nodes(job, store)
        shape = replace(job, demands=job.demands[:1]) if member.keep_only else job
        groups: list[ConfigGroup] = []
        for layout in layouts:
            groups.extend(
                layout.groups(
                    shape,
                    layout.may_split(shape) and high_sensitivity(job, layout.gpu_type),
                    distinct=distinct,
                    per_group=spec.per_group,
                    offset=index * (spec.per_group or 1),
                )
            )
        thr = _throughputs(job, groups, distinct, estimator)
        keep_thr: float | None = None
        if job.current is not None and _keep_fits(job, spec.free):
            keep_thr = estimator.throughput(job, job.current).samples_per_s
        basis = thr + ([keep_thr] if keep_thr is not None else [])
        if not basis:
            continue
        gains = normalised_gains(basis)
        keep_gain = gains[-1] if keep_thr is not None else None
        out.append(
            JobOptions(
                index,
                member,
                tuple(groups),
                tuple(thr),
                tuple(gains[: len(groups)]),
                keep_gain,
                distinct,
                min(basis),
            )
        )
    return layouts, out


def _throughputs(
    job: Job, groups: Sequence[ConfigGroup], distinct: frozenset[str], estimator: Estimator
) -> list[float]:
    """One estimate per group; groups off the job's entity nodes that differ only in
    which nodes they use (same type, GPUs, node count and node-speed priors) share
    one, since every layer below the entity layer sees a node only through its prior."""
    shared: dict[tuple[str, int, int, tuple[float, ...]], float] = {}
    out: list[float] = []
    for group in groups:
        rep = group.configs[0]
        if distinct and not distinct.isdisjoint(rep.node_ids):
            out.append(estimator.throughput(job, rep).samples_per_s)
            continue
        key = (rep.gpu_type, rep.total_gpus, rep.n_nodes, estimator.speed_key(rep))
        value = shared.get(key)
        if value is None:
            value = shared[key] = estimator.throughput(job, rep).samples_per_s
        out.append(value)
    return out


def candidate_set(
    members: Sequence[Member], options: Sequence[JobOptions], spec: PassSpec
) -> CandidateSet:
    """All per-node columns of a pass, valued per eq. 11 with the restart prices."""
    out = CandidateSet(tuple(members))
    for opt in options:
        job = opt.member.job
        cost = spec.move_cost(job)
        factor = restart_factor(job, spec.round_length_s, cost, spec.price_restarts)
        idle = idle_move_factor(opt, spec.round_length_s, cost, spec.restart_penalty_s, factor)
        stay = staying_value(opt, spec.round_length_s, cost) if spec.price_restarts else 0.0
        _add_job_columns(out, opt, (factor, idle), stay, spec.settled)
    return out


def moves_or_resumes(job: Job, price_restarts: bool) -> bool:
    """Whether a placement other than the job's current one costs it a restart.

    Always for a running job (a move); with ``price_restarts`` also for a queued
    job that ran before (it resumes from its checkpoint), see :mod:`hopsd.core.gains`.
    """
    return job.current is not None or (price_restarts and job.samples_done > 0)


def restart_factor(job: Job, round_length_s: float, cost_s: float, price_restarts: bool) -> float:
    """What a placement other than the job's current one is worth per unit of its gain.

    A move is weighed against staying (:func:`~hopsd.core.gains.restart_discount`),
    a resume against idle GPUs (:func:`~hopsd.core.gains.resume_discount`); a job
    that pays no restart there (a first start) is worth its whole gain. A move onto
    GPUs nobody else holds may be worth more: :func:`idle_move_factor`.
    """
    if job.current is not None:
        return restart_discount(round_length_s, cost_s)
    if moves_or_resumes(job, price_restarts):
        return resume_discount(round_length_s, cost_s)
    return 1.0


def move_horizon_s(opt: JobOptions, round_length_s: float) -> float:
    """Over how long a running job's move onto idle GPUs is taken to pay back its restart.

    The move costs its restart once, and the new placement serves the job for as
    long as it keeps it. One round undervalues that for a long job whose restart
    is a large share of the round (250 s of 300 s: a move worth a sixth of its
    gain), which then stayed for hours on GPUs several times slower than ones
    lying idle. The job's whole remaining run overvalues it where jobs of higher
    priority come and go: the long job bounces between its large placement and
    a small one and pays a restart each time. So the horizon is how long the job
    has held its current placement (a placement held long is likely to be held
    again), at least one round and at most the rest of its run: its remaining
    samples at its current placement's estimated throughput.
    """
    job = opt.member.job
    if job.current is None or opt.keep_gain is None:
        return round_length_s
    rate = opt.keep_gain * opt.basis
    left = max(job.total_samples - job.samples_done, 0.0) / rate if rate > 0 else 0.0
    return max(min(job.run_elapsed_s, left), round_length_s)


def idle_move_factor(
    opt: JobOptions, round_length_s: float, cost_s: float, prior_s: float, factor: float
) -> float:
    """What a running job's move onto GPUs idle once every running job stays is worth.

    Such a move takes nobody's place, so the restart is the whole price: a
    restart dearer than the prior ``prior_s`` is weighed over
    :func:`move_horizon_s` instead of one round, but never above a move at the
    prior's cost over one round (the margin every move must clear against the
    estimates' noise). ``factor`` is the move's one-round value
    (:func:`restart_factor`); a restart no dearer than the prior keeps it, and so
    does any move of a job that is not running. A move onto GPUs another running
    job holds keeps it too: two running jobs swapping places gain nothing together
    and both pay a restart.
    """
    if opt.member.job.current is None or cost_s <= prior_s:
        return factor
    horizon = move_horizon_s(opt, round_length_s)
    amortised = restart_discount(horizon, cost_s)
    return max(factor, min(amortised, restart_discount(round_length_s, prior_s)))


def onto_idle(config: Configuration, settled: Mapping[str, int], current: Configuration) -> bool:
    """Whether ``config`` fits in GPUs idle once every running job stays, plus the job's own."""
    own = current.as_dict()
    return all(settled.get(n, 0) + own.get(n, 0) >= g for n, g in config.parts)


def staying_value(opt: JobOptions, round_length_s: float, cost_s: float) -> float:
    """What a running job's columns carry besides their gain: its preemption's price.

    ``w * G_keep * preemption_price``; 0 for a job not running. Every column of
    the job carries it, so keeping and moving compare as before and only the
    choice of no column (a preemption) forgoes it.
    """
    if opt.member.job.current is None:
        return 0.0
    gain = opt.keep_gain if opt.keep_gain is not None else 1.0
    return opt.member.weight * gain * preemption_price(round_length_s, cost_s)


def _add_job_columns(
    out: CandidateSet,
    opt: JobOptions,
    factors: tuple[float, float],
    stay: float,
    settled: Mapping[str, int],
) -> None:
    """The member's columns; ``factors``: a restarting placement's value per unit of gain,
    onto GPUs others hold and onto idle ones (:func:`idle_move_factor`)."""
    member = opt.member
    job = member.job
    if opt.keep_gain is not None and job.current is not None:
        keep_thr = opt.keep_gain * opt.basis
        out.columns.append(Column(opt.index, job.current, keep_thr, keep=True))
        out.values.append(member.weight * opt.keep_gain + stay)
    if member.keep_only:
        return
    factor, idle = factors
    for group, thr, gain in zip(opt.groups, opt.throughputs, opt.gains, strict=True):
        for config in group.configs:
            f = factor
            if job.current is not None:
                if same_placement(config, job.current):
                    continue
                if idle != factor and onto_idle(config, settled, job.current):
                    f = idle
            out.columns.append(Column(opt.index, config, thr, keep=False))
            out.values.append(member.weight * gain * f + stay)
