"""Relaunch: a job whose launch failed at once is requeued, not ended.

Slurm ends a job FAILED within a second of its start when the launch itself
failed (a node still revoking the previous run's credential, a node not
responding). Such a run never really ran, so hops requeues the job held and
places it afresh, a bounded number of times.
"""

from __future__ import annotations

import logging

from hopsd.daemon.decide import RELAUNCH, Action, intent_chain
from hopsd.daemon.views import ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import JobRecord, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")

#: A run that failed within this many seconds of its start never really ran.
LAUNCH_FAILURE_S = 2.0
#: Launch failures hops requeues a job after, before it lets the job fail.
MAX_RELAUNCHES = 3


def launch_failed(seen: ObservedJob) -> bool:
    """Slurm ended the job FAILED (not by its script's exit code) at once after its start."""
    if seen.state not in ("FAILED", "NODE_FAIL", "BOOT_FAIL", "LAUNCH_FAILED"):
        return False
    if not (seen.start_time and seen.end_time):
        return False
    return seen.end_time - seen.start_time <= LAUNCH_FAILURE_S


def relaunch(unit: Unit, row: JobRecord, seen: ObservedJob, now: float) -> bool:
    """Requeue a job whose launch failed right after hops released it, instead of ending it.

    A launch can fail for reasons of the moment (the node still revoking the
    credential of the job's previous run, a node not responding): Slurm then
    ends the job FAILED within a second of its start. Such a job is requeued
    held (Slurm requeues failed batch jobs too) and placed afresh, at most
    :data:`MAX_RELAUNCHES` times; a job hops started must not die of that.
    """
    if not launch_failed(seen):
        return False
    tries = unit.relaunches(row.id)
    if tries >= MAX_RELAUNCHES or not unit.released_by_hops(row.id):
        return False
    said = seen.reason if seen.reason not in ("", "None") else seen.state
    reason = f"launch failed ({said}); requeued by hops, try {tries + 1}"
    action = Action(row.id, seen.slurm_id, RELAUNCH, None, "", seen.restarts, False)
    unit.record_intents(intent_chain(action, reason), None, now)
    if JobState(row.state) != JobState.RUNNING:
        unit.transition(row.id, JobState.RUNNING, seen.start_time or now, "ran between ticks")
    unit.open_run(row.id, seen.restarts, runs.RUN, None, seen.start_time or now)
    unit.close_run(row.id, seen.end_time or now, runs.LAUNCH_FAILED, seen.exit_code)
    unit.transition(row.id, JobState.REQUEUED, now, reason)
    unit.set_placement(row.id, None)
    log.warning(
        "event=launch-failed job=%s slurm_state=%s action=relaunch try=%d",
        row.id,
        seen.state,
        tries + 1,
    )
    return True
