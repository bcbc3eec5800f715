"""The status page's timeline: which job held which GPUs of each node, and when.

Built from the ledger's runs (:mod:`hopsd.ledger.runs`: Slurm's start of each
run, its end, its nodes), the releases hops made (the GPUs are *held* for a run
from hops's decision to release it until Slurm starts it), the notices hops
sent (a run's last stretch, from the signal to its end, is its checkpoint
grace) and the rounds (how many jobs waited). One document serves
``/timeline.json`` and the SVG the page draws from it, so a test can hold every
bar against the run it stands for.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from hopsd.ledger.records import JobRun

#: Points of each utilisation curve over the window.
SAMPLES = 60


@dataclass(frozen=True)
class Bar:
    """One run's hold on one node: GPUs ``lane`` to ``lane + gpus - 1`` from start to end."""

    node: str
    lane: int
    gpus: int
    job_id: int
    run: int
    kind: str  # held (released, not started yet), profiling, run, or grace (notice to end)
    start: float
    end: float
    open: bool

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


#: How long before its start a release still counts as this run's (older: a stale intent).
HELD_MAX_S = 600.0
#: Slurm stamps starts in whole seconds, hops sees ends to the microsecond: an end less
#: than this after a start on the same node may still have freed that start's GPUs.
SLURM_CLOCK_S = 1.0


def held_from(run: JobRun, released_at: float | None, after: float | None = None) -> float:
    """When the run's GPUs were first held: hops's release decision (a move decides the
    release with the stop, so not before the job's previous run ended), else its start."""
    if released_at is None or not run.start_time - HELD_MAX_S <= released_at < run.start_time:
        return run.start_time
    return released_at if after is None else min(max(released_at, after), run.start_time)


def _stretches(
    run: JobRun, notice_at: float | None, held: float, now: float
) -> list[tuple[str, float, float]]:
    """``held`` from ``held`` to the start, the run's kind, then ``grace`` from the
    notice to its end."""
    end = run.end_time if run.end_time is not None else now
    out = [("held", held, run.start_time)] if held < run.start_time else []
    if notice_at is None or not run.start_time < notice_at < end:
        return [*out, (run.kind, run.start_time, end)]
    return [*out, (run.kind, run.start_time, notice_at), ("grace", notice_at, end)]


def bars_of(
    runs: Mapping[int, Sequence[JobRun]],
    notices: Mapping[tuple[int, int], float],
    sizes: Mapping[str, int],
    since: float,
    now: float,
    releases: Mapping[tuple[int, int], float] | None = None,
) -> list[Bar]:
    """Every run's bars on the nodes of ``sizes``, each on GPU lanes free at its start.

    ``runs`` per Slurm job id; ``notices`` the signal time per (job, run);
    ``releases`` hops's release decision per (job, run).
    Lanes are assigned in start order, lowest free first, so bars on one node
    never overlap while the runs did not hold more GPUs than the node has.
    """
    released = releases or {}
    spans: list[tuple[float, float, str, int, JobRun]] = []
    for job, job_runs in runs.items():
        before: float | None = None  # the end of the job's previous run
        for run in sorted(job_runs, key=lambda r: r.start_time):
            end = run.end_time if run.end_time is not None else now
            since_held = held_from(run, released.get((job, run.run)), before)
            before = end
            if end < since:
                continue
            for node, _gpus in run.parts:
                if node in sizes:
                    spans.append((since_held, end, node, job, run))
    spans = _held_after_others(spans)
    busy: dict[str, list[tuple[float, int, int]]] = {}  # node -> (until, lane, gpus)
    out: list[Bar] = []
    for start, end, node, job, run in sorted(spans, key=lambda s: (s[0], s[2], s[3])):
        gpus = dict(run.parts)[node]
        held = [(u, lane, g) for u, lane, g in busy.get(node, []) if u > start]
        lane = _free_lane(held, gpus, sizes[node])
        busy[node] = [*held, (end, lane, gpus)]
        stretches = _stretches(run, notices.get((job, run.run)), start, now)
        for kind, a, b in stretches:
            if b <= since:
                continue
            out.append(
                Bar(node, lane, gpus, job, run.run, kind, max(a, since), b, run.end_time is None)
            )
    return out


