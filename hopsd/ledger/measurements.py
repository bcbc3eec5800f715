"""Measurements: what jobs' reports taught the ledger, written and read.

:class:`MeasurementStore` is the one object the daemon's sensing writes a
job's reports through (measured layers, profiles, samples done, restart
costs); the functions below are the reads ``hops show``, the status page and
the planner's profile lookups make of the same tables.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from hopsd.core.throughput import PhaseProfile
from hopsd.ledger import restarts
from hopsd.ledger.errors import UnknownJobError
from hopsd.ledger.models import JobRow, ProfileRow, ThroughputLayer, ThroughputRow
from hopsd.ledger.records import ThroughputRecord
from hopsd.ledger.throughput_store import SqlThroughputStore, profile_from_row


class MeasurementStore(SqlThroughputStore):
    """What a job's own reports teach the ledger: measured layers, profiles, progress.

    The daemon's sensing writes through this one object: throughputs and
    profiles (the store's own methods), and the job's samples done and estimate
    source that come with the same reports.
    """

    def profile_iterations(self, job_id: str, gpu_type: str) -> int | None:
        """Iterations behind a job's profile on a type (0: derived), None without one."""
        row = self.session.get(ProfileRow, (job_id, gpu_type))
        return None if row is None else row.iterations

    def note_samples_done(self, job_id: str, samples_done: float) -> None:
        """Samples done only grow: a report older than the last one changes nothing."""
        row = self._job(job_id)
        row.samples_done = max(row.samples_done, samples_done)

    def note_estimate_source(self, job_id: str, source: str) -> None:
        self._job(job_id).estimate_source = source

    def note_restart_cost(
        self, job_id: str, *, checkpoint_s: float | None = None, startup_s: float | None = None
    ) -> None:
        """The latest checkpoint and start-up times a job's probe reported (its restart cost)."""
        row = self._job(job_id)
        if checkpoint_s is not None:
            row.checkpoint_s = checkpoint_s
        if startup_s is not None:
            row.startup_s = startup_s

    def note_whole_restart(self, job_id: str, run: int, first_iteration_at: float) -> None:
        """Measure the restart into ``run`` whole (:mod:`hopsd.ledger.restarts`) and keep it."""
        whole = restarts.whole_restart_s(self.session, job_id, run, first_iteration_at)
        if whole is not None:
            self._job(job_id).restart_s = whole

    def _job(self, job_id: str) -> JobRow:
        row = self.session.get(JobRow, job_id)
        if row is None:
            raise UnknownJobError(f"no job {job_id!r} in the ledger")
        return row


def profiled_types(session: Session, job_ids: Sequence[str]) -> dict[str, set[str]]:
    """Types each job was really profiled on (derived profiles have ``iterations = 0``)."""
    out: dict[str, set[str]] = {j: set() for j in job_ids}
    if not job_ids:
        return out
    stmt = select(ProfileRow.job_id, ProfileRow.gpu_type).where(
        ProfileRow.job_id.in_(list(job_ids)), ProfileRow.iterations > 0
    )
    for job_id, gpu_type in session.execute(stmt):
        out.setdefault(job_id, set()).add(gpu_type)
    return out


def model_profiles(
    session: Session, models: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], list[tuple[str, str, PhaseProfile]]]:
    """Measured profiles (``iterations > 0``) of every job of each (model name, per-GPU
    batch size): ``(job id, GPU type, profile)``, newest first (one query)."""
    out: dict[tuple[str, int], list[tuple[str, str, PhaseProfile]]] = {m: [] for m in models}
    names = sorted({name for name, _ in models})
    if not names:
        return out
    stmt = (
        select(ProfileRow, JobRow.model_name, JobRow.batch_size)
        .join(JobRow, JobRow.id == ProfileRow.job_id)
        .where(JobRow.model_name.in_(names), ProfileRow.iterations > 0)
        .order_by(ProfileRow.updated_at.desc(), ProfileRow.job_id)
    )
    for row, name, batch in session.execute(stmt):
        key = (name, int(batch))
        if key in out:
            out[key].append((row.job_id, row.gpu_type, profile_from_row(row)))
    return out


def profile(session: Session, job_id: str, gpu_type: str) -> tuple[PhaseProfile, int] | None:
    """A job's theory-layer profile on a type and the iterations behind it (0: derived)."""
    row = session.get(ProfileRow, (job_id, gpu_type))
    return None if row is None else (profile_from_row(row), row.iterations)


def job_throughputs(session: Session, job_id: str) -> list[ThroughputRecord]:
    """Every measurement of one job, all layers (``hops show``)."""
    stmt = select(ThroughputRow).where(ThroughputRow.job_id == job_id)
    return [
        ThroughputRecord(r.job_id, ThroughputLayer(r.layer), r.place, r.size, r.per_gpu)
        for r in session.scalars(stmt)
    ]


def throughputs(session: Session, layer: ThroughputLayer) -> list[ThroughputRecord]:
    """Every measurement of one layer (for per-server speed factors)."""
    stmt = select(ThroughputRow).where(ThroughputRow.layer == layer.value)
    return [
        ThroughputRecord(r.job_id, ThroughputLayer(r.layer), r.place, r.size, r.per_gpu)
        for r in session.scalars(stmt)
    ]
