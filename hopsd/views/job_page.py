"""hopsd's ``/job/ID`` page: one job's own timeline, its runs and what hops foresaw for it.

The timeline is the status page's, drawn for this job alone from its submit
to its end (or now): on each node it used, held (released, not started yet),
profiling, running and checkpoint grace. Under it, each Slurm run and why it
ended, and every START and ETA hopsd recorded for the job, beside what
happened. Served like the status page to a viewer nobody vouches for: a job
Slurm's ``PrivateData`` hides from any user is not found.
"""

from __future__ import annotations

import time
from typing import Any

from hopsd.core.privacy import ANONYMOUS, PrivateData, Viewer, sees_job
from hopsd.ledger.unit import Ledger
from hopsd.views.cells import duration
from hopsd.views.jobshow import show_payload
from hopsd.views.page import REFRESH_S, STYLE, escape, table, utc
from hopsd.views.privacy import public_job
from hopsd.views.timeline import render_svg, timeline_payload

_NOBODY = Viewer(ANONYMOUS)


def job_document(ledger: Ledger, rules: PrivateData, slurm_id: int) -> dict[str, Any] | None:
    """``/job/ID.json``: the job as ``hops show`` has it, its timeline and its predictions;
    None when there is no such job or no user may see it."""
    now = time.time()
    with ledger.reading() as unit:
        shown = show_payload(unit, slurm_id)
        if shown is None or not sees_job(rules, _NOBODY, str(shown["user"])):
            return None
        job_id = str(shown["id"])
        runs = unit.job_runs([job_id])[job_id]
        said = unit.job_predictions([job_id])[job_id]
        since = float(shown["submit_time"])
        notices = unit.notices_since(since - 3600)
        releases = unit.releases_since(since - 3600)
    until = float(shown["end_time"]) if shown["end_time"] is not None else now
    used: dict[str, tuple[str, int]] = {}
    for run in runs:
        for node, gpus in run.parts:
            kept = used.get(node, (run.gpu_type or "", 0))
            used[node] = (kept[0], max(kept[1], gpus))
    lanes = [(n, t, g) for n, (t, g) in sorted(used.items())]

    def mine(per_run: dict[tuple[str, int], float]) -> dict[tuple[int, int], float]:
        return {(slurm_id, n): at for (j, n), at in per_run.items() if j == job_id}

    timeline = timeline_payload(
        {slurm_id: runs}, mine(notices), lanes, [], since, until, mine(releases)
    )
    return {
        "job": public_job(shown, rules),
        "timeline": timeline,
        "predictions": [
            {
                "made_at": p.made_at,
                "state": p.state,
                "start_at": p.start_at,
                "end_at": p.end_at,
                "gpu_type": p.gpu_type,
                "gpus": p.gpus,
            }
            for p in said
        ],
    }


def render_job(doc: dict[str, Any]) -> str:
    """The page of one job; it reloads itself like the status page."""
    job = doc["job"]
    title = f"job {job['job_id']} ({job['name']})"
    first = job["start_time"]
    facts = (
        f"{escape(job['user'])} &middot; {escape(job['state'])}"
        f" &middot; {escape(job['reason'] or '-')}"
        f" &middot; GPUs {escape(','.join(map(str, job['demands'])))}"
        f" &middot; samples {job['samples_done']:.0f}/{job['total_samples']:.0f}"
        f" &middot; submitted {escape(utc(job['submit_time']))}"
        f" &middot; started {escape(utc(first) if first else '-')}"
        f" &middot; START {escape(duration(job['start_in_s']))}"
        f" &middot; ETA {escape(duration(job['eta_s']))}"
    )
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>",
        f"<meta http-equiv='refresh' content='{REFRESH_S}'>",
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>",
        f"<p id='facts'>{facts}</p>",
        "<h2>Timeline</h2><p>From its submission: grey held for it, blue running, "
        "orange profiling, red in its checkpoint grace.</p>",
        render_svg(doc["timeline"]),
        "<h2>Runs</h2>",
        table(
            "runs",
            ("run", "kind", "type", "nodes", "start", "end", "elapsed", "ended"),
            (
                (
                    r["run"],
                    r["kind"],
                    r["gpu_type"] or "-",
                    ",".join(f"{n}:{g}" for n, g in r["nodes"].items()),
                    utc(r["start_time"]),
                    utc(r["end_time"]) if r["end_time"] is not None else "-",
                    duration(r["elapsed_s"]),
                    r["ended"] or "",
                )
                for r in job["runs"]
            ),
        ),
        "<h2>What hops foresaw</h2>",
        table(
            "predictions",
            ("made", "state", "start", "end", "on"),
            (
                (
                    utc(p["made_at"]),
                    p["state"],
                    utc(p["start_at"]) if p["start_at"] is not None else "-",
                    utc(p["end_at"]) if p["end_at"] is not None else "-",
                    f"{p['gpu_type']} x{p['gpus']}" if p["gpu_type"] else "",
                )
                for p in doc["predictions"]
            ),
        ),
        "</body></html>",
    ]
    return "".join(parts)