def _held_after_others(
    spans: list[tuple[float, float, str, int, JobRun]],
) -> list[tuple[float, float, str, int, JobRun]]:
    """A run's held stretch on a node starts no earlier than the last other run there
    ended before its start: hops decides a release with the stop of the job whose GPUs
    it takes (that one checkpoints meanwhile), and the GPUs are the new run's only then."""
    ends: dict[str, list[float]] = {}
    for _held, end, node, _job, run in spans:
        ends.setdefault(node, []).append(end if run.end_time is not None else float("inf"))
    out = []
    for held, end, node, job, run in spans:
        if held < run.start_time:
            freed = [e for e in ends[node] if held < e < run.start_time + SLURM_CLOCK_S]
            held = min(max([held, *freed]), run.start_time)
        out.append((held, end, node, job, run))
    return out


def _free_lane(held: Sequence[tuple[float, int, int]], gpus: int, size: int) -> int:
    taken = {lane + k for _, lane, g in held for k in range(g)}
    for lane in range(max(size - gpus + 1, 1)):
        if not any(lane + k in taken for k in range(gpus)):
            return lane
    return 0  # more held than the node has (Slurm's view changed): draw over lane 0


def utilisation(
    bars: Sequence[Bar],
    types: Mapping[str, str],
    sizes: Mapping[str, int],
    since: float,
    now: float,
) -> dict[str, list[list[float]]]:
    """Per GPU type: ``[time, share of its GPUs held]`` at :data:`SAMPLES` instants."""
    totals: dict[str, int] = {}
    for node, size in sizes.items():
        totals[types[node]] = totals.get(types[node], 0) + size
    step = max(now - since, 1.0) / (SAMPLES - 1)
    out: dict[str, list[list[float]]] = {t: [] for t in sorted(totals)}
    for k in range(SAMPLES):
        at = since + k * step
        held: dict[str, int] = {}
        for b in bars:
            if b.start <= at < b.end or (b.open and b.start <= at):
                held[types[b.node]] = held.get(types[b.node], 0) + b.gpus
        for t, total in totals.items():
            out[t].append([round(at, 3), round(min(held.get(t, 0) / total, 1.0), 4)])
    return out


def timeline_payload(
    runs: Mapping[int, Sequence[JobRun]],
    notices: Mapping[tuple[int, int], float],
    nodes: Sequence[tuple[str, str, int]],
    queue: Sequence[tuple[float, int]],
    since: float,
    now: float,
    releases: Mapping[tuple[int, int], float] | None = None,
) -> dict[str, Any]:
    """The ``/timeline.json`` document; ``nodes`` are (name, GPU type, GPUs)."""
    sizes = {n: g for n, _, g in nodes}
    types = {n: t for n, t, _ in nodes}
    bars = bars_of(runs, notices, sizes, since, now, releases)
    return {
        "since": since,
        "until": now,
        "nodes": [
            {
                "node": n,
                "gpu_type": t,
                "gpus": g,
                "bars": [b.as_json() for b in bars if b.node == n],
            }
            for n, t, g in nodes
        ],
        "utilisation": utilisation(bars, types, sizes, since, now),
        "queue": [[round(at, 3), q] for at, q in queue if since <= at <= now],
    }


# -- the SVG -----------------------------------------------------------------------------

WIDTH = 960
LABEL = 90
LANE_PX = 10
#: Bars at least this wide carry their job's id.
LABELLED_PX = 60
COLOURS = {"run": "#3a7bd5", "profiling": "#f0a030", "grace": "#c0392b", "held": "#8e8e8e"}


def _x(at: float, since: float, until: float) -> float:
    span = max(until - since, 1e-9)
    return round(LABEL + (at - since) / span * (WIDTH - LABEL), 2)


