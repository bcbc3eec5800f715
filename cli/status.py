"""``hops status``: the typer command (its options and help); the work is in
:mod:`hops_cli.status_report`, which :mod:`hops_cli.quick` also runs without typer.
"""

from __future__ import annotations

from typing import Annotated

import typer

from hops_cli.common import state
from hops_cli.filter_options import JobIds, Jobs, Me, Partitions, States, Users
from hops_cli.output_options import AsJson, NoHeader, Parsable, columns_option
from hops_cli.status_report import COLUMNS, StatusArgs, show_status


def status(
    ctx: typer.Context,
    job_ids: JobIds = None,
    jobs: Jobs = None,
    users: Users = None,
    me: Me = False,
    states: States = None,
    partitions: Partitions = None,
    all_users: Annotated[bool, typer.Option("--all", "-a", help="Every user's jobs.")] = False,
    fmt: Annotated[str | None, columns_option(COLUMNS)] = None,
    noheader: NoHeader = False,
    parsable: Parsable = False,
    window_h: Annotated[
        float, typer.Option("--window", help="Hours of finished jobs that RAQLR averages.")
    ] = 24.0,
    as_json: AsJson = False,
) -> None:
    """Show hops jobs (yours unless --all, -u or job ids), why they wait, where and when they run.

    LR is the latency ratio: queue wait / expected run time (the method's age
    of the job); lower is better. START (+time from now) and ETA are hopsd's
    forecast, its scheduling step run forward from the live state after each
    plan: when a waiting job starts, when a running one ends (hopsd's page
    /job/ID lists every forecast made of a job). REASON fits the job's state:
    why it waits, where it runs, how it ended, or that hopsd is not running.
    """
    show_status(
        state(ctx).config_path,
        StatusArgs(
            job_ids,
            jobs,
            users,
            me,
            states,
            partitions,
            all_users,
            fmt,
            noheader,
            parsable,
            window_h,
            as_json,
        ),
    )
