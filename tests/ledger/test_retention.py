"""Retention on SQLite and PostgreSQL: old history goes in batches, jobs and live state stay."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.model import Configuration
from hopsd.ledger.allocations import record_allocation
from hopsd.ledger.intents import mark_done, record_intent
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.models import (
    AllocationReason,
    AllocationRow,
    IntentAction,
    IntentRow,
    IntentState,
    JobRow,
    JobState,
    RoundRow,
)
from hopsd.ledger.retention import DAY_S, cutoff_of, prune
from hopsd.ledger.rounds import RoundSummary, record_round

OLD, NEW, NOW = 1 * DAY_S, 100 * DAY_S, 101 * DAY_S
A100 = Configuration.of("a100", {"n1": 1})


def _history(Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]) -> None:
    """An ended job and a running one, each with old and new history."""
    with Sessions.begin() as s:
        ended, live = add_job(s, make_spec("ended"), 0.0), add_job(s, make_spec("live"), 0.0)
        ended.state, ended.end_time = JobState.DONE, OLD + 60
        live.state = JobState.RUNNING
        old_round = record_round(s, RoundSummary(number=1, started_at=OLD))
        new_round = record_round(s, RoundSummary(number=2, started_at=NEW))
        for job in ("ended", "live"):
            for i in range(3):
                row = record_intent(s, job, IntentAction.UPDATE, {"i": i}, old_round.id, now=OLD)
                mark_done(s, row, OLD)
            record_allocation(s, old_round.id, job, AllocationReason.START, A100, OLD)
            record_allocation(s, new_round.id, job, AllocationReason.KEEP, A100, NEW)
            record_intent(s, job, IntentAction.RELEASE, {"new": 1}, new_round.id, now=NEW)
        # a crash left this one pending long ago: resume still needs it
        record_intent(s, "ended", IntentAction.RELEASE, {"stuck": 1}, old_round.id, now=OLD)


def _count(s: Session, table: type, *where: object) -> int:
    return int(s.scalar(select(func.count()).select_from(table).where(*where)) or 0)  # type: ignore[arg-type]


def test_prune_removes_old_history_of_ended_jobs_in_batches(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    _history(Sessions, make_spec)
    pruned = prune(Sessions, cutoff_of(NOW, 50), batch=2)
    assert (pruned.rounds, pruned.intents, pruned.allocations) == (1, 3, 1)
    assert not pruned.more
    with Sessions() as s:
        assert _count(s, JobRow) == 2  # the jobs' summaries stay
        assert [r.number for r in s.scalars(select(RoundRow))] == [2]
        # the running job keeps everything; the pending intent stays
        assert _count(s, IntentRow, IntentRow.job_id == "live") == 4
        assert _count(s, AllocationRow, AllocationRow.job_id == "live") == 2
        assert _count(s, IntentRow, IntentRow.state == IntentState.PENDING) == 3
        assert _count(s, AllocationRow, AllocationRow.job_id == "ended") == 1
        # rows kept from the pruned round lost only their link to it
        assert _count(s, IntentRow, IntentRow.round_id.is_(None)) == 4
    again = prune(Sessions, cutoff_of(NOW, 50), batch=2)
    assert again.total == 0


def test_prune_stops_after_max_batches_and_carries_on(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    _history(Sessions, make_spec)
    first = prune(Sessions, cutoff_of(NOW, 50), batch=1, max_batches=2)
    assert first.more and first.total == 2
    rest = prune(Sessions, cutoff_of(NOW, 50), batch=1)
    assert first.total + rest.total == 5 and not rest.more


def test_nothing_newer_than_the_retention_goes(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    _history(Sessions, make_spec)
    assert prune(Sessions, cutoff_of(NOW, 101), batch=10).total == 0
    with Sessions() as s:
        assert _count(s, RoundRow) == 2
