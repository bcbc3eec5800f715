"""Plain records the ledger hands out and takes: no SQLAlchemy here.

The daemon and the CLI see the ledger only through these frozen values and the
unit of work (:mod:`hopsd.ledger.unit`), so they never hold an ORM row, never
issue a query of their own, and the CLI can import them without loading
SQLAlchemy. The enumerations are stored as their string values (see
:mod:`hopsd.ledger.models`, which imports them from here).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from hopsd.core.limits import MAX_LEASE_TTL_S
from hopsd.core.model import Configuration, Job, Plan


class JobState(enum.StrEnum):
    SUBMITTED = "submitted"
    PROFILING = "profiling"
    QUEUED = "queued"
    RUNNING = "running"
    PREEMPTED = "preempted"
    REQUEUED = "requeued"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TagStatus(enum.StrEnum):
    UNCHECKED = "unchecked"
    VALID = "valid"
    INVALID = "invalid"


class LrRule(enum.StrEnum):
    NONE = "none"
    LINEAR = "linear"
    SQRT = "sqrt"


class AllocationReason(enum.StrEnum):
    START = "start"
    KEEP = "keep"
    MOVE = "move"
    PREEMPT = "preempt"
    END = "end"


class IntentAction(enum.StrEnum):
    UPDATE = "update"
    RELEASE = "release"
    REQUEUE_HOLD = "requeue_hold"
    MAKE_ELIGIBLE = "make_eligible"
    CANCEL = "cancel"
    HOLD = "hold"
    # signal the job before a requeue; pending until it checkpointed or its grace is over
    NOTICE = "notice"


class IntentState(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    ABANDONED = "abandoned"


class ThroughputLayer(enum.StrEnum):
    """Which of the four measured tables a row belongs to (entity/type x agg/dist).

    ``place`` is a node id for the entity layer and a GPU type for the type layer;
    ``size`` is a GPU count for aggregated rows and a node count for distributed ones.
    """

    ENTITY_AGGREGATED = "entity_agg"
    ENTITY_DISTRIBUTED = "entity_dist"
    TYPE_AGGREGATED = "type_agg"
    TYPE_DISTRIBUTED = "type_dist"


S = JobState
TERMINAL_STATES = frozenset({S.DONE, S.FAILED, S.CANCELLED})
ACTIVE_STATES = frozenset(JobState) - TERMINAL_STATES
WAITING_STATES = frozenset({S.QUEUED, S.PREEMPTED, S.REQUEUED})
#: Active jobs not running: the queue ``hops status`` counts and numbers.
NOT_RUNNING_STATES = ACTIVE_STATES - {S.RUNNING}

# Who may follow whom. Profiling runs a few iterations per GPU type, after which
# the job waits in the queue; preempted (yielded by hops) and requeued (sent back
# by Slurm, or moved) jobs wait again and may be placed directly.
LEGAL_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    S.SUBMITTED: frozenset({S.PROFILING, S.QUEUED, S.FAILED, S.CANCELLED}),
    S.PROFILING: frozenset({S.QUEUED, S.RUNNING, S.FAILED, S.CANCELLED}),
    S.QUEUED: frozenset({S.PROFILING, S.RUNNING, S.FAILED, S.CANCELLED}),
    S.RUNNING: frozenset({S.PREEMPTED, S.REQUEUED, S.DONE, S.FAILED, S.CANCELLED}),
    # a requeued job may turn out to have finished just before the requeue hit it
    S.PREEMPTED: frozenset({S.QUEUED, S.REQUEUED, S.RUNNING, S.DONE, S.FAILED, S.CANCELLED}),
    S.REQUEUED: frozenset({S.QUEUED, S.PREEMPTED, S.RUNNING, S.DONE, S.FAILED, S.CANCELLED}),
    S.DONE: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


def is_legal(current: JobState, requested: JobState) -> bool:
    """Whether the state machine allows ``current -> requested`` (same state is a no-op)."""
    return requested == current or requested in LEGAL_TRANSITIONS[current]


#: Whose jobs, and which Slurm ids, a read keeps (None: any).
Users = Iterable[str] | None
SlurmIds = Iterable[int] | None


class QueueEntry(NamedTuple):
    """What the queue's order needs of a job not on GPUs (``hops status``'s positions):
    read alone, so a status of a few jobs need not load every waiting job whole."""

    id: str
    state: JobState
    latency_ratio: float | None
    submit_time: float


@dataclass(frozen=True, kw_only=True)
class JobLine:
    """What a job's line in ``hops status`` (and its ``--json``) is made of: who and what
    the job is, its state, times, ratio and where it runs.

    The CLI's driver read builds only these 24 of a job's 41 columns: at 10,000 jobs
    every column read costs ``hops status`` about 2 ms. A view typed on this class
    cannot read a column the status read left out (mypy says so), and every
    :class:`JobRecord` is one, so the daemon's page passes its records unchanged.
    """

    id: str
    slurm_job_id: int | None
    user: str
    account: str
    script_path: str
    demands: tuple[int, ...]
    total_samples: float
    model_name: str
    state: JobState
    state_reason: str
    submit_time: float
    first_start_time: float | None
    end_time: float | None
    wait_time: float
    restarts: int
    samples_done: float
    estimate_source: str | None
    current_gpu_type: str | None
    current_parts: tuple[tuple[str, int], ...] | None
    latency_ratio: float | None
    ftf_rho: float | None
    input_problem: str
    plan_reason: str
    # the job's Slurm name (the script's file name unless -J gave another)
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class JobRecord(JobLine):
    """One ledger job as it stands in the unit of work that read it: its line's fields
    (:class:`JobLine`) and the rest the daemon plans and accounts with."""

    batch_size: int
    params: float
    lr: float | None
    lr_rule: LrRule
    lr_by_demand: Mapping[str, float] | None
    state_changed_at: float
    service_gpu_s: float
    service_norm: float
    tag_status: TagStatus
    tag_reason: str
    updated_at: float
    # what the probe measured of a restart: saving a checkpoint, start to first iteration
    checkpoint_s: float | None = None
    startup_s: float | None = None
    # a restart measured whole (decision to first iteration after it): the job's own
    # latest, and its model's median when it was adopted (hopsd.ledger.restarts)
    restart_s: float | None = None
    model_restart_s: float | None = None
    # why hops stopped believing the claimed size ("" while it is believed)
    size_doubt: str = ""
    # the hops tag (Slurm comment) as adopted: the job's constraints come from it
    adopted_tag: str = ""

    @property
    def current(self) -> Configuration | None:
        """Where the job holds GPUs now (None when it holds none)."""
        return config_from_parts(self.current_gpu_type, self.current_parts)


#: Columns of a job row that one written by an older hopsd (or by hand) may hold as
#: NULL, and what a record says for them; one table for the ORM and driver reads.
RECORD_DEFAULTS: Mapping[str, object] = {
    "account": "",
    "script_path": "",
    "model_name": "",
    "params": 0.0,
    "state_reason": "",
    "wait_time": 0.0,
    "service_gpu_s": 0.0,
    "service_norm": 0.0,
    "restarts": 0,
    "samples_done": 0.0,
    "tag_reason": "",
    "input_problem": "",
    "plan_reason": "",
    "size_doubt": "",
    "adopted_tag": "",
    "name": "",
}


@dataclass(frozen=True)
class JobUpdate:
    """New values of some of a job's fields; ``None`` leaves a field as it is."""

    job_id: str
    samples_done: float | None = None
    restarts: int | None = None
    estimate_source: str | None = None
    state_reason: str | None = None
    input_problem: str | None = None
    plan_reason: str | None = None
    size_doubt: str | None = None
    adopted_tag: str | None = None
    latency_ratio: float | None = None
    ftf_rho: float | None = None
    wait_time: float | None = None
    service_gpu_s: float | None = None
    service_norm: float | None = None
    updated_at: float | None = None


