"""Queue priorities: latency ratio (the method's own) and the orderings it is compared with.

Every priority maps a job to a number where **higher is served first**; values
may be negative (LAS, SJF, SRTF), which is why the ILP adds a bias before
raising priorities to the power lambda. Priorities are found by name in a
registry, so a policy names its ordering in settings instead of branching on it.

Fair share between users or accounts is not a priority of its own: each job's
``share_factor`` multiplies its *biased* priority, ``(prior + bias) *
share_factor`` (:func:`share_keys`), and that product is what jobs are ordered
by and what the ILP weight raises to lambda. Scaling after the bias keeps every
key positive, so the factor means the same for every priority, negative ones
(LAS, SJF, SRTF) included: a factor of 2 doubles a job's key whatever the
priority's sign or scale. With every factor 1 the order and the weights are
exactly those of the priority alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hopsd.core.errors import InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.gains import priority_bias
from hopsd.core.model import Cluster, Job


@dataclass(frozen=True)
class PriorityContext:
    """What a priority may look at besides the job: the instant, the cluster, the estimator.

    ``n_jobs`` is the number of jobs sharing the cluster (queued and running);
    only finish-time fairness uses it, to size a job's equal share.
    """

    now: float
    cluster: Cluster
    estimator: Estimator
    n_jobs: int = 1


class Priority(Protocol):
    """A named job ordering; ``__call__`` returns a score, higher served first."""

    @property
    def name(self) -> str: ...

    def __call__(self, job: Job, ctx: PriorityContext) -> float: ...


@dataclass(frozen=True, slots=True)
class NamedPriority:
    """A plain function given a registry name."""

    name: str
    score: Callable[[Job, PriorityContext], float]

    def __call__(self, job: Job, ctx: PriorityContext) -> float:
        return self.score(job, ctx)


_REGISTRY: dict[str, Priority] = {}


def register_priority(p: Priority) -> Priority:
    """Add ``p`` under ``p.name``; registering the same object twice is harmless."""
    if not p.name:
        raise InvalidInputError("a priority needs a non-empty name")
    known = _REGISTRY.get(p.name)
    if known is not None and known is not p:
        raise InvalidInputError(f"a different priority is already registered as {p.name!r}")
    _REGISTRY[p.name] = p
    return p


def get_priority(name: str) -> Priority:
    """The priority registered as ``name``; the error lists the known names."""
    found = _REGISTRY.get(name)
    if found is None:
        raise InvalidInputError(f"unknown priority {name!r}; known: {', '.join(priority_names())}")
    return found


def priority_names() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def age(job: Job, ctx: PriorityContext) -> float:
    """Eq. 9: expected run time without waiting, in seconds.

    ``sum_j P(type=j) * total_samples / (throughput_ij * R_avg)``, with the
    per-GPU throughput of one GPU of type j (the job is assumed to scale
    linearly to its mean demand). Types holding no GPU contribute nothing.
    """
    return ctx.estimator.seconds_per_sample(job) * job.total_samples / job.avg_demand


def latency_ratio(job: Job, ctx: PriorityContext) -> float:
    """LR of eq. 8: time waited so far over the age the job would have unhindered."""
    return job.wait_time / age(job, ctx)


def expected_rate(job: Job, ctx: PriorityContext) -> float:
    """Samples/s the job is expected to make from now on.

    A running job goes at its current configuration's estimated throughput; a
    queued one at the rate its age assumes (``total_samples / age``).
    """
    if job.current is not None:
        return ctx.estimator.throughput(job, job.current).samples_per_s
    return job.total_samples / age(job, ctx)


def finish_time_fairness(job: Job, ctx: PriorityContext) -> float:
    """Themis finish-time fairness in its heterogeneous form, ``rho = T_shared / T_independent``.

    ``T_independent`` is the run time on an equal share of the cluster: the job
    gets ``share = min(max demand, total GPUs / n_jobs)`` GPUs spread over the
    types in the cluster's type mix, so, like eq. 9,
    ``T_independent = sum_j P(type=j) * total_samples / (throughput_ij * share)``
    (= ``age * R_avg / share``).

    ``T_shared`` is the finish time expected in the shared cluster: time since
    submission plus the remaining samples at the job's rate from now on -- its
    current configuration's throughput when running, its equal-share rate
    (``total_samples / T_independent``) when queued.

    ``rho > 1`` means the job is worse off than on its own share; higher is
    more unfair, so it is served first. A queued job's rho grows with waiting,
    and faster for short jobs.
    """
    n_jobs = max(ctx.n_jobs, 1)
    share = min(float(job.demands[-1]), ctx.cluster.total_gpus / n_jobs)
    if share <= 0.0:
        raise InvalidInputError("the cluster has no GPUs: finish-time fairness is undefined")
    t_independent = age(job, ctx) * job.avg_demand / share
    elapsed = max(ctx.now - job.submit_time, 0.0)
    if job.current is not None:
        rate = ctx.estimator.throughput(job, job.current).samples_per_s
    else:
        rate = job.total_samples / t_independent
    t_shared = elapsed + job.remaining_samples / rate
    return t_shared / t_independent


def least_attained_service(job: Job, ctx: PriorityContext) -> float:
    """LAS: the job that has received least (speed-normalised) GPU time goes first."""
    return -job.attained_service


def shortest_job_first(job: Job, ctx: PriorityContext) -> float:
    """SJF: the job with the smallest age goes first."""
    return -age(job, ctx)


def shortest_remaining_time_first(job: Job, ctx: PriorityContext) -> float:
    """SRTF: the job with the least remaining time at its expected rate goes first."""
    return -job.remaining_samples / expected_rate(job, ctx)


def share_keys(priorities: Sequence[float], factors: Sequence[float]) -> list[float]:
    """``(prior_i + bias) * share_factor_i`` for jobs scored together (see the module doc).

    ``bias`` is eq. 11's over the priorities given (0 when all are > 0, else
    ``|min| + 0.01``), so every key is > 0 and the ILP weight is
    ``(key_i / max key) ** lambda``. Ordering by these keys is ordering by
    priority when all factors are 1.
    """
    if len(priorities) != len(factors):
        raise InvalidInputError("share_keys: one share factor per priority")
    if any(not (math.isfinite(f) and f > 0) for f in factors):
        raise InvalidInputError("share factors must be finite numbers > 0")
    bias = priority_bias(priorities)
    return [(p + bias) * f for p, f in zip(priorities, factors, strict=True)]


def order_jobs(jobs: Iterable[Job], priority: Priority, ctx: PriorityContext) -> tuple[Job, ...]:
    """Jobs sorted by share key, highest first; ties by priority, earlier submission, id.

    The key is :func:`share_keys` of the jobs' priorities and share factors;
    the tie-breaks make the order (and so the plan) deterministic, and the
    priority tie-break keeps the pure priority order exact when all factors are
    1 (adding the bias could round two close priorities to one key).
    """
    listed = list(jobs)
    scores = [float(priority(job, ctx)) for job in listed]
    keys = share_keys(scores, [job.share_factor for job in listed])
    scored = [
        (-key, -score, job.submit_time, job.id, job)
        for key, score, job in zip(keys, scores, listed, strict=True)
    ]
    scored.sort(key=lambda item: item[:4])
    return tuple(item[4] for item in scored)


LR = register_priority(NamedPriority("lr", latency_ratio))
FTF = register_priority(NamedPriority("ftf", finish_time_fairness))
LAS = register_priority(NamedPriority("las", least_attained_service))
SJF = register_priority(NamedPriority("sjf", shortest_job_first))
SRTF = register_priority(NamedPriority("srtf", shortest_remaining_time_first))
