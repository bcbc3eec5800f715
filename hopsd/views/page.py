"""hopsd's read-only status page: the ``hops status`` and ``hops fairness`` documents as HTML.

Rendered on the server from the same payloads the JSON routes return, with no
script: whatever a browser (or ``curl``) fetches is the whole page. Every value
is escaped: job names, users and reasons come from users.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hopsd.config import HopsConfig
from hopsd.core.inventory import facts_of, managed_nodes
from hopsd.core.privacy import ANONYMOUS, PrivateData, Viewer, sees_job
from hopsd.ledger.reader import reading
from hopsd.ledger.records import RoundSummary
from hopsd.ledger.unit import Ledger
from hopsd.views.cells import demands, duration, placement, ratio
from hopsd.views.fairness import fairness_payload
from hopsd.views.privacy import public_fairness, public_status
from hopsd.views.routes import Document, Page, Under
from hopsd.views.status import read_nodes, status_payload
from hopsd.views.timeline import render_curves, render_svg, timeline_payload

if TYPE_CHECKING:
    from hopsd.slurm.port import SlurmNode

NOBODY = Viewer(ANONYMOUS)


STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
    "th{background:#eee}.starving{color:#b00;font-weight:bold}"
)


def rounds_payload(ledger: Ledger, limit: int = 20) -> dict[str, Any]:
    """The latest enacting rounds, newest first."""
    with ledger.reading() as unit:
        rounds = unit.recent_rounds(limit)
    return {"rounds": [_round(r) for r in rounds]}


def _round(r: RoundSummary) -> dict[str, Any]:
    try:
        note = json.loads(r.note) if r.note else {}
    except ValueError:
        note = {}
    return {
        "number": r.number,
        "started_at": r.started_at,
        "kind": note.get("kind", ""),
        "queued": r.queued,
        "running": r.running,
        "actions": len(note.get("actions", [])),
        "decision_s": round(r.decision_s, 4),
        "idle_gpus_waiting": r.idle_gpus_waiting,
        "policy": r.policy,
    }


def documents(
    ledger: Ledger,
    config: HopsConfig,
    rules: Callable[[], PrivateData] = PrivateData,
    window_h: float = 24.0,
) -> dict[str, Page | Under]:
    """The routes hopsd serves beside /metrics: the page, each job's page (``/job/ID``)
    and the JSON behind them.

    Nobody is identified over HTTP, so every document is what Slurm's
    ``PrivateData`` (``rules``) lets any user see (:mod:`hopsd.views.privacy`).
    """

    def status(listed: tuple[list[SlurmNode], str | None] | None = None) -> dict[str, Any]:
        # through the driver, as ``hops status`` reads: at 12,000 jobs 0.23 s of hopsd's
        # CPU at every reload, against 0.29-0.30 s through the unit of work
        with reading(config.ledger_url) as unit:
            return public_status(status_payload(unit, config, None, window_h, listed), rules())

    def fairness() -> dict[str, Any]:
        with ledger.reading() as unit:
            return public_fairness(fairness_payload(unit, config, window_h), rules())

    def as_json(build: Callable[[], dict[str, Any]]) -> Callable[[], Document]:
        return lambda: ("application/json", json.dumps(build()).encode() + b"\n")

    def timeline(listed: Sequence[SlurmNode] | None = None) -> dict[str, Any]:
        nodes = listed if listed is not None else read_nodes(config)[0]
        return timeline_document(ledger, config, rules(), nodes, window_h=TIMELINE_H)

    def page() -> Document:
        listed = read_nodes(config)  # one look at Slurm's nodes for the whole page
        body = render(status(listed), fairness(), rounds_payload(ledger), timeline(listed[0]))
        return "text/html; charset=utf-8", body.encode()

    def job(rest: str) -> Document | None:
        """``/job/ID`` (the page) and ``/job/ID.json``; None for anything else."""
        from hopsd.views.job_page import job_document, render_job

        wanted, as_doc = (rest[:-5], True) if rest.endswith(".json") else (rest, False)
        if not wanted.isdigit() or len(wanted) > 12:
            return None
        doc = job_document(ledger, rules(), int(wanted))
        if doc is None:
            return None
        if as_doc:
            return "application/json", json.dumps(doc).encode() + b"\n"
        return "text/html; charset=utf-8", render_job(doc).encode()

    return {
        "/status": page,
        "/job/": Under(job),
        "/status.json": as_json(status),
        "/timeline.json": as_json(timeline),
        "/timeline.svg": lambda: ("image/svg+xml", render_svg(timeline()).encode()),
        "/fairness.json": as_json(fairness),
        "/rounds.json": as_json(lambda: rounds_payload(ledger)),
    }


#: The longest stretch of the past the timeline shows (it starts at the first run in it).
TIMELINE_H = 3.0
#: Seconds between the page's own reloads.
REFRESH_S = 10
#: Rows a table of jobs shows at most: a large centre's 10,000 waiting jobs made a
#: 2.7 MB page that took hopsd 1.3 s to draw at every reload of every open tab.
#: The queue shows the jobs served first; the JSON documents keep every job.
PAGE_ROWS = 200


def timeline_document(
    ledger: Ledger,
    config: HopsConfig,
    rules: PrivateData,
    nodes: Sequence[SlurmNode],
    window_h: float = TIMELINE_H,
) -> dict[str, Any]:
    """The ``/timeline.json`` document: runs of the jobs any user may see, per managed node
    of ``nodes`` (as Slurm lists them).

    The window starts at the first run that was still on within ``window_h``
    hours (a young cluster fills the width), and ends now.
    """
    now = time.time()
    since = now - window_h * 3600
    with ledger.reading() as unit:
        by_id = unit.runs_between(since, now)
        jobs = unit.jobs(list(by_id))
        notices = unit.notices_since(since - 3600)
        releases = unit.releases_since(since - 3600)
        queue = unit.queue_lengths_since(since)
    seen = {j: r for j, r in by_id.items() if j in jobs and sees_job(rules, NOBODY, jobs[j].user)}
    runs = {int(jobs[j].slurm_job_id or 0): r for j, r in seen.items()}

    def by_slurm_id(per_run: dict[tuple[str, int], float]) -> dict[tuple[int, int], float]:
        return {
            (int(jobs[j].slurm_job_id or 0), n): at for (j, n), at in per_run.items() if j in seen
        }

    told, freed = by_slurm_id(notices), by_slurm_id(releases)
    starts = [r.start_time for rs in runs.values() for r in rs]
    begin = max(since, min(starts, default=now - 600.0))
    managed = managed_nodes(facts_of(nodes), config.partitions, config.node_types)
    lanes = [(m.name, m.gpu_type, m.gpus) for m in managed]
    return timeline_payload(runs, told, lanes, queue, begin, now, freed)


def render(
    status: dict[str, Any],
    fairness: dict[str, Any],
    rounds: dict[str, Any],
    timeline: dict[str, Any] | None = None,
) -> str:
    """The whole page; it reloads itself every :data:`REFRESH_S` seconds."""
    leader = status["leader"]
    led = (
        f"leader: {leader['holder']} (fencing token {leader['token']})"
        if leader["holder"]
        else "leader: none"
    )
    # what holds GPUs (running, or a profiling run) runs; what holds none waits
    running = [j for j in status["jobs"] if j["nodes"]]
    queued = sorted(
        (j for j in status["jobs"] if not j["nodes"]),
        key=lambda j: j["queue_position"] or len(status["jobs"]) + 1,
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>hops status</title>",
        f"<meta http-equiv='refresh' content='{REFRESH_S}'>",
        f"<style>{STYLE}</style></head><body><h1>hops</h1>",
        f"<p id='leader'>{escape(led)} &middot; RAQLR ({status['raqlr_window_h']:g} h): "
        f"{status['raqlr']:.2f} &middot; page made {escape(utc(time.time()))}</p>",
        *_timeline_parts(timeline),
        "<h2>GPU types</h2>",
        _gpu_types(status["cluster"]),
        f"<h2>Queue ({len(queued)})</h2>",
        _queue(queued[:PAGE_ROWS]),
        _more(len(queued), "waiting jobs", "/status.json"),
        f"<h2>Running ({len(running)})</h2>",
        _running(running[:PAGE_ROWS]),
        _more(len(running), "running jobs", "/status.json"),
        "<h2>Fairness per job</h2>",
        _fairness_jobs(fairness["jobs"][:PAGE_ROWS]),
        _more(len(fairness["jobs"]), "jobs", "/fairness.json"),
        f"<h2>Fairness per user</h2><p>Jain index {fairness['jain_users']:.3f}</p>",
        table("fairness-users", *_users(fairness["users"])),
        "<h2>Recent rounds</h2>",
        _rounds(rounds["rounds"]),
        "</body></html>",
    ]
    return "".join(parts)


def _more(total: int, what: str, document: str) -> str:
    """Where the rows a table leaves out are (empty when it shows them all)."""
    if total <= PAGE_ROWS:
        return ""
    return (
        f"<p class='more'>{total - PAGE_ROWS:,} more {escape(what)} not shown: "
        f"<a href='{escape(document)}'>{escape(document)}</a> and <code>hops status</code> "
        "list every one</p>"
    )


def _gpu_types(cluster: list[dict[str, Any]]) -> str:
    """The GPU types: nodes, GPUs, busy and idle."""
    return table(
        "gpu-types",
        ("type", "nodes", "GPUs", "busy", "idle"),
        (
            (c["gpu_type"], c["nodes"], c["gpus_total"], c["gpus_busy"], c["gpus_idle"])
            for c in cluster
        ),
    )


#: The first columns of every table of jobs: which job, whose, and its state.
_JOB = ("job", "user", "state")


def _job(j: dict[str, Any]) -> tuple[Any, Any, Any]:
    return j["job_id"], j["user"], j["state"]


def _queue(queued: list[dict[str, Any]]) -> str:
    """The jobs holding no GPUs, with their expected start."""
    return table(
        "queue",
        (*_JOB, "demands", "wait", "LR", "START", "reason"),
        (
            (
                *_job(j),
                demands(j["demands"]),
                duration(j["wait_s"]),
                ratio(j["latency_ratio"]),
                duration(j["start_in_s"]),
                j["reason"] or j["problem"] or "",
            )
            for j in queued
        ),
        JOB_LINK,
    )


def _running(running: list[dict[str, Any]]) -> str:
    """The jobs holding GPUs, with their expected end."""
    return table(
        "running",
        (*_JOB, "type", "nodes", "LR", "ETA", "reason"),
        (
            (
                *_job(j),
                j["gpu_type"] or "",
                placement(j["nodes"]),
                ratio(j["latency_ratio"]),
                duration(j["eta_s"]),
                j["reason"] or "",
            )
            for j in running
        ),
        JOB_LINK,
    )


def _fairness_jobs(jobs: list[dict[str, Any]]) -> str:
    """Each job's latency ratio, finish-time fairness and whether it starves."""
    return table(
        "fairness-jobs",
        (*_JOB, "LR", "rho", "starving"),
        (
            (
                *_job(j),
                ratio(j["latency_ratio"]),
                ratio(j["ftf_rho"]),
                "yes" if j["starving"] else "",
            )
            for j in jobs
        ),
    )


