"""Holds: keep a hops job held until hops places it, whatever its owner does.

``hops submit`` submits jobs held, but a user hold is its owner's to release.
hopsd turns it into a hold only an operator can release. Which jobs is the act
stage's rule (:func:`hopsd.core.act.hold`), judged by the scheduling step on
what this module reads: every hops job Slurm shows pending
(:func:`pending_jobs`). The step's holds become intents here
(:func:`hold_intents`), written before the enactor takes them; a shadow daemon
asks for nothing. The rule reads only Slurm's state and the ledger's intents,
so a daemon killed before it wrote a hold finds the same job to hold next tick.

A job its owner released before hopsd saw it started is recorded here as a run
hops did not decide (:func:`record_unplanned`); the scheduling step requeues it
(:func:`hopsd.core.act.act`, enacted by :mod:`hopsd.daemon.flights`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from hopsd.core.act import HOLD, Act
from hopsd.core.snapshot import PendingJob
from hopsd.daemon.decide import Action, intent_chain
from hopsd.daemon.views import Observation, ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import IntentRequest, JobRecord, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")
HOLD_USERS = "held by hops until placed (the owner's hold became hops's own)"
HOLD_RELEASED = "released by its owner before hops placed it; held again until placed"
UNPLANNED_RUN = (
    "started by Slurm without a hops decision (its owner released it before hops placed it)"
)
UNPLANNED = f"{UNPLANNED_RUN}; requeued held"


@dataclass
class Holds:
    """The Slurm ids whose hold this daemon asked for (while they stay pending).

    A hold is asked once per job and daemon: a hopsd without operator rights
    would otherwise ask every tick in vain. A restarted daemon asks again.
    """

    asked: set[int] = field(default_factory=set)


def pending_jobs(
    unit: Unit, rows: Sequence[JobRecord], obs: Observation, asked: set[int]
) -> tuple[PendingJob, ...]:
    """The hops jobs Slurm shows pending (not those whose hold was asked already), with
    whether hops released each: the facts the act stage's hold rule judges.

    Whether hops released a job is asked of the ledger only for jobs Slurm shows
    not held (one query for all of them): a job waiting for Slurm to launch it
    where hops placed it.
    """
    observed = obs.job_map()
    seen = {
        row.id: job
        for row in rows
        if (job := observed.get(int(row.slurm_job_id or 0))) is not None
        and job.pending
        and job.slurm_id not in asked
    }
    free = [job_id for job_id, job in seen.items() if not job.held]
    ours = unit.released_by_hops_among(free) if free else set()
    return tuple(
        PendingJob(job_id, job.held, job.reason, job_id in ours) for job_id, job in seen.items()
    )


def hold_intents(
    acts: Sequence[Act], rows: Sequence[JobRecord], obs: Observation
) -> tuple[list[Action], list[IntentRequest]]:
    """The step's holds as actions and their intents (one builder:
    :func:`hopsd.daemon.decide.intent_chain`); a job that left Slurm since is skipped."""
    by_id = {r.id: r for r in rows}
    observed = obs.job_map()
    actions: list[Action] = []
    requests: list[IntentRequest] = []
    for decided in acts:
        row = by_id.get(decided.job_id) if decided.kind == HOLD else None
        seen = observed.get(int(row.slurm_job_id or 0)) if row is not None else None
        if seen is None:
            continue
        why = HOLD_USERS if seen.held else HOLD_RELEASED
        action = Action(decided.job_id, seen.slurm_id, HOLD, None, "", seen.restarts, False)
        actions.append(action)
        requests.extend(intent_chain(action, why))
        log.info(
            "event=hold-locked job=%s slurm_job=%s reason=%r", decided.job_id, seen.slurm_id, why
        )
    return actions, requests


def record_unplanned(unit: Unit, job_id: str, seen: ObservedJob, now: float) -> None:
    """A hops job Slurm started before hopsd adopted it (its owner released it): record
    the run it has, and why. The state's reason marks it as unplanned for the
    scheduling step (:func:`hopsd.daemon.flights.unplanned`), whose act stage
    requeues it."""
    started = min(seen.start_time or now, now)
    unit.transition(job_id, JobState.RUNNING, started, UNPLANNED_RUN)
    unit.open_run(job_id, seen.restarts, runs.RUN, None, started)
