"""Closing nodes: no new work where it cannot finish, and moves off before a node closes.

A centre's Slurm drains nodes for repair and holds them in maintenance
reservations. The snapshot names such nodes in ``closing``
(:class:`~hopsd.core.model.NodeClosing`): when jobs can no longer run there and
from when running jobs that would not finish by then are moved off.

:class:`ClosingAware` wraps any policy with those rules, so every policy keeps
them without knowing about them:

* a running job on a closing node stays (pinned) while it will finish before
  the node closes, or while its move is not due yet; from ``move_from`` on, one
  that would not finish is handed to the policy as queued and becomes a move
  (or a preemption, when nothing else fits) -- only in a full round, where
  moves are allowed, and never a job the snapshot pins itself;
* the policy never sees a closing node's free GPUs, so neither a start nor a
  move lands there; a second fragment pass then offers those GPUs to queued
  jobs, and keeps only starts whose estimated run time and Slurm time limit
  both end before the node closes (Slurm itself launches no job whose time
  limit reaches into a reservation; a drained node, closed for good, takes none).

Estimates are the core estimator's: a job whose throughput cannot be estimated
is taken not to finish in time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hopsd.core.capacity import held_gpus
from hopsd.core.errors import HopsError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Assignment, Configuration, Job, NodeClosing, Plan
from hopsd.core.policies import Policy
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import applied
from hopsd.core.urgency import asked_early_round


@dataclass(frozen=True, slots=True)
class Window:
    """A reservation's window on some nodes (epoch seconds)."""

    start: float
    end: float
    nodes: tuple[str, ...]


def node_closings(
    now: float,
    unusable: Iterable[str],
    windows: Iterable[Window],
    *,
    move_on_drain: bool,
    notice_s: float,
) -> dict[str, NodeClosing]:
    """Every closing node: drained ones (see :meth:`NodeClosing.drained`), and nodes of
    reservations not over yet, closing at their start; jobs that would not finish move
    ``notice_s`` before it. A node under several keeps the earliest closing."""
    out: dict[str, NodeClosing] = {n: NodeClosing.drained(now, move_on_drain) for n in unusable}
    for window in windows:
        if window.end <= now:
            continue
        closing = NodeClosing(window.start, window.start - notice_s)
        for node in window.nodes:
            known = out.get(node)
            if known is None or closing.at < known.at:
                out[node] = closing
    return out


#: Fragment passes over a closing node's free GPUs (each drops the jobs that would not finish).
FILL_PASSES = 3


def remaining_s(job: Job, config: Configuration, estimator: Estimator) -> float:
    """Seconds ``job`` still runs in ``config`` (inf when its throughput cannot be estimated)."""
    try:
        rate = estimator.throughput(job, config).samples_per_s
    except (HopsError, ArithmeticError, ValueError):
        return math.inf
    return job.remaining_samples / rate if rate > 0 else math.inf


def closes_at(config: Configuration, closing: Mapping[str, NodeClosing]) -> float:
    """When the first node of ``config`` closes (inf when none of them does)."""
    return min((closing[n].at for n, _ in config.parts if n in closing), default=math.inf)


def finishes_in_time(job: Job, config: Configuration, snapshot: Snapshot, est: Estimator) -> bool:
    """Whether ``job`` run in ``config`` ends before any of its nodes closes."""
    at = closes_at(config, snapshot.closing)
    return at == math.inf or snapshot.now + remaining_s(job, config, est) <= at


def may_start_before(job: Job, config: Configuration, snapshot: Snapshot, est: Estimator) -> bool:
    """Whether a start of ``job`` in ``config`` ends before its nodes close, and Slurm will
    launch it there: Slurm starts no job on a reservation's nodes whose time limit reaches
    into the reservation (an unlimited one always does), whatever hops expects of it."""
    at = closes_at(config, snapshot.closing)
    if at == math.inf:
        return True
    limit = job.time_limit_s
    fits_limit = limit is not None and snapshot.now + limit <= at
    return fits_limit and finishes_in_time(job, config, snapshot, est)


@dataclass(frozen=True)
class ClosedView:
    """What the wrapped policy plans on: closing nodes full, jobs due to move queued."""

    snapshot: Snapshot
    moving: tuple[str, ...]


def jobs_to_move(snapshot: Snapshot, est: Estimator) -> tuple[str, ...]:
    """Running jobs on closing nodes whose move is due and that would not finish in time."""
    out: list[str] = []
    for job in snapshot.running:
        assert job.current is not None
        mine = [snapshot.closing[n] for n, _ in job.current.parts if n in snapshot.closing]
        if not mine or job.id in snapshot.pinned:
            continue
        due = snapshot.now >= min(c.move_from for c in mine)
        if due and not finishes_in_time(job, job.current, snapshot, est):
            out.append(job.id)
    return tuple(out)


