"""Plan diffs and queue order: the one definition of each, for every policy and caller.

A policy decides *where every job should be*; what hopsd and the simulator
enact is the *difference* from where jobs are now. :func:`diff_plan` is the
one rule that turns target placements into a :class:`~hopsd.core.model.Plan`
(start a queued job, keep or move a running one, preempt a running job left
out); :func:`arrival_order` is the queue order by submission that FIFO and
the baselines' arrival mode use (the priority order is
:func:`hopsd.core.priorities.order_jobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hopsd.core.model import Assignment, Configuration, Job, Plan


def arrival_order(jobs: Iterable[Job]) -> tuple[Job, ...]:
    """Jobs by submission time, then id (deterministic among equal times)."""
    return tuple(sorted(jobs, key=lambda j: (j.submit_time, j.id)))


def diff_plan(
    jobs: Iterable[Job],
    placements: Mapping[str, Configuration],
    *,
    pinned: frozenset[str] = frozenset(),
    notes: Sequence[str] = (),
    window: Sequence[str] = (),
    objective: float = 0.0,
) -> Plan:
    """The plan that takes ``jobs`` (in the order given) to ``placements``.

    A queued job with a placement starts; a running one keeps its place when
    the placement is where it runs (or it is ``pinned``), moves otherwise, and
    is preempted when it has no placement.
    """
    start: list[Assignment] = []
    keep: list[Assignment] = []
    move: list[Assignment] = []
    preempt: list[str] = []
    for job in jobs:
        cfg = placements.get(job.id)
        if job.current is not None and job.id in pinned:
            keep.append(Assignment(job.id, job.current))
        elif job.current is None:
            if cfg is not None:
                start.append(Assignment(job.id, cfg))
        elif cfg is None:
            preempt.append(job.id)
        elif cfg == job.current:
            keep.append(Assignment(job.id, cfg))
        else:
            move.append(Assignment(job.id, cfg))
    return Plan(
        tuple(start),
        tuple(keep),
        tuple(move),
        tuple(preempt),
        window=tuple(window),
        objective=objective,
        notes=tuple(notes),
    )
