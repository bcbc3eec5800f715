"""Allocation history: which configuration each job held in each round, and why.

A row is written whenever a round starts, keeps, moves or preempts a job, and
when a job ends, so ``hops status`` can show a job's placements over time and
fairness reports can attribute GPU time to GPU types.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Select, func, insert, select
from sqlalchemy.orm import Session

from hopsd.core.candidates import same_placement
from hopsd.core.model import Configuration
from hopsd.ledger.by_job import rows_by_job
from hopsd.ledger.jobs import config_from_json
from hopsd.ledger.models import AllocationReason, AllocationRow
from hopsd.ledger.records import AllocationChange, PlacementRecord, changes_from_plan

__all__ = ["AllocationChange", "changes_from_plan"]


def record_allocations(
    session: Session, round_id: int | None, changes: Sequence[AllocationChange], now: float
) -> int:
    """Append many allocation rows in one executemany INSERT; returns the count.

    Bulk Core insert rather than ORM objects: history rows are never updated,
    and a 2000-job round would otherwise build 2000 tracked objects per tick.
    """
    if not changes:
        return 0
    rows = [_row_values(round_id, change, now) for change in changes]
    session.execute(insert(AllocationRow), rows)
    return len(rows)


def record_allocation(
    session: Session,
    round_id: int | None,
    job_id: str,
    reason: AllocationReason,
    config: Configuration | None,
    now: float,
) -> AllocationRow:
    """Append one allocation row (e.g. ``end`` when a job finishes between rounds)."""
    values = _row_values(round_id, AllocationChange(job_id, reason, config), now)
    row = AllocationRow(**values)
    session.add(row)
    return row


def note_observed_start(session: Session, job_id: str, where: Configuration, now: float) -> bool:
    """A job Slurm started at ``where`` although its last start or move named elsewhere:
    record where it runs (a ``keep``); True when that was needed.

    A placement whose enactment failed stays in the history (it was decided);
    the job's run then went where an earlier release had put it, e.g. a
    release Slurm launched after hops had placed the job anew.
    """
    planned = latest_targets(session, [job_id]).get(job_id)
    if planned is None or same_placement(planned, where):
        return False
    record_allocation(session, None, job_id, AllocationReason.KEEP, where, now)
    return True


def allocation_history(session: Session, job_id: str) -> list[AllocationRow]:
    """A job's allocations, oldest first."""
    stmt = (
        select(AllocationRow)
        .where(AllocationRow.job_id == job_id)
        .order_by(AllocationRow.at, AllocationRow.id)
    )
    return list(session.scalars(stmt))


def placement_before_last_move(session: Session, job_id: str) -> Configuration | None:
    """Where a job ran before its last planned move (None when it never moved).

    For a move that never happened: the requeue hit a run that had already
    finished where it was.
    """
    history = [
        r
        for r in allocation_history(session, job_id)
        if r.reason in (AllocationReason.START, AllocationReason.MOVE, AllocationReason.KEEP)
    ]
    moves = [i for i, r in enumerate(history) if r.reason == AllocationReason.MOVE]
    if not moves or moves[-1] == 0:
        return None
    return allocation_config(history[moves[-1] - 1])


def allocations_in_round(session: Session, round_id: int) -> list[AllocationRow]:
    stmt = (
        select(AllocationRow).where(AllocationRow.round_id == round_id).order_by(AllocationRow.id)
    )
    return list(session.scalars(stmt))


def allocation_config(row: AllocationRow) -> Configuration | None:
    """The :class:`Configuration` an allocation row describes (None for preempt/end)."""
    return config_from_json(row.gpu_type, row.parts)


def _row_values(round_id: int | None, change: AllocationChange, now: float) -> dict[str, object]:
    config = change.config
    return {
        "round_id": round_id,
        "job_id": change.job_id,
        "reason": AllocationReason(change.reason),
        "gpu_type": None if config is None else config.gpu_type,
        "parts": None if config is None else [[n, g] for n, g in config.parts],
        "total_gpus": 0 if config is None else config.total_gpus,
        "at": now,
    }


def start_counts(session: Session, job_ids: Sequence[str]) -> dict[str, int]:
    """How many times each job was started (one query; a profiling run is a start)."""
    out = {j: 0 for j in job_ids}
    if not job_ids:
        return out
    stmt = (
        select(AllocationRow.job_id, func.count())
        .where(
            AllocationRow.job_id.in_(list(job_ids)),
            AllocationRow.reason == AllocationReason.START,
        )
        .group_by(AllocationRow.job_id)
    )
    for job_id, count in session.execute(stmt):
        out[str(job_id)] = int(count)
    return out


def latest_targets(session: Session, job_ids: Sequence[str]) -> dict[str, Configuration]:
    """The placement each job was last started or moved to (one query)."""
    if not job_ids:
        return {}
    stmt = (
        select(AllocationRow)
        .where(
            AllocationRow.job_id.in_(list(job_ids)),
            AllocationRow.reason.in_([AllocationReason.START, AllocationReason.MOVE]),
        )
        .order_by(AllocationRow.at, AllocationRow.id)
    )
    out: dict[str, Configuration] = {}
    for row in session.scalars(stmt):
        config = allocation_config(row)
        if config is not None:
            out[row.job_id] = config
    return out


def placements(session: Session, job_ids: Sequence[str]) -> dict[str, list[PlacementRecord]]:
    """Every recorded placement change of each job, oldest first (one query per chunk of jobs)."""

    def select_for(ids: list[str]) -> Select[AllocationRow]:
        return (
            select(AllocationRow)
            .where(AllocationRow.job_id.in_(ids), AllocationRow.reason != AllocationReason.KEEP)
            .order_by(AllocationRow.at, AllocationRow.id)
        )

    return rows_by_job(session, job_ids, select_for, _placement)


def _placement(row: AllocationRow) -> PlacementRecord:
    parts = tuple((str(n), int(g)) for n, g in (row.parts or []))
    total = int(row.total_gpus or sum(g for _, g in parts))
    return PlacementRecord(row.at, AllocationReason(row.reason), row.gpu_type, parts, total)
