"""The reserve stage: work already decided but not yet done keeps its GPUs.

A decision is enacted as a chain of actions (notice, requeue, placement,
release). Between the decision and the chain's last action the job is *in
flight*: a move waits out its checkpoint notice's grace, a requeued job waits
for Slurm to take it off its nodes, a placement waits to be released. Planning
it again would decide twice for one job, and handing its GPUs to another job
would double-book them once the chain finishes. So, before anything else, the
scheduling step (:func:`hopsd.core.step.schedule_step`) runs :func:`reserve`:

* an in-flight job is taken out of planning (and out of ``pinned``);
* the GPUs its pending placement names are taken out of capacity;
* a job that still runs on its current GPUs (its notice's grace is not over,
  so it has not been requeued yet) keeps those busy too;
* a placement onto GPUs a job under notice still holds counts them once
  (:func:`reserve`): no job still planned is left over capacity;
* a running job Slurm started without a hops decision (``Snapshot.unplanned``)
  is reserved like a job under notice: it keeps its GPUs until the act stage's
  requeue (:func:`hopsd.core.act.act`) takes it off them. One already in
  flight (its requeue is under way) is not requeued again;
* a failed launch (``Snapshot.launch_failures``) already in flight (its
  relaunch is under way) is not judged again: the act stage would relaunch it twice;
* a pending job in flight (``Snapshot.pending``: its hold or placement is under
  way) is not judged for a hold again.

The same rule says when a pending placement that waits only for its GPUs (a
start released onto GPUs a job under notice still holds) may be taken before
its grace is over (:func:`landing`): when nothing else holds or will take them.

hopsd builds the in-flight records from its pending intents, the simulator
from the moves it is enacting under a notice; both plan around them by this
one rule.
"""

from __future__ import annotations

import dataclasses

from hopsd.core.capacity import held_gpus, left, node_capacity
from hopsd.core.errors import InvalidInputError
from hopsd.core.snapshot import InFlight, Snapshot

__all__ = ["InFlight", "flights", "landing", "reserve", "reserved_gpus"]


def flights(snapshot: Snapshot) -> tuple[InFlight, ...]:
    """The in-flight records, and a running unplanned start not yet in flight as one that
    still runs on its GPUs (its requeue is to come)."""
    flying = {f.job_id for f in snapshot.in_flight}
    running = {j.id for j in snapshot.running}
    extra = tuple(
        InFlight(job_id, (), runs_on=True)
        for job_id in sorted(snapshot.unplanned)
        if job_id in running and job_id not in flying
    )
    return (*snapshot.in_flight, *extra)


def reserved_gpus(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per node in-flight work holds now (jobs under notice, unplanned starts) plus
    what it will take (pending placements). A node the snapshot's cluster does not know
    (a placement decided before the node left the configuration) reserves nothing of
    the cluster's."""
    current = {j.id: j.current for j in snapshot.jobs}
    held: dict[str, int] = {}
    for flight in flights(snapshot):
        config = current.get(flight.job_id)
        parts = [*flight.target, *(config.parts if flight.runs_on and config else ())]
        for node_id, gpus in parts:
            if gpus < 0:
                raise InvalidInputError(f"job {flight.job_id!r} reserves {gpus} GPUs")
            held[node_id] = held.get(node_id, 0) + gpus
    return held


def landing(snapshot: Snapshot) -> tuple[str, ...]:
    """The pending placements that may be taken now, before their grace is over.

    A placement whose job does not run on (``runs_on`` False: it only waits for
    GPUs to come free, e.g. a start released onto GPUs a job under notice holds)
    may land early when a job that held them ended -- but only where its nodes
    have room for everything held and reserved there: every job's GPUs (one
    under notice holds its own until its requeue) and every in-flight record's
    target (a move's, the other waiting placements', its own). GPUs that merely
    look free may be a move's target, taken when its grace ends, or be promised
    to several waiting placements at once; handing them out now would book them
    twice then. Where a target lies on GPUs a job under notice still holds, the
    node's reservations come to more than it has, and nothing lands there
    before that job has left (how many overlap is not known, so none is
    guessed). Landing changes no count (a reserved target becomes a held one),
    so which records land does not depend on their order. Returns their job
    ids in the snapshot's in-flight order.
    """
    flying = flights(snapshot)
    waiting = [f for f in flying if not f.runs_on and f.target]
    if not waiting:
        return ()
    # every job's GPUs (one under notice, or requeued but not yet off them, included)
    held = held_gpus(j.current for j in snapshot.jobs if j.current is not None)
    for flight in flying:
        for node_id, gpus in flight.target:
            held[node_id] = held.get(node_id, 0) + gpus
    capacity = node_capacity(snapshot)
    return tuple(
        f.job_id for f in waiting if all(held.get(n, 0) <= capacity.get(n, 0) for n, _ in f.target)
    )


def reserve(snapshot: Snapshot) -> Snapshot:
    """The snapshot the policy may plan: in-flight jobs out, their GPUs out of capacity.

    A node keeps at least the GPUs the jobs still planned run on there. Where
    the reserved GPUs and those jobs' come to more than the node has, a pending
    placement lands on GPUs a job under notice still holds (a move onto a
    preempted job's GPUs; in hopsd also a start Slurm holds back until that job
    has left): those GPUs are counted once, and nothing is left to hand out.
    The result carries no in-flight records any more (they are spent on its
    capacity), and ``unplanned`` only the starts the act stage is to requeue
    (those already in flight are out), so reserving twice changes nothing.
    """
    flying = flights(snapshot)
    if not flying:
        return _requeued(snapshot, snapshot)
    waiting = {f.job_id for f in flying}
    jobs = tuple(j for j in snapshot.jobs if j.id not in waiting)
    running = held_gpus(j.current for j in jobs if j.current is not None)
    reserved = reserved_gpus(snapshot)
    capacity = {
        n: min(cap, max(left(cap, reserved.get(n, 0)), running.get(n, 0)))
        for n, cap in node_capacity(snapshot).items()
    }
    reserved_snapshot = dataclasses.replace(
        snapshot,
        jobs=jobs,
        capacity=capacity,
        pinned=frozenset(j for j in snapshot.pinned if j not in waiting),
        in_flight=(),
    )
    return _requeued(snapshot, reserved_snapshot)


def _requeued(given: Snapshot, reserved: Snapshot) -> Snapshot:
    """``reserved`` with only the unplanned starts the act stage is to requeue (not those
    in flight already, nor a job still planned: one that is not running, nor one whose
    launch failed), and only the failed launches and pending jobs it is to judge (not
    those in flight)."""
    if not (given.unplanned or given.launch_failures or given.pending):
        return reserved
    pending = {f.job_id for f in given.in_flight}
    failed = tuple(f for f in given.launch_failures if f.job_id not in pending)
    # a run that ended already (its launch failed) has nothing left to requeue
    gone = pending | {j.id for j in reserved.jobs} | {f.job_id for f in given.launch_failures}
    keep = frozenset(j for j in given.unplanned if j not in gone)
    judged = tuple(p for p in given.pending if p.job_id not in pending)
    if (keep, failed, judged) == (reserved.unplanned, reserved.launch_failures, reserved.pending):
        return reserved
    return dataclasses.replace(reserved, unplanned=keep, launch_failures=failed, pending=judged)
