"""``hops fairness``: latency ratios per job, usage vs fair share per user, RAQLR."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from hops_cli.common import config_of, fail, print_json, say
from hops_cli.filter_options import Users
from hops_cli.filters import job_filter
from hops_cli.ledger_access import reading
from hops_cli.output_options import AsJson, Parsable
from hops_cli.table import Layout, pick_per_table, render
from hopsd.views.fairness import fairness_payload
from hopsd.views.records import STARVING_LR

JOB_COLUMNS = ("JOBID", "USER", "STATE", "LR", "FTF", "STARVING")
USER_COLUMNS = ("USER", "GPU_S", "SHARE", "FAIR_SHARE", "RATIO")


def _job_cells(job: dict[str, Any]) -> dict[str, str]:
    return {
        "JOBID": str(job["job_id"]),
        "USER": job["user"],
        "STATE": job["state"],
        "LR": "-" if job["latency_ratio"] is None else f"{job['latency_ratio']:.2f}",
        "FTF": "-" if job["ftf_rho"] is None else f"{job['ftf_rho']:.2f}",
        "STARVING": "STARVING" if job["starving"] else "",
    }


def _user_cells(row: dict[str, Any]) -> dict[str, str]:
    return {
        "USER": row["user"],
        "GPU_S": f"{row['usage_norm_gpu_s']:.0f}",
        "SHARE": f"{row['usage_share']:.1%}",
        "FAIR_SHARE": f"{row['fair_share']:.1%}",
        "RATIO": f"{row['ratio']:.2f}",
    }


def _render(payload: dict[str, Any], fmt: str | None, layout: Layout) -> None:
    """The jobs table, the users table and the summary line, as ``-o``, ``-n``, ``-P`` ask.

    Like ``hops status``: without the header (``--noheader``) or with
    ``--parsable`` one table is printed, so a script reads one: the one with
    most of the named columns (USER is in both), the jobs table on a tie; the
    summary line goes with the header.
    """
    job_cols, user_cols = pick_per_table(
        (JOB_COLUMNS, USER_COLUMNS), fmt, (JOB_COLUMNS, USER_COLUMNS)
    )
    tables = [
        ("jobs", job_cols, [[c[k] for k in job_cols] for c in map(_job_cells, payload["jobs"])]),
        (
            "users (decayed, speed-normalised GPU time)",
            user_cols,
            [[c[k] for k in user_cols] for c in map(_user_cells, payload["users"])],
        ),
    ]
    shown = [t for t in tables if t[1]]
    if not layout.header or layout.parsable:
        title, columns, rows = max(shown, key=lambda t: len(t[1]))  # first on a tie
        render(title, columns, rows, Layout(tuple(columns), layout.header, layout.parsable))
        return
    for title, columns, rows in shown:
        if rows:
            render(title, columns, rows, Layout(tuple(columns)))
        elif title == "jobs":
            say("No active hops jobs.")
    say(
        f"Jain's index (users): {payload['jain_users']:.3f}   "
        f"RAQLR ({payload['raqlr_window_h']:g} h, {payload['finished_in_window']} jobs): "
        f"{payload['raqlr']:.2f}"
    )


def _plot(payload: dict[str, Any], path: str) -> None:
    """Latency ratio per job, bars coloured by user, sized to the number of jobs.

    The starving threshold is drawn only when some bar comes near it, so that it
    does not flatten bars that are all far below it; job labels thin out when
    there are too many to read.
    """

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [j for j in payload["jobs"] if j["latency_ratio"] is not None]
    users = sorted({str(j["user"]) for j in jobs})
    palette = plt.get_cmap("tab10")
    colour = {user: palette(i % 10) for i, user in enumerate(users)}
    width = min(24.0, max(7.0, 0.25 * len(jobs) + 4))
    fig, ax = plt.subplots(figsize=(width, 4.5))
    positions = range(len(jobs))
    ratios = [float(j["latency_ratio"]) for j in jobs]
    ax.bar(positions, ratios, color=[colour[str(j["user"])] for j in jobs])
    _job_labels(ax, [str(j["job_id"]) for j in jobs])
    highest = max(ratios, default=0.0)
    if highest >= STARVING_LR / 2:
        ax.axhline(STARVING_LR, color="red", linestyle="--", linewidth=1)
        ax.annotate(
            f"starving (LR > {STARVING_LR:g})",
            (0, STARVING_LR),
            color="red",
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=8,
        )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[u]) for u in users]
    if handles:
        ax.legend(
            handles, users, title="user", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0)
        )
    ax.set_xlabel("job")
    ax.set_ylabel("latency ratio\n(queue wait / expected run time)")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ax.set_title(f"hops fairness: latency ratio of {len(jobs)} active jobs\n{stamp}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _job_labels(ax: Any, labels: list[str]) -> None:
    """Every job id when they fit, else every k-th, turned upright when crowded."""
    step = max(1, len(labels) // 60)
    shown = list(range(0, len(labels), step))
    ax.set_xticks(shown)
    ax.set_xticklabels(
        [labels[i] for i in shown], rotation=90 if len(labels) > 15 else 0, fontsize=8
    )


def fairness(
    ctx: typer.Context,
    window_h: Annotated[
        float, typer.Option("--window", help="Hours of finished jobs that RAQLR averages.")
    ] = 24.0,
    as_json: AsJson = False,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Also write a PNG bar chart of latency ratios.")
    ] = None,
    users: Users = None,
    me: Annotated[
        bool, typer.Option("--me", help="Only your jobs (users and Jain's index stay global).")
    ] = False,
    mine: Annotated[bool, typer.Option("--mine", hidden=True)] = False,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-o",
            help=f"Columns: {','.join(JOB_COLUMNS)} (jobs), {','.join(USER_COLUMNS)} (users).",
        ),
    ] = None,
    noheader: Annotated[
        bool, typer.Option("--noheader", "-n", help="No header line (one table).")
    ] = False,
    parsable: Parsable = False,
) -> None:
    """How fair the cluster is right now: per job and per user.

    Latency ratio (LR) = queue wait / expected run time (the method's age of
    the job); finish-time fairness rho (Themis) = time in system / time
    served. Users are compared on decayed GPU time normalised by GPU-type
    speed against their configured shares (equal by default).
    """
    if window_h <= 0:
        fail("--window must be > 0 hours", 2)
    pick_per_table((JOB_COLUMNS, USER_COLUMNS), fmt, ())  # a bad -o fails before any read
    config = config_of(ctx)
    with reading(config) as unit:
        payload = fairness_payload(unit, config, window_h)
    wanted = job_filter(None, users, me or mine, None, None)
    if wanted.users is not None:
        payload["jobs"] = [j for j in payload["jobs"] if j["user"] in wanted.users]
    if plot:
        try:
            _plot(payload, plot)
        except OSError as exc:
            fail(f"cannot write plot {plot}: {exc.strerror or exc}")
    if as_json:
        print_json(payload)
    else:
        _render(payload, fmt, Layout(None, not noheader, parsable))
