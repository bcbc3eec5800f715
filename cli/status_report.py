"""What ``hops status`` prints: jobs, why they wait, where and when they run (squeue's habits).

The payload is built from ledger records by the pure functions of
:mod:`hopsd.views.joblist` (the daemon serves the same document); this module
only reads, filters and prints. It needs neither typer nor SQLAlchemy: the
ledger is read through the database driver (:mod:`hopsd.ledger.reader`), rich
only draws a table on a terminal, so the command answers like ``squeue``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hops_cli.common import load_config_or_fail, print_json, say
from hops_cli.filters import job_filter, job_words
from hops_cli.table import Layout, pick_columns, render
from hopsd.views.cells import Job, demands, duration, job_cells, placement, rows

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


def _cells(job: Job) -> dict[str, str]:
    """A ``hops status`` row: the common job cells and where, when and why it runs."""
    start = job["start_in_s"]
    cells = job_cells(job)  # filled in place: a large centre's status has 10,000 rows
    cells["TYPE"] = job["gpu_type"] or "-"
    cells["NODES"] = placement(job["nodes"]) or "-"
    cells["DEMANDS"] = demands(job["demands"])
    cells["START"] = "-" if start is None else f"+{duration(start)}"
    cells["ETA"] = duration(job["eta_s"])
    cells["EST"] = job["estimate_source"] or "-"
    cells["REASON"] = job["reason"] or "-"
    return cells


DAEMON_LINES = {
    "stopped": "hopsd is not running: nothing is placed or moved until it starts",
    "shadow": "hopsd runs in shadow mode: it plans but does not act; REASON says what it would do",
}


def render_status(payload: dict[str, Any], columns: Sequence[str], layout: Layout) -> None:
    """The table, then hopsd's state, problems, GPU types and RAQLR (only with the header)."""
    table = rows(payload["jobs"], columns, _cells)
    if table or layout.parsable or not layout.header:
        render("hops jobs", columns, table, layout)
    else:
        say("No hops jobs.")
    if not layout.header or layout.parsable:
        return
    mode = payload["daemon"]["mode"]
    if mode in DAEMON_LINES:
        say(DAEMON_LINES[mode])
    for job in payload["jobs"]:
        if job["problem"]:
            say(f"job {job['job_id']}: {job['problem']}")
    for job in payload.get("refused", []):
        say(f"job {job['job_id']} ({job['user']}): refused by hopsd: {job['reason']}")
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
    say(
        f"queue: {queued} waiting   RAQLR ({payload['raqlr_window_h']:g} h): {payload['raqlr']:.2f}"
    )
    if payload["slurm_error"]:
        say(f"Slurm unreachable, node summary omitted: {payload['slurm_error']}")
    leader = payload["leader"]
    if leader["holder"]:
        led = duration(time.time() - leader["since"]) if leader["since"] else "-"
        say(f"leader: {leader['holder']} (for {led}, fencing token {leader['token']})")


@dataclass(frozen=True)
class StatusArgs:
    """What ``hops status`` was asked for, by option name (see :mod:`hops_cli.status`)."""

    job_ids: list[str] | None = None
    jobs: list[str] | None = None
    users: list[str] | None = None
    me: bool = False
    states: list[str] | None = None
    partitions: list[str] | None = None
    all_users: bool = False
    fmt: str | None = None
    noheader: bool = False
    parsable: bool = False
    window_h: float = 24.0
    as_json: bool = False


def show_status(config_path: str | None, args: StatusArgs) -> None:
    """Read, filter and print: the whole command, whichever parser read its options."""
    from hops_cli.ledger_access import quick_reading
    from hopsd.views.status import status_payload

    config = load_config_or_fail(config_path)
    wanted = job_filter(
        job_words(args.job_ids, args.jobs),
        args.users,
        args.me,
        args.states,
        args.partitions,
        default_me=not args.all_users,
        config=config,
    )
    columns = pick_columns(COLUMNS, args.fmt, DEFAULT)
    with quick_reading(config) as reader:
        payload = status_payload(reader, config, wanted, args.window_h)
    if args.as_json:
        print_json(payload)
    else:
        layout = Layout(tuple(columns), not args.noheader, args.parsable)
        render_status(payload, columns, layout)
