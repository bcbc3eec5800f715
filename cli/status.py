"""``hops status``: hops jobs, why they wait, where and when they run (squeue's habits).

The payload is built from ledger records by the pure functions of
:mod:`hopsd.views.joblist` (the daemon can serve the same document); this module
only reads, filters and prints. SQLAlchemy, rich and the Slurm port are imported
only when needed, so the command answers quickly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hops_cli.common import config_of, hours, print_json
from hops_cli.filters import JobIds, Me, Partitions, States, Users, job_filter
from hops_cli.table import Layout, pick_columns, render

if TYPE_CHECKING:
    pass

COLUMNS = (
    "JOBID",
    "NAME",
    "USER",
    "STATE",
    "TYPE",
    "NODES",
    "DEMANDS",
    "WAIT",
    "ELAPSED",
    "RESTARTS",
    "LR",
    "START",
    "ETA",
    "EST",
    "REASON",
)
DEFAULT = tuple(c for c in COLUMNS if c != "EST")
JOB_STATES = (
    "submitted",
    "profiling",
    "queued",
    "running",
    "preempted",
    "requeued",
    "done",
    "failed",
    "cancelled",
)




def _cells(job: dict[str, Any]) -> dict[str, str]:
    lr = "-" if job["latency_ratio"] is None else f"{job['latency_ratio']:.2f}"
    return {
        "JOBID": str(job["job_id"]),
        "NAME": job["name"],
        "USER": job["user"],
        "STATE": job["state"],
        "TYPE": job["gpu_type"] or "-",
        "NODES": ",".join(f"{n}:{g}" for n, g in job["nodes"].items()) or "-",
        "DEMANDS": ",".join(map(str, job["demands"])),
        "WAIT": hours(job["wait_s"]),
        "ELAPSED": hours(job["elapsed_s"]),
        "RESTARTS": str(job["restarts"]),
        "LR": lr,
        "START": "-" if job["start_in_s"] is None else f"+{hours(job['start_in_s'])}",
        "ETA": hours(job["eta_s"]),
        "EST": job["estimate_source"] or "-",
        "REASON": job["reason"] or "-",
    }


DAEMON_LINES = {
    "stopped": "hopsd is not running: nothing is placed or moved until it starts",
    "shadow": "hopsd runs in shadow mode: it plans but does not act; REASON says what it would do",
}


def render_status(payload: dict[str, Any], columns: Sequence[str], layout: Layout) -> None:
    """The table, then hopsd's state, problems, GPU types and RAQLR (only with the header)."""
    rows = [[cells[c] for c in columns] for cells in map(_cells, payload["jobs"])]
    if rows or layout.parsable or not layout.header:
        render("hops jobs", columns, rows, layout)
    else:
        typer.echo("No hops jobs.")
    if not layout.header or layout.parsable:
        return
    mode = payload["daemon"]["mode"]
    if mode in DAEMON_LINES:
        typer.echo(DAEMON_LINES[mode])
    for job in payload["jobs"]:
        if job["problem"]:
            typer.echo(f"job {job['job_id']}: {job['problem']}")
    for job in payload.get("refused", []):
        typer.echo(f"job {job['job_id']} ({job['user']}): refused by hopsd: {job['reason']}")
    summary = [
        [
            r["gpu_type"],
            str(r["nodes"]),
            str(r["gpus_total"]),
            str(r["gpus_busy"]),
            str(r["gpus_idle"]),
        ]
        for r in payload["cluster"]
    ]
    if summary:
        render("GPU types", ("TYPE", "NODES", "GPUS", "BUSY", "IDLE"), summary, layout)
    queued = sum(1 for j in payload["jobs"] if j["state"] != "running")
    typer.echo(
        f"queue: {queued} waiting   RAQLR ({payload['raqlr_window_h']:g} h): {payload['raqlr']:.2f}"
    )
    if payload["slurm_error"]:
        typer.echo(f"Slurm unreachable, node summary omitted: {payload['slurm_error']}")
    leader = payload["leader"]
    if leader["holder"]:
        led = hours(time.time() - leader["since"]) if leader["since"] else "-"
        typer.echo(f"leader: {leader['holder']} (for {led}, fencing token {leader['token']})")


def status(
    ctx: typer.Context,
    job_ids: JobIds = None,
    users: Users = None,
    me: Me = False,
    states: States = None,
    partitions: Partitions = None,
    all_users: Annotated[bool, typer.Option("--all", "-a", help="Every user's jobs.")] = False,
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-o", help=f"Columns, comma-separated: {','.join(COLUMNS)}."),
    ] = None,
    noheader: Annotated[bool, typer.Option("--noheader", "-h", help="No header line.")] = False,
    parsable: Annotated[
        bool, typer.Option("--parsable", help="'|'-separated fields, no padding.")
    ] = False,
    window_h: Annotated[
        float, typer.Option("--window", help="Hours of finished jobs that RAQLR averages.")
    ] = 24.0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show hops jobs (yours unless --all, -u or job ids), why they wait, where and when they run.

    LR is the latency ratio: queue wait / expected run time (the method's age
    of the job); lower is better. START is a rough start estimate for a
    waiting job (+time from now), ETA the time left of a running one. REASON is
    what hopsd recorded when it last decided, or that hopsd is not running.
    """
    from hops_cli.ledger_access import reading

    config = config_of(ctx)
    wanted = job_filter(
        job_ids, users, me, states, partitions, default_me=not all_users, known_states=JOB_STATES
    )
    columns = pick_columns(COLUMNS, fmt, DEFAULT)
    with reading(config) as unit:
        from hopsd.views.status import status_payload

        payload = status_payload(unit, config, wanted, window_h)
    if as_json:
        print_json(payload)
    else:
        render_status(payload, columns, Layout(tuple(columns), not noheader, parsable))
