"""The ledger's boundary: a unit of work that takes and returns plain records.

The daemon and the CLI never see a session, a query or an ORM row: they open a
:class:`Ledger`, run one :meth:`Ledger.unit` (committed when the block ends
without an exception, rolled back otherwise) or one :meth:`Ledger.reading`
(always rolled back), and call the :class:`Unit`'s methods, which return frozen
records from :mod:`hopsd.ledger.records`. Every query hops makes lives behind
this class, so what a tick costs in SQL can be read (and tested) in one place.

Within one unit a job's record is rebuilt from the row the unit holds, so
re-reading a job after changing it costs no query. The unit keeps the rows it
loaded alive: the session's identity map holds them only weakly, and a row
dropped there would be fetched again, one query per job.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.model import Configuration
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.ledger import (
    allocations,
    intents,
    jobs,
    lease,
    measurements,
    predictions,
    refusals,
    restarts,
    rounds,
    runs,
    usage,
)
from hopsd.ledger.engine import SqliteBegin, make_engine, make_sessionmaker, redact
from hopsd.ledger.errors import LedgerError, UnknownJobError
from hopsd.ledger.history import LedgerHistory, read_history
from hopsd.ledger.measurements import MeasurementStore
from hopsd.ledger.models import (
    JobRow,
    RoundRow,
)
from hopsd.ledger.records import (
    AllocationReason,
    ForeseenLine,
    IntentAction,
    IntentRecord,
    IntentRequest,
    JobRecord,
    JobSpec,
    JobState,
    JobUpdate,
    LeaseInfo,
    Prediction,
    QueueEntry,
    RoundRecord,
    RoundSummary,
    SlurmIds,
    Users,
)
from hopsd.ledger.retention import Pruned, prune
from hopsd.ledger.throughput_store import (
    load_throughput_store,
)

#: Database errors the engine did not translate into a ledger error (a bug, or a
#: failure hops does not know how to name).
DRIVER_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError,)
#: What a caller may meet when the database fails: the ledger's own errors too.
LEDGER_FAILURES: tuple[type[BaseException], ...] = (LedgerError, *DRIVER_ERRORS)

_UPDATABLE = jobs.UPDATABLE


#: Raises (``FencedError``) unless the unit's daemon still holds the lease's token.
Fence = Callable[["Unit"], None]

P = ParamSpec("P")
R = TypeVar("R")


def _on_session(fn: Callable[Concatenate[Session, P], R]) -> Callable[Concatenate[Unit, P], R]:
    """The ledger function ``fn`` as a :class:`Unit` method: the unit's session goes first.

    Most of the unit's methods only pass their session on; bound this way, each
    is its function's own signature and docstring, not a copy of them to keep alike.
    """

    @functools.wraps(fn)
    def method(self: Unit, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return fn(self._session, *args, **kwargs)

    return method


class Unit:
    """One transaction's view of the ledger (see the module docstring)."""

    def __init__(self, session: Session, fence: Fence | None = None) -> None:
        self._session = session
        self._held: dict[str, JobRow] = {}
        self._model_restart: dict[str, float | None] = {}  # per model, read once (adoption)
        self._fence = fence

    # -- jobs --------------------------------------------------------------------------

    def active_jobs(self) -> list[JobRecord]:
        """Every job not yet done, failed or cancelled, oldest submission first."""
        return [self._hold(r) for r in jobs.active_jobs(self._session)]

    def active_records(self) -> list[JobRecord]:
        """:meth:`active_jobs` without keeping their rows (:func:`jobs.active_records`): for a
        caller that changes few of them. A job changed later is loaded then; :meth:`jobs`
        loads many at once."""
        return jobs.active_records(self._session)

    def jobs_in_states(
        self, states: Iterable[JobState], users: Users = None, slurm_ids: SlurmIds = None
    ) -> list[JobRecord]:
        """Jobs in any of ``states`` (see :func:`jobs.records_in_states`), as records whose
        rows this unit does not keep: what the read-only views ask for."""
        return jobs.records_in_states(self._session, states, users, slurm_ids)

    def job_lines(
        self, states: Iterable[JobState], users: Users = None, slurm_ids: SlurmIds = None
    ) -> list[ForeseenLine]:
        """The status lines of jobs in any of ``states``, each with its newest forecast:
        whole records, which are lines (the CLI's driver read builds only the lines'
        columns, the forecast joined in the same query)."""
        records = self.jobs_in_states(states, users, slurm_ids)
        said = self.latest_predictions([r.id for r in records])
        return [(r, p.forecast if (p := said.get(r.id)) else None) for r in records]

    def queue_entries(self) -> list[QueueEntry]:
        """Every active job not running, as the queue's order needs it."""
        return jobs.queue_entries(self._session)

    def queue_length(self) -> int:
        """How many active jobs are not running."""
        return jobs.queue_length(self._session)

    def job(self, job_id: str) -> JobRecord | None:
        """The job as it stands in this unit (no query when it was read before)."""
        row = self._held.get(job_id) or self._session.get(JobRow, job_id)
        return None if row is None else self._hold(row)

    def jobs(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        """Many jobs by id: those read before from memory, the rest in a few queries."""
        return {j: jobs.record_of(row) for j, row in self._load(job_ids).items()}

    def current(self, records: Iterable[JobRecord]) -> list[JobRecord]:
        """Fresh copies of records read earlier in this unit (changes since included)."""
        return [jobs.record_of(self._row(r.id)) for r in records]

    def refresh(self, record: JobRecord) -> JobRecord:
        """A fresh copy of one record read earlier in this unit."""
        return jobs.record_of(self._row(record.id))

    def jobs_by_slurm_ids(self, slurm_ids: Sequence[int]) -> dict[int, JobRecord]:
        stmt = select(JobRow).where(JobRow.slurm_job_id.in_(list(slurm_ids)))
        return {
            int(r.slurm_job_id): self._hold(r)
            for r in self._session.scalars(stmt)
            if r.slurm_job_id is not None
        }

    def add_job(self, spec: JobSpec, now: float, *, free: bool = False) -> JobRecord:
        """``free``: the caller made sure the id is free. A model's restart cost is read once."""
        cost = self._restart_of(spec.model_name)
        if free:  # adoption's thousands: written at once, no row kept (a change loads it)
            return jobs.insert_job(self._session, spec, now, cost)
        return self._hold(jobs.add_job(self._session, spec, now, check_id=not free, restart_s=cost))

    def add_jobs(self, specs: Sequence[JobSpec], now: float) -> None:
        """:meth:`add_job` (``free``) for many jobs in one statement; no record is returned."""
        jobs.insert_jobs(self._session, [(s, self._restart_of(s.model_name)) for s in specs], now)

    def _restart_of(self, model: str) -> float | None:
        """What restarts of the model's earlier jobs cost, read once per model (adoption)."""
        if model not in self._model_restart:
            self._model_restart[model] = restarts.model_restart_s(self._session, model)
        return self._model_restart[model]

    def forget(self, job_ids: set[str]) -> None:
        """Drop jobs a rolled-back savepoint added from what this unit holds."""
        self._held = {k: v for k, v in self._held.items() if k not in job_ids}

    def transition(self, job_id: str, state: JobState, now: float, reason: str = "") -> bool:
        """Move a job along the state machine (see :func:`hopsd.ledger.jobs.transition`);
        False when it already was there. Read it again with :meth:`refresh`."""
        return jobs.transition(self._row(job_id), state, now, reason)

    def update_job(self, update: JobUpdate) -> None:
        """Set the fields the update gives; the others (``updated_at`` too) stay as they are.

        Read the job again with :meth:`refresh` when its new values are needed.
        """
        self._apply(update)

    def update_jobs(self, updates: Sequence[JobUpdate]) -> None:
        """Many updates: one query loads the jobs not read before in this unit.

        An update of a job the ledger does not hold is skipped.
        """
        known = self._load([u.job_id for u in updates])
        for update in updates:
            if update.job_id in known:
                self._apply(update)

    def write_updates(self, updates: Sequence[JobUpdate]) -> None:
        """Many updates written at once (:func:`hopsd.ledger.jobs.write_updates`): for the
        fields a tick sets on every active job. Unlike :meth:`update_jobs` they are not
        held back until the flush, so :meth:`discard` cannot take them back.
        """
        jobs.write_updates(self._session, updates)

    def write_values(self, name: str, values: Mapping[str, Any]) -> None:
        """:meth:`write_updates` of one field (a :class:`JobUpdate` field's ``name``), by job
        id; None leaves a job's value as it is."""
        if name not in _UPDATABLE:
            raise ValueError(f"{name!r} is not a field a job update sets")
        jobs.write_values(self._session, name, values)

    def set_placement(self, job_id: str, config: Configuration | None) -> None:
        """Record where a job holds GPUs now (None when it holds none)."""
        jobs.set_current_config(self._row(job_id), config)

    def detach_slurm_id(self, job_id: str) -> None:
        """Free a job's Slurm id for another job (written at once: the id is unique)."""
        self._row(job_id).slurm_job_id = None
        self._session.flush()

    def job_id_taken(self, job_id: str) -> bool:
        return job_id in self._held or self._session.get(JobRow, job_id) is not None

    def discard(self, job_id: str) -> None:
        """Drop the job's changes not yet written (the next read loads it afresh)."""
        row = self._held.get(job_id)
        if row is not None:
            self._session.expire(row)

    def finished_latency_ratios(self, since: float) -> list[float]:
        # not bound with _on_session: in the class body ``jobs`` is the method, not the module
        return jobs.finished_latency_ratios(self._session, since)

    def first_submit_time(self) -> float | None:
        return jobs.first_submit_time(self._session)

    def finished_jobs(self, since: float, until: float) -> list[JobRecord]:
        """Jobs that ended in ``[since, until]`` (``hops history``), in end order."""
        return [jobs.record_of(r) for r in jobs.finished_jobs(self._session, since, until)]

    def record_finished_run(
        self, job_id: str, slurm_state: str, ended_at: float, reason: str
    ) -> bool:
        if not jobs.record_finished_run(self._session, job_id, slurm_state, ended_at, reason):
            return False
        how = runs.ended_by_slurm(slurm_state)
        runs.close_run(self._session, job_id, ended_at, how, amend=True)
        return True

    def run_reported_complete(self, job_id: str) -> bool:
        return jobs.run_reported_complete(self._session, job_id)

    # -- intents -----------------------------------------------------------------------

    def pending_intents(self, job_id: str | None = None) -> list[IntentRecord]:
        return [intents.intent_record(r) for r in intents.pending_intents(self._session, job_id)]

    def record_intents(
        self, requests: Sequence[IntentRequest], round_id: int | None, now: float
    ) -> list[IntentRecord]:
        self._fenced()
        return intents.record_intent_records(self._session, requests, round_id, now)

    def record_intent(
        self,
        job_id: str | None,
        action: IntentAction,
        payload: Mapping[str, Any],
        round_id: int | None,
        now: float,
    ) -> IntentRecord:
        self._fenced()
        row = intents.record_intent(self._session, job_id, action, payload, round_id, now=now)
        return intents.intent_record(row)

    def note_notice_sent(self, intent_id: int, at: float) -> None:
        intents.note_notice_sent(self._session, intent_id, at)

    def mark_done(self, intent_id: int, now: float) -> None:
        intents.mark_done(self._session, intent_id, now)

    def mark_done_many(self, intent_ids: Sequence[int], now: float) -> int:
        return intents.mark_done_many(self._session, intent_ids, now)

    def mark_failed(self, intent_id: int, error: str, now: float) -> None:
        intents.mark_failed(self._session, intent_id, error, now)

    def mark_abandoned(self, intent_id: int, reason: str, now: float) -> None:
        intents.mark_abandoned(self._session, intent_id, reason, now)

    relaunches = _on_session(intents.relaunches)
    released_by_hops = _on_session(intents.released_by_hops)
    released_by_hops_among = _on_session(intents.released_by_hops_among)
    last_requeue_was_relaunch = _on_session(intents.last_requeue_was_relaunch)

    # -- runs ----------------------------------------------------------------------------

    def open_run(
        self, job_id: str, run: int, kind: str, config: Configuration | None, start: float
    ) -> None:
        """Record a run hopsd sees started (see :func:`hopsd.ledger.runs.open_run`); an
        earlier run replaced since the last look ended as the job's latest requeue says."""

        why = functools.partial(self._requeue_of, job_id)
        runs.open_run(self._session, job_id, run, kind, config, start, why)

    def _requeue_of(self, job_id: str, run: int | None) -> tuple[str, float | None]:
        """Why run ``run`` of the job ended by a requeue, and when hops took that requeue."""
        payload, taken_at = self._requeue_by_hops(job_id, run)
        return runs.ended_by_requeue(payload), taken_at

    def _requeue_by_hops(
        self, job_id: str, run: int | None
    ) -> tuple[dict[str, Any] | None, float | None]:
        """hops's requeue of run ``run`` (any run when None): its payload and when it was
        taken; (None, None) when hops did not requeue that run."""
        found = intents.last_requeue_done(self._session, job_id)
        if found is None or (run is not None and found[0].get("restarts") != run):
            return None, None
        return found

    close_run = _on_session(runs.close_run)

    def close_requeued_run(self, job_id: str, end: float, run: int | None = None) -> str | None:
        """End the job's open run as its requeue says (moved, preempted, ...); the reason
        hops gave that requeue, None when hops did not requeue run ``run``."""
        payload, taken_at = self._requeue_by_hops(job_id, run)
        # the run ended when hops requeued it, not when hopsd next looked
        ended = runs.ended_by_requeue(payload)
        runs.close_run(self._session, job_id, min(end, taken_at or end), ended)
        return None if payload is None else str(payload.get("reason") or "") or None

    job_runs = _on_session(runs.runs_of)
    runs_between = _on_session(runs.runs_between)

    def record_predictions(self, made: Iterable[Prediction]) -> int:
        """Write the forecast's predictions that changed (:mod:`hopsd.ledger.predictions`)."""
        return predictions.write(self._session, made)

    latest_predictions = _on_session(predictions.latest)
    job_predictions = _on_session(predictions.of_jobs)
    launch_s = _on_session(restarts.launch_s)
    profiled_jobs = _on_session(restarts.profiled_jobs)
    start_lag_s = _on_session(restarts.start_lag_s)
    profiling_phase_s = _on_session(restarts.profiling_phase_s)
    profiling_phases_s = _on_session(restarts.profiling_phases_s)
    notices_since = _on_session(intents.notices_since)

    def releases_since(self, since: float) -> dict[tuple[str, int], float]:
        """When hops decided to release each (job, run) since ``since``
        (:func:`restarts.releases`)."""
        return restarts.releases(self._session, since=since)

    queue_lengths_since = _on_session(rounds.queue_lengths_since)
    full_round_times = _on_session(rounds.full_round_times)

    # -- rounds and allocations --------------------------------------------------------

    next_round_number = _on_session(rounds.next_round_number)

    def record_round(self, summary: RoundSummary) -> RoundRecord:
        row: RoundRow = rounds.record_round(self._session, summary)
        return RoundRecord(row.id, row.number, row.shadow)

    def recent_rounds(self, limit: int = 20) -> list[RoundSummary]:
        """The latest enacting rounds, newest first (for the status page)."""
        names = [f.name for f in dataclasses.fields(RoundSummary)]
        return [
            RoundSummary(**{n: getattr(row, n) for n in names})
            for row in rounds.recent_rounds(self._session, limit)
        ]

    def record_allocation(
        self,
        round_id: int | None,
        job_id: str,
        reason: AllocationReason,
        config: Configuration | None,
        now: float,
    ) -> None:
        allocations.record_allocation(self._session, round_id, job_id, reason, config, now)

    record_allocations = _on_session(allocations.record_allocations)
    placement_before_last_move = _on_session(allocations.placement_before_last_move)
    start_counts = _on_session(allocations.start_counts)
    latest_targets = _on_session(allocations.latest_targets)
    note_observed_start = _on_session(allocations.note_observed_start)
    placements = _on_session(allocations.placements)
    latest_round = _on_session(rounds.latest_round)

    # -- usage -------------------------------------------------------------------------

    def add_usage(self, user: str, account: str, at: float, gpu_s: float, norm: float) -> None:
        usage.add_usage(self._session, user, account, at, gpu_s, norm)

    def decayed_usage(
        self, now: float, half_life_s: float
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Decayed, speed-normalised usage per user and per account (one aggregate query)."""
        return usage.decayed_usage_by_owner(self._session, now, half_life_s)

    # -- measurements ------------------------------------------------------------------

    def store(self, now: float = 0.0) -> MeasurementStore:
        """The measured layers of this unit, read and written row by row (``now`` stamps)."""
        return MeasurementStore(self._session, now)

    def throughput_snapshot(self, job_ids: Sequence[str]) -> InMemoryThroughputStore:
        """Everything measured about the jobs, in memory (two queries per 900 jobs)."""
        return load_throughput_store(self._session, job_ids)

    profiled_types = _on_session(measurements.profiled_types)
    model_profiles = _on_session(measurements.model_profiles)
    profile = _on_session(measurements.profile)
    job_throughputs = _on_session(measurements.job_throughputs)
    throughputs = _on_session(measurements.throughputs)

    # -- the lease ---------------------------------------------------------------------

    def acquire_lease(self, holder: str, ttl_s: float, now: float, name: str) -> bool:
        return lease.acquire_lease(self._session, holder, ttl_s, now, name)

    def ensure_lease(self, holder: str, ttl_s: float, now: float) -> LeaseInfo:
        return lease.ensure_lease(self._session, holder, ttl_s, now)

    def renew_lease(self, holder: str, ttl_s: float, now: float, name: str) -> LeaseInfo:
        return lease.renew_lease(self._session, holder, ttl_s, now, name)

    check_fence = _on_session(lease.check_fence)

    def _fenced(self) -> None:
        """Intents are recorded only under the fencing token of the daemon that leads."""
        if self._fence is not None:
            self._fence(self)

    def release_lease(self, holder: str) -> bool:
        return lease.release_lease(self._session, holder)

    # -- refusals -----------------------------------------------------------------------

    record_refusal = _on_session(refusals.record_refusal)
    refusal_ids = _on_session(refusals.refusal_ids)
    drop_refusals = _on_session(refusals.drop_refusals)
    refusals = _on_session(refusals.refusals)
    lease_info = _on_session(lease.lease_info)

    # -- history -----------------------------------------------------------------------

    def history(self, since: float, until: float) -> LedgerHistory:
        return read_history(self._session, since, until)

    # -- transaction control -----------------------------------------------------------

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Writes inside stand or fall together (a SAVEPOINT)."""
        with self._session.begin_nested():
            yield

    def _row(self, job_id: str) -> JobRow:
        row = self._held.get(job_id) or self._session.get(JobRow, job_id)
        if row is None:
            raise UnknownJobError(f"no job {job_id!r} in the ledger")
        self._held[job_id] = row
        return row

    def _load(self, job_ids: Sequence[str]) -> dict[str, JobRow]:
        missing = [j for j in job_ids if j not in self._held]
        if missing:
            self._held.update(jobs.load_jobs(self._session, missing))
        return {j: self._held[j] for j in job_ids if j in self._held}

    def _apply(self, update: JobUpdate) -> JobRow:
        row = self._row(update.job_id)
        for name in _UPDATABLE:
            value = getattr(update, name)
            if value is not None:
                setattr(row, name, value)
        return row

    def _hold(self, row: JobRow) -> JobRecord:
        self._held[row.id] = row
        return jobs.record_of(row)


class Ledger:
    """Opens units of work on one database (the daemon's, or the CLI's read-only one)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        # Set by the daemon that holds the lease: checked with every intent batch.
        self.fence: Fence | None = None

    @classmethod
    def open(
        cls,
        url: str | URL,
        *,
        timeout_ms: int | None = None,
        sqlite_begin: SqliteBegin = "deferred",
        read_only: bool = False,
    ) -> Ledger:
        kwargs: dict[str, Any] = {"sqlite_begin": sqlite_begin, "read_only": read_only}
        if timeout_ms is not None:
            kwargs["timeout_ms"] = timeout_ms
        return cls(make_sessionmaker(make_engine(url, **kwargs)))

    @property
    def engine(self) -> Engine:
        bind = self.sessions.kw["bind"]
        assert isinstance(bind, Engine)
        return bind

    @property
    def where(self) -> str:
        """The database's URL without its password (for messages)."""
        return redact(self.engine.url)

    def check_schema(self) -> None:
        """Raise unless the database is at this code's schema revision."""
        from hopsd.ledger.schema_head import at_head

        if at_head(self.engine):
            return
        from hopsd.ledger.migrate import check_schema

        check_schema(self.engine)

    @contextmanager
    def unit(self) -> Iterator[Unit]:
        """A unit of work: committed when the block ends normally, else rolled back."""
        with self.sessions.begin() as session:
            yield Unit(session, self.fence)

    @contextmanager
    def reading(self) -> Iterator[Unit]:
        """A unit that only reads: rolled back at the end whatever happened."""
        session = self.sessions()
        try:
            yield Unit(session)
        finally:
            session.rollback()
            session.close()

    def prune(self, cutoff: float, *, batch: int, max_batches: int | None = None) -> Pruned:
        """Remove rounds, intents and allocations older than ``cutoff`` in short transactions
        (see :func:`hopsd.ledger.retention.prune`)."""
        return prune(self.sessions, cutoff, batch=batch, max_batches=max_batches)

    def dispose(self) -> None:
        self.engine.dispose()


LedgerLike = Ledger | sessionmaker[Session]


def as_ledger(ledger: LedgerLike) -> Ledger:
    """A :class:`Ledger` from itself or from a bare session factory (tests, benchmarks)."""
    return ledger if isinstance(ledger, Ledger) else Ledger(ledger)
