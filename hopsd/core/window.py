"""The service window: which jobs of the priority-ordered queue one round plans at all.

Planning every queued job would make the ILP grow with the queue rather than with
the cluster. The method instead walks the queue from the head and stops once the
jobs seen could, at their smallest demand, fill the cluster: jobs behind that
point could not be served this round even in the best case.
"""

from __future__ import annotations

from collections.abc import Sequence

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Job


def service_window(ordered_jobs: Sequence[Job], total_gpus: int) -> tuple[Job, ...]:
    """The head of ``ordered_jobs`` whose minimum demands just reach ``total_gpus``.

    The walk sums each job's R1 and stops at the first job where the sum reaches
    ``total_gpus``; that job is *included*. Including it means the window always
    holds at least a cluster's worth of minimum demand, so the ILP can fill
    every GPU when the jobs pack well (excluding it could leave the boundary
    GPUs idle for a whole round). When the whole queue sums to less, the whole
    queue is the window. ``ordered_jobs`` must already be in priority order with
    ties broken deterministically (see :func:`hopsd.core.priorities.order_jobs`).
    """
    if total_gpus < 0:
        raise InvalidInputError(f"total GPUs must be >= 0, got {total_gpus}")
    if total_gpus == 0:
        return ()
    window: list[Job] = []
    demand = 0
    for job in ordered_jobs:
        window.append(job)
        demand += job.min_demand
        if demand >= total_gpus:
            break
    return tuple(window)
