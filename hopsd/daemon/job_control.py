"""What a job is told at each start: its GPU count and learning rate, in its mode file.

Slurm cannot change a queued job's environment, and hops picks the GPU count
only when it places the job, so right before each release hopsd (re)writes
``<spool>/<job>.mode`` for the run about to start: ``{"run": R, "gpus": G,
"lr": X}`` (plus ``"mode": "profile"`` and the iteration count for a profiling
run). The probe reads it at start (``probe.gpus``, ``probe.lr``) and trusts it
only from root, hopsd or the job's user (:mod:`hopsd.daemon.spool`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from hopsd.daemon.sensing import Sensing
from hopsd.ledger.records import JobRecord, LrRule
from hopsd.ledger.unit import LedgerLike, as_ledger

log = logging.getLogger("hopsd.job_control")


def lr_for(
    lr: float | None,
    rule: LrRule,
    by_demand: Mapping[str, float] | None,
    smallest: int,
    gpus: int,
) -> float | None:
    """The learning rate ``hops submit --lr/--lr-scale`` gives a run on ``gpus`` GPUs."""
    if by_demand:
        value = by_demand.get(str(gpus))
        return float(value) if value is not None else None
    if lr is None:
        return None
    ratio = gpus / max(smallest, 1)
    if rule == LrRule.LINEAR:
        return lr * ratio
    if rule == LrRule.SQRT:
        return lr * math.sqrt(ratio)
    return lr


def control_body(
    row: JobRecord, payload: Mapping[str, Any], profile_iterations: int
) -> dict[str, Any]:
    """The mode file of the run a release starts."""
    gpus = int(payload.get("gpus", 0))
    body: dict[str, Any] = {"run": int(payload.get("run", row.restarts)), "gpus": gpus}
    lr = lr_for(row.lr, row.lr_rule, row.lr_by_demand, min(row.demands or [1]), gpus)
    if lr is not None:
        body["lr"] = lr
    if payload.get("kind") == "profile":
        body.update(mode="profile", iterations=profile_iterations)
    return body


class ReleaseNotes:
    """Writes the mode file of each run right before hops releases it (enactor's hook)."""

    def __init__(
        self,
        ledger: LedgerLike,
        sensing: Sensing,
        profile_iterations: Callable[[], int],
    ) -> None:
        self.ledger = as_ledger(ledger)
        self.sensing = sensing
        self.profile_iterations = profile_iterations

    def __call__(self, job_id: str, slurm_id: int, payload: Mapping[str, Any]) -> None:
        if "gpus" not in payload:
            return  # a chain recorded before runs were told their GPUs
        with self.ledger.reading() as unit:
            row = unit.job(job_id)
        if row is None:
            return
        body = control_body(row, payload, self.profile_iterations())
        user = row.user
        problem = self.sensing.write_mode(slurm_id, user, body)
        if problem:
            log.warning("event=mode-file-unwritten job=%s reason=%r", job_id, problem)
