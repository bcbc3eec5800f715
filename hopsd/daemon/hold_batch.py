"""Adoption's holds, taken together: one batched Slurm call for a queue adopted at once.

A cluster where hopsd starts (or one where many jobs arrive between two ticks)
adopts thousands of jobs in a tick, each with a lone ``hold`` intent; one
Slurm call per job made that first tick last minutes. The intents are still
recorded before any call (:mod:`hopsd.daemon.holds`); only their enactment is
batched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hopsd.ledger.records import IntentAction

if TYPE_CHECKING:
    from hopsd.daemon.enact import Enactor, EnactReport, Step

log = logging.getLogger("hopsd.enact")


def hold_together(
    enactor: Enactor,
    chains: Mapping[str, Sequence[Step]],
    skip: Mapping[int, str],
    broken: Mapping[str, str],
    report: EnactReport,
) -> set[str]:
    """Take every chain that is a lone hold (adoption's) in one batched Slurm call.

    A queue adopted at once asks thousands of holds; one ``scontrol`` per
    job made the first tick last minutes. The intents are committed before
    the call, as any others; their outcomes are then recorded together, in
    one transaction. Returns the jobs whose chains were taken here.
    """
    lone = [
        chain[0]
        for job_id, chain in chains.items()
        if len(chain) == 1
        and chain[0].action == IntentAction.HOLD
        and chain[0].intent_id not in skip
        and job_id not in broken
    ]
    if len(lone) < 2:
        return set()
    if enactor.guard is not None:
        enactor.guard()
    refused = enactor.port.hold_many([s.slurm_id for s in lone])
    now = enactor.clock()
    done = [s for s in lone if s.slurm_id not in refused]
    with enactor.ledger.unit() as unit:
        unit.mark_done_many([s.intent_id for s in done], now)
        for step in lone:
            if step.slurm_id in refused:
                unit.mark_failed(step.intent_id, refused[step.slurm_id], now)
    for step in lone:
        if step.slurm_id in refused:
            report.failed.append((step, refused[step.slurm_id]))
            log.warning(
                "event=enact job=%s action=hold kind=%s result=failed error=%r",
                step.job_id,
                step.payload.get("kind"),
                refused[step.slurm_id],
            )
            continue
        report.done.append(step)
        log.info(
            "event=enact job=%s slurm_job=%s action=hold kind=%s reason=%r result=ok",
            step.job_id,
            step.slurm_id,
            step.payload.get("kind"),
            step.payload.get("reason", ""),
        )
    for _ in done:
        enactor.actions_taken += 1
        enactor.faults.action_taken(enactor.actions_taken)
    return {s.job_id for s in lone}
