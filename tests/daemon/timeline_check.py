"""Checks of the status page's timeline against the ledger and against its own picture.

:func:`bars_against_ledger`: every bar of ``/timeline.json`` is a run the
ledger recorded, on that node, from that run's start (or the window's) to its
end (or now, while it runs); a ``held`` bar runs from a release hops carried
out for that run to the run's start. :func:`bars_in_screenshot`: in a screenshot of
``/timeline.svg``, the pixel in the middle of each bar (the part of it drawn
at both ends of the few seconds between two fetches of the document) has the
colour of its kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.models import IntentRow, JobRow, RunRow
from hopsd.ledger.records import IntentAction, IntentState
from hopsd.views.timeline import COLOURS, LABEL, LANE_PX, WIDTH

Doc = Mapping[str, Any]


def bars_against_ledger(doc: Doc, sessions: sessionmaker[Session]) -> tuple[int, list[str]]:
    """(bars checked, problems)."""
    with sessions.begin() as s:
        slurm_of = {r.id: int(r.slurm_job_id or 0) for r in s.scalars(select(JobRow))}
        runs = {(slurm_of[r.job_id], r.run): r for r in s.scalars(select(RunRow))}
        released = {
            (slurm_of[r.job_id], int(r.payload.get("run", -1)), round(r.created_at, 3))
            for r in s.scalars(
                select(IntentRow).where(
                    IntentRow.action == IntentAction.RELEASE, IntentRow.state == IntentState.DONE
                )
            )
            if r.job_id in slurm_of
        }
        ended_on: dict[str, list[float]] = {}
        for r in runs.values():
            for n, _ in r.parts or []:
                if r.end_time is not None:
                    ended_on.setdefault(str(n), []).append(r.end_time)
        problems: list[str] = []
        checked = 0
        for node in doc["nodes"]:
            for bar in node["bars"]:
                checked += 1
                run = runs.get((bar["job_id"], bar["run"]))
                if run is None:
                    problems.append(f"bar {bar} is no run of the ledger")
                    continue
                parts = {str(n): int(g) for n, g in run.parts or []}
                if parts.get(bar["node"]) != bar["gpus"]:
                    problems.append(f"bar {bar} but the run held {parts}")
                start = max(run.start_time, doc["since"])
                if bar["kind"] == "held":
                    # from the release, or (a move's release is decided with its stop)
                    # from the end of the job's previous run
                    key = (bar["job_id"], bar["run"], round(bar["start"], 3))
                    before = runs.get((bar["job_id"], bar["run"] - 1))
                    after_previous = (
                        before is not None
                        and before.end_time is not None
                        and abs(bar["start"] - before.end_time) <= 1e-3
                    )
                    # or from the end of another run on the node (whose GPUs it takes)
                    after_other = any(
                        abs(bar["start"] - e) <= 1e-3 for e in ended_on.get(bar["node"], [])
                    )
                    from_release = key in released or after_previous or after_other
                    if abs(bar["end"] - run.start_time) > 1e-3 or (
                        bar["start"] > doc["since"] and not from_release
                    ):
                        problems.append(f"held bar {bar}: no release of it before {start}")
                    continue
                if bar["kind"] != "grace" and abs(bar["start"] - start) > 1e-3:
                    problems.append(f"bar {bar} but the run started at {run.start_time}")
                ended = run.end_time
                if bar["open"] != (ended is None) or (ended is not None and bar["end"] > ended):
                    problems.append(f"bar {bar} but the run ended at {ended}")
    return checked, problems


def _x(at: float, doc: Doc) -> float:
    return LABEL + (at - doc["since"]) / max(doc["until"] - doc["since"], 1e-9) * (WIDTH - LABEL)


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def bars_in_screenshot(png: Path, before: Doc, after: Doc) -> tuple[int, list[str]]:
    """(bars found where they belong, problems), ``before``/``after`` the documents fetched
    around the screenshot (their ``until`` brackets the one drawn)."""
    image = Image.open(png).convert("RGB")
    later = {(b["job_id"], b["run"], b["kind"], b["node"]): b
             for n in after["nodes"] for b in n["bars"]}  # fmt: skip
    problems: list[str] = []
    checked = 0
    top = 4
    for node in before["nodes"]:
        for bar in node["bars"]:
            twin = later.get((bar["job_id"], bar["run"], bar["kind"], bar["node"]))
            if twin is None:
                continue
            left = max(_x(bar["start"], before), _x(twin["start"], after))
            right = min(_x(bar["end"], before), _x(twin["end"], after))
            if right - left < 4:
                continue  # too thin to tell apart from its neighbours
            x = int((left + right) / 2)
            y = int(top + bar["lane"] * LANE_PX + (bar["gpus"] * LANE_PX - 1) / 2)
            seen = image.getpixel((x, y))
            want = _rgb(COLOURS[bar["kind"]])
            checked += 1
            if max(abs(a - b) for a, b in zip(seen, want, strict=True)) > 24:
                problems.append(f"at ({x}, {y}) {seen}, not {want}, for bar {bar}")
        top += max(int(node["gpus"]), 1) * LANE_PX + 6
    return checked, problems
