"""One job as ``hops status``/``show``/``history`` print it, and the daemon's state.

Names used in every payload (see README, "Reading the numbers"):

* ``latency_ratio`` (LR): queue wait / expected run time, where the expected
  run time is the method's *age* of the job (its run time at its best
  configuration); lower is better.
* ``since_submit_s``: wall-clock seconds since the job was submitted (this is
  not the method's age).
* ``elapsed_s``: seconds since the job first started (to its end when finished).
* ``start_in_s``: for a waiting job, seconds until hopsd's forecast starts it;
  ``eta_s`` for a job on GPUs, seconds until the forecast ends it. Both come
  from the job's newest recorded prediction (:mod:`hopsd.sim.forecast`, made
  after every plan): what is shown is in the ledger, and can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from hopsd.holder import local_dead
from hopsd.ledger.records import (
    TERMINAL_STATES,
    JobLine,
    JobRecord,
    JobRun,
    JobState,
    LeaseInfo,
    PlacementRecord,
    Prediction,
    RoundInfo,
)

WAITING = (JobState.SUBMITTED, JobState.QUEUED, JobState.PREEMPTED, JobState.REQUEUED)
NOT_RUNNING = "hopsd not running"
NEXT_ROUND = "waiting for hopsd's next round"


@dataclass(frozen=True)
class DaemonState:
    """Whether hopsd acts now: ``running``, ``shadow`` (plans without enacting) or ``stopped``."""

    mode: str
    holder: str | None
    heartbeat_at: float | None
    last_round_at: float | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def daemon_state(lease: LeaseInfo | None, last: RoundInfo | None, now: float) -> DaemonState:
    """From the lease row (who holds it, until when) and the latest round (shadow or not).

    No holder, an expired lease or a holder gone from this host means no hopsd
    heartbeats: it is not running, whatever the last round said.
    """
    holder = None if lease is None else lease.holder
    beat = None if lease is None else lease.heartbeat_at
    at = None if last is None else last.started_at
    if lease is None or not lease.held_at(now) or local_dead(holder):
        return DaemonState("stopped", holder, beat, at)
    return DaemonState(
        "shadow" if last is not None and last.shadow else "running", holder, beat, at
    )


def job_name(job: JobLine) -> str:
    """The job's Slurm name (``squeue``'s NAME: the script's file name unless ``-J`` gave
    another), else its script's file name, else its model, else hops's id."""
    return job.name or job.script_path.rpartition("/")[2] or job.model_name or job.id


def elapsed_of(job: JobLine, now: float) -> float:
    """Seconds since the job first started, to its end once it ended (0 if it never ran)."""
    if job.first_start_time is None:
        return 0.0
    end = job.end_time if job.end_time is not None else now
    return max(end - job.first_start_time, 0.0)


class Queued(Protocol):
    """What the queue's order is taken of: status lines, or the ledger's queue entries."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> JobState: ...

    @property
    def latency_ratio(self) -> float | None: ...

    @property
    def submit_time(self) -> float: ...


Q = TypeVar("Q", bound=Queued)


def queue_order(jobs: Sequence[Q]) -> list[Q]:
    """Waiting jobs in the order hopsd serves them: highest latency ratio first, then oldest."""
    waiting = [j for j in jobs if j.state in WAITING]
    return sorted(waiting, key=lambda j: (-(j.latency_ratio or 0.0), j.submit_time, j.id))


class Foreseen(Protocol):
    """What a job's START and ETA read of its newest forecast: a :class:`Prediction`, or
    the :class:`~hopsd.ledger.records.Forecast` the status read joins to each line."""

    @property
    def start_at(self) -> float | None: ...

    @property
    def end_at(self) -> float | None: ...


def start_in_of(job: JobLine, predicted: Foreseen | None, now: float) -> float | None:
    """Seconds until a waiting job starts, as the newest forecast saw it (None: no forecast
    reached its start)."""
    if job.state not in WAITING or predicted is None or predicted.start_at is None:
        return None
    return max(predicted.start_at - now, 0.0)


def eta_of(job: JobLine, predicted: Foreseen | None, now: float) -> float | None:
    """Seconds until a job on GPUs ends, as the newest forecast saw it."""
    if job.state not in HOLDING or predicted is None or predicted.end_at is None:
        return None
    return max(predicted.end_at - now, 0.0)


#: States in which a job holds GPUs: only then does it show a type and nodes.
HOLDING = (JobState.RUNNING, JobState.PROFILING)


