"""Requeues Slurm made on its own: why, as the accounting database records them.

hops knows its own requeues (moves, preemptions) by their intents. A running hops
job requeued without one was requeued by Slurm: its QOS preemption
(``PreemptMode=REQUEUE``), a node failure, an operator's ``scontrol requeue``.
The queue does not say which (the job just waits again, ``Reason=BeginTime``),
but ``sacct -D`` ends the stopped run in a state that does: ``PREEMPTED``,
``NODE_FAIL``, ``REQUEUED``. Reconcile notes such jobs; at the end of the
reconciliation one accounting read for all of them names the cause, and the
run's end and the job's reason say it (``hops show``: "preempted by slurm"),
so a preemption by the centre's Slurm is never mistaken for one of hops's.
Where accounting cannot say (none kept, the record not written yet), the run
stays ended "requeued".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.ledger import runs
from hopsd.ledger.records import JobState, JobUpdate
from hopsd.ledger.unit import Unit
from hopsd.slurm.port import RunRecord

log = logging.getLogger("hopsd.reconcile")

#: Slurm ids -> the Slurm state each job's latest ended run ended in (one read for all).
RunEnds = Callable[[Sequence[int]], Mapping[int, str]]

#: States of a run that has not ended (the incarnation waiting or running now).
_NOT_ENDED = frozenset({"PENDING", "RUNNING", "COMPLETING", "REQUEUE_HOLD", "REQUEUE_FED"})


def latest_ends(records: Sequence[RunRecord]) -> dict[int, str]:
    """Each job's latest ended run's state, from its runs oldest first (``sacct -D``)."""
    out: dict[int, str] = {}
    for record in records:
        if record.end_time is not None and record.state not in _NOT_ENDED:
            out[record.job_id] = record.state
    return out


@dataclass
class SlurmRequeues:
    """Jobs reconcile saw requeued by Slurm this tick, and how their runs' ends are named."""

    ends: RunEnds | None = None
    #: (ledger id, Slurm id) of the jobs noted in this reconciliation
    noted: list[tuple[str, int]] = field(default_factory=list)

    def note(self, job_id: str, slurm_id: int) -> None:
        self.noted.append((job_id, slurm_id))

    def forget(self) -> None:
        """The reconciliation rolled back: nothing it noted was recorded."""
        self.noted = []

    def record(self, unit: Unit) -> None:
        """Name the cause of each noted requeue, in ``unit``'s transaction.

        Only a run still ended "requeued" by a job still waiting requeued is
        renamed: a job whose reconciliation failed (its changes dropped) is left
        for the next tick, which sees its requeue again.
        """
        noted, self.noted = self.noted, []
        if not noted or self.ends is None:
            return
        states = self.ends([slurm_id for _, slurm_id in noted])
        rows = unit.jobs([job_id for job_id, _ in noted])
        latest = unit.job_runs(list(rows))
        for job_id, slurm_id in noted:
            state, row, run = states.get(slurm_id), rows.get(job_id), latest.get(job_id)
            if not (state and row and run) or row.state != JobState.REQUEUED:
                continue
            last = run[-1]
            if last.ended != runs.REQUEUED or last.end_time is None:
                continue
            ended = runs.ended_by_slurm(state)
            unit.close_run(job_id, last.end_time, ended, amend=True)
            unit.update_job(JobUpdate(job_id, state_reason=f"{ended}, requeued"))
            log.info("event=slurm-requeue job=%s slurm_job=%s cause=%r", job_id, slurm_id, ended)
