"""A requeue Slurm made itself is named from accounting: its preemption, a node failure.

The in-memory Slurm requeues a running hops job as Slurm's QOS preemption does
(pending again, not held, one restart more) and keeps the run's end in its
``sacct -D`` log; the live test (``test_live_slurm_preempt.py``) does it on
the real cluster.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from hopsd.daemon.slurm_requeues import latest_ends
from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import AllocationReason, JobState, RunRow
from hopsd.slurm.errors import SlurmAccountingDisabledError
from hopsd.slurm.port import RunRecord
from hopsd.slurm.tag import HopsTag


def requeued_by_slurm(config, port, sessions, clock, state: str | None):  # type: ignore[no-untyped-def]
    """A running hops job Slurm requeues; ``state``: its run's end in accounting (None: none)."""
    job = port.add_job(HopsTag((1,), 1e6))
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    slurm = port.jobs[job]
    slurm.state, slurm.placement, slurm.held, slurm.restarts = "PENDING", {}, False, 1
    if state is not None:
        port.run_log.append(RunRecord(job, state, 0.0, 10.0, "CANCELLED", 0, 15, 10.0))
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        ended = [r.ended for r in s.scalars(select(RunRow).where(RunRow.job_id == row.id))]
        reasons = [a.reason for a in allocation_history(s, row.id)]
        return row.state, row.state_reason, ended, reasons


@pytest.mark.parametrize(
    ("state", "words"), [("PREEMPTED", "preempted by slurm"), ("NODE_FAIL", "node failure")]
)
def test_slurms_requeue_is_named_by_the_runs_end_in_accounting(  # type: ignore[no-untyped-def]
    config, port, sessions, clock, state, words
):
    row_state, reason, ended, reasons = requeued_by_slurm(config, port, sessions, clock, state)
    assert row_state == JobState.REQUEUED and reason == f"{words}, requeued"
    assert ended[0] == words, ended
    assert AllocationReason.MOVE not in reasons and AllocationReason.PREEMPT not in reasons


def test_without_accounting_the_run_stays_ended_requeued(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    def none(job_ids):  # type: ignore[no-untyped-def]
        raise SlurmAccountingDisabledError(["sacct"], 1, "accounting storage is disabled")

    port.runs = none
    row_state, reason, ended, _ = requeued_by_slurm(config, port, sessions, clock, None)
    assert row_state == JobState.REQUEUED and ended[0] == "requeued"
    assert not reason.endswith(", requeued"), reason


def test_the_latest_ended_run_names_the_cause() -> None:
    runs = [
        RunRecord(5, "NODE_FAIL", 1.0, 2.0),
        RunRecord(5, "PREEMPTED", 3.0, 4.0),
        RunRecord(5, "PENDING", None, None),
        RunRecord(6, "RUNNING", 1.0, None),
    ]
    assert latest_ends(runs) == {5: "PREEMPTED"}