def held_nodes(job: JobLine) -> dict[str, int]:
    """GPUs per node the job holds now: none unless its state holds GPUs, whatever
    placement was last recorded (a job shows a type and nodes only while it holds them)."""
    return dict(job.current_parts or ()) if job.state in HOLDING else {}


def where_of(job: JobLine) -> str | None:
    """``a100 a100n1:2+a100n2:2`` while the job holds GPUs, else None."""
    if job.state not in HOLDING or not job.current_parts:
        return None
    parts = "+".join(f"{n}:{g}" for n, g in job.current_parts)
    return f"{job.current_gpu_type} {parts}"


#: How the planner's sentences about a job on GPUs begin (:func:`hopsd.core.step.explain`,
#: the profiling queue's): said of a job that holds none yet, it was placed, not started.
ON_GPUS = ("running on ", "started on ", "profiling on ")


def _not_started(reason: str | None) -> str | None:
    """``starting on X: ...`` for a sentence that has the job on X before Slurm started it."""
    if reason is None or not reason.startswith(ON_GPUS):
        return reason
    what, _, where = reason.partition(" on ")
    run = "a profiling run" if what == "profiling" else "its run"
    return f"starting on {where}: released, waiting for Slurm to start {run}"


#: How the planner's sentences about a job it takes off its GPUs begin.
MOVED_TO = "moved to "
PREEMPTED = "preempted"


def _leaving(reason: str | None, where: str | None) -> str | None:
    """A move or preemption said of a job still on its old GPUs is under way: it
    checkpoints there before hops requeues it."""
    if reason is None or where is None:
        return reason
    if reason.startswith(MOVED_TO) and reason[len(MOVED_TO) :] != where:
        return f"moving to {reason[len(MOVED_TO) :]}: checkpointing on {where} before its requeue"
    if reason.startswith(PREEMPTED):
        return f"being {reason}: checkpointing on {where} before its requeue"
    return reason


def state_reason_of(job: JobLine) -> str | None:
    """A reason that fits the job's state, whatever the planner said last.

    Ended: how (Slurm's state and exit code). Running or profiling: where. Waiting:
    hopsd's recorded reason (cleared at every state change, so never one of an
    earlier state), else why it entered the queue. A job the planner placed
    that holds no GPUs yet is starting, not running.
    """
    if job.state in TERMINAL_STATES:
        return job.state_reason or str(job.state)
    recorded = job.plan_reason or job.input_problem or None
    where = where_of(job)
    if where is None:
        recorded = _not_started(recorded)
    if job.state == JobState.PROFILING:
        if where is not None and (recorded is None or recorded.startswith("profiling on ")):
            return f"profiling on {where}"  # where it is now, whatever run was said last
        return recorded or "profiling: waiting for a GPU"
    if job.state == JobState.RUNNING:
        return _leaving(recorded, where) or (f"running on {where}" if where else "running")
    if recorded is None and job.state_reason:
        return f"waiting ({job.state_reason})"
    return recorded


def reason_of(job: JobLine, daemon: DaemonState) -> str | None:
    """Why the job is where it is (:func:`state_reason_of`), or that hopsd is not running."""
    recorded = state_reason_of(job)
    if job.state in TERMINAL_STATES:
        return recorded
    if daemon.mode == "stopped" and job.state != JobState.RUNNING:
        return f"{NOT_RUNNING} (last: {recorded})" if recorded else NOT_RUNNING
    if daemon.mode == "shadow" and recorded:
        return f"shadow: would {recorded}"
    if recorded is None and job.state in WAITING:
        return NEXT_ROUND  # adopted or requeued since the last round: not planned yet
    return recorded


def job_fields(job: JobLine, now: float) -> dict[str, Any]:
    """What ``hops status`` and ``hops history`` both say of a job, under the same names.

    Who and what it is, its state, and the times and ratio their tables' common
    columns show (:func:`hopsd.views.cells.job_cells`).
    """
    return {
        "job_id": job.slurm_job_id,
        "name": job_name(job),
        "user": job.user,
        "account": job.account,
        "state": str(job.state),
        "wait_s": round(job.wait_time, 1),
        "elapsed_s": round(elapsed_of(job, now), 1),
        "restarts": job.restarts,
        "latency_ratio": _r(job.latency_ratio, 3),
    }


