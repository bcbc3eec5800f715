"""Fairness and completion metrics, checked on hand-worked values and against numpy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.core.errors import InvalidInputError
from hopsd.core.metrics import (
    finish_time_fairness_of,
    jain_index,
    latency_ratio_of,
    mean_or_zero,
    percentile,
    raqlr,
)


def test_jain_even_and_single_winner() -> None:
    assert jain_index([3.0, 3.0, 3.0, 3.0]) == pytest.approx(1.0)
    # (1)^2 / (4 * 1) = 0.25, the minimum 1/n
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_jain_worked_example() -> None:
    # (1 + 2 + 3)^2 / (3 * (1 + 4 + 9)) = 36 / 42
    assert jain_index([1.0, 2.0, 3.0]) == pytest.approx(36 / 42)


def test_jain_all_zero_is_even() -> None:
    assert jain_index([0.0, 0.0]) == 1.0


@pytest.mark.parametrize("values", [[], [1.0, -1.0]])
def test_jain_refuses_empty_and_negative(values: list[float]) -> None:
    with pytest.raises(InvalidInputError):
        jain_index(values)


@given(st.lists(st.floats(0.0, 1e6), min_size=1, max_size=50))
def test_jain_bounds(values: list[float]) -> None:
    index = jain_index(values)
    assert 1 / len(values) - 1e-9 <= index <= 1.0 + 1e-9


def test_percentile_linear_interpolation() -> None:
    # position (4 - 1) * 0.5 = 1.5 -> between 2 and 3
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    # 1..100, q 99: position 98.01 -> 99 + 0.01
    assert percentile([float(i) for i in range(1, 101)], 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 5.0], 0) == 1.0
    assert percentile([1.0, 5.0], 100) == 5.0


@pytest.mark.parametrize(("values", "q"), [([], 50.0), ([1.0], -1.0), ([1.0], 100.5)])
def test_percentile_refuses_bad_input(values: list[float], q: float) -> None:
    with pytest.raises(InvalidInputError):
        percentile(values, q)


@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40),
    st.floats(0.0, 100.0),
)
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    expected = float(np.percentile(np.array(values), q, method="linear"))
    assert percentile(values, q) == pytest.approx(expected, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize(
    ("ratio", "operands", "expected", "refused"),
    [
        (latency_ratio_of, (1800.0, 3600.0), 0.5, [(10.0, 0.0), (-1.0, 10.0)]),
        (finish_time_fairness_of, (3000.0, 1000.0), 3.0, [(3000.0, 0.0), (-1.0, 1.0)]),
    ],
    ids=["latency_ratio_of", "finish_time_fairness_of"],
)
def test_ratio_of_divides_and_refuses_a_zero_or_negative_input(
    ratio: Callable[[float, float], float],
    operands: tuple[float, float],
    expected: float,
    refused: list[tuple[float, float]],
) -> None:
    assert ratio(*operands) == expected
    for args in refused:
        with pytest.raises(InvalidInputError):
            ratio(*args)


def test_mean_or_zero() -> None:
    assert mean_or_zero([]) == 0.0
    assert mean_or_zero(iter([1.0, 2.0, 6.0])) == pytest.approx(3.0)


def test_raqlr_is_the_mean_latency_ratio_of_the_jobs_given() -> None:
    assert raqlr([0.5, 1.0, 3.0]) == pytest.approx(1.5)
    assert raqlr([]) == 0.0
