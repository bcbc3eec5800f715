"""Refusals: the Slurm jobs hopsd would not adopt, and why.

A refusal is kept (one row per Slurm job) so that ``hops status`` can tell a
job's owner what was wrong with it and so that hopsd refuses, records and logs
a job once, also across its restarts; it is dropped when the job leaves Slurm
or is adopted after all.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from hopsd.ledger.models import RefusalRow
from hopsd.ledger.records import RefusalRecord


def record_refusal(session: Session, slurm_job_id: int, user: str, reason: str, now: float) -> None:
    """Keep (or update) why hopsd refused to adopt a Slurm job."""
    row = session.get(RefusalRow, slurm_job_id)
    if row is None:
        session.add(RefusalRow(slurm_job_id=slurm_job_id, user=user, reason=reason, refused_at=now))
    elif row.reason != reason:
        row.reason, row.refused_at = reason, now


def refusal_ids(session: Session) -> set[int]:
    return set(session.scalars(select(RefusalRow.slurm_job_id)))


def drop_refusals(session: Session, slurm_job_ids: Iterable[int]) -> None:
    """Forget refusals of jobs Slurm no longer knows (or that hopsd has adopted since)."""
    ids = list(slurm_job_ids)
    if ids:
        session.execute(delete(RefusalRow).where(RefusalRow.slurm_job_id.in_(ids)))


def refusals(session: Session, users: Iterable[str] | None = None) -> list[RefusalRecord]:
    """The refused jobs (of some users), oldest first."""
    stmt = select(RefusalRow).order_by(RefusalRow.slurm_job_id)
    if users is not None:
        stmt = stmt.where(RefusalRow.user.in_(list(users)))
    return [
        RefusalRecord(r.slurm_job_id, r.user, r.reason, r.refused_at) for r in session.scalars(stmt)
    ]
