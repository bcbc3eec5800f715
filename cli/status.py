"""``hops status``: hops jobs with where they run, their wait, latency ratio and ETA."""

from __future__ import annotations

import getpass
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from hops_cli.common import config_of, console, hours, print_json
from hops_cli.ledger_access import reading
from hops_cli.views import ACTIVE, job_record, raqlr_of, type_summaries
from hopsd.config import HopsConfig
from hopsd.ledger.records import JobRecord, JobState
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.port import SlurmNode

if TYPE_CHECKING:
    from hopsd.ledger.unit import Unit


def _nodes(config: HopsConfig) -> tuple[list[SlurmNode], str | None]:
    from hopsd.slurm.factory import make_port

    try:
        port = make_port(
            config.slurm_backend,
            timeout_s=config.slurm_timeout_s,
            command_prefix=config.slurm_command_prefix,
        )
        return port.list_nodes(), None
    except (SlurmError, ValueError) as exc:
        return [], str(exc)


def _eta(job: JobRecord, now: float) -> float | None:
    """Seconds left at the job's observed rate since it first started (None if unknown)."""
    if job.state != JobState.RUNNING or job.service_gpu_s <= 0 or job.samples_done <= 0:
        return None
    if job.first_start_time is None:
        return None
    ran = max(now - job.first_start_time - job.wait_time, 1.0)
    rate = job.samples_done / ran
    return max(job.total_samples - job.samples_done, 0.0) / rate if rate > 0 else None


def status_payload(
    unit: Unit, config: HopsConfig, users: set[str] | None, window_h: float
) -> dict[str, Any]:
    """The ``--json`` document of ``hops status`` (stable schema, see README)."""
    now = time.time()
    rows = [r for r in unit.jobs_in_states(ACTIVE) if users is None or r.user in users]
    rows.sort(key=lambda r: (r.submit_time, r.slurm_job_id or 0))
    nodes, slurm_error = _nodes(config)
    queued = sum(1 for r in rows if r.state != JobState.RUNNING)
    lrs = unit.finished_latency_ratios(now - window_h * 3600)
    return {
        "jobs": [job_record(r, now, _eta(r, now)) for r in rows],
        "cluster": [
            s.as_json() for s in type_summaries(nodes, config.partitions, config.node_types, queued)
        ],
        "raqlr": round(raqlr_of(lrs), 3),
        "raqlr_window_h": window_h,
        "slurm_error": slurm_error,
        "leader": _leader(unit, now),
    }


def _leader(unit: Unit, now: float) -> dict[str, Any]:
    """Which hopsd leads (holds the unexpired lease), since when, under which fencing token."""
    info = unit.lease_info()
    if info is None:
        return {"holder": None, "since": None, "expires_at": None, "token": 0}
    holder = info.holder if info.held_at(now) else None
    return {
        "holder": holder,
        "since": info.acquired_at if holder else None,
        "expires_at": info.expires_at,
        "token": info.token,
    }


def _render(payload: dict[str, Any]) -> None:
    out = console()
    jobs = Table(title="hops jobs", title_justify="left")
    for header in (
        "JOBID",
        "USER",
        "STATE",
        "TYPE",
        "NODES",
        "DEMANDS",
        "WAIT",
        "LR",
        "ETA",
        "EST",
        "REASON",
    ):
        jobs.add_column(header)
    for job in payload["jobs"]:
        nodes = ",".join(f"{n}:{g}" for n, g in job["nodes"].items()) or "-"
        lr = "-" if job["latency_ratio"] is None else f"{job['latency_ratio']:.2f}"
        jobs.add_row(
            str(job["job_id"]),
            job["user"],
            job["state"],
            job["gpu_type"] or "-",
            nodes,
            ",".join(map(str, job["demands"])),
            hours(job["wait_s"]),
            lr,
            hours(job["eta_s"]),
            job["estimate_source"] or "-",
            job["reason"] or "-",
        )
    out.print(jobs if payload["jobs"] else "No hops jobs.")
    for job in payload["jobs"]:
        if job["problem"]:
            out.print(f"job {job['job_id']}: {job['problem']}", markup=False, highlight=False)
    summary = Table(title="GPU types", title_justify="left")
    for header in ("TYPE", "NODES", "GPUS", "BUSY", "IDLE"):
        summary.add_column(header)
    for row in payload["cluster"]:
        summary.add_row(
            row["gpu_type"],
            str(row["nodes"]),
            str(row["gpus_total"]),
            str(row["gpus_busy"]),
            str(row["gpus_idle"]),
        )
    if payload["cluster"]:
        out.print(summary)
    queued = sum(1 for j in payload["jobs"] if j["state"] != "running")
    out.print(
        f"queue: {queued} waiting   RAQLR ({payload['raqlr_window_h']:g} h): {payload['raqlr']:.2f}"
    )
    if payload["slurm_error"]:
        out.print(f"Slurm unreachable, node summary omitted: {payload['slurm_error']}")
    leader = payload["leader"]
    if leader["holder"]:
        led = hours(time.time() - leader["since"]) if leader["since"] else "-"
        out.print(f"leader: {leader['holder']} (for {led}, fencing token {leader['token']})")
    else:
        out.print("leader: none (no hopsd holds the lease; a standby takes over within its TTL)")


def status(
    ctx: typer.Context,
    all_users: Annotated[bool, typer.Option("--all", help="Every user's jobs.")] = False,
    user: Annotated[str | None, typer.Option("--user", help="This user's jobs.")] = None,
    window_h: Annotated[
        float, typer.Option("--window", help="Hours of finished jobs that RAQLR averages.")
    ] = 24.0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show hops jobs (yours by default) and a per-GPU-type cluster summary.

    LR is the latency ratio wait/age (lower is better; hops keeps it low and
    even); EST says where the job's throughput estimate comes from
    (entity/type/theory/table).
    """
    config = config_of(ctx)
    users = None if all_users else {user or getpass.getuser()}
    with reading(config) as unit:
        payload = status_payload(unit, config, users, window_h)
    if as_json:
        print_json(payload)
    else:
        _render(payload)
