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
  so it has not been requeued yet) keeps those busy too; on a node where both
  happen, the larger of the two is reserved (:func:`reserved_gpus`).

hopsd builds the in-flight records from its pending intents, the simulator
from the moves it is enacting under a notice; both plan around them by this
one rule.
"""

from __future__ import annotations

import dataclasses

from hopsd.core.capacity import free_gpus, node_capacity
from hopsd.core.errors import InvalidInputError
from hopsd.core.snapshot import InFlight, Snapshot

__all__ = ["InFlight", "reserve", "reserved_gpus"]


def reserved_gpus(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per node the in-flight work of ``snapshot`` holds now or will take.

    On each node that is the larger of what in-flight jobs still run on and
    what pending placements will take, not their sum: a placement onto the GPUs
    of a job under notice (a move onto a preempted job's GPUs) takes them only
    once that job has left them. Planning may hand out what neither needs, so no
    GPU is handed out twice before the grace ends nor after. A node the
    snapshot's cluster does not know (a placement decided before the node left
    the configuration) reserves nothing of the cluster's.
    """
    current = {j.id: j.current for j in snapshot.jobs}
    running: dict[str, int] = {}
    taking: dict[str, int] = {}
    for flight in snapshot.in_flight:
        config = current.get(flight.job_id)
        held = config.parts if flight.runs_on and config is not None else ()
        for into, parts in ((taking, flight.target), (running, held)):
            for node_id, gpus in parts:
                if gpus < 0:
                    raise InvalidInputError(f"job {flight.job_id!r} reserves {gpus} GPUs")
                into[node_id] = into.get(node_id, 0) + gpus
    return {n: max(running.get(n, 0), taking.get(n, 0)) for n in {**running, **taking}}


def reserve(snapshot: Snapshot) -> Snapshot:
    """The snapshot the policy may plan: in-flight jobs out, their GPUs out of capacity.

    The result carries no in-flight records any more (they are spent on its
    capacity), so reserving twice changes nothing.
    """
    if not snapshot.in_flight:
        return snapshot
    waiting = {f.job_id for f in snapshot.in_flight}
    capacity = free_gpus(node_capacity(snapshot), reserved_gpus(snapshot))
    return dataclasses.replace(
        snapshot,
        jobs=tuple(j for j in snapshot.jobs if j.id not in waiting),
        capacity=capacity,
        pinned=frozenset(j for j in snapshot.pinned if j not in waiting),
        in_flight=(),
    )
