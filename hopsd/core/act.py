"""The act stage: which Slurm actions a plan asks for, and which of them start with a notice.

A plan is a diff (starts, moves, preemptions); enacting it takes actions in
this order, each a chain of Slurm calls built by the caller (hopsd's intents,
the simulator's bookings). Whether a move or preemption first gives the job
its checkpoint notice is decided here, once: only when notices are on
(``StepOptions.notice``) and the job can hear one (``Snapshot.listening``: in
hopsd the jobs whose probe reported, :func:`hopsd.core.gains.hears_notice`; a
job that cannot checkpoint on notice, or whose batch script would die of the
signal, is requeued at once).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from hopsd.core.model import Configuration, Plan

START, MOVE, PREEMPT = "start", "move", "preempt"


@dataclass(frozen=True)
class Act:
    """One action of a plan: start, move or preempt a job (a notice first, if ``notice``)."""

    job_id: str
    kind: str
    config: Configuration | None = None
    notice: bool = False


def act(plan: Plan, listening: Collection[str] | None, notices: bool) -> tuple[Act, ...]:
    """The plan's actions in enacting order: starts, moves, then preemptions.

    ``listening`` None: every job hears a notice.
    """

    def told(job_id: str) -> bool:
        return notices and (listening is None or job_id in listening)

    return (
        *(Act(a.job_id, START, a.config) for a in plan.start),
        *(Act(a.job_id, MOVE, a.config, told(a.job_id)) for a in plan.move),
        *(Act(job_id, PREEMPT, None, told(job_id)) for job_id in plan.preempt),
    )
