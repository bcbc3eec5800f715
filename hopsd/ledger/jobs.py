"""Jobs in the ledger: adoption, the state machine, per-tick progress, core views.

Every function takes the caller's :class:`Session` and never commits: the daemon
wraps one tick in one ``with Session.begin():`` unit of work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal, cast

from sqlalchemy import Table, Text, bindparam, func, select, type_coerce
from sqlalchemy import update as sql_update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from hopsd.core.model import Configuration, Job
from hopsd.ledger.errors import DuplicateJobError, IllegalTransitionError, UnknownJobError
from hopsd.ledger.models import JobRow
from hopsd.ledger.records import (
    ACTIVE_STATES,
    CHUNK,
    LEGAL_TRANSITIONS,
    NOT_RUNNING_STATES,
    RECORD_DEFAULTS,
    TERMINAL_STATES,
    WAITING_STATES,
    JobProgress,
    JobRecord,
    JobSpec,
    JobState,
    JobUpdate,
    QueueEntry,
    config_from_parts,
    core_job,
    field_values,
    is_legal,
)
from hopsd.ledger.restarts import model_restart_s

S = JobState

__all__ = [
    "ACTIVE_STATES",
    "LEGAL_TRANSITIONS",
    "TERMINAL_STATES",
    "WAITING_STATES",
    "JobProgress",
    "JobSpec",
    "is_legal",
]


def add_job(
    session: Session,
    spec: JobSpec,
    now: float,
    *,
    check_id: bool = True,
    restart_s: float | Literal["read"] | None = "read",
) -> JobRow:
    """Adopt a job. The spec is validated by the core's own :class:`Job` rules.

    A caller adopting many jobs may have checked their ids already (``check_id``
    false) and read what restarts of the model cost (``restart_s``).
    """
    _validate(spec)
    if check_id and session.get(JobRow, spec.id) is not None:
        raise DuplicateJobError(f"job {spec.id!r} is already in the ledger")
    row = JobRow(**_new_values(session, spec, now, restart_s))
    session.add(row)
    return row


def insert_job(session: Session, spec: JobSpec, now: float, restart_s: float | None) -> JobRecord:
    """:func:`add_job` as one ``INSERT`` written at once, building no ORM row; the new
    job's record. For adoption, which adds thousands of jobs in a tick and changes
    few of them afterwards (a change loads the row). The caller made sure the id is free.
    """
    _validate(spec)
    values = _new_values(session, spec, now, restart_s)
    session.execute(_JOBS.insert(), values)
    return _record({n: values.get(n) for n in _RECORD_FIELDS})


def insert_jobs(
    session: Session, specs: Sequence[tuple[JobSpec, float | None]], now: float
) -> None:
    """:func:`insert_job` for many jobs (each with its model's restart cost) in one
    ``INSERT`` executed over all of them: adoption's backlog, not a statement per job."""
    for spec, _ in specs:
        _validate(spec)
    if specs:
        session.execute(_JOBS.insert(), [_new_values(session, s, now, c) for s, c in specs])


def _new_values(
    session: Session, spec: JobSpec, now: float, restart_s: float | Literal["read"] | None
) -> dict[str, Any]:
    """The columns a new job is written with (the others take their defaults)."""
    # A new job's counters and texts start empty, as a record reads them when empty;
    # each field of the spec is the column of its name, two of them stored converted.
    converted = {"demands": list(spec.demands), "lr_by_demand": _lr_map(spec.lr_by_demand)}
    return {
        **RECORD_DEFAULTS,
        **field_values(spec),
        **converted,
        # what restarts of earlier jobs of its model cost (hopsd.ledger.restarts)
        "model_restart_s": (
            model_restart_s(session, spec.model_name) if restart_s == "read" else restart_s
        ),
        "state_changed_at": now,
        "updated_at": now,
    }


def get_job(session: Session, job_id: str) -> JobRow | None:
    return session.get(JobRow, job_id)


def require_job(session: Session, job_id: str) -> JobRow:
    row = session.get(JobRow, job_id)
    if row is None:
        raise UnknownJobError(f"no job {job_id!r} in the ledger")
    return row


def job_by_slurm_id(session: Session, slurm_job_id: int) -> JobRow | None:
    return session.scalars(select(JobRow).where(JobRow.slurm_job_id == slurm_job_id)).first()


def jobs_in_states(session: Session, states: Iterable[JobState]) -> list[JobRow]:
    """The rows of the jobs in any of ``states``, oldest submission first: for a caller
    that changes them (:func:`records_in_states` reads without building rows)."""
    wanted = [JobState(s) for s in states]
    stmt = select(JobRow).where(JobRow.state.in_(wanted))
    return list(session.scalars(stmt.order_by(JobRow.submit_time, JobRow.id)))


def queue_entries(session: Session) -> list[QueueEntry]:
    """Every active job not running, by the fields the queue's order needs."""
    stmt = select(JobRow.id, JobRow.state, JobRow.latency_ratio, JobRow.submit_time).where(
        JobRow.state.in_(list(NOT_RUNNING_STATES))
    )
    return [QueueEntry(i, JobState(s), lr, t) for i, s, lr, t in session.execute(stmt)]


def queue_length(session: Session) -> int:
    """How many active jobs are not running (the queue :func:`queue_entries` reads)."""
    stmt = (
        select(func.count()).select_from(JobRow).where(JobRow.state.in_(list(NOT_RUNNING_STATES)))
    )
    return int(session.scalar(stmt) or 0)


def active_jobs(session: Session) -> list[JobRow]:
    """Every job not yet done, failed or cancelled: what a tick reasons about."""
    return jobs_in_states(session, ACTIVE_STATES)


def transition(job: JobRow, requested: JobState, now: float, reason: str = "") -> bool:
    """Move a job along the state machine; returns False when it already was there.

    Re-observing the current state is a no-op (a restarted daemon reconciles the
    same Slurm state twice). Entering ``running`` records the first start or
    counts a restart; entering a terminal state records the end time. The
    planner's last sentence (``plan_reason``) was about the state left, so it
    goes; a job that waits or has ended holds no GPUs, so its placement goes.
    """
    current = JobState(job.state)
    requested = JobState(requested)
    if requested == current:
        return False
    if requested not in LEGAL_TRANSITIONS[current]:
        raise IllegalTransitionError(job.id, current.value, requested.value)
    if requested == S.RUNNING:
        if job.first_start_time is None:
            job.first_start_time = now
        elif current in (S.PREEMPTED, S.REQUEUED):
            job.restarts = (job.restarts or 0) + 1
    if requested in TERMINAL_STATES:
        job.end_time = now
    if requested in TERMINAL_STATES or requested in WAITING_STATES:
        job.current_gpu_type = None
        job.current_parts = None
    job.plan_reason = ""
    job.state = requested
    job.state_reason = reason
    job.state_changed_at = now
    job.updated_at = now
    return True


_PROGRESS_FIELDS = (
    "wait_time",
    "service_gpu_s",
    "service_norm",
    "samples_done",
    "estimate_source",
    "latency_ratio",
)


def apply_progress(session: Session, updates: Sequence[JobProgress], now: float) -> int:
    """Write one tick's counters of many jobs; returns how many jobs were updated.

    One SELECT loads the rows (reusing those already in the session), then the
    unit of work batches the UPDATEs, so a 2000-job tick is a handful of round
    trips rather than 2000.
    """
    rows = load_jobs(session, [u.job_id for u in updates])
    for update in updates:
        row = rows.get(update.job_id)
        if row is None:
            raise UnknownJobError(f"no job {update.job_id!r} in the ledger")
        for name in _PROGRESS_FIELDS:
            value = getattr(update, name)
            if value is not None:
                setattr(row, name, value)
        row.updated_at = now
    return len(updates)


def load_jobs(session: Session, job_ids: Sequence[str], chunk: int = 900) -> dict[str, JobRow]:
    """Rows of many jobs by id: those already in the session as they are, the rest
    in a few ``IN`` queries (chunked for driver parameter limits).

    A tick loads the active jobs once and then updates them; re-reading 2000
    rows (and re-decoding their JSON) only to find the same objects would double
    the tick's read cost.
    """
    out: dict[str, JobRow] = {}
    missing: list[str] = []
    for job_id in dict.fromkeys(job_ids):
        cached = session.identity_map.get(identity_key(JobRow, job_id))
        if isinstance(cached, JobRow):
            out[job_id] = cached
        else:
            missing.append(job_id)
    for start in range(0, len(missing), chunk):
        part = missing[start : start + chunk]
        for row in session.scalars(select(JobRow).where(JobRow.id.in_(part))):
            out[row.id] = row
    return out


#: The jobs table itself, for statements that build no ORM row.
_JOBS = cast(Table, JobRow.__table__)

#: The fields a :class:`JobUpdate` may set (all but the job's id), in its order.
UPDATABLE = tuple(f for f in JobUpdate.__dataclass_fields__ if f != "job_id")


def write_updates(session: Session, updates: Sequence[JobUpdate]) -> int:
    """Write many jobs' updates now: one executemany ``UPDATE`` per set of fields given.

    A tick sets the counters and scores of every active job; through the ORM
    each row cost its own change tracking and flush bookkeeping, about a
    second at ten thousand jobs. The rows the session holds take the written
    values as their loaded state (no change is left to flush again), so what
    the session reads afterwards is what the database holds. Jobs the ledger
    does not hold are skipped. Returns how many updates set anything.
    """
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for change in updates:
        values = {n: v for n in UPDATABLE if (v := getattr(change, n)) is not None}
        if values:
            given = {"k_id": change.job_id, **{f"v_{n}": v for n, v in values.items()}}
            groups.setdefault(tuple(values), []).append(given)
    for names, params in groups.items():
        _write(session, names, params)
    return sum(len(p) for p in groups.values())


def write_values(session: Session, name: str, values: Mapping[str, Any]) -> int:
    """:func:`write_updates` of one field: ``values`` by job id (None leaves a job's as it is)."""
    params = [{"k_id": k, f"v_{name}": v} for k, v in values.items() if v is not None]
    _write(session, (name,), params)
    return len(params)


def _write(session: Session, names: Sequence[str], params: Sequence[dict[str, Any]]) -> None:
    """One executemany ``UPDATE`` of the fields ``names`` (``k_id``: the job, ``v_NAME``: its
    values), the rows the session holds kept in step."""
    if not params or not names:
        return
    if session.new:  # a row added but not yet inserted would miss the UPDATE
        session.flush()
    columns = _JOBS.c
    stmt = (
        sql_update(_JOBS)
        .where(columns.id == bindparam("k_id"))
        .values({columns[n]: bindparam(f"v_{n}", type_=columns[n].type) for n in names})
    )
    session.execute(stmt, list(params))
    _keep_in_step(session, names, params)


def _keep_in_step(session: Session, names: Sequence[str], params: Sequence[dict[str, Any]]) -> None:
    """Give the rows the session holds the values just written, as loaded (not changed).

    The session holds few of the rows a tick writes (those it changed), so its rows are
    looked up among the written ones rather than the other way round.
    """
    held = [r for r in session.identity_map.values() if isinstance(r, JobRow)]
    if not held:
        return
    by_id = {given["k_id"]: given for given in params}
    for row in held:
        given = by_id.get(row.__dict__.get("id"))
        if given is not None:
            for name in names:
                set_committed_value(row, name, given[f"v_{name}"])


def set_current_config(job: JobRow, config: Configuration | None) -> None:
    """Record where a running job holds GPUs now (None when it holds none)."""
    if config is None:
        job.current_gpu_type = None
        job.current_parts = None
        return
    job.current_gpu_type = config.gpu_type
    job.current_parts = [[node, gpus] for node, gpus in config.parts]


def current_config(job: JobRow) -> Configuration | None:
    return config_from_json(job.current_gpu_type, job.current_parts)


def config_from_json(gpu_type: str | None, parts: list[list[Any]] | None) -> Configuration | None:
    """Rebuild a :class:`Configuration` from its stored ``[[node, gpus], ...]`` form."""
    return config_from_parts(gpu_type, parts)


_RECORD_FIELDS = tuple(JobRecord.__dataclass_fields__)


def record_of(job: JobRow) -> JobRecord:
    """A frozen copy of a row, as the unit of work hands it out.

    A tick copies every active job several times, so this reads the loaded
    values straight from the row (an attribute not loaded yet is fetched as
    usual) and fills the record's fields at once instead of through the
    frozen dataclass's per-field ``__init__``: some 20 times cheaper.
    """
    loaded = job.__dict__
    return _record({n: loaded[n] if n in loaded else getattr(job, n) for n in _RECORD_FIELDS})


def active_records(session: Session) -> list[JobRecord]:
    """:func:`active_jobs` as records read straight from the table: no ORM row is built.

    A tick reads every active job twice; at ten thousand jobs building and
    tracking their rows was about half a second each time, while a tick goes
    on to change only the few that moved.
    """
    return records_in_states(session, ACTIVE_STATES)


def records_in_states(
    session: Session,
    states: Iterable[JobState],
    users: Iterable[str] | None = None,
    slurm_ids: Iterable[int] | None = None,
) -> list[JobRecord]:
    """Jobs in any of ``states`` (of ``users``, with ``slurm_ids``: None is any), oldest
    submission first, as records read straight from the table: no ORM row is built.

    A user or id list longer than :data:`~hopsd.ledger.records.CHUNK` is not sent
    (SQLite bounds a statement's parameters): it filters the rows read instead.
    Changes the session has not written yet are written first, so the records
    are what the rows would have said. The status page and ``hops fairness``
    read every active job this way: at 12,000 jobs 0.14-0.19 s against 0.38-0.43 s
    through ORM rows, which the end of the transaction then had to expire too.
    """
    session.flush()
    table = _JOBS
    wanted = [JobState(s) for s in states]
    # the JSON columns as stored: a queue repeats a few demand sets, decoded once each
    columns = [
        type_coerce(table.c[n], Text).label(n) if n in _JSON_FIELDS else table.c[n]
        for n in _RECORD_FIELDS
    ]
    stmt = select(*columns).where(table.c.state.in_(wanted))
    unsent: list[tuple[str, set[Any]]] = []  # too long to send: filtered below
    for name, values in (("user", users), ("slurm_job_id", slurm_ids)):
        if values is None:
            continue
        chosen = set(values)
        if len(chosen) > CHUNK:
            unsent.append((name, chosen))
            continue
        stmt = stmt.where(table.c[name].in_(sorted(chosen)))
    out = []
    for row in session.execute(stmt.order_by(table.c.submit_time, table.c.id)):
        values = dict(zip(_RECORD_FIELDS, row, strict=True))
        if not all(values[name] in chosen for name, chosen in unsent):
            continue
        for name in _JSON_FIELDS:
            if isinstance(stored := values[name], str):
                values[name] = _json_text(stored)
        out.append(_record(values))
    return out


#: The job columns stored as JSON.
_JSON_FIELDS = ("demands", "lr_by_demand", "current_parts")


@lru_cache(maxsize=4096)
def _json_text(text: str) -> Any:
    """A JSON column's stored text, decoded (shared: :func:`_record` copies what it keeps)."""
    return json.loads(text)


def _record(values: dict[str, Any]) -> JobRecord:
    """The record of a row's column values (``values`` is taken over)."""
    for name, default in RECORD_DEFAULTS.items():
        if values[name] is None:
            values[name] = default
    values["demands"] = tuple(int(d) for d in values["demands"])
    if values["lr_by_demand"] is not None:
        values["lr_by_demand"] = dict(values["lr_by_demand"])
    if type(values["state"]) is not JobState:
        values["state"] = JobState(values["state"])
    parts = values["current_parts"]
    if parts is not None:
        values["current_parts"] = tuple((str(n), int(g)) for n, g in parts)
    record = object.__new__(JobRecord)
    record.__dict__.update(values)  # complete, and never changed afterwards
    return record


def to_core_job(job: JobRow) -> Job:
    """The planner's view of a ledger job (the core never sees ORM rows)."""
    return core_job(record_of(job))


def finished_latency_ratios(session: Session, since: float) -> list[float]:
    """Latency ratios of jobs that ran and ended at or after ``since`` (input of RAQLR).

    A job cancelled before it ever started has no run time to compare its wait
    with; counting it would let a queue of abandoned jobs inflate RAQLR.
    """
    stmt = (
        select(JobRow.latency_ratio)
        .where(
            JobRow.end_time >= since,
            JobRow.latency_ratio.is_not(None),
            JobRow.first_start_time.is_not(None),
        )
        .order_by(JobRow.end_time)
    )
    return [float(v) for v in session.scalars(stmt) if v is not None]


def _validate(spec: JobSpec) -> None:
    Job(
        id=spec.id,
        demands=tuple(spec.demands),
        total_samples=spec.total_samples,
        batch_size=spec.batch_size,
        params=spec.params,
    )


def _lr_map(lrs: Mapping[int, float] | None) -> dict[str, float] | None:
    # JSON object keys are strings on both backends; store them so explicitly.
    return None if lrs is None else {str(k): float(v) for k, v in lrs.items()}


def record_finished_run(
    session: Session, job_id: str, slurm_state: str, ended_at: float, reason: str
) -> bool:
    """End a job whose last run finished on its own although hops then requeued it.

    ``slurm_state`` is the state the run ended in (``COMPLETED`` -> done, else
    failed). Returns False when the job is unknown or already ended.
    """
    row = session.get(JobRow, job_id)
    if row is None or JobState(row.state) in TERMINAL_STATES:
        return False
    target = S.DONE if slurm_state == "COMPLETED" else S.FAILED
    transition(row, target, ended_at, reason)
    if target == S.DONE:
        row.samples_done = max(row.samples_done, row.total_samples)
    return True


def run_reported_complete(session: Session, job_id: str) -> bool:
    """The job itself reported all its samples done (probe or progress file)."""
    row = session.get(JobRow, job_id)
    return row is not None and row.total_samples > 0 and row.samples_done >= row.total_samples


def first_submit_time(session: Session) -> float | None:
    """When the ledger's first job was submitted (None: no job yet): since when arrivals
    are on record."""
    return session.scalar(select(func.min(JobRow.submit_time)))


def finished_jobs(session: Session, since: float, until: float) -> list[JobRow]:
    """Jobs done, failed or cancelled with an end time in ``[since, until]``, in end order."""
    stmt = (
        select(JobRow)
        .where(
            JobRow.state.in_([JobState.DONE, JobState.FAILED, JobState.CANCELLED]),
            JobRow.end_time >= since,
            JobRow.end_time <= until,
        )
        .order_by(JobRow.end_time, JobRow.id)
    )
    return list(session.scalars(stmt))
