"""Rounds: one row per scheduling decision, for reports and for resuming numbering."""

from __future__ import annotations

import json

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hopsd.ledger.models import RoundRow
from hopsd.ledger.records import RoundInfo, RoundSummary, field_values

__all__ = ["RoundSummary"]


def record_round(session: Session, summary: RoundSummary) -> RoundRow:
    """Insert a round and flush, so its id can key the round's allocations and intents."""
    row = RoundRow(**field_values(summary))
    session.add(row)
    session.flush()
    return row


def next_round_number(session: Session, shadow: bool = False) -> int:
    """One more than the highest number recorded, so numbering survives restarts."""
    stmt = select(func.max(RoundRow.number)).where(RoundRow.shadow == shadow)
    highest = session.scalar(stmt)
    return 1 if highest is None else int(highest) + 1


def last_round(session: Session, shadow: bool = False) -> RoundRow | None:
    stmt = (
        select(RoundRow).where(RoundRow.shadow == shadow).order_by(RoundRow.number.desc()).limit(1)
    )
    return session.scalars(stmt).first()


def recent_rounds(session: Session, limit: int = 20, shadow: bool = False) -> list[RoundRow]:
    """The latest rounds, newest first."""
    stmt = (
        select(RoundRow)
        .where(RoundRow.shadow == shadow)
        .order_by(RoundRow.number.desc())
        .limit(limit)
    )
    return list(session.scalars(stmt))


def queue_lengths_since(
    session: Session, since: float, limit: int = 2000
) -> list[tuple[float, int]]:
    """(start, jobs waiting) of each enacting round since ``since``, oldest first."""
    stmt = (
        select(RoundRow.started_at, RoundRow.queued)
        .where(RoundRow.started_at >= since, RoundRow.shadow.is_(False))
        .order_by(RoundRow.started_at.desc())
        .limit(limit)
    )
    return sorted((float(at), int(q)) for at, q in session.execute(stmt))


def full_round_times(session: Session, lo: float, hi: float) -> list[float]:
    """When each full round (not a fragment plan) of ``[lo, hi]`` began, in order: the
    instants hopsd's round clock fired (a replay's rounds fall on them).

    Only rounds that decided something are recorded; a full round's note says
    ``"kind":"round"``.
    """
    stmt = (
        select(RoundRow.started_at, RoundRow.note)
        .where(RoundRow.started_at >= lo, RoundRow.started_at <= hi)
        .where(RoundRow.shadow.is_(False))
        .order_by(RoundRow.started_at)
    )
    return [float(at) for at, note in session.execute(stmt) if _kind(note) == "round"]


def _kind(note: str | None) -> str | None:
    try:
        summary = json.loads(note) if note else None
    except ValueError:
        return None
    return summary.get("kind") if isinstance(summary, dict) else None


def latest_round(session: Session) -> RoundInfo | None:
    """The most recent round hopsd recorded (shadow or not), or None before the first."""
    row = session.scalars(
        select(RoundRow).order_by(RoundRow.started_at.desc(), RoundRow.id.desc()).limit(1)
    ).first()
    if row is None:
        return None
    return RoundInfo(row.number, row.started_at, bool(row.shadow), row.policy)
