"""Turning probe measurements into the theory layer: mixtures, pattern, profiles.

Pure functions: the daemon hands in the numbers a job reported, and gets back
the :class:`~hopsd.core.throughput.PhaseProfile` pieces the estimator uses.

*Data-time mixture.* T_d is a cache hit (fast) or miss (slow). The samples are
split in two by the threshold that maximises the between-group variance (the
best two-group split of sorted 1-D data, found in one pass), refined by a few
EM steps of a two-component normal mixture. The split is kept only when the
groups are well separated (Ashman's D > 2) and the smaller one is not a
handful of outliers; otherwise the time is treated as one normal component.

*Pattern.* A job whose measured iteration time is closer to
``max(T_d, T_b + T_u) + T_f + T_w`` (averaged over its iterations) than to the
plain sum of its phases loads data in the background (pattern 1); otherwise it
loads in the loop (pattern 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hopsd.core.errors import InvalidInputError
from hopsd.core.throughput import Mixture, PhaseProfile

#: Fewer samples than this are summarised by one component.
MIN_SAMPLES_FOR_SPLIT = 8
#: Ashman's D above which two components count as separate modes.
MIN_SEPARATION = 2.0
#: The smaller component must hold at least this share of the samples.
MIN_WEIGHT = 0.03
EM_STEPS = 25


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n
    return mean, math.sqrt(max(var, 0.0))


def _check_samples(samples: Sequence[float]) -> list[float]:
    out = [float(s) for s in samples]
    if any(not math.isfinite(s) or s < 0 for s in out):
        raise InvalidInputError("time samples must be finite and >= 0")
    return out


def best_split(sorted_values: Sequence[float]) -> int:
    """Index k (1..n-1) splitting sorted values into [:k] and [k:] with maximal
    between-group variance ``w0 * w1 * (m0 - m1)^2``; 0 when all values are equal."""
    n = len(sorted_values)
    total = sum(sorted_values)
    best_k, best_score, prefix = 0, 0.0, 0.0
    for k in range(1, n):
        prefix += sorted_values[k - 1]
        if sorted_values[k] == sorted_values[k - 1]:
            continue
        m0 = prefix / k
        m1 = (total - prefix) / (n - k)
        score = k * (n - k) * (m1 - m0) ** 2
        if score > best_score:
            best_k, best_score = k, score
    return best_k


def _normal_pdf(x: float, mu: float, sigma: float) -> float:
    z = (x - mu) / sigma
    return math.exp(-0.5 * z * z) / (sigma * 2.5066282746310002)


@dataclass(frozen=True)
class _Two:
    p: float
    m0: float
    s0: float
    m1: float
    s1: float


def _em(values: Sequence[float], start: _Two, floor: float) -> _Two:
    """A few EM steps of a two-component 1-D normal mixture (sigmas floored)."""
    p, m0, s0, m1, s1 = start.p, start.m0, max(start.s0, floor), start.m1, max(start.s1, floor)
    for _ in range(EM_STEPS):
        r0_sum = r0x = r0xx = 0.0
        r1_sum = r1x = r1xx = 0.0
        for x in values:
            a = p * _normal_pdf(x, m0, s0)
            b = (1.0 - p) * _normal_pdf(x, m1, s1)
            r0 = a / (a + b) if a + b > 0 else (1.0 if abs(x - m0) <= abs(x - m1) else 0.0)
            r1 = 1.0 - r0
            r0_sum += r0
            r0x += r0 * x
            r0xx += r0 * x * x
            r1_sum += r1
            r1x += r1 * x
            r1xx += r1 * x * x
        if r0_sum < 1e-9 or r1_sum < 1e-9:
            break
        new_m0, new_m1 = r0x / r0_sum, r1x / r1_sum
        s0 = max(math.sqrt(max(r0xx / r0_sum - new_m0 * new_m0, 0.0)), floor)
        s1 = max(math.sqrt(max(r1xx / r1_sum - new_m1 * new_m1, 0.0)), floor)
        converged = abs(new_m0 - m0) + abs(new_m1 - m1) < floor * 1e-3
        m0, m1, p = new_m0, new_m1, r0_sum / len(values)
        if converged:
            break
    return _Two(p, m0, s0, m1, s1)


def single(samples: Sequence[float]) -> Mixture:
    """One normal component: hit and miss share mean and sigma (``p_hit`` = 1)."""
    values = _check_samples(samples)
    if not values:
        return Mixture.constant(0.0)
    mean, sd = _mean_sd(values)
    return Mixture(1.0, mean, sd, mean, sd)


def fit_mixture(samples: Sequence[float]) -> Mixture:
    """Two-component (hit/miss) fit of time samples, or one component when not bimodal.

    The hit is the faster component. Returns ``Mixture.constant(0)`` for no samples.
    """
    values = sorted(_check_samples(samples))
    n = len(values)
    if n < MIN_SAMPLES_FOR_SPLIT:
        return single(values)
    k = best_split(values)
    if k == 0:
        return single(values)
    low, high = values[:k], values[k:]
    m0, s0 = _mean_sd(low)
    m1, s1 = _mean_sd(high)
    overall_mean, _ = _mean_sd(values)
    floor = max(1e-3 * overall_mean, 1e-9)
    two = _em(values, _Two(k / n, m0, s0, m1, s1), floor)
    if two.m0 > two.m1:
        two = _Two(1.0 - two.p, two.m1, two.s1, two.m0, two.s0)
    separation = math.sqrt(2.0) * (two.m1 - two.m0) / math.sqrt(two.s0**2 + two.s1**2)
    if separation <= MIN_SEPARATION or min(two.p, 1.0 - two.p) < MIN_WEIGHT:
        return single(values)
    return Mixture(two.p, two.m0, two.s0, two.m1, two.s1)


@dataclass(frozen=True, slots=True)
class PhaseMeans:
    """Mean per-iteration times a profiling run measured (seconds)."""

    t_iter: float
    t_d: float
    t_f: float
    t_b: float
    t_u: float
    t_w: float

    def __post_init__(self) -> None:
        values = (self.t_iter, self.t_d, self.t_f, self.t_b, self.t_u, self.t_w)
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise InvalidInputError("phase times must be finite and >= 0")


def decide_pattern(m: PhaseMeans, data_samples: Sequence[float] = ()) -> int:
    """1 when the data time is hidden behind backward + update, 2 when it adds up.

    With the per-iteration data times at hand the overlapped prediction is the
    mean of ``max(T_d_i, T_b + T_u)``; from means alone, a cache-hit/miss data
    time would be misjudged (max of the mean is not the mean of the max).
    Ties go to pattern 2: with no measurable data time both formulas agree.
    """
    serial = m.t_d + m.t_f + m.t_b + m.t_u + m.t_w
    compute = m.t_b + m.t_u
    if data_samples:
        hidden = sum(max(d, compute) for d in data_samples) / len(data_samples)
    else:
        hidden = max(m.t_d, compute)
    overlapped = hidden + m.t_f + m.t_w
    return 1 if abs(m.t_iter - overlapped) < abs(m.t_iter - serial) else 2


def profile_from_measurements(
    means: PhaseMeans, data_samples: Sequence[float], wait_samples: Sequence[float]
) -> PhaseProfile:
    """The theory-layer entry of one profiling run."""
    return PhaseProfile(
        t_f=means.t_f,
        t_b=means.t_b,
        t_u=means.t_u,
        pattern=decide_pattern(means, data_samples),
        data=fit_mixture(data_samples) if data_samples else Mixture.constant(means.t_d),
        sync_wait=fit_mixture(wait_samples) if wait_samples else Mixture.constant(means.t_w),
    )


def scaled_profile(profile: PhaseProfile, from_speed: float, to_speed: float) -> PhaseProfile:
    """A profile for a type the job could not be profiled on, from one it was.

    GPU phases (forward, backward, update) scale with the admin's relative type
    speed; data time and sync wait are host- and job-bound and are kept as is.
    """
    if from_speed <= 0 or to_speed <= 0:
        raise InvalidInputError("type speeds must be > 0")
    f = from_speed / to_speed
    return PhaseProfile(
        t_f=profile.t_f * f,
        t_b=profile.t_b * f,
        t_u=profile.t_u * f,
        pattern=profile.pattern,
        data=profile.data,
        sync_wait=profile.sync_wait,
    )
