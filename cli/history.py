"""``hops history``: finished hops jobs, like ``sacct`` (JCT, wait, restarts, GPU-hours, LR).

GPU-hours per type are summed from the placements hopsd recorded (start, move,
preempt, end), so they say what the job held, not what Slurm billed.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hops_cli.common import EXIT_USAGE, config_of, fail, print_json
from hops_cli.filter_options import EndedStates, JobIds, Jobs, Me, Users
from hops_cli.filters import job_filter, job_words
from hops_cli.output_options import AsJson, Parsable, columns_option
from hops_cli.table import Layout, pick_columns, render
from hops_cli.timespec import parse_time
from hopsd.views.cells import Job, duration, job_cells, rows
from hopsd.views.filters import JobFilter

if TYPE_CHECKING:
    from hopsd.ledger.records import JobRecord
    from hopsd.ledger.unit import Unit

COLUMNS = (
    "JOBID",
    "NAME",
    "USER",
    "STATE",
    "SUBMIT",
    "END",
    "JCT",
    "WAIT",
    "ELAPSED",
    "RESTARTS",
    "GPUH",
    "LR",
)


def _keep(job: JobRecord, wanted: JobFilter) -> bool:
    return (
        (wanted.job_ids is None or job.slurm_job_id in wanted.job_ids)
        and (wanted.users is None or job.user in wanted.users)
        and (wanted.states is None or str(job.state) in wanted.states)
    )


def history_payload(unit: Unit, wanted: JobFilter, since: float, until: float) -> dict[str, Any]:
    """The ``--json`` document of ``hops history`` (golden file history.json)."""
    from hopsd.views.joblist import history_record

    now = time.time()
    jobs = [j for j in unit.finished_jobs(since, until) if _keep(j, wanted)]
    placements = unit.placements([j.id for j in jobs])
    return {
        "since": since,
        "until": until,
        "jobs": [history_record(j, placements[j.id], now) for j in jobs],
    }


def _stamp(at: float | None) -> str:
    """Local time without an offset, as sacct prints Submit and End.

    Why local: ``-S``/``-E`` read a time without an offset as local time (as
    sacct does), so a time copied from this table selects the same moment.
    """
    if at is None:
        return "-"
    return datetime.fromtimestamp(at).strftime("%Y-%m-%dT%H:%M:%S")


def _cells(job: Job) -> dict[str, str]:
    """A ``hops history`` row: the common job cells and when it ran, what it held."""
    gpuh = ",".join(f"{t}:{h:.2f}" for t, h in job["gpu_hours"].items()) or "-"
    return {
        **job_cells(job),
        "SUBMIT": _stamp(job["submit_time"]),
        "END": _stamp(job["end_time"]),
        "JCT": duration(job["jct_s"]),
        "GPUH": gpuh,
    }


def history(
    ctx: typer.Context,
    job_ids: JobIds = None,
    jobs: Jobs = None,
    users: Users = None,
    me: Me = False,
    states: EndedStates = None,
    all_users: Annotated[bool, typer.Option("--all", "-a", help="Every user's jobs.")] = False,
    since: Annotated[
        str,
        typer.Option(
            "--since",
            "--starttime",
            "-S",
            help="Jobs that ended from then (default now-1d): sacct's times, 24h, 7d.",
        ),
    ] = "now-1d",
    until: Annotated[
        str,
        typer.Option(
            "--until",
            "--endtime",
            "-E",
            help="Jobs that ended until then (default now): sacct's times.",
        ),
    ] = "now",
    fmt: Annotated[str | None, columns_option(COLUMNS)] = None,
    noheader: Annotated[bool, typer.Option("--noheader", "-n", help="No header line.")] = False,
    parsable: Parsable = False,
    as_json: AsJson = False,
) -> None:
    """Finished hops jobs (yours unless --all, -u or job ids), like sacct.

    JCT is submission to end; WAIT the time spent queued; GPUH the GPU-hours
    held per GPU type; LR the final latency ratio (queue wait / expected run
    time).
    """
    from hops_cli.ledger_access import reading

    config = config_of(ctx)
    wanted = job_filter(
        job_words(job_ids, jobs),
        users,
        me,
        states,
        None,
        default_me=not all_users,
        ended_only=True,
        config=config,
    )
    columns = pick_columns(COLUMNS, fmt, COLUMNS)
    now = time.time()
    try:
        start, end = parse_time(since, now, "--since"), parse_time(until, now, "--until")
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    with reading(config) as unit:
        payload = history_payload(unit, wanted, start, end)
    if as_json:
        print_json(payload)
        return
    table = rows(payload["jobs"], columns, _cells)
    if not table and not parsable and not noheader:
        typer.echo("No finished hops jobs in that window.")
        return
    render("hops history", columns, table, Layout(tuple(columns), not noheader, parsable))
