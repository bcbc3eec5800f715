"""Figures of one simulated run: JCTs, waits, latency ratios, finish-time fairness, idle GPUs.

Latency ratio and finish-time fairness are computed from the *true* model
throughputs, so the figures judge every policy by the same yardstick whatever
its estimator believed:

* ``age`` (eq. 9, the expected run time):
  ``sum_j P(type=j) * total_samples / (thr_1gpu_j * R_avg)``;
  ``LR = wait / age`` where wait is the time the engine charged as waiting
  (:mod:`hopsd.core.accounting`, as hopsd charges it: a profiling run holds GPUs
  and is not waiting).
* ``FTF rho = JCT / T_independent`` (Themis, heterogeneous form): the job alone on
  an equal share of the cluster, ``share = min(R_max, G / N_avg)`` GPUs spread
  over the type mix, ``N_avg`` the time-averaged number of jobs in the system
  during the job's lifetime: ``T_independent = age * R_avg / share``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hopsd.core.metrics import finish_time_fairness_of, latency_ratio_of, percentile_or_zero
from hopsd.sim.state import EngineResult, JobState
from hopsd.sim.truth import GroundTruth

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One finished job, as exported to CSV/JSON."""

    job_id: str
    model: str
    user: str
    demands: str
    submit_s: float
    first_start_s: float
    finish_s: float
    jct_s: float
    wait_s: float
    run_s: float
    age_s: float
    latency_ratio: float
    ftf_rho: float
    restarts: int
    gpu_types: str


def true_age(truth: GroundTruth, job: JobState) -> float:
    """Eq. 9 with the true single-GPU throughputs (hosts of factor 1.0).

    Types the job's model does not fit are left out and the other types' shares
    scaled up to one: a random GPU the job could be given is one it fits.
    """
    spec = truth.model(job.spec.model)
    every = truth.cluster.type_fractions()
    fractions = {t: f for t, f in every.items() if spec.runs_on(t)}
    held = sum(fractions.values())
    if len(fractions) < len(every) and held > 0:
        fractions = {t: f / held for t, f in fractions.items()}
    avg_demand = sum(job.spec.demands) / len(job.spec.demands)
    total = 0.0
    for gpu_type, share in fractions.items():
        if share > 0:
            total += (
                share
                * job.spec.total_samples
                / (
                    truth.single_gpu(job.spec.model, gpu_type, batch_size=job.batch_size)
                    * avg_demand
                )
            )
    return total


def job_records(truth: GroundTruth, result: EngineResult) -> list[JobRecord]:
    """Per-job figures of a finished run (every job must be done)."""
    records = []
    total_gpus = result.total_gpus
    for job in result.jobs:
        if job.finish_time is None or job.first_start is None:
            raise ValueError(f"job {job.spec.job_id!r} did not finish")
        jct = job.finish_time - job.spec.submit_time
        wait = job.wait_time
        age = true_age(truth, job)
        avg_demand = sum(job.spec.demands) / len(job.spec.demands)
        n_avg = (
            (job.active_integral_at_finish - job.active_integral_at_submit) / jct if jct > 0 else 1
        )
        share = min(float(job.spec.demands[-1]), total_gpus / max(n_avg, 1.0))
        independent = age * avg_demand / share
        records.append(
            JobRecord(
                job_id=job.spec.job_id,
                model=job.spec.model,
                user=job.spec.user,
                demands="|".join(str(d) for d in job.spec.demands),
                submit_s=job.spec.submit_time,
                first_start_s=job.first_start,
                finish_s=job.finish_time,
                jct_s=jct,
                wait_s=max(wait, 0.0),
                run_s=job.run_time,
                age_s=age,
                latency_ratio=latency_ratio_of(max(wait, 0.0), age),
                ftf_rho=finish_time_fairness_of(jct, independent),
                restarts=job.restarts,
                gpu_types="|".join(sorted(job.types_used)),
            )
        )
    return records


def summarise(result: EngineResult, records: Sequence[JobRecord]) -> dict[str, float]:
    """The per-policy figures of the results object."""
    jcts = [r.jct_s / HOUR for r in records]
    lrs = [r.latency_ratio for r in records]
    first = min(r.submit_s for r in records)
    makespan = (max(r.finish_s for r in records) - first) / HOUR
    waiting_rounds = [s for s in result.rounds if s.waiting_s > 0]
    idle = (
        float(np.mean([s.idle_gpu_s_waiting / s.waiting_s for s in waiting_rounds]))
        if waiting_rounds
        else 0.0
    )
    usable = (
        float(np.mean([s.usable_idle_gpu_s / s.waiting_s for s in waiting_rounds]))
        if waiting_rounds
        else 0.0
    )
    span = sum(s.duration for s in result.rounds)
    used = sum(s.used_gpu_s for s in result.rounds)
    return {
        "makespan_h": makespan,
        "avg_jct_h": float(np.mean(jcts)),
        "median_jct_h": percentile_or_zero(jcts, 50),
        "p99_jct_h": percentile_or_zero(jcts, 99),
        "avg_wait_h": float(np.mean([r.wait_s / HOUR for r in records])),
        "max_lr": max(lrs),
        "p99_lr": percentile_or_zero(lrs, 99),
        "max_ftf": max(r.ftf_rho for r in records),
        "avg_idle_gpus": idle,
        "avg_usable_idle_gpus": usable,
        "utilization": used / (result.total_gpus * span) if span > 0 else 0.0,
        "preemptions": float(result.preemptions + result.moves),
    }


def write_jobs_csv(path: str | Path, records: Sequence[JobRecord]) -> None:
    fields = list(JobRecord.__slots__)
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for r in records:
            writer.writerow([getattr(r, f) for f in fields])


def records_as_dicts(records: Sequence[JobRecord]) -> list[dict[str, Any]]:
    return [{f: getattr(r, f) for f in JobRecord.__slots__} for r in records]


def write_jobs_json(path: str | Path, records: Sequence[JobRecord]) -> None:
    Path(path).write_text(json.dumps(records_as_dicts(records), indent=1), encoding="utf-8")
