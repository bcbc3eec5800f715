"""Every row of some jobs, grouped by job: the reads behind ``hops show`` and the job pages.

Runs, placement changes and predictions are each read for many jobs at once,
in one query per chunk of job ids, and handed back per job in the query's
order, with an empty list for a job that has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from hopsd.ledger.records import CHUNK


class _OfJob(Protocol):
    @property
    def job_id(self) -> str: ...


RowT = TypeVar("RowT", bound=_OfJob)
T = TypeVar("T")


def rows_by_job(
    session: Session,
    job_ids: Sequence[str],
    select_for: Callable[[list[str]], Select[RowT]],
    record: Callable[[RowT], T],
) -> dict[str, list[T]]:
    """``record`` of each row ``select_for`` a chunk of the jobs selects, per job, in order."""
    out: dict[str, list[T]] = {j: [] for j in job_ids}
    ids = list(dict.fromkeys(job_ids))
    for k in range(0, len(ids), CHUNK):
        for row in session.scalars(select_for(ids[k : k + CHUNK])):
            out[row.job_id].append(record(row))
    return out
