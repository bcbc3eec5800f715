"""Gavel's heterogeneity-aware max-min fairness (its LAS policy), with its round mechanism.

Formulation (Narayanan et al., OSDI '20): ``X[m, j]`` is the fraction of time job
``m`` should spend on GPU type ``j``; ``T[m, j]`` the job's throughput on ``j``
with its (rigid) GPU count, its scale factor ``s_m``. Each job's effective
throughput is normalised by what it would get from an equal, type-proportional
share of the cluster, ``P_m = sum_j T[m, j] * G_j / G``, and weighted by its
scale factor, so that jobs are equalised in GPU-time rather than in time (a
1-GPU job gets ``s`` times the time share of an ``s``-GPU job of equal
throughput, as in Gavel's policies):

    maximise   min_m  sum_j T[m, j] * s_m * X[m, j] / P_m
    s.t.       sum_j X[m, j] <= 1                 (time fractions of one job)
               sum_m s_m * X[m, j] <= G_j         (GPUs of each type)
               X >= 0

solved as an LP with HiGHS. Each round, Gavel's priority of (job, type) is the
allocated fraction over the fraction of time the job has actually received on
that type since it arrived (infinite when it has received none); (job, type)
pairs are served greedily in priority order while GPUs of the type remain, then
leftover GPUs go to the remaining jobs in queue order (work conserving). Jobs
keep their previous GPUs when they stay on the same type.

As in the Hops paper's comparison, each job gets the median of its demand set as
its rigid demand, and ties are broken by the shared queue order (LR by default;
``gavel-arrival`` breaks them by submission order). Gavel plans only at round
boundaries: GPUs freed inside a round wait for the next round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hopsd.core.errors import SolverError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Job, Plan
from hopsd.core.policies.common import (
    CanonicalThroughput,
    baseline_spec,
    diff_plan,
    free_gpus,
    keep_running,
    ordered_queue,
    place_by_type,
    rigid_demand,
    type_capacity,
)
from hopsd.core.policies.lp import scipy_lp
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot

#: Priority of a (job, type) pair that is owed time but has received none yet.
UNSERVED = 1e12


def max_min_allocation(
    thr: np.ndarray, scale: Sequence[int], capacity: Sequence[int]
) -> np.ndarray:
    """Solve Gavel's max-min LP; ``thr`` is jobs x types (0 where a type cannot hold the job).

    ``scale`` holds each job's scale factor (GPU count), which weights its
    normalised throughput in the objective. Returns the time-fraction matrix
    ``X`` (same shape as ``thr``).
    """
    n, k = thr.shape
    if n == 0:
        return np.zeros((0, k))
    optimize, sparse = scipy_lp("gavel")
    share = np.asarray(capacity, dtype=float)
    share = share / share.sum() if share.sum() > 0 else share
    proportional = thr @ share
    norm = (
        np.divide(
            thr, proportional[:, None], out=np.zeros_like(thr), where=proportional[:, None] > 0
        )
        * np.asarray(scale, dtype=float)[:, None]
    )
    n_x = n * k
    var = np.arange(n_x).reshape(n, k)  # column of X[m, j]
    jobs = np.arange(n)
    pos_m, pos_j = np.nonzero(norm > 0)
    scale_f = np.asarray(scale, dtype=float)
    # t - sum_j norm[m, j] X[m, j] <= 0;  sum_j X[m, j] <= 1;  sum_m s_m X[m, j] <= G_j
    rows = np.concatenate([jobs, pos_m, n + np.repeat(jobs, k), 2 * n + np.tile(np.arange(k), n)])
    cols = np.concatenate([np.full(n, n_x), var[pos_m, pos_j], var.ravel(), var.ravel()])
    vals = np.concatenate([np.ones(n), -norm[pos_m, pos_j], np.ones(n_x), np.repeat(scale_f, k)])
    a_ub = sparse.coo_matrix((vals, (rows, cols)), shape=(2 * n + k, n_x + 1)).tocsr()
    b_ub = np.concatenate([np.zeros(n), np.ones(n), np.asarray(capacity, dtype=float)])
    bounds = np.zeros((n_x + 1, 2))
    bounds[:n_x, 1] = (thr > 0).ravel()
    bounds[n_x, 1] = np.inf
    cost = np.zeros(n_x + 1)
    cost[-1] = -1.0
    result = optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise SolverError(f"Gavel max-min LP failed: {result.message}")
    x: np.ndarray = np.clip(result.x[:n_x].reshape(n, k), 0.0, 1.0)
    return x


def _holds(job: Job, gpu_type: str, capacity: Mapping[str, int]) -> bool:
    """Whether a type can run the job's rigid demand: enough GPUs, and its profiles allow it."""
    count = rigid_demand(job)
    return count <= capacity[gpu_type] and count in job.demands_on(gpu_type)


