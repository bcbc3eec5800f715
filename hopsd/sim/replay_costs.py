"""What launches and restarts really cost on the cluster, measured from a window.

A replay charges each job what its first launch and its restarts cost live,
not a configured penalty: both are read back from hopsd's start decisions and
placements, against the job's measured rates.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from hopsd.core.model import Configuration
from hopsd.sim.replay import ReplayWorld, model_of
from hopsd.sim.replay_inputs import ReplayJob, ReplayPlacement


def measured_launch(
    jobs: Sequence[ReplayJob], placements: Sequence[ReplayPlacement], tick_s: float
) -> dict[str, float]:
    """What each job's first start cost before it trained: from hopsd's start decision
    to Slurm running it (launch), plus the job's own start to first iteration
    (``startup_s``, when its probe reported it). Jobs never started are left out.

    hopsd sees a job running at the first tick after Slurm started it, so
    Slurm's start lies within the ``tick_s`` before ``first_start_time`` (and
    not before the decision): the launch is the middle of that span.
    """
    decided: dict[str, float] = {}
    for p in sorted(placements, key=lambda p: p.at):
        if p.reason == "start":
            decided.setdefault(p.job_id, p.at)
    out: dict[str, float] = {}
    for j in jobs:
        at = decided.get(j.job_id)
        if at is None or j.first_start_time is None:
            continue
        latest = max(j.first_start_time - at, 0.0)
        earliest = max(latest - tick_s, 0.0)
        out[j.job_id] = (earliest + latest) / 2 + max(j.startup_s or 0.0, 0.0)
    return out


def measured_restart_cost(
    world: ReplayWorld, placements: Sequence[ReplayPlacement]
) -> float | None:
    """What a restart really cost on the cluster: the median over finished, restarted jobs.

    A job's placements (start or move until the next start, move, preempt or
    end) at its measured rates would have done more samples than it had, had
    every relaunch been free (and its first launch, the truth's ``launch_s``);
    the excess, over the rates of the placements that began with a relaunch,
    is the time each relaunch cost it (requeue, Slurm's launch, the job's own
    restore until it trains again). None when no finished job was ever
    restarted.
    """
    by_job: dict[str, list[ReplayPlacement]] = {}
    for p in sorted(placements, key=lambda p: p.at):
        by_job.setdefault(p.job_id, []).append(p)
    costs: list[float] = []
    for live in world.live.values():
        if live.restarts <= 0 or live.end_time is None:
            continue
        spans = _spans(by_job.get(live.job_id, []), live.end_time)
        if not spans:
            continue
        rate_of = world.truth.throughput
        model = model_of(live.job_id)
        launch = world.truth.model(model).launch_s
        first = min(launch, spans[0][2] - spans[0][1])
        done = sum(rate_of(model, cfg) * (end - begin) for cfg, begin, end in spans)
        done -= rate_of(model, spans[0][0]) * first
        relaunched = sum(rate_of(model, cfg) for cfg, _, _ in spans[1:])
        if relaunched > 0:
            costs.append(max((done - live.total_samples) / relaunched, 0.0))
    return statistics.median(costs) if costs else None


def _spans(
    rows: Sequence[ReplayPlacement], end_time: float
) -> list[tuple[Configuration, float, float]]:
    """(placement, from, to) of each stretch a job held GPUs (keeps do not break one)."""
    spans: list[tuple[Configuration, float, float]] = []
    current: tuple[Configuration, float] | None = None
    for row in rows:
        if row.reason == "keep":
            continue
        if current is not None:
            spans.append((current[0], current[1], row.at))
            current = None
        if row.reason in ("start", "move") and row.parts and row.gpu_type:
            current = (Configuration(row.gpu_type, tuple(row.parts)), row.at)
    if current is not None:
        spans.append((current[0], current[1], max(end_time, current[1])))
    return spans