def job_record(
    job: JobLine,
    now: float,
    daemon: DaemonState,
    predicted: Foreseen | None = None,
    position: int | None = None,
) -> dict[str, Any]:
    """One job in the stable ``--json`` schema of ``hops status`` (golden file status.json).

    Built as one dict in one pass: a large centre's status has 10,000 of them.
    """
    nodes = held_nodes(job)
    record = job_fields(job, now)
    record["gpu_type"] = job.current_gpu_type if nodes else None
    record["nodes"] = nodes
    record["gpus"] = sum(nodes.values())
    record["demands"] = list(job.demands)
    record["ftf_rho"] = _r(job.ftf_rho, 3)
    record["eta_s"] = _r(eta_of(job, predicted, now), 1)
    record["start_in_s"] = _r(start_in_of(job, predicted, now), 1)
    record["queue_position"] = position
    record["estimate_source"] = job.estimate_source
    record["samples_done"] = job.samples_done
    record["total_samples"] = job.total_samples
    record["since_submit_s"] = round(now - job.submit_time, 1)
    record["problem"] = job.input_problem or None
    record["reason"] = reason_of(job, daemon)
    return record


def gpu_hours_by_type(
    job: JobRecord, placements: Sequence[PlacementRecord], now: float
) -> dict[str, float]:
    """GPU-hours the job held per GPU type, from its placement changes up to its end."""
    out: dict[str, float] = {}
    end = job.end_time if job.end_time is not None else now
    ends = [p.at for p in placements[1:]] + [end]
    for here, until in zip(placements, ends, strict=False):
        if here.gpu_type is None or here.gpus <= 0 or until <= here.at:
            continue
        out[here.gpu_type] = out.get(here.gpu_type, 0.0) + here.gpus * (until - here.at) / 3600
    return {t: round(h, 3) for t, h in sorted(out.items())}


def history_record(
    job: JobRecord, placements: Sequence[PlacementRecord], now: float
) -> dict[str, Any]:
    """One finished job in ``hops history --json`` (golden file history.json)."""
    end = job.end_time if job.end_time is not None else now
    return {
        **job_fields(job, now),
        "submit_time": job.submit_time,
        "start_time": job.first_start_time,
        "end_time": job.end_time,
        "jct_s": round(end - job.submit_time, 1),
        "gpu_hours": gpu_hours_by_type(job, placements, now),
        "reason": job.state_reason or None,
    }


def placement_story(placements: Sequence[PlacementRecord]) -> list[dict[str, Any]]:
    """A job's placements and moves over time, for ``hops show``."""
    return [
        {
            "at": p.at,
            "change": str(p.reason),
            "gpu_type": p.gpu_type,
            "nodes": {n: g for n, g in p.parts},
            "gpus": p.gpus,
        }
        for p in placements
    ]


def run_story(runs: Sequence[JobRun], now: float) -> list[dict[str, Any]]:
    """Each Slurm run of a job for ``hops show``: where, Slurm's start, its end and why."""
    return [
        {
            "run": r.run,
            "kind": r.kind,
            "gpu_type": r.gpu_type,
            "nodes": {n: g for n, g in r.parts},
            "start_time": r.start_time,
            "end_time": r.end_time,
            "elapsed_s": round((r.end_time if r.end_time is not None else now) - r.start_time, 1),
            "ended": r.ended or None,
            "exit_code": r.exit_code,
        }
        for r in runs
    ]


def show_record(
    job: JobRecord,
    now: float,
    daemon: DaemonState,
    placements: Sequence[PlacementRecord],
    estimates: Mapping[str, Mapping[str, Any]],
    predicted: Prediction | None,
    position: int | None,
    runs: Sequence[JobRun] = (),
) -> dict[str, Any]:
    """Everything hops knows about one job (``hops show --json``, golden file show.json)."""
    base = job_record(job, now, daemon, predicted, position)
    base.update(
        {
            "id": job.id,
            "script": job.script_path,
            "model": job.model_name,
            "batch_size": job.batch_size,
            "learning_rate": job.lr,
            "lr_rule": str(job.lr_rule),
            "tag": {"status": str(job.tag_status), "reason": job.tag_reason or None},
            "state_reason": job.state_reason or None,
            # why hops plans the job with another size than it claimed (None: believed)
            "size_doubt": job.size_doubt or None,
            "submit_time": job.submit_time,
            "start_time": job.first_start_time,
            "end_time": job.end_time,
            "estimates": {t: dict(v) for t, v in sorted(estimates.items())},
            "placements": placement_story(placements),
            "runs": run_story(runs, now),
            "gpu_hours": gpu_hours_by_type(job, placements, now),
            "daemon": daemon.as_json(),
        }
    )
    return base


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
