"""Placement sensitivity (eq. 10): how much a job loses when split across two hosts.

``rho_i = thr({a: 1}) / per_gpu_thr({a: 1, b: 1})`` for two hosts ``a`` and ``b``
of the same GPU type. A job with ``rho_i > sigma`` is *highly sensitive*: it is
only offered distributed configurations where it cannot run on one node at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Job


def probe_nodes(cluster: Cluster, gpu_type: str) -> tuple[str, str] | None:
    """The two hosts eq. 10 compares: the first two nodes of the type (cluster order) with GPUs.

    ``None`` when the type has fewer than two such nodes.
    """
    ids = [n.id for n in cluster.nodes_of_type(gpu_type) if n.gpus > 0]
    if len(ids) < 2:
        return None
    return ids[0], ids[1]


def sensitivity_on(
    job: Job, gpu_type: str, pair: tuple[str, str] | None, estimator: Estimator
) -> float:
    """Eq. 10 for ``job`` on ``gpu_type``'s probe hosts (:func:`probe_nodes`).

    A type with a single node (``pair`` None) can never host a distributed
    configuration, so the question has no measurable answer there; the job is
    then treated as infinitely sensitive (``math.inf``) -- it is never offered a
    split it could not get anyway, and the value is left out of the mean
    sensitivities used by the fragment plans (:func:`mean_finite`).
    """
    if pair is None:
        return math.inf
    first, second = pair
    alone = estimator.per_gpu_one_each(job, gpu_type, first, 1)  # {first: 1}
    split = min(  # per GPU of {first: 1, second: 1}: the slower node sets the pace
        estimator.per_gpu_one_each(job, gpu_type, first, 2),
        estimator.per_gpu_one_each(job, gpu_type, second, 2),
    )
    return alone / split


def is_high_sensitivity(rho: float, sigma: float) -> bool:
    """``rho > sigma``: the job runs markedly slower when split over hosts."""
    return rho > sigma


def mean_finite(values: Iterable[float]) -> float:
    """Mean of the finite values; ``0.0`` when there are none (nothing to adjust)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0
    return math.fsum(finite) / len(finite)
