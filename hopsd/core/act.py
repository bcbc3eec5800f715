"""The act stage: which Slurm actions a plan asks for, and which of them start with a notice.

A plan is a diff (starts, moves, preemptions); enacting it takes actions in
this order, each a chain of Slurm calls built by the caller (hopsd's intents,
the simulator's bookings). Whether a move or preemption first gives the job
its checkpoint notice is decided here, once: only when notices are on
(``StepOptions.notice``) and the job can hear one (``Snapshot.listening``: in
hopsd the jobs whose probe reported, :func:`hopsd.core.gains.hears_notice`; a
job that cannot checkpoint on notice, or whose batch script would die of the
signal, is requeued at once).

The act stage also owns what hops does about what Slurm did without it, so that
every caller enacts one rule (hopsd is the only one Slurm surprises):

* a running job Slurm started without a hops decision (``Snapshot.unplanned``)
  is requeued held, with a notice first under the same rule as a preemption
  (:func:`act`);
* a job whose launch failed at once (``Snapshot.launch_failures``) is
  relaunched, a bounded number of times (:func:`relaunch`, asked by :func:`act`);
  one it does not relaunch ends;
* a pending job whose hold its owner could release (or did) is held by hops
  (:func:`hold`, judged on ``Snapshot.pending``): first of all actions, so a
  job the same step starts is held before its placement is written (its
  update must not race a launch Slurm could make on its own).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from hopsd.core.model import Configuration, Plan
from hopsd.core.snapshot import LaunchFailure, PendingJob

START, MOVE, PREEMPT = "start", "move", "preempt"
# requeue held a job Slurm started without a hops decision; requeue held a job whose
# launch failed, to place it afresh; take a hold its owner could release
REQUEUE, RELAUNCH, HOLD = "requeue", "relaunch", "hold"

#: A run that failed within this many seconds of its start never really ran.
LAUNCH_FAILURE_S = 2.0
#: Launch failures hops requeues a job after, before it lets the job fail.
MAX_RELAUNCHES = 3
#: Slurm's end states of a run that may have failed at its launch, not in its script.
LAUNCH_END_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL", "LAUNCH_FAILED"})
#: Slurm's reason for a hold the job's owner placed (and may release).
USER_HOLD = "JobHeldUser"


@dataclass(frozen=True)
class Act:
    """One action: start, move, preempt or requeue a job (a notice first, if ``notice``),
    relaunch it or hold it."""

    job_id: str
    kind: str
    config: Configuration | None = None
    notice: bool = False


def act(
    plan: Plan,
    listening: Collection[str] | None,
    notices: bool,
    unplanned: Collection[str] = (),
    launch_failures: Collection[LaunchFailure] = (),
    pending: Collection[PendingJob] = (),
) -> tuple[Act, ...]:
    """The step's actions in enacting order: the holds :func:`hold` takes among
    ``pending``, the plan's starts, moves, then preemptions, then the requeues of
    ``unplanned`` starts (after reserve: the ones not already in flight), then the
    relaunches :func:`relaunch` takes among ``launch_failures``.

    ``listening`` None: every job hears a notice. An unplanned start is told as a
    preemption is: a job whose probe never reported is requeued at once.
    """

    def told(job_id: str) -> bool:
        return notices and (listening is None or job_id in listening)

    return (
        *holds(pending),
        *(Act(a.job_id, START, a.config) for a in plan.start),
        *(Act(a.job_id, MOVE, a.config, told(a.job_id)) for a in plan.move),
        *(Act(job_id, PREEMPT, None, told(job_id)) for job_id in plan.preempt),
        *(Act(job_id, REQUEUE, None, told(job_id)) for job_id in sorted(unplanned)),
        *relaunches(launch_failures),
    )


def relaunches(failures: Collection[LaunchFailure]) -> tuple[Act, ...]:
    """The relaunches among ``failures`` (by job id); the others end as Slurm ended them."""
    decided = (
        relaunch(
            f.job_id,
            f.state,
            f.start_time,
            f.end_time,
            tries=f.tries,
            released_by_hops=f.released_by_hops,
        )
        for f in sorted(failures, key=lambda f: f.job_id)
    )
    return tuple(a for a in decided if a is not None)


def launch_failed(state: str, start_time: float | None, end_time: float | None) -> bool:
    """Slurm ended the run FAILED (not by its script's exit code) at once after its start."""
    if state not in LAUNCH_END_STATES or not (start_time and end_time):
        return False
    return end_time - start_time <= LAUNCH_FAILURE_S


def relaunch(
    job_id: str,
    state: str,
    start_time: float | None,
    end_time: float | None,
    *,
    tries: int,
    released_by_hops: bool,
) -> Act | None:
    """A relaunch of a job whose launch failed right after hops released it, or None.

    A launch can fail for reasons of the moment (the node still revoking the
    credential of the job's previous run, a node not responding): Slurm then
    ends the job FAILED within a second of its start. Such a run never really
    ran: the job is requeued held and placed afresh, at most
    :data:`MAX_RELAUNCHES` times (``tries`` so far), and only when hops started
    it (a job hops started must not die of that; one it did not is not hops's
    to restart).
    """
    if not launch_failed(state, start_time, end_time):
        return None
    if tries >= MAX_RELAUNCHES or not released_by_hops:
        return None
    return Act(job_id, RELAUNCH)


def holds(pending: Collection[PendingJob]) -> tuple[Act, ...]:
    """The holds :func:`hold` takes among ``pending`` (by job id)."""
    decided = (hold(p) for p in sorted(pending, key=lambda p: p.job_id))
    return tuple(a for a in decided if a is not None)


def hold(job: PendingJob) -> Act | None:
    """Hops's own hold on a pending job whose hold its owner could release, or None.

    A hold its owner placed (``sbatch --hold``, Slurm's reason ``JobHeldUser``)
    may be released by that owner, and Slurm would start the job with no hops
    decision; a job its owner released already is held again. Hops's hold
    (an operator's) only such a user can release. A job hops released itself
    is left alone: it waits for Slurm to launch it where hops placed it.
    """
    if job.held and job.reason == USER_HOLD:
        return Act(job.job_id, HOLD)
    if not job.held and not job.released_by_hops:
        return Act(job.job_id, HOLD)
    return None
