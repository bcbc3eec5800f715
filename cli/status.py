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
from hops_cli.filters import JobFilter, JobIds, Me, Partitions, States, Users, job_filter
from hops_cli.table import Layout, pick_columns, render

if TYPE_CHECKING:
    from hopsd.config import HopsConfig
    from hopsd.ledger.records import JobRecord
    from hopsd.ledger.unit import Unit
    from hopsd.slurm.port import SlurmNode

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


def _nodes(config: HopsConfig) -> tuple[list[SlurmNode], str | None]:
    from hopsd.slurm.errors import SlurmError
    from hopsd.slurm.factory import port_from_config

    try:
        port = port_from_config(config)
        return port.list_nodes(), None
    except (SlurmError, ValueError) as exc:
        return [], str(exc)


def _matches(job: JobRecord, wanted: JobFilter, node_parts: dict[str, tuple[str, ...]]) -> bool:
    if wanted.job_ids is not None and job.slurm_job_id not in wanted.job_ids:
        return False
    if wanted.users is not None and job.user not in wanted.users:
        return False
    if wanted.states is not None and str(job.state) not in wanted.states:
        return False
    if wanted.partitions is not None:
        places = {job.current_gpu_type or ""}
        for node, _ in job.current_parts or ():
            places.update(node_parts.get(node, ()))
        return bool(places & wanted.partitions)
    return True


def status_payload(
    unit: Unit, config: HopsConfig, wanted: JobFilter, window_h: float
) -> dict[str, Any]:
    """The ``--json`` document of ``hops status`` (stable schema, see README)."""
    from hops_cli.views import raqlr_of, type_summaries
    from hopsd.ledger.records import ACTIVE_STATES, JobState
    from hopsd.views.joblist import daemon_state, job_record, queue_order, start_estimates

    now = time.time()
    daemon = daemon_state(unit.lease_info(), unit.latest_round(), now)
    states = ACTIVE_STATES if wanted.states is None else {JobState(s) for s in wanted.states}
    every = unit.jobs_in_states(states)
    nodes, slurm_error = _nodes(config)
    node_parts = {n.name: tuple(n.partitions) for n in nodes}
    starts = start_estimates(every, now)
    position = {j.id: k + 1 for k, j in enumerate(queue_order(every))}
    rows = [r for r in every if _matches(r, wanted, node_parts)]
    rows.sort(key=lambda r: (r.submit_time, r.slurm_job_id or 0))
    queued = sum(1 for r in every if r.state != JobState.RUNNING)
    lrs = unit.finished_latency_ratios(now - window_h * 3600)
    return {
        "jobs": [job_record(r, now, daemon, starts.get(r.id), position.get(r.id)) for r in rows],
        "daemon": daemon.as_json(),
        "cluster": [
            s.as_json() for s in type_summaries(nodes, config.partitions, config.node_types, queued)
        ],
        "raqlr": round(raqlr_of(lrs), 3),
        "raqlr_window_h": window_h,
        "slurm_error": slurm_error,
    }


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
        payload = status_payload(unit, config, wanted, window_h)
    if as_json:
        print_json(payload)
    else:
        render_status(payload, columns, Layout(tuple(columns), not noheader, parsable))