def render_svg(doc: Mapping[str, Any]) -> str:
    """Each node a band of GPU lanes; each bar a run (or its grace) at its times.

    Every bar carries its job, run, kind and times as ``data-`` attributes, and
    a tooltip, so the picture can be read by a person and checked by a test.
    """
    since, until = float(doc["since"]), float(doc["until"])
    rows: list[str] = []
    y = 4
    for node in doc["nodes"]:
        height = max(int(node["gpus"]), 1) * LANE_PX
        rows.append(
            f"<text x='2' y='{y + height / 2 + 4:.0f}' font-size='11'>"
            f"{_e(node['node'])}</text>"
            f"<rect x='{LABEL}' y='{y}' width='{WIDTH - LABEL}' height='{height}' "
            "fill='#f4f4f4' stroke='#ccc'/>"
        )
        for bar in node["bars"]:
            x0, x1 = _x(bar["start"], since, until), _x(bar["end"], since, until)
            rows.append(
                f"<rect class='bar {bar['kind']}' data-job='{bar['job_id']}' "
                f"data-run='{bar['run']}' data-kind='{bar['kind']}' data-node='{_e(bar['node'])}' "
                f"data-start='{bar['start']:.3f}' data-end='{bar['end']:.3f}' "
                f"x='{x0}' y='{y + bar['lane'] * LANE_PX}' width='{max(x1 - x0, 1.0):.2f}' "
                f"height='{bar['gpus'] * LANE_PX - 1}' fill='{COLOURS.get(bar['kind'], '#888')}'>"
                f"<title>job {bar['job_id']} run {bar['run']} ({bar['kind']}) on "
                f"{_e(bar['node'])}: {bar['gpus']} GPU(s)</title></rect>"
            )
            if x1 - x0 >= LABELLED_PX:  # the job's id at the bar's left, clear of its middle
                rows.append(
                    f"<text class='job' x='{x0 + 3:.1f}' y='{y + bar['lane'] * LANE_PX + 8}' "
                    f"font-size='8' fill='#fff'>{bar['job_id']}</text>"
                )
        y += height + 6
    rows.append(_axis(since, until, y))
    return (
        f"<svg id='timeline' xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' "
        f"height='{y + 16}' data-since='{since:.3f}' data-until='{until:.3f}'>"
        f"{''.join(rows)}</svg>"
    )


def _axis(since: float, until: float, y: int, ticks: int = 5) -> str:
    """Times (UTC) under the bands, at ``ticks`` evenly spaced instants."""
    marks = []
    for k in range(ticks):
        at = since + (until - since) * k / (ticks - 1)
        x = _x(at, since, until)
        anchor = "start" if k == 0 else "end" if k == ticks - 1 else "middle"
        clock = datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")
        marks.append(
            f"<line x1='{x}' y1='{y - 4}' x2='{x}' y2='{y}' stroke='#999'/>"
            f"<text class='tick' x='{x}' y='{y + 10}' font-size='9' text-anchor='{anchor}'>"
            f"{clock}</text>"
        )
    return "".join(marks)


def render_curves(doc: Mapping[str, Any], height: int = 80) -> str:
    """Per-type utilisation and the queue's length over the window, as polylines."""
    since, until = float(doc["since"]), float(doc["until"])
    lines = []
    palette = ["#3a7bd5", "#27ae60", "#8e44ad", "#d35400", "#16a085"]
    for k, (gpu_type, points) in enumerate(sorted(doc["utilisation"].items())):
        path = " ".join(f"{_x(t, since, until)},{height - v * height:.1f}" for t, v in points)
        lines.append(
            f"<polyline class='utilisation' data-type='{_e(gpu_type)}' fill='none' "
            f"stroke='{palette[k % len(palette)]}' points='{path}'/>"
            f"<text x='2' y='{12 + 12 * k}' font-size='11' "
            f"fill='{palette[k % len(palette)]}'>{_e(gpu_type)}</text>"
        )
    top = max((q for _, q in doc["queue"]), default=0) or 1
    path = " ".join(
        f"{_x(t, since, until)},{height - q / top * height:.1f}" for t, q in doc["queue"]
    )
    lines.append(
        f"<polyline class='queue' fill='none' stroke='#555' stroke-dasharray='4 2' "
        f"points='{path}'/>"
    )
    return (
        f"<svg id='curves' xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' "
        f"height='{height + 4}'>{''.join(lines)}</svg>"
        f"<p>GPUs held per type (0-100 %), and jobs waiting (dashed, 0-{top}).</p>"
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