@dataclass(frozen=True)
class JobSpec:
    """What hops learns about a job when it adopts it from Slurm (the tag + Slurm fields)."""

    id: str
    user: str
    demands: tuple[int, ...]
    total_samples: float
    submit_time: float
    batch_size: int = 32
    account: str = ""
    slurm_job_id: int | None = None
    script_path: str = ""
    model_name: str = ""
    params: float = 0.0
    lr: float | None = None
    lr_rule: LrRule = LrRule.NONE
    lr_by_demand: Mapping[int, float] | None = None
    tag_status: TagStatus = TagStatus.UNCHECKED
    tag_reason: str = ""
    state: JobState = JobState.SUBMITTED
    adopted_tag: str = ""
    name: str = ""


@dataclass(frozen=True)
class JobProgress:
    """Absolute values of one job's counters after a tick; None leaves a field as is."""

    job_id: str
    wait_time: float | None = None
    service_gpu_s: float | None = None
    service_norm: float | None = None
    samples_done: float | None = None
    estimate_source: str | None = None
    latency_ratio: float | None = None


@dataclass(frozen=True)
class IntentRequest:
    """One action to record (see :func:`hopsd.ledger.intents.record_intents`)."""

    job_id: str | None
    action: IntentAction
    payload: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None


@dataclass(frozen=True)
class IntentRecord:
    """A recorded intent as committed (or about to be)."""

    id: int
    job_id: str | None
    action: IntentAction
    payload: Mapping[str, Any]
    state: IntentState
    created_at: float
    round_id: int | None = None


