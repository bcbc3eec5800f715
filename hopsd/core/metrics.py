"""Fairness and completion metrics shared by the simulator and ``hops fairness``.

Pure functions over plain numbers, so a simulated run and a live cluster are
judged by exactly the same arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from hopsd.core.errors import InvalidInputError


def mean_or_zero(values: Iterable[float]) -> float:
    """Arithmetic mean, 0.0 for no values (an idle window is not busy)."""
    items = list(values)
    if not items:
        return 0.0
    return math.fsum(items) / len(items)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``, in ``[1/n, 1]``; 1 is perfectly even.

    All-zero values count as perfectly even (1.0). Negative values have no
    meaning for an allocation and are refused, as is an empty sequence.
    """
    if not values:
        raise InvalidInputError("Jain's index of no values is undefined")
    if any(v < 0 for v in values):
        raise InvalidInputError("Jain's index needs non-negative values")
    square_sum = math.fsum(v * v for v in values)
    if square_sum == 0.0:
        return 1.0
    return math.fsum(values) ** 2 / (len(values) * square_sum)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) by linear interpolation between closest ranks.

    Position ``(n - 1) * q / 100`` in the sorted values, interpolated linearly;
    this is the common default (numpy's ``linear`` method), so the figures match
    what analysts get from their own tools.
    """
    if not values:
        raise InvalidInputError("the percentile of no values is undefined")
    if not 0.0 <= q <= 100.0:
        raise InvalidInputError(f"percentile q must be in [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def percentile_or_zero(values: Sequence[float], q: float) -> float:
    """:func:`percentile`, 0.0 for no values (an empty run's figures are zeros)."""
    return percentile(values, q) if values else 0.0


def latency_ratio_of(wait_s: float, age_s: float) -> float:
    """LR of a job given its queueing time and its age (expected unhindered run time)."""
    return _time_ratio(wait_s, "wait time", age_s, "age")


def raqlr(latency_ratios: Iterable[float]) -> float:
    """RAQLR: mean LR of the jobs that finished in the window given; 0.0 if none did.

    The window is the caller's (``hops status`` and ``fairness`` read the jobs
    that ended in the last 24 h from the ledger; a simulated run takes all).
    """
    return mean_or_zero(latency_ratios)


def finish_time_fairness_of(jct_s: float, independent_s: float) -> float:
    """Themis rho of a finished job: its completion time over its time on an equal share."""
    return _time_ratio(jct_s, "JCT", independent_s, "independent time")


def _time_ratio(part: float, part_name: str, whole: float, whole_name: str) -> float:
    """``part / whole`` of two durations; a negative part or a whole not above 0 is refused."""
    if part < 0:
        raise InvalidInputError(f"{part_name} must be >= 0, got {part}")
    if whole <= 0:
        raise InvalidInputError(f"{whole_name} must be > 0, got {whole}")
    return part / whole