def _rounds(rounds: list[dict[str, Any]]) -> str:
    """The latest rounds: when, what kind, and what they cost."""
    return table(
        "rounds",
        ("round", "at", "kind", "queued", "running", "actions", "decision s", "idle GPUs"),
        (
            (
                r["number"],
                utc(r["started_at"]),
                r["kind"],
                r["queued"],
                r["running"],
                r["actions"],
                f"{r['decision_s']:.3f}",
                r["idle_gpus_waiting"],
            )
            for r in rounds
        ),
    )


def _timeline_parts(timeline: dict[str, Any] | None) -> list[str]:
    if timeline is None:
        return []
    span = f"{utc(timeline['since'])} to {utc(timeline['until'])}"
    return [
        f"<h2>Timeline</h2><p>{escape(span)}: each node's GPUs; a bar is a run "
        "(grey: held for it, released and waiting for Slurm to start it; blue: running; "
        "orange: profiling; red: in its checkpoint grace).</p>",
        render_svg(timeline),
        render_curves(timeline),
    ]


def _users(users: Sequence[dict[str, Any]]) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
    """Columns as the fairness document has them (usage, share, ...), whatever they are."""
    if not users:
        return ("user",), []
    headers = list(users[0].keys())
    return headers, ([_cell(u[h]) for h in headers] for u in users)


#: Where a job's own page is: its id in the tables links there.
JOB_LINK = "/job/"


def table(
    ident: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    link: str | None = None,
) -> str:
    """An HTML table, every cell escaped; with ``link`` the first cell links to
    ``link`` + its value (a job id to the job's page)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)

    def first(value: Any) -> str:
        text = escape(_cell(value))
        return f"<a href='{escape(link)}{text}'>{text}</a>" if link and value is not None else text

    body = "".join(
        "<tr>"
        + "".join(f"<td>{first(v) if k == 0 else escape(_cell(v))}</td>" for k, v in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table id='{ident}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
