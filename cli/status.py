"""``hops status``: hops jobs with where they run, their wait, latency ratio and ETA."""

from __future__ import annotations

import getpass
import time
from typing import Annotated, Any

import typer
from rich.table import Table

from hops_cli.common import config_of, console, hours, print_json
from hops_cli.ledger_access import reading
from hopsd.views.status import status_payload


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
