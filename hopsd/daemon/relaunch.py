"""Relaunch: a job whose launch failed at once is requeued, not ended.

Whether it is relaunched is the act stage's rule (:func:`hopsd.core.act.relaunch`);
this module asks it with what the ledger and Slurm say, records the failed run
and writes the relaunch's intents (:func:`hopsd.daemon.decide.intent_chain`)
before the enactor takes them.
"""

from __future__ import annotations

import logging

from hopsd.core import act
from hopsd.daemon.decide import Action, intent_chain
from hopsd.daemon.views import ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import JobRecord, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")


def relaunch(unit: Unit, row: JobRecord, seen: ObservedJob, now: float) -> bool:
    """Requeue a job whose launch failed right after hops released it, when the act stage
    says so (:func:`hopsd.core.act.relaunch`), instead of ending it."""
    if not act.launch_failed(seen.state, seen.start_time, seen.end_time):
        return False  # no ledger read for the common end
    tries = unit.relaunches(row.id)
    decided = act.relaunch(
        row.id,
        seen.state,
        seen.start_time,
        seen.end_time,
        tries=tries,
        released_by_hops=unit.released_by_hops(row.id),
    )
    if decided is None:
        return False
    said = seen.reason if seen.reason not in ("", "None") else seen.state
    reason = f"launch failed ({said}); requeued by hops, try {tries + 1}"
    action = Action(row.id, seen.slurm_id, decided.kind, None, "", seen.restarts, False)
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
