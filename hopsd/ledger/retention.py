"""Retention: remove rounds, intents and allocations older than ``[ledger] retention_days``.

A busy hopsd writes a round row per decision and intents and allocations per
action; nothing else ever removes them. Pruning keeps every job row (the
summary ``hops status --all``, ``hops fairness`` and ``hops replay`` read) and
everything a job still being scheduled may need: intents that are pending, and
the intents and allocations of jobs not yet ended, are never touched. Rows go
in batches, each batch its own short transaction, so a daemon pruning a large
backlog holds no lock for long and a kill at any point loses nothing but the
progress of one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, delete, select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.jobs import TERMINAL_STATES
from hopsd.ledger.models import (
    AllocationRow,
    IntentRow,
    IntentState,
    JobRow,
    PredictionRow,
    RoundRow,
)

DAY_S = 86400.0


@dataclass
class Pruned:
    """Rows removed per table (and whether a batch limit stopped the work early)."""

    rounds: int = 0
    intents: int = 0
    allocations: int = 0
    predictions: int = 0
    more: bool = False

    @property
    def total(self) -> int:
        return self.rounds + self.intents + self.allocations + self.predictions


def cutoff_of(now: float, retention_days: float) -> float:
    return now - retention_days * DAY_S


def _ended_jobs() -> Select[str]:
    return select(JobRow.id).where(JobRow.state.in_(TERMINAL_STATES))


def _old_intents(cutoff: float) -> ColumnElement[bool]:
    ended_or_none = IntentRow.job_id.is_(None) | IntentRow.job_id.in_(_ended_jobs())
    return (
        (IntentRow.created_at < cutoff) & (IntentRow.state != IntentState.PENDING) & ended_or_none
    )


def _old_allocations(cutoff: float) -> ColumnElement[bool]:
    return (AllocationRow.at < cutoff) & AllocationRow.job_id.in_(_ended_jobs())


def _old_predictions(cutoff: float) -> ColumnElement[bool]:
    return (PredictionRow.made_at < cutoff) & PredictionRow.job_id.in_(_ended_jobs())


def _batch(session: Session, table: type, where: ColumnElement[bool], size: int) -> int:
    """Delete up to ``size`` rows of ``table`` matching ``where``, oldest ids first."""
    column = table.id  # type: ignore[attr-defined]
    ids = list(session.scalars(select(column).where(where).order_by(column).limit(size)))
    if ids:
        session.execute(delete(table).where(column.in_(ids)))
    return len(ids)


def prune(
    sessions: sessionmaker[Session],
    cutoff: float,
    *,
    batch: int = 500,
    max_batches: int | None = None,
) -> Pruned:
    """Remove what is older than ``cutoff`` (Unix time), ``batch`` rows per transaction.

    Intents and allocations go before the rounds they name. With ``max_batches``
    the work stops after that many transactions and ``more`` says whether rows
    are left for the next call.
    """
    out = Pruned()
    steps: list[tuple[str, type, Callable[[float], ColumnElement[bool]]]] = [
        ("intents", IntentRow, _old_intents),
        ("allocations", AllocationRow, _old_allocations),
        ("predictions", PredictionRow, _old_predictions),
        ("rounds", RoundRow, lambda c: RoundRow.started_at < c),
    ]
    done = 0
    for name, table, where in steps:
        while True:
            if max_batches is not None and done >= max_batches:
                out.more = True
                return out
            with sessions.begin() as session:
                removed = _batch(session, table, where(cutoff), batch)
            done += 1 if removed else 0  # a query that found nothing costs no batch
            setattr(out, name, getattr(out, name) + removed)
            if removed < batch:
                break
    return out
