"""Pure fitting: the two-component data-time mixture, the pattern, derived profiles."""

from __future__ import annotations

import random

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.estimator import expected_iteration_time
from hopsd.core.fitting import (
    PhaseMeans,
    best_split,
    decide_pattern,
    fit_mixture,
    profile_from_measurements,
    scaled_profile,
)
from hopsd.core.throughput import Mixture, PhaseProfile


def test_best_split_separates_the_two_groups() -> None:
    assert best_split([1.0, 1.0, 1.0, 10.0, 10.0]) == 3
    assert best_split([2.0, 2.0, 2.0]) == 0


def test_two_clean_groups_give_their_weights_and_means() -> None:
    # six hits at 1 ms, four misses at 5 ms (tiny jitter so sigmas are not zero)
    samples = [0.001, 0.00101, 0.00099, 0.001, 0.00101, 0.00099, 0.005, 0.00501, 0.00499, 0.005]
    m = fit_mixture(samples)
    assert m.p_hit == pytest.approx(0.6, abs=1e-6)
    assert m.mu_hit == pytest.approx(0.001, rel=1e-3)
    assert m.mu_miss == pytest.approx(0.005, rel=1e-3)
    assert m.mean == pytest.approx(sum(samples) / 10, rel=1e-6)


def test_one_mode_stays_one_component() -> None:
    samples = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.02, 1.98]
    m = fit_mixture(samples)
    assert m.p_hit == 1.0 and m.mu_hit == m.mu_miss == pytest.approx(2.0)
    # population sd: sqrt((2 * 0.1^2 + 2 * 0.05^2 + 2 * 0.02^2) / 8) = 0.05679
    assert m.sigma_hit == pytest.approx(0.05679, abs=1e-4)


def test_few_samples_or_a_lone_outlier_do_not_make_a_mode() -> None:
    assert fit_mixture([1.0, 9.0, 1.0]).p_hit == 1.0
    rng = random.Random(3)
    samples = [rng.gauss(1.0, 0.01) for _ in range(99)] + [10.0]
    assert fit_mixture(samples).p_hit == 1.0


def test_a_noisy_bimodal_sample_recovers_the_mixture() -> None:
    rng = random.Random(7)
    samples = [
        rng.gauss(0.01, 0.001) if rng.random() < 0.7 else rng.gauss(0.05, 0.005)
        for _ in range(2000)
    ]
    m = fit_mixture(samples)
    assert m.p_hit == pytest.approx(0.7, abs=0.03)
    assert m.mu_hit == pytest.approx(0.01, rel=0.03)
    assert m.mu_miss == pytest.approx(0.05, rel=0.03)
    assert m.sigma_miss == pytest.approx(0.005, rel=0.15)


def test_bad_samples_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        fit_mixture([0.1, -0.2])
    assert fit_mixture([]) == Mixture.constant(0.0)


def test_pattern_follows_the_measured_iteration_time() -> None:
    # serial sum 0.10 s; overlapped max(0.05, 0.03 + 0.01) + 0.01 = 0.06 s
    base = {"t_d": 0.05, "t_f": 0.01, "t_b": 0.03, "t_u": 0.01, "t_w": 0.0}
    assert decide_pattern(PhaseMeans(t_iter=0.061, **base)) == 1
    assert decide_pattern(PhaseMeans(t_iter=0.099, **base)) == 2
    assert (
        decide_pattern(PhaseMeans(t_iter=0.05, t_d=0.0, t_f=0.01, t_b=0.03, t_u=0.01, t_w=0)) == 2
    )


def test_a_serial_profile_predicts_its_own_iteration_time_on_one_gpu() -> None:
    means = PhaseMeans(t_iter=0.1, t_d=0.02, t_f=0.02, t_b=0.05, t_u=0.01, t_w=0.0)
    profile = profile_from_measurements(means, [0.02] * 10, [])
    assert profile.pattern == 2
    t = expected_iteration_time(profile, 25e6, 1, 1, 2.5e9, 1.25e9)
    assert t == pytest.approx(0.1)


def test_scaled_profile_scales_gpu_phases_only() -> None:
    data = Mixture(0.5, 0.01, 0.001, 0.03, 0.002)
    p = PhaseProfile(0.02, 0.04, 0.01, pattern=2, data=data)
    q = scaled_profile(p, from_speed=1.0, to_speed=4.0)
    assert (q.t_f, q.t_b, q.t_u) == pytest.approx((0.005, 0.01, 0.0025))
    assert q.data == data and q.pattern == 2


def test_pattern_of_a_hit_miss_loader_uses_the_per_iteration_data_times() -> None:
    # compute 0.08 s; data hits 0.02 s (70 %), misses 0.25 s (30 %); forward 0.03 s.
    # measured: 0.7 * 0.08 + 0.3 * 0.25 + 0.03 = 0.161 s (overlapped)
    data = [0.02] * 7 + [0.25] * 3
    means = PhaseMeans(t_iter=0.161, t_d=0.089, t_f=0.03, t_b=0.07, t_u=0.01, t_w=0.0)
    assert decide_pattern(means) == 2  # from means alone: |0.161-0.119| > |0.161-0.199|
    assert decide_pattern(means, data) == 1
