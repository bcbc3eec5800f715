"""Holds: keep a hops job held until hops places it, whatever its owner does.

``hops submit`` submits jobs held, but a user hold is its owner's to release.
hopsd turns it into a hold only an operator can release (which jobs: the act
stage's rule, :func:`hopsd.core.act.hold`), as an intent the enactor carries
out after reconcile; a shadow daemon (``acts`` false) asks for nothing. A job
its owner released before hopsd saw it started is recorded here as a run
hops did not decide (:meth:`Holds.record_unplanned`); the scheduling step
requeues it (:func:`hopsd.core.act.act`, enacted by :mod:`hopsd.daemon.flights`).
"""

from __future__ import annotations

import logging

from hopsd.config import HopsConfig
from hopsd.core import act
from hopsd.daemon.decide import Action, intent_chain
from hopsd.daemon.views import ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import IntentRequest, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")
HOLD_USERS = "held by hops until placed (the owner's hold became hops's own)"
HOLD_RELEASED = "released by its owner before hops placed it; held again until placed"
UNPLANNED_RUN = (
    "started by Slurm without a hops decision (its owner released it before hops placed it)"
)
UNPLANNED = f"{UNPLANNED_RUN}; requeued held"


class Holds:
    """Asks for hops's own hold on each pending job once per daemon, and records the runs
    of jobs Slurm started without a hops decision."""

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
        decided = act.hold(job_id, pending=seen.pending, held=seen.held, reason=seen.reason)
        if decided is None or not self.acts or seen.slurm_id in self.asked:
            return
        self.asked.add(seen.slurm_id)
        why = HOLD_RELEASED if not seen.held else HOLD_USERS
        action = Action(job_id, seen.slurm_id, decided.kind, None, "", seen.restarts, False)
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

    @staticmethod
    def record_unplanned(unit: Unit, job_id: str, seen: ObservedJob, now: float) -> None:
        """A hops job Slurm started before hopsd adopted it (its owner released it): record
        the run it has, and why. The state's reason marks it as unplanned for the
        scheduling step (:func:`hopsd.daemon.flights.unplanned`), whose act stage
        requeues it."""
        started = min(seen.start_time or now, now)
        unit.transition(job_id, JobState.RUNNING, started, UNPLANNED_RUN)
        unit.open_run(job_id, seen.restarts, runs.RUN, None, started)
