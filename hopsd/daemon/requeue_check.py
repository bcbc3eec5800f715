"""Was a requeued job's script stopped by the requeue, or had it already finished?

``scontrol requeuehold`` also requeues a batch job that has just *completed*;
released again, such a job would run a second time. No Slurm command requeues
"only if still running", and hops's fresh read of the queue right before the
requeue narrows the window to one command's latency but cannot close it. So
the race is not prevented; it is **always detected before the job can run
again**: every chain that releases a requeued job waits for the accounting
record of the run that ended, and :func:`judge_requeued_run` compares when the
run's batch script ended with when Slurm requeued the run:

* script ended in an earlier second than the requeue: it finished on its own
  (the requeue hit a finished job) -> the job is recorded finished and the
  held requeue cancelled, never released;
* script ended in a later second, or was killed by a signal: the requeue
  stopped it -> the job may be placed again;
* same second, clean exit: sacct cannot tell (it keeps whole seconds), and a
  job that checkpoints and exits 0 on the requeue's SIGTERM looks exactly like
  one that finished a moment before. Slurm's own job record decides: a requeue
  that stops a running job clears the job's allocation record
  (``tres_alloc_str``), one that hits a job that had already ended keeps it
  (seen on 22.05.8 and 24.11.5, recorded in the parser fixtures; a stress run hit this case
  11 times in 361 requeues). The job's own progress report (all samples done)
  is taken as evidence too. When the script ended so shortly before the requeue
  that slurmctld had not yet heard of it, Slurm's record looks like a stop;
  then slurmstepd's line in the job's output decides (:mod:`job_output`):
  written when the requeue stopped a running script, absent otherwise.

Where the cluster keeps no accounting, the allocation record and progress
reports alone guard the release; the daemon logs that once.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hopsd.slurm.port import RunRecord, SlurmJob

#: Batch-step states that mean the script is still there (no end recorded yet).
_STILL_RUNNING = frozenset({"RUNNING", "PENDING", "COMPLETING", "SUSPENDED", "REQUEUED"})


class RunEnd(enum.StrEnum):
    FINISHED = "finished"  # the script had ended on its own before the requeue
    STOPPED = "stopped"  # the requeue stopped a running script
    UNSETTLED = "unsettled"  # accounting does not show the run's end yet
    AMBIGUOUS = "ambiguous"  # clean exit in the very second of the requeue


@dataclass(frozen=True)
class RunVerdict:
    """How the last requeued run of a job ended, with the evidence in words."""

    end: RunEnd
    detail: str
    script_state: str = ""
    exit_code: int = 0
    ended_at: float | None = None
    requeued_at: float | None = None

    @property
    def final_state(self) -> str:
        """The Slurm state the finished run would have had without the requeue."""
        if self.script_state == "COMPLETED" and self.exit_code == 0:
            return "COMPLETED"
        return "FAILED"


def hit_an_ended_run(job: SlurmJob) -> bool:
    """Slurm's record of a held, requeued job still shows its last run's allocation.

    Slurm clears ``tres_alloc_str`` when a requeue stops a running job and keeps
    it when the requeue hits a job whose run had already ended.
    """
    return job.pending and bool(job.alloc_tres)


def last_requeued_run(runs: Sequence[RunRecord], job_id: int) -> RunRecord | None:
    """The job's most recent run that a requeue ended (sacct lists runs oldest first)."""
    ended = [r for r in runs if r.job_id == job_id and r.state == "REQUEUED"]
    return ended[-1] if ended else None


def judge_requeued_run(run: RunRecord | None) -> RunVerdict:
    """Classify one requeued run from its accounting record (see the module docstring)."""
    if run is None or run.end_time is None:
        return RunVerdict(RunEnd.UNSETTLED, "accounting has no requeued run yet")
    if run.batch_state is None:
        return RunVerdict(RunEnd.UNSETTLED, "accounting has no batch step for the run yet")
    if run.batch_state in _STILL_RUNNING or run.batch_end_time is None:
        return RunVerdict(RunEnd.UNSETTLED, f"batch script still {run.batch_state.lower()}")
    requeued_s = math.floor(run.end_time)
    ended_s = math.floor(run.batch_end_time)
    said = (
        f"script {run.batch_state} exit {run.batch_exit_code}:{run.batch_signal} "
        f"at {ended_s}, requeued at {requeued_s}"
    )
    if ended_s < requeued_s:
        return _verdict(RunEnd.FINISHED, said, run)
    if ended_s > requeued_s or run.batch_signal != 0 or run.batch_state == "CANCELLED":
        return _verdict(RunEnd.STOPPED, said, run)
    return _verdict(RunEnd.AMBIGUOUS, said, run)


def _verdict(end: RunEnd, said: str, run: RunRecord) -> RunVerdict:
    return RunVerdict(
        end, said, run.batch_state or "", run.batch_exit_code, run.batch_end_time, run.end_time
    )