def closed_view(snapshot: Snapshot, moving: Iterable[str]) -> ClosedView:
    """The snapshot with ``moving`` jobs queued and no free GPU left on a closing node."""
    leave = frozenset(moving)
    jobs = tuple(
        dataclasses.replace(j, current=None) if j.id in leave else j for j in snapshot.jobs
    )
    staying = [j for j in jobs if j.current is not None]
    held = held_gpus(j.current for j in staying if j.current is not None)
    capacity = dict(snapshot.capacity)
    for node in snapshot.closing:
        capacity[node] = min(snapshot.capacity_of(node), held.get(node, 0))
    on_closing = {
        j.id
        for j in staying
        if j.current is not None and any(n in snapshot.closing for n, _ in j.current.parts)
    }
    pinned = (snapshot.pinned - leave) | on_closing
    view = dataclasses.replace(snapshot, jobs=jobs, capacity=capacity, pinned=pinned)
    return ClosedView(view, tuple(sorted(leave)))


def as_moves(plan: Plan, moving: tuple[str, ...]) -> Plan:
    """The policy started some of the jobs due to move: those are moves, the rest preempted."""
    if not moving:
        return plan
    leave = set(moving)
    moves = tuple(a for a in plan.start if a.job_id in leave)
    placed = {a.job_id for a in moves}
    return dataclasses.replace(
        plan,
        start=tuple(a for a in plan.start if a.job_id not in leave),
        move=(*plan.move, *moves),
        preempt=(*plan.preempt, *(j for j in moving if j not in placed)),
        notes=(*plan.notes, f"moved off closing nodes: {', '.join(moving)}"),
    )


def fill_closing(policy: Policy, snapshot: Snapshot, plan: Plan, settings: Settings) -> Plan:
    """Offer closing nodes' free GPUs to queued jobs that finish before the node closes."""
    open_until = {n for n, c in snapshot.closing.items() if snapshot.now < c.at < math.inf}
    if not open_until:
        return plan
    est = Estimator(snapshot.cluster, snapshot.store, settings)
    after = applied(snapshot, plan)
    held = held_gpus(j.current for j in after.running if j.current is not None)
    capacity = {
        n.id: snapshot.capacity_of(n.id) if n.id in open_until else held.get(n.id, 0)
        for n in snapshot.cluster.nodes
    }
    capacity = {n: max(c, held.get(n, 0)) for n, c in capacity.items()}
    refused: set[str] = set()
    for _ in range(FILL_PASSES):
        jobs = tuple(j for j in after.jobs if j.id not in refused)
        if not any(j.current is None for j in jobs):
            return plan
        trial = dataclasses.replace(after, jobs=jobs, capacity=capacity)
        starts = policy.plan_fragment(trial, settings).start
        jobs_by_id = {j.id: j for j in jobs}
        late = {a.job_id for a in starts if not _in_time(a, jobs_by_id, snapshot, est)}
        if not late:
            return dataclasses.replace(plan, start=(*plan.start, *starts)) if starts else plan
        refused |= late
    return plan


def _in_time(a: Assignment, jobs: Mapping[str, Job], snapshot: Snapshot, est: Estimator) -> bool:
    return may_start_before(jobs[a.job_id], a.config, snapshot, est)


class ClosingAware:
    """A policy that keeps the closing-node rules of the module docstring."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """The inner round plan over the closed view; due jobs moved off."""
        if not snapshot.closing:
            return self.inner.plan(snapshot, settings)
        est = Estimator(snapshot.cluster, snapshot.store, settings)
        view = closed_view(snapshot, jobs_to_move(snapshot, est))
        return as_moves(self.inner.plan(view.snapshot, settings), view.moving)

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """The inner fragment plan over the closed view, then the closing nodes' fill."""
        if not snapshot.closing:
            return self.inner.plan_fragment(snapshot, settings)
        view = closed_view(snapshot, ())
        plan = self.inner.plan_fragment(view.snapshot, settings)
        return fill_closing(self.inner, snapshot, plan, settings)

    def early_round_at(
        self, snapshot: Snapshot, settings: Settings, last_round_at: float | None
    ) -> float | None:
        """The wrapped policy's early round (:func:`hopsd.core.urgency.asked_early_round`)."""
        return asked_early_round(self.inner, snapshot, settings, last_round_at)
