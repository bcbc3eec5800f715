"""The score stage: every active job's latency ratio and finish-time fairness, once.

``hops status``, ``hops fairness`` and RAQLR show and average the latency ratio
(LR, eq. 8) and Themis' rho of each job as the planner sees it: at the size the
size check believes (:mod:`hopsd.core.sizeclaim`), not at a doubted claim, and
with rho's equal share taken among the jobs planned together. The step scores
the jobs it plans (:func:`hopsd.core.step.schedule_step` with
``StepOptions.score``); hopsd records what it gets, including the final LR of
jobs that just ended (:func:`score_jobs` with ``ended``).

One job's failure costs only that job's figures: it is returned with the
exception, so the caller can say which job it skipped and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.core.estimator import Estimator
from hopsd.core.model import Job
from hopsd.core.priorities import PriorityContext, finish_time_fairness, latency_ratio
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot


@dataclass(frozen=True)
class Scores:
    """LR and (finite) rho per job id, and the jobs that could not be scored, with why."""

    latency_ratio: Mapping[str, float] = field(default_factory=dict)
    ftf_rho: Mapping[str, float] = field(default_factory=dict)
    failed: tuple[tuple[str, Exception], ...] = ()


def score_jobs(
    snapshot: Snapshot,
    settings: Settings,
    jobs: Sequence[Job] | None = None,
    *,
    n_jobs: int | None = None,
    ended: Sequence[Job] = (),
) -> Scores:
    """LR and rho of ``jobs`` (default: the snapshot's), and LR alone of ``ended`` jobs.

    ``jobs`` are to be at their believed sizes already (the step passes them
    after its size check); ``n_jobs`` is how many jobs share the cluster for
    rho's equal share (default: the snapshot's). An ended job's failure is not
    reported (it has nothing left to skip).
    """
    estimator = Estimator(snapshot.cluster, snapshot.store, settings)
    scored = snapshot.jobs if jobs is None else jobs
    count = len(snapshot.jobs) if n_jobs is None else n_jobs
    ctx = PriorityContext(snapshot.now, snapshot.cluster, estimator, max(count, 1))
    failed: list[tuple[str, Exception]] = []
    ratios: dict[str, float] = {}
    rhos: dict[str, float] = {}
    for job in scored:
        ratio = _tried(job, ctx, latency_ratio, failed)
        if ratio is not None:
            ratios[job.id] = ratio
    for job in scored:
        rho = _tried(job, ctx, finish_time_fairness, failed)
        if rho is not None and math.isfinite(rho):
            rhos[job.id] = rho
    for job in ended:
        if job.id not in ratios:
            ratio = _tried(job, ctx, latency_ratio, [])
            if ratio is not None:
                ratios[job.id] = ratio
    return Scores(ratios, rhos, tuple(failed))


def _tried(
    job: Job,
    ctx: PriorityContext,
    score: Callable[[Job, PriorityContext], float],
    failed: list[tuple[str, Exception]],
) -> float | None:
    """``score(job)``, or None with the exception noted: a job's own data may be unusable."""
    try:
        return score(job, ctx)
    except Exception as exc:  # whatever the job's data raises costs only its figures
        failed.append((job.id, exc))
        return None
