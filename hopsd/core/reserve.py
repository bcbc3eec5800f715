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
  (:func:`reserve`): no job still planned is left over capacity.

hopsd builds the in-flight records from its pending intents, the simulator
from the moves it is enacting under a notice; both plan around them by this
one rule.
"""

from __future__ import annotations

import dataclasses

from hopsd.core.capacity import held_gpus, left, node_capacity
from hopsd.core.errors import InvalidInputError
from hopsd.core.snapshot import InFlight, Snapshot

__all__ = ["InFlight", "reserve", "reserved_gpus"]


def reserved_gpus(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per node in-flight work holds now (jobs under notice) plus what it will take
    (pending placements). A node the snapshot's cluster does not know (a placement
    decided before the node left the configuration) reserves nothing of the cluster's."""
    current = {j.id: j.current for j in snapshot.jobs}
    held: dict[str, int] = {}
    for flight in snapshot.in_flight:
        config = current.get(flight.job_id)
        parts = [*flight.target, *(config.parts if flight.runs_on and config else ())]
        for node_id, gpus in parts:
            if gpus < 0:
                raise InvalidInputError(f"job {flight.job_id!r} reserves {gpus} GPUs")
            held[node_id] = held.get(node_id, 0) + gpus
    return held


def reserve(snapshot: Snapshot) -> Snapshot:
    """The snapshot the policy may plan: in-flight jobs out, their GPUs out of capacity.

    A node keeps at least the GPUs the jobs still planned run on there. Where
    the reserved GPUs and those jobs' come to more than the node has, a pending
    placement lands on GPUs a job under notice still holds (a move onto a
    preempted job's GPUs; in hopsd also a start Slurm holds back until that job
    has left): those GPUs are counted once, and nothing is left to hand out.
    The result carries no in-flight records any more (they are spent on its
    capacity), so reserving twice changes nothing.
    """
    if not snapshot.in_flight:
        return snapshot
    waiting = {f.job_id for f in snapshot.in_flight}
    jobs = tuple(j for j in snapshot.jobs if j.id not in waiting)
    running = held_gpus(j.current for j in jobs if j.current is not None)
    reserved = reserved_gpus(snapshot)
    capacity = {
        n: min(cap, max(left(cap, reserved.get(n, 0)), running.get(n, 0)))
        for n, cap in node_capacity(snapshot).items()
    }
    return dataclasses.replace(
        snapshot,
        jobs=jobs,
        capacity=capacity,
        pinned=frozenset(j for j in snapshot.pinned if j not in waiting),
        in_flight=(),
    )
