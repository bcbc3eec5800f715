"""What the step is told of work under way, and the intents of its requeues of unplanned starts.

The core decides (:mod:`hopsd.core.reserve` keeps in-flight work out of
planning, :func:`hopsd.core.act.act` requeues the starts Slurm made without a
hops decision); this module only reads the ledger for the step's input and
turns the step's requeues into intents (:func:`hopsd.daemon.decide.chains`),
which are written before the enactor takes them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hopsd.config import HopsConfig
from hopsd.core.act import REQUEUE, Act
from hopsd.core.snapshot import InFlight
from hopsd.daemon.decide import PREEMPT, Action, chains, notice_of
from hopsd.daemon.enact import Step, by_job
from hopsd.daemon.holds import UNPLANNED, UNPLANNED_RUN
from hopsd.daemon.views import Observation
from hopsd.ledger.records import IntentAction, IntentRecord, JobRecord, JobState, JobUpdate
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")


def in_flight(unit: Unit) -> tuple[InFlight, ...]:
    """Jobs whose intent chains still wait, as the core's in-flight records.

    A chain waits on a requeued job not yet off its nodes, or on a notice's
    grace (the requeue is still to come: the job runs on its current GPUs
    until the grace ends). What the step does with them is the core's rule
    (:mod:`hopsd.core.reserve`).
    """
    out: list[InFlight] = []
    for job_id, chain in by_job([Step.of(r) for r in unit.pending_intents()]).items():
        target = tuple(
            (str(node), int(gpus))
            for step in chain
            if step.action == IntentAction.UPDATE
            for node, gpus in step.payload.get("nodes", [])
        )
        runs_on = any(s.action == IntentAction.REQUEUE_HOLD for s in chain)
        out.append(InFlight(job_id, target, runs_on, _grace_end(chain)))
    return tuple(out)


def _grace_end(chain: Sequence[Step]) -> float | None:
    """When the chain's notice grace ends: the signal's time (recorded in its intent when
    sent) plus the grace; None without a notice, or before the signal went out."""
    for step in chain:
        sent_at = step.payload.get("sent_at") if step.action == IntentAction.NOTICE else None
        if sent_at is not None:
            return float(sent_at) + float(step.payload.get("grace_s", 0.0))
    return None


def unplanned(rows: Sequence[JobRecord]) -> frozenset[str]:
    """Running jobs whose run reconcile recorded as Slurm's, not hops's
    (:func:`hopsd.daemon.holds.record_unplanned`): the ledger keeps the mark, so a
    requeue not yet decided (a failed plan, a restart of hopsd) is decided next tick."""
    return frozenset(
        r.id for r in rows if r.state == JobState.RUNNING and r.state_reason == UNPLANNED_RUN
    )


def requeue_unplanned(
    unit: Unit,
    acts: Sequence[Act],
    rows: Sequence[JobRecord],
    obs: Observation,
    config: HopsConfig,
    now: float,
) -> tuple[list[Action], list[IntentRecord]]:
    """Write the intents of the step's requeues of unplanned starts (a notice first where
    the act stage says so) and say why on each job; the actions and intents to enact."""
    requeues = [a for a in acts if a.kind == REQUEUE]
    if not requeues:
        return [], []
    by_id = {r.id: r for r in rows}
    observed = obs.job_map()
    actions: list[Action] = []
    for decided in requeues:
        row = by_id.get(decided.job_id)
        seen = observed.get(int(row.slurm_job_id or 0)) if row is not None else None
        if seen is None:
            continue  # left Slurm since: nothing to requeue
        actions.append(
            Action(decided.job_id, seen.slurm_id, PREEMPT, None, "", seen.restarts, False)
        )
        log.warning(
            "event=unplanned-start job=%s slurm_job=%s user=%s action=requeue-hold reason=%r",
            decided.job_id,
            seen.slurm_id,
            seen.user,
            UNPLANNED,
        )
    listening = {a.job_id for a in requeues if a.notice}
    reasons = {a.job_id: UNPLANNED for a in actions}
    intents = unit.record_intents(chains(actions, reasons, notice_of(config), listening), None, now)
    unit.update_jobs([JobUpdate(a.job_id, plan_reason=UNPLANNED) for a in actions])
    return actions, intents
