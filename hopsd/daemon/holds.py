"""Holds: keep a hops job held until hops places it, whatever its owner does.

``hops submit`` submits jobs held, but a user hold is its owner's to release.
hopsd turns it into a hold only an operator can release, and a job its owner
released before hopsd saw it started is requeued held. Both are intents the
enactor carries out after reconcile; a shadow daemon (``acts`` false) records
the run and asks for nothing.
"""

from __future__ import annotations

import logging

from hopsd.config import HopsConfig
from hopsd.daemon.decide import HOLD, PREEMPT, Action, intent_chain, notice_of
from hopsd.daemon.views import ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import IntentRequest, JobState, JobUpdate
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")

#: Slurm's reason for a hold the job's owner placed (and may release).
USER_HOLD = "JobHeldUser"
HOLD_USERS = "held by hops until placed (the owner's hold became hops's own)"
HOLD_RELEASED = "released by its owner before hops placed it; held again until placed"
UNPLANNED_RUN = (
    "started by Slurm without a hops decision (its owner released it before hops placed it)"
)
UNPLANNED = f"{UNPLANNED_RUN}; requeued held"


class Holds:
    """Asks for hops's own hold on each pending job once per daemon, and requeues
    jobs Slurm started without a hops decision."""

    def __init__(self, config: HopsConfig) -> None:
        self.config = config
        # Whether this daemon acts on Slurm (not in shadow mode): holds and requeues.
        self.acts = True
        # Slurm ids whose user hold hopsd asked to make its own (once per job and daemon).
        self.asked: set[int] = set()
        # Hold intents of this reconciliation, recorded together by :meth:`record`.
        self.waiting: list[IntentRequest] = []

    def lock(self, unit: Unit, job_id: str, seen: ObservedJob, now: float) -> None:
        """Make a hops job's hold one its owner cannot release: hops's own (an operator's).

        ``sbatch --hold`` (what ``hops submit`` does) is a user hold: its owner may
        ``scontrol release`` it, and Slurm would start the job with no hops
        decision. ``scontrol hold`` by hopsd (root, SlurmUser or an operator)
        turns it into an admin hold (``JobHeldAdmin``, on 22.05 and 24.11 alike),
        which only such a user can release. A job its owner released before
        hopsd saw it is held again the same way. The hold is an intent, taken
        right after reconcile; it is asked once per job and daemon (a hopsd
        without operator rights would otherwise ask every tick in vain). The
        intent is recorded by :meth:`record`, in the same transaction, with the
        others of the reconciliation: one batched insert for a queue adopted at once.
        """
        owners = not seen.held or seen.reason == USER_HOLD
        if not (self.acts and seen.pending and owners) or seen.slurm_id in self.asked:
            return
        self.asked.add(seen.slurm_id)
        why = HOLD_RELEASED if not seen.held else HOLD_USERS
        action = Action(job_id, seen.slurm_id, HOLD, None, "", seen.restarts, False)
        self.waiting.extend(intent_chain(action, why))
        log.info("event=hold-locked job=%s slurm_job=%s reason=%r", job_id, seen.slurm_id, why)

    def record(self, unit: Unit, now: float) -> None:
        """Record the reconciliation's hold intents, before its transaction commits."""
        waiting, self.waiting = self.waiting, []
        if waiting:
            unit.record_intents(waiting, None, now)

    def drop(self, slurm_id: int) -> None:
        """Forget a hold asked for a job whose adoption was rolled back."""
        self.waiting = [r for r in self.waiting if r.payload.get("slurm_id") != slurm_id]
        self.asked.discard(slurm_id)

    def requeue_unplanned(self, unit: Unit, job_id: str, seen: ObservedJob, now: float) -> None:
        """A hops job Slurm started before hopsd adopted it (its owner released it): requeue
        it held, after the checkpoint notice a preemption gets, and say why.

        The ledger records the run it had (the job ran); a shadow daemon only records it.
        """
        started = seen.start_time or now
        unit.transition(job_id, JobState.RUNNING, min(started, now), UNPLANNED_RUN)
        unit.open_run(job_id, seen.restarts, runs.RUN, None, min(started, now))
        if not self.acts:
            return
        action = Action(job_id, seen.slurm_id, PREEMPT, None, "", seen.restarts, False)
        unit.record_intents(intent_chain(action, UNPLANNED, notice_of(self.config)), None, now)
        unit.update_job(JobUpdate(job_id, plan_reason=UNPLANNED))
        log.warning(
            "event=unplanned-start job=%s slurm_job=%s user=%s action=requeue-hold reason=%r",
            job_id,
            seen.slurm_id,
            seen.user,
            UNPLANNED,
        )
