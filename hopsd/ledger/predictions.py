"""The forecasts hopsd showed: each job's predicted start and end, written when they change.

``hops status`` shows a job's newest row (START of a waiting job, ETA of a
running one), so every prediction a user saw is here with the time it was
made; ``benchmarks/predictions.py`` sets them beside what happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from hopsd.ledger.by_job import rows_by_job
from hopsd.ledger.models import PredictionRow
from hopsd.ledger.records import CHUNK, Prediction, field_values

#: A new forecast is written when a time moved by more than this many seconds ...
CHANGE_S = 2.0
#: ... and by more than this share of the time left until it.
CHANGE_SHARE = 0.02


def _moved(old: float | None, new: float | None, now: float) -> bool:
    if old is None or new is None:
        return old is not new
    return abs(new - old) > max(CHANGE_S, CHANGE_SHARE * max(min(old, new) - now, 0.0))


def changed(old: Prediction | None, new: Prediction) -> bool:
    """Whether ``new`` says something ``old`` (the job's newest row) did not."""
    if old is None or old.state != new.state:
        return True
    return _moved(old.start_at, new.start_at, new.made_at) or _moved(
        old.end_at, new.end_at, new.made_at
    )


def _record(row: PredictionRow) -> Prediction:
    return Prediction.from_row(
        (row.job_id, row.made_at, row.state, row.start_at, row.end_at, row.gpu_type, row.gpus)
    )


def latest(session: Session, job_ids: Sequence[str]) -> dict[str, Prediction]:
    """Each job's newest prediction (jobs never forecast are absent)."""
    out: dict[str, Prediction] = {}
    ids = list(dict.fromkeys(job_ids))
    for k in range(0, len(ids), CHUNK):
        newest = (
            select(func.max(PredictionRow.id))
            .where(PredictionRow.job_id.in_(ids[k : k + CHUNK]))
            .group_by(PredictionRow.job_id)
        )
        for row in session.scalars(select(PredictionRow).where(PredictionRow.id.in_(newest))):
            out[row.job_id] = _record(row)
    return out


def write(session: Session, predictions: Iterable[Prediction]) -> int:
    """Add the predictions that changed since each job's newest; how many were written."""
    wanted = list(predictions)
    before = latest(session, [p.job_id for p in wanted])
    fresh = [p for p in wanted if changed(before.get(p.job_id), p)]
    session.add_all(PredictionRow(**field_values(p)) for p in fresh)
    return len(fresh)


def of_jobs(session: Session, job_ids: Sequence[str]) -> Mapping[str, list[Prediction]]:
    """Every prediction of the jobs, oldest first (what the benchmark compares)."""

    def select_for(ids: list[str]) -> Select[PredictionRow]:
        return (
            select(PredictionRow)
            .where(PredictionRow.job_id.in_(ids))
            .order_by(PredictionRow.made_at, PredictionRow.id)
        )

    return rows_by_job(session, job_ids, select_for, _record)
