"""Sensitivity adjustment of the fragment plans (step 5 of a round).

GPUs left idle after a plan are usually scattered in small pieces. Jobs that
lose little when split across hosts (low placement sensitivity) are the ones
that can use such pieces, so when the jobs still waiting in the window are more
sensitive on average than the queue as a whole (``rho_set > rho_queue``), jobs
from *behind* the window boundary are admitted for the fragment plans: walking
down the queue from the boundary, every job with ``rho_i < rho_queue`` whose
minimum demand fits in the idle GPUs joins, until ``rho_set <= rho_queue``.
They return to their usual place in the next round's window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hopsd.core.model import Job


def sensitivity_adjustment(
    waiting: Sequence[Job],
    beyond: Sequence[Job],
    rho: Callable[[Job], float],
    rho_queue: float,
    fits: Callable[[Job], bool],
) -> tuple[Job, ...]:
    """Jobs admitted from ``beyond`` (queue order after the boundary) to join ``waiting``.

    Infinite sensitivities (eq. 10 undefined) are left out of ``rho_set``, as
    they are out of ``rho_queue``.
    """
    finite = [v for v in (rho(job) for job in waiting) if math.isfinite(v)]
    total, count = math.fsum(finite), len(finite)
    admitted: list[Job] = []
    for job in beyond:
        if count == 0 or total / count <= rho_queue:
            break
        r = rho(job)
        if r < rho_queue and fits(job):
            admitted.append(job)
            total += r
            count += 1
    return tuple(admitted)