@dataclass(frozen=True)
class AllocationChange:
    """One job's placement decision; ``config`` is None for preempt and end."""

    job_id: str
    reason: AllocationReason
    config: Configuration | None = None


@dataclass(frozen=True)
class RoundSummary:
    """What a round saw and decided: plan inputs, objective, decision time, idle GPUs.

    ``idle_gpus_waiting`` counts GPUs left idle while jobs waited (the paper's
    "idle GPUs per round" figure); ``shadow`` marks rounds planned without
    enacting (dry runs beside another scheduler).
    """

    number: int
    started_at: float
    queued: int = 0
    running: int = 0
    window_size: int = 0
    objective: float = 0.0
    decision_s: float = 0.0
    idle_gpus_waiting: int = 0
    plans: int = 1
    policy: str = "hops"
    shadow: bool = False
    note: str = ""


@dataclass(frozen=True)
class RoundRecord:
    """A recorded round: its row id keys the round's allocations and intents."""

    id: int
    number: int
    shadow: bool


@dataclass(frozen=True)
class UsageTotals:
    """GPU-seconds of one user or account, raw and normalised by GPU-type speed."""

    gpu_s: float
    gpu_s_norm: float


@dataclass(frozen=True)
class ThroughputRecord:
    """One measured per-GPU throughput (see :class:`ThroughputLayer` for place and size)."""

    job_id: str
    layer: ThroughputLayer
    place: str
    size: int
    per_gpu: float


#: Ids per query where a read names many jobs: under SQLite's default bound on a
#: statement's parameters (999). The ORM's reads and the driver-only reader share it.
CHUNK = 900

#: The lease hopsd takes (one row per name in ``daemon_lease``).
DEFAULT_LEASE = "hopsd"


@dataclass(frozen=True)
class LeaseInfo:
    name: str
    holder: str | None
    acquired_at: float | None
    heartbeat_at: float | None
    expires_at: float
    # The fencing token of the current holder's acquisition (raised by each one).
    token: int = 0

    def held_at(self, now: float) -> bool:
        return self.holder is not None and self.expires_at > now


def field_values(record: Any) -> dict[str, Any]:
    """A record's dataclass fields by name, as they are (``asdict`` would deep-copy them).

    A row whose columns are a record's fields of the same names is built from
    them all at once, so a field added to both needs no third line to copy it.
    """
    return {f.name: getattr(record, f.name) for f in fields(record)}


def believed_expiry(heartbeat_at: float | None, stored: float | None) -> float:
    """The expiry a valid configuration could have granted at the last heartbeat.

    An older hopsd with ``lease_ttl_s = inf`` (or a hand-edited row) may have
    stored an infinite, NaN or far-future expiry; believing it would name a dead
    holder forever and keep every successor out.
    """
    expiry = math.nan if stored is None else float(stored)
    if heartbeat_at is None or not math.isfinite(heartbeat_at):
        return expiry if math.isfinite(expiry) else 0.0
    cap = heartbeat_at + MAX_LEASE_TTL_S
    return min(expiry, cap) if math.isfinite(expiry) else cap


def config_from_parts(gpu_type: str | None, parts: Any) -> Configuration | None:
    """Rebuild a :class:`Configuration` from its stored ``[[node, gpus], ...]`` form."""
    if gpu_type is None or not parts:
        return None
    return Configuration(gpu_type, tuple((str(node), int(gpus)) for node, gpus in parts))


@dataclass(frozen=True)
class SlurmFacts:
    """What the caller knows of a job better than the ledger: where Slurm runs it now,
    its restart price, its time limit and how long its current run has run."""

    current: Configuration | None
    restart_s: float | None
    time_limit_s: float | None
    run_elapsed_s: float


