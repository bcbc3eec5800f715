"""Each Slurm run of a job: when it started (Slurm's time), where, and why it ended.

A requeue starts a new run of the same Slurm job, numbered by Slurm's restart
count. hopsd opens a run when it first sees the job running and closes it when
it sees the run end: requeued (why hops requeued it is in the job's latest
requeue intent) or finished (Slurm's final state and exit code). ``hops show``
lists the runs; they are what a user compares with ``sacct -D``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from hopsd.core.model import Configuration
from hopsd.ledger.by_job import rows_by_job
from hopsd.ledger.models import RunRow
from hopsd.ledger.records import JobRun

PROFILING = "profiling"
RUN = "run"

#: How a run ended, by the Slurm state it ended in (anything else: its name, lower case).
ENDED_BY_SLURM = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node failure",
    "OUT_OF_MEMORY": "out of memory",
    "PREEMPTED": "preempted by slurm",
    "BOOT_FAIL": "boot failure",
    "DEADLINE": "deadline",
}
MOVED = "moved"
PREEMPTED = "preempted"
PROFILING_OVER = "profiling over"
LAUNCH_FAILED = "launch failed"
#: Requeued without a hops decision (an admin's ``scontrol requeue``, a node failure).
REQUEUED = "requeued"


def ended_by_slurm(state: str) -> str:
    """How a run that Slurm ended in ``state`` ended, in the words ``hops show`` uses."""
    return ENDED_BY_SLURM.get(state, state.lower() or "ended")


def ended_by_requeue(payload: Mapping[str, Any] | None) -> str:
    """Why hops requeued a run, from its requeue intent's payload (None: not hops)."""
    if payload is None:
        return REQUEUED
    if payload.get("relaunch"):
        return LAUNCH_FAILED
    if str(payload.get("reason", "")).startswith("profiling"):
        return PROFILING_OVER
    kind = payload.get("kind")
    if kind == "move":
        return MOVED
    if kind == "preempt":
        return PREEMPTED
    return REQUEUED


def _parts(config: Configuration | None) -> list[list[Any]] | None:
    return None if config is None else [[n, g] for n, g in config.parts]


def run_row(session: Session, job_id: str, run: int) -> RunRow | None:
    """Run ``run`` of the job as recorded (None: never seen)."""
    stmt = select(RunRow).where(RunRow.job_id == job_id, RunRow.run == run)
    return session.scalars(stmt).first()


def _open_before(session: Session, job_id: str, run: int) -> RunRow | None:
    stmt = select(RunRow).where(
        RunRow.job_id == job_id, RunRow.run < run, RunRow.end_time.is_(None)
    )
    return session.scalars(stmt.order_by(RunRow.run.desc()).limit(1)).first()


def open_run(
    session: Session,
    job_id: str,
    run: int,
    kind: str,
    config: Configuration | None,
    start: float,
    why_earlier_ended: Callable[[int], tuple[str, float | None]] = lambda run: (REQUEUED, None),
) -> None:
    """Record that run ``run`` of the job started at ``start``; seen again, only fill in
    where it runs once that is known (a run's nodes do not change).

    An earlier run still open was requeued and replaced between two looks: it
    ended by ``start`` at the latest, for the reason ``why_earlier_ended`` gives of
    it (and when, if it knows: the requeue that ended it).
    """
    row = run_row(session, job_id, run)
    if row is None:
        earlier = _open_before(session, job_id, run)
        if earlier is not None:
            why, at = why_earlier_ended(earlier.run)
            earlier.end_time = max(min(start, at or start), earlier.start_time)
            earlier.ended = why
        gpu_type = None if config is None else config.gpu_type
        session.add(
            RunRow(
                job_id=job_id,
                run=run,
                kind=kind,
                gpu_type=gpu_type,
                parts=_parts(config),
                start_time=start,
                ended="",
            )
        )
        session.flush()
    elif row.parts is None and config is not None:
        row.gpu_type, row.parts = config.gpu_type, _parts(config)


def close_run(
    session: Session,
    job_id: str,
    end: float,
    ended: str,
    exit_code: int | None = None,
    *,
    amend: bool = False,
) -> bool:
    """End the job's open run (its latest, still without an end); False when none is open.

    With ``amend`` the latest run is corrected even when it already ended: hopsd
    took a run as stopped by its requeue and learned afterwards that it had
    finished on its own first.
    """
    stmt = select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.run.desc()).limit(1)
    row = session.scalars(stmt).first()
    if row is None or (row.end_time is not None and not amend):
        return False
    row.end_time = max(end, row.start_time)
    row.ended = ended
    row.exit_code = exit_code
    return True


def _record(row: RunRow) -> JobRun:
    parts = tuple((str(n), int(g)) for n, g in (row.parts or []))
    return JobRun(
        row.run, row.kind, row.gpu_type, parts, row.start_time, row.end_time, row.ended,
        row.exit_code,
    )  # fmt: skip


def _by_job(rows: Iterable[RunRow], out: dict[str, list[JobRun]]) -> dict[str, list[JobRun]]:
    for row in rows:
        out.setdefault(row.job_id, []).append(_record(row))
    return out


def runs_of(session: Session, job_ids: Sequence[str]) -> dict[str, list[JobRun]]:
    """Every recorded run of each job, oldest first (one query per chunk of jobs)."""

    def select_for(ids: list[str]) -> Select[RunRow]:
        return select(RunRow).where(RunRow.job_id.in_(ids)).order_by(RunRow.job_id, RunRow.run)

    return rows_by_job(session, job_ids, select_for, _record)


def runs_between(session: Session, since: float, until: float) -> dict[str, list[JobRun]]:
    """Runs that overlap ``[since, until]``, per job, oldest first (the status page's
    timeline; one query)."""
    stmt = (
        select(RunRow)
        .where(RunRow.start_time <= until, (RunRow.end_time.is_(None)) | (RunRow.end_time >= since))
        .order_by(RunRow.job_id, RunRow.run)
    )
    return _by_job(session.scalars(stmt), {})
