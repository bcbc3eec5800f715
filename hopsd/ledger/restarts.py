"""A restart measured whole: from hops's decision to stop a job to its first iteration after.

The probe measures two parts of a restart (saving the checkpoint, and start to
first iteration), but a move costs more than their sum: the requeue waits for
the checkpoint report, the held job waits for its release, Slurm launches it
(prolog, the node still cleaning up the last run). Measured on the test
cluster a move cost 4-6 s of no progress while the two parts summed to
0.2-1.4 s, so the planner moved short jobs far too often. Measured whole:

* a **move** (stop and start in one decision): first iteration of the new
  run minus the decision;
* a **stop** (preemption, the end of a profiling run, a relaunch) and a later
  start: from the decision to the old run's end, plus from the release that
  started the new run to its first iteration (the wait in between is queueing,
  charged as waiting).

Each job keeps its latest; a new job of a known model starts from the median
of the latest earlier jobs of that model.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from hopsd.ledger.models import AllocationRow, IntentRow, JobRow, RunRow
from hopsd.ledger.records import AllocationReason, IntentAction, IntentState
from hopsd.ledger.runs import PROFILING, RUN, run_row

#: A "restart" longer than this was not one (a job held by an admin, a lost report).
MAX_RESTART_S = 3600.0
#: How many of a model's latest jobs its median restart is taken over.
MODEL_SAMPLE = 20
_STOPS = (IntentAction.NOTICE, IntentAction.REQUEUE_HOLD)


def whole_restart_s(
    session: Session, job_id: str, run: int, first_iteration_at: float
) -> float | None:
    """What the restart into ``run`` cost the job, whole; None when hops did not cause it
    or what it needs is not recorded (see the module docstring)."""
    if run <= 0:
        return None
    stmt = (
        select(IntentRow)
        .where(
            IntentRow.job_id == job_id,
            IntentRow.action.in_([*_STOPS, IntentAction.RELEASE]),
            IntentRow.state == IntentState.DONE,
        )
        .order_by(IntentRow.id)
    )
    rows = list(session.scalars(stmt))
    stops = [r for r in rows if r.action in _STOPS and r.payload.get("restarts") == run - 1]
    if not stops:
        return None
    decided = min(r.created_at for r in stops)
    if stops[0].payload.get("kind") == "move":
        whole = first_iteration_at - decided
    else:
        old = run_row(session, job_id, run - 1)
        releases = [
            r.created_at
            for r in rows
            if r.action == IntentAction.RELEASE
            and r.payload.get("run") == run
            and r.created_at <= first_iteration_at
        ]
        if old is None or old.end_time is None or not releases:
            return None
        whole = max(old.end_time - decided, 0.0) + (first_iteration_at - max(releases))
    return whole if 0.0 <= whole <= MAX_RESTART_S else None


def model_restart_s(session: Session, model_name: str) -> float | None:
    """The median whole restart of the latest jobs of a model (None: none measured)."""
    if not model_name:
        return None
    stmt = (
        select(JobRow.restart_s)
        .where(JobRow.model_name == model_name, JobRow.restart_s.is_not(None))
        .order_by(JobRow.updated_at.desc())
        .limit(MODEL_SAMPLE)
    )
    values = [float(v) for v in session.scalars(stmt) if v is not None]
    return statistics.median(values) if values else None


#: How many of the latest first starts the launch median is taken over.
LAUNCH_SAMPLE = 50


def launch_s(session: Session) -> float | None:
    """What a first start costs until the job trains: the median, over the latest jobs,
    of hops's start decision to Slurm's start of the run, plus the job's start-up to
    its first iteration (what its probe reported). None: no job started yet.

    The forecast charges it to every job it starts (:mod:`hopsd.sim.forecast`).
    """
    stmt = (
        select(AllocationRow.job_id, AllocationRow.at)
        .where(AllocationRow.reason == AllocationReason.START)
        .order_by(AllocationRow.at.desc())
        .limit(LAUNCH_SAMPLE)
    )
    decided: dict[str, float] = {}
    for job_id, at in session.execute(stmt):
        decided[job_id] = min(float(at), decided.get(job_id, float(at)))
    if not decided:
        return None
    starts = session.execute(
        select(RunRow.job_id, RunRow.start_time, JobRow.startup_s)
        .join(JobRow, JobRow.id == RunRow.job_id)
        .where(RunRow.job_id.in_(list(decided)), RunRow.kind == RUN)
        .order_by(RunRow.run)
    )
    first: dict[str, float] = {}
    for job_id, start, startup in starts:
        if job_id in first or start < decided[job_id]:
            continue
        first[job_id] = float(start) - decided[job_id] + max(float(startup or 0.0), 0.0)
    costs = [c for c in first.values() if 0.0 <= c <= MAX_RESTART_S]
    return statistics.median(costs) if costs else None


def profiling_phase_s(session: Session, job_ids: Sequence[str] | None = None) -> float | None:
    """How long a new job's profiling phase lasts: the median, over the latest profiled
    jobs (or over ``job_ids``), of its first profiling run's start to its last one's end.
    None: none yet.

    The forecast holds a new job in profiling that long before it may be planned, and
    the replay profiles that long a replayed job whose own phase is unknown (where
    hopsd profiled; :func:`profiling_phases_s` gives the others their own).
    """
    phases = list(profiling_phases_s(session, job_ids).values())
    return statistics.median(phases) if phases else None


def profiling_phases_s(session: Session, job_ids: Sequence[str] | None = None) -> dict[str, float]:
    """Per profiled job of ``job_ids`` (else of the latest) whose runs ended: its own
    profiling phase, its first run's start to its last run's end (one over
    ``MAX_RESTART_S`` was no phase: a held job, a lost report).

    A job's phase is its own: a job whose start-up is slow (a real framework's import
    and initialisation) pays it in every run, so the replay profiles it that long
    rather than for the window's median phase.
    """
    stmt = (
        select(RunRow.job_id, RunRow.start_time, RunRow.end_time)
        .where(RunRow.kind == PROFILING, RunRow.end_time.is_not(None))
        .order_by(RunRow.id.desc())
    )
    if job_ids is not None:
        stmt = stmt.where(RunRow.job_id.in_(list(job_ids)))
    else:
        stmt = stmt.limit(LAUNCH_SAMPLE * 4)
    spans: dict[str, tuple[float, float]] = {}
    for job_id, start, end in session.execute(stmt):
        if end is None:
            continue
        lo, hi = spans.get(job_id, (float(start), float(end)))
        spans[job_id] = (min(lo, float(start)), max(hi, float(end)))
    return {job: hi - lo for job, (lo, hi) in spans.items() if 0.0 <= hi - lo <= MAX_RESTART_S}


def releases(
    session: Session, since: float | None = None, limit: int | None = None
) -> dict[tuple[str, int], float]:
    """When hops decided to release each (job, run) it released (its newest release
    intent for that run that was carried out): since ``since``, or the latest ``limit``."""
    stmt = select(IntentRow.job_id, IntentRow.payload, IntentRow.created_at).where(
        IntentRow.action == IntentAction.RELEASE, IntentRow.state == IntentState.DONE
    )
    if since is not None:
        stmt = stmt.where(IntentRow.created_at >= since)
    if limit is not None:
        stmt = stmt.order_by(IntentRow.id.desc()).limit(limit)
    out: dict[tuple[str, int], float] = {}
    for job_id, payload, created in session.execute(stmt):
        run = (payload or {}).get("run")
        if job_id is not None and run is not None:
            key = (str(job_id), int(run))
            out[key] = max(out.get(key, float(created)), float(created))
    return out


def start_lag_s(session: Session) -> float | None:
    """How long Slurm takes to start a run hops released: the median, over the latest
    releases carried out, of the release decision to Slurm's start of that run. None:
    no release yet. The forecast adds it to each start it foresees."""
    released = releases(session, limit=LAUNCH_SAMPLE)
    if not released:
        return None
    starts = session.execute(
        select(RunRow.job_id, RunRow.run, RunRow.start_time).where(
            RunRow.job_id.in_({j for j, _ in released})
        )
    )
    lags = [
        float(start) - released[(job_id, int(run))]
        for job_id, run, start in starts
        if (job_id, int(run)) in released
    ]
    lags = [lag for lag in lags if 0.0 <= lag <= MAX_RESTART_S]
    return statistics.median(lags) if lags else None


def profiled_jobs(session: Session, job_ids: Sequence[str]) -> frozenset[str]:
    """The jobs of ``job_ids`` that had a profiling run (hopsd profiled them)."""
    if not job_ids:
        return frozenset()
    stmt = select(RunRow.job_id).where(RunRow.job_id.in_(list(job_ids)), RunRow.kind == PROFILING)
    return frozenset(str(j) for j in session.scalars(stmt))