def core_job(job: JobRecord, facts: SlurmFacts | None = None) -> Job:
    """The planner's view of a ledger job (the core never sees ledger records).

    ``facts``, when given, are set in the one construction (and its checks) rather
    than in a copy made afterwards; without them the job runs where the ledger says.
    """
    if facts is None:
        facts = SlurmFacts(job.current if job.state == S.RUNNING else None, None, None, 0.0)
    return Job(
        id=job.id,
        demands=tuple(int(d) for d in job.demands),
        total_samples=job.total_samples,
        batch_size=job.batch_size,
        params=job.params,
        submit_time=job.submit_time,
        user=job.user,
        account=job.account,
        samples_done=job.samples_done,
        attained_service=job.service_norm,
        wait_time=job.wait_time,
        current=facts.current,
        size_doubt=job.size_doubt,
        restart_s=facts.restart_s,
        time_limit_s=facts.time_limit_s,
        run_elapsed_s=facts.run_elapsed_s,
    )


def changes_from_plan(plan: Plan) -> list[AllocationChange]:
    """The allocation rows a plan implies (start, keep, move, preempt), in plan order."""
    R = AllocationReason
    out = [AllocationChange(a.job_id, R.START, a.config) for a in plan.start]
    out += [AllocationChange(a.job_id, R.KEEP, a.config) for a in plan.keep]
    out += [AllocationChange(a.job_id, R.MOVE, a.config) for a in plan.move]
    out += [AllocationChange(job_id, R.PREEMPT, None) for job_id in plan.preempt]
    return out


@dataclass(frozen=True)
class PlacementRecord:
    """One change of a job's placement: from ``at`` on it held ``gpus`` GPUs of ``gpu_type``."""

    at: float
    reason: AllocationReason
    gpu_type: str | None
    parts: tuple[tuple[str, int], ...]
    gpus: int


@dataclass(frozen=True)
class JobRun:
    """One Slurm run of a job: Slurm's restart count, where, from when to when, why it ended.

    ``kind`` is ``profiling`` or ``run``; ``ended`` is empty while the run goes on.
    """

    run: int
    kind: str
    gpu_type: str | None
    parts: tuple[tuple[str, int], ...]
    start_time: float
    end_time: float | None
    ended: str
    exit_code: int | None


@dataclass(frozen=True)
class Prediction:
    """What a round's forecast said of a job (:mod:`hopsd.sim.forecast`), in epoch seconds.

    ``start_at``: its next start (None: it held GPUs when the forecast was made,
    or the horizon did not reach its start); ``end_at``: its end (None: beyond
    the horizon). ``state`` is the job's state when it was made.
    """

    job_id: str
    made_at: float
    state: str
    start_at: float | None
    end_at: float | None
    gpu_type: str | None = None
    gpus: int = 0

    @classmethod
    def from_row(cls, values: tuple[Any, ...]) -> Prediction:
        """A stored row's values in column order (job, made, state, start, end, type, GPUs).

        The ORM and the read-only reader both read rows; the numbers come back as
        each database stored them (a ``Decimal``, an ``int``, NULL GPUs), made plain here.
        """
        job_id, made_at, state, start_at, end_at, gpu_type, gpus = values
        return cls(
            str(job_id),
            float(made_at),
            str(state),
            None if start_at is None else float(start_at),
            None if end_at is None else float(end_at),
            gpu_type,
            int(gpus or 0),
        )

    @property
    def forecast(self) -> Forecast:
        """The start and end a job's line reads of this prediction."""
        return Forecast(self.start_at, self.end_at)


class Forecast(NamedTuple):
    """What a job's line reads of its newest :class:`Prediction`: when the forecast starts
    it and when it ends it (epoch seconds; None where the forecast did not reach)."""

    start_at: float | None
    end_at: float | None


#: A job's status line and its newest forecast (None: never forecast).
ForeseenLine = tuple[JobLine, Forecast | None]


@dataclass(frozen=True)
class RoundInfo:
    """What the latest recorded round says about the daemon: when, and whether it only watched."""

    number: int
    started_at: float
    shadow: bool
    policy: str


@dataclass(frozen=True)
class RefusalRecord:
    """A tagged Slurm job hopsd refused to adopt: whose, why, since when."""

    slurm_job_id: int
    user: str
    reason: str
    refused_at: float