class GavelPolicy:
    """Gavel LAS (heterogeneity-aware max-min fairness) behind the Policy interface."""

    def __init__(self, queue_order: str = "lr", name: str = "gavel") -> None:
        scipy_lp(name)  # a missing extra fails here, before the first round
        self.name = name
        self._order = queue_order
        self._received: dict[str, dict[str, float]] = {}
        self._first_seen: dict[str, float] = {}
        self._last_now: float | None = None

    def _account(self, snapshot: Snapshot) -> None:
        """Credit every running job with the time since the previous round on its type."""
        elapsed = 0.0 if self._last_now is None else max(snapshot.now - self._last_now, 0.0)
        self._last_now = snapshot.now
        live = {j.id for j in snapshot.jobs}
        for job in snapshot.jobs:
            self._first_seen.setdefault(job.id, snapshot.now)
            if job.current is not None:
                per_type = self._received.setdefault(job.id, {})
                per_type[job.current.gpu_type] = per_type.get(job.current.gpu_type, 0.0) + elapsed
        for gone in [j for j in self._first_seen if j not in live]:
            self._first_seen.pop(gone, None)
            self._received.pop(gone, None)

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        self._account(snapshot)
        est = Estimator(snapshot.cluster, snapshot.store, settings)
        queue = ordered_queue(snapshot, est, self._order)
        types = sorted(t for t, g in type_capacity(snapshot).items() if g > 0)
        capacity = type_capacity(snapshot)
        jobs = [j for j in queue if any(_holds(j, t, capacity) for t in types)]
        if not jobs or not types:
            return diff_plan(snapshot, {}, ("gavel: nothing to run",))
        thr = self._throughputs(snapshot, est, jobs, types, capacity)
        scale = [rigid_demand(j) for j in jobs]
        x = max_min_allocation(thr, scale, [capacity[t] for t in types])
        chosen = self._serve(snapshot, jobs, types, x, thr, scale, capacity)
        by_id = {j.id: j for j in snapshot.jobs}
        placements = place_by_type(snapshot.cluster, chosen, by_id, free_gpus(snapshot))
        return diff_plan(snapshot, placements, ("gavel",))

    @staticmethod
    def _throughputs(
        snapshot: Snapshot,
        est: Estimator,
        jobs: Sequence[Job],
        types: Sequence[str],
        capacity: dict[str, int],
    ) -> np.ndarray:
        thr = np.zeros((len(jobs), len(types)))
        throughput = CanonicalThroughput(snapshot.cluster, est)
        for m, job in enumerate(jobs):
            count = rigid_demand(job)
            for j, gpu_type in enumerate(types):
                if not _holds(job, gpu_type, capacity):
                    continue
                value = throughput(job, gpu_type, count)
                if value is not None:
                    thr[m, j] = value
        return thr

    def _priority(self, job: Job, gpu_type: str, fraction: float, now: float) -> float:
        if fraction <= 0:
            return 0.0
        in_system = max(now - self._first_seen.get(job.id, now), 0.0)
        received = self._received.get(job.id, {}).get(gpu_type, 0.0)
        if received <= 0 or in_system <= 0:
            return UNSERVED * fraction
        return fraction / (received / in_system)

    def _serve(
        self,
        snapshot: Snapshot,
        jobs: Sequence[Job],
        types: Sequence[str],
        x: np.ndarray,
        thr: np.ndarray,
        scale: Sequence[int],
        capacity: dict[str, int],
    ) -> dict[str, tuple[str, int]]:
        """Greedy round mechanism: (job, type) pairs by priority, then fill leftovers."""
        pairs: list[tuple[float, int, int, int]] = []
        for m, job in enumerate(jobs):
            for j, gpu_type in enumerate(types):
                prio = self._priority(job, gpu_type, float(x[m, j]), snapshot.now)
                if prio > 0:
                    pairs.append((-prio, m, -int(thr[m, j] > 0), j))
        pairs.sort()
        left = dict(capacity)
        chosen: dict[str, tuple[str, int]] = {}
        for _, m, _, j in pairs:
            job, gpu_type = jobs[m], types[j]
            if job.id in chosen or left[gpu_type] < scale[m]:
                continue
            chosen[job.id] = (gpu_type, scale[m])
            left[gpu_type] -= scale[m]
        for m, job in enumerate(jobs):
            if job.id in chosen:
                continue
            options = sorted((-thr[m, j], j) for j in range(len(types)) if thr[m, j] > 0)
            for _, j in options:
                if left[types[j]] >= scale[m]:
                    chosen[job.id] = (types[j], scale[m])
                    left[types[j]] -= scale[m]
                    break
        return chosen

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """Round-based: GPUs freed inside a round stay idle until the next round."""
        return keep_running(snapshot, "gavel: waits for the next round")


GAVEL = baseline_spec("gavel", GavelPolicy, "lr", "Gavel's baseline, ties by latency ratio")
GAVEL_ARRIVAL = baseline_spec(
    "gavel-arrival", GavelPolicy, "arrival", "Gavel's baseline, ties by submission order"
)
