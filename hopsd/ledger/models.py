"""SQLAlchemy 2.0 typed models of the ledger: the daemon's memory across restarts.

Times are float epoch seconds (UTC) everywhere: identical on SQLite and
PostgreSQL, trivially comparable, and what the pure core already uses.
Enumerations are stored as short strings (see :class:`StrEnumType`) guarded by
CHECK constraints, so a row written by hand with a typo cannot enter the ledger.
Small structured values (demand sets, placements, action payloads) are JSON.
"""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from hopsd.ledger.records import (
    AllocationReason,
    IntentAction,
    IntentState,
    JobState,
    LrRule,
    TagStatus,
    ThroughputLayer,
)

__all__ = [
    "AllocationReason",
    "IntentAction",
    "IntentState",
    "JobState",
    "LrRule",
    "TagStatus",
    "ThroughputLayer",
]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base; the naming convention gives every constraint a stable name
    so migrations can address them on both backends."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class StrEnumType(TypeDecorator[enum.StrEnum]):
    """Stores a :class:`enum.StrEnum` as its value and reads it back as the enum."""

    impl = String(16)
    cache_ok = True

    def __init__(self, enum_cls: type[enum.StrEnum]) -> None:
        super().__init__()
        self.enum_cls = enum_cls

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return self.enum_cls(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> enum.StrEnum | None:
        if value is None:
            return None
        return self.enum_cls(value)


def _in_check(column: str, enum_cls: type[enum.StrEnum], name: str) -> CheckConstraint:
    values = ", ".join(f"'{m.value}'" for m in enum_cls)
    return CheckConstraint(f"{column} IN ({values})", name=name)


class JobRow(Base):
    """One job hops manages, from adoption to its terminal state."""

    __tablename__ = "jobs"
    __table_args__ = (
        _in_check("state", JobState, "state"),
        _in_check("tag_status", TagStatus, "tag_status"),
        _in_check("lr_rule", LrRule, "lr_rule"),
        Index("ix_jobs_state", "state"),
        Index("ix_jobs_user", "user"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    slurm_job_id: Mapped[int | None] = mapped_column(Integer, unique=True)
    user: Mapped[str] = mapped_column(String(64))
    account: Mapped[str] = mapped_column(String(64), default="")
    script_path: Mapped[str] = mapped_column(Text, default="")
    demands: Mapped[list[int]] = mapped_column(JSON)
    total_samples: Mapped[float] = mapped_column(Float)
    batch_size: Mapped[int] = mapped_column(Integer)
    model_name: Mapped[str] = mapped_column(String(128), default="")
    params: Mapped[float] = mapped_column(Float, default=0.0)
    lr: Mapped[float | None] = mapped_column(Float)
    lr_rule: Mapped[LrRule] = mapped_column(StrEnumType(LrRule), default=LrRule.NONE)
    lr_by_demand: Mapped[dict[str, float] | None] = mapped_column(JSON)
    state: Mapped[JobState] = mapped_column(StrEnumType(JobState), default=JobState.SUBMITTED)
    state_reason: Mapped[str] = mapped_column(Text, default="")
    state_changed_at: Mapped[float] = mapped_column(Float)
    submit_time: Mapped[float] = mapped_column(Float)
    first_start_time: Mapped[float | None] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float)
    wait_time: Mapped[float] = mapped_column(Float, default=0.0)
    service_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    service_norm: Mapped[float] = mapped_column(Float, default=0.0)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    samples_done: Mapped[float] = mapped_column(Float, default=0.0)
    # What a restart costs the job, as its probe measured it: saving a checkpoint
    # (after hops's notice) and getting from a start to the first iteration.
    checkpoint_s: Mapped[float | None] = mapped_column(Float)
    startup_s: Mapped[float | None] = mapped_column(Float)
    # Added by revision 0011: a restart measured whole, from hops's decision to stop
    # the job to its first iteration after it (the job's own latest), and the median
    # of earlier jobs of its model, taken when it was adopted.
    restart_s: Mapped[float | None] = mapped_column(Float)
    model_restart_s: Mapped[float | None] = mapped_column(Float)
    estimate_source: Mapped[str | None] = mapped_column(String(16))
    tag_status: Mapped[TagStatus] = mapped_column(
        StrEnumType(TagStatus), default=TagStatus.UNCHECKED
    )
    tag_reason: Mapped[str] = mapped_column(Text, default="")
    current_gpu_type: Mapped[str | None] = mapped_column(String(64))
    current_parts: Mapped[list[list[Any]] | None] = mapped_column(JSON)
    # Added by revision 0002: the latency ratio wait/age at the end, for RAQLR.
    latency_ratio: Mapped[float | None] = mapped_column(Float)
    # Added by revision 0004: Themis rho (the core's finish-time fairness), per tick.
    ftf_rho: Mapped[float | None] = mapped_column(Float)
    # Added by revision 0003: the latest input of this job hopsd refused, or
    # failure it contained to this job, and why; shown to the owner by ``hops status``.
    input_problem: Mapped[str] = mapped_column(Text, default="", server_default="")
    # Added by revision 0005: the reason the last scheduling step gave the job.
    plan_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    # why hops stopped believing the claimed size ("" while believed; hopsd.core.sizeclaim)
    size_doubt: Mapped[str] = mapped_column(Text, default="", server_default="")
    adopted_tag: Mapped[str] = mapped_column(Text, default="", server_default="")
    name: Mapped[str] = mapped_column(Text, default="", server_default="")
    updated_at: Mapped[float] = mapped_column(Float)


# Added by revision 0002, so "finished in the last h hours" is an index range scan.
Index("ix_jobs_end_time", JobRow.end_time)


class RoundRow(Base):
    """One scheduling round (or a shadow round that planned without enacting)."""

    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("number", "shadow"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    number: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float)
    queued: Mapped[int] = mapped_column(Integer, default=0)
    running: Mapped[int] = mapped_column(Integer, default=0)
    window_size: Mapped[int] = mapped_column(Integer, default=0)
    objective: Mapped[float] = mapped_column(Float, default=0.0)
    decision_s: Mapped[float] = mapped_column(Float, default=0.0)
    idle_gpus_waiting: Mapped[int] = mapped_column(Integer, default=0)
    plans: Mapped[int] = mapped_column(Integer, default=1)
    policy: Mapped[str] = mapped_column(String(32), default="hops")
    shadow: Mapped[bool] = mapped_column(Boolean, default=False)
    note: Mapped[str] = mapped_column(Text, default="")


class AllocationRow(Base):
    """Which configuration a job held in a round, and why it changed."""

    __tablename__ = "allocations"
    __table_args__ = (
        _in_check("reason", AllocationReason, "reason"),
        Index("ix_allocations_job_id_at", "job_id", "at"),
        Index("ix_allocations_round_id", "round_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[int | None] = mapped_column(ForeignKey("rounds.id", ondelete="SET NULL"))
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    reason: Mapped[AllocationReason] = mapped_column(StrEnumType(AllocationReason))
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    parts: Mapped[list[list[Any]] | None] = mapped_column(JSON)
    total_gpus: Mapped[int] = mapped_column(Integer, default=0)
    at: Mapped[float] = mapped_column(Float)


class RunRow(Base):
    """One Slurm run of a job (each requeue starts another), as hopsd saw it.

    ``run`` is Slurm's restart count of the run; ``start_time`` is Slurm's own
    start where squeue gave it; ``ended`` says why the run stopped (completed,
    moved, preempted, profiling over, failed, ...) and stays empty while it runs.
    ``hops show`` lists these, and the status page draws them.
    """

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("job_id", "run"),
        Index("ix_runs_start_time", "start_time"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    parts: Mapped[list[list[Any]] | None] = mapped_column(JSON)
    start_time: Mapped[float] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float)
    ended: Mapped[str] = mapped_column(String(32), default="")
    exit_code: Mapped[int | None] = mapped_column(Integer)


class PredictionRow(Base):
    """What a round's forecast said of a job: its next start and its end (epoch seconds).

    ``state`` is the job's state when it was made (a waiting job's START, a
    running job's ETA); ``gpu_type``/``gpus`` where a waiting job was foreseen
    to start. Written only when the forecast changed, so the newest row is what
    ``hops status`` shows.
    """

    __tablename__ = "predictions"
    __table_args__ = (Index("ix_predictions_job_id_made_at", "job_id", "made_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    made_at: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16))
    start_at: Mapped[float | None] = mapped_column(Float)
    end_at: Mapped[float | None] = mapped_column(Float)
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    gpus: Mapped[int] = mapped_column(Integer, default=0)


class IntentRow(Base):
    """A Slurm action written before it is taken, then marked done or failed."""

    __tablename__ = "intents"
    __table_args__ = (
        _in_check("action", IntentAction, "action"),
        _in_check("state", IntentState, "state"),
        Index("ix_intents_state", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    round_id: Mapped[int | None] = mapped_column(ForeignKey("rounds.id", ondelete="SET NULL"))
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    action: Mapped[IntentAction] = mapped_column(StrEnumType(IntentAction))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[IntentState] = mapped_column(
        StrEnumType(IntentState), default=IntentState.PENDING
    )
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)


class ThroughputRow(Base):
    """Entity and type layers: a measured per-GPU throughput that keeps learning."""

    __tablename__ = "throughput"
    __table_args__ = (_in_check("layer", ThroughputLayer, "layer"),)

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    layer: Mapped[ThroughputLayer] = mapped_column(StrEnumType(ThroughputLayer), primary_key=True)
    place: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(Integer, primary_key=True)
    per_gpu: Mapped[float] = mapped_column(Float)
    observations: Mapped[int] = mapped_column(Integer, default=1)
    samples: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[float] = mapped_column(Float)


class ProfileRow(Base):
    """Theory layer: profiled phase times and the data/sync-wait mixtures."""

    __tablename__ = "profiles"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    gpu_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    t_f: Mapped[float] = mapped_column(Float)
    t_b: Mapped[float] = mapped_column(Float)
    t_u: Mapped[float] = mapped_column(Float)
    pattern: Mapped[int] = mapped_column(Integer, default=1)
    data_p_hit: Mapped[float] = mapped_column(Float)
    data_mu_hit: Mapped[float] = mapped_column(Float)
    data_sigma_hit: Mapped[float] = mapped_column(Float)
    data_mu_miss: Mapped[float] = mapped_column(Float)
    data_sigma_miss: Mapped[float] = mapped_column(Float)
    wait_p_hit: Mapped[float] = mapped_column(Float)
    wait_mu_hit: Mapped[float] = mapped_column(Float)
    wait_sigma_hit: Mapped[float] = mapped_column(Float)
    wait_mu_miss: Mapped[float] = mapped_column(Float)
    wait_sigma_miss: Mapped[float] = mapped_column(Float)
    iterations: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[float] = mapped_column(Float)


class UsageRow(Base):
    """GPU-seconds one user/account consumed in one interval (bucket)."""

    __tablename__ = "usage"
    __table_args__ = (
        UniqueConstraint("user", "account", "interval_start"),
        Index("ix_usage_interval_end", "interval_end"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column(String(64))
    account: Mapped[str] = mapped_column(String(64))
    interval_start: Mapped[float] = mapped_column(Float)
    interval_end: Mapped[float] = mapped_column(Float)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_s_norm: Mapped[float] = mapped_column(Float, default=0.0)


class LeaseRow(Base):
    """The daemon lease: at most one unexpired holder may act on the cluster."""

    __tablename__ = "daemon_lease"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(256))
    acquired_at: Mapped[float | None] = mapped_column(Float)
    heartbeat_at: Mapped[float | None] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float, default=0.0)
    # Fencing token: raised on every acquisition, checked before every enactment.
    token: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class RefusalRow(Base):
    """A tagged Slurm job hopsd refused to adopt, and why (kept while Slurm knows the job)."""

    __tablename__ = "refusals"

    slurm_job_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    user: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(Text)
    refused_at: Mapped[float] = mapped_column(Float)
