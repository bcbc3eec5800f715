"""The arrivals a forecast expects: the last window's jobs again, evenly spaced."""

from __future__ import annotations

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.sim.arrivals import ArrivalModel, PastArrival, expected

NOW = 10_000.0


def _past(at: float, work: float = 600.0, demands: tuple[int, ...] = (1,)) -> PastArrival:
    return PastArrival(at, demands, work, user=f"u{int(at)}")


def test_the_window_is_replayed_in_order_at_its_mean_rate() -> None:
    past = [_past(NOW - 100.0, demands=(2,)), _past(NOW - 3000.0), _past(NOW - 5000.0)]
    got = expected(ArrivalModel("recent", window_s=3600.0), past, NOW)
    # the two of the last hour, oldest first, one every half hour from now
    assert [e.after_s for e in got] == [1800.0, 3600.0]
    assert [e.shape.submit_time for e in got] == [NOW - 3000.0, NOW - 100.0]
    assert got[1].shape.demands == (2,)


def test_a_window_seen_only_in_part_is_replayed_over_the_part_seen() -> None:
    """A cluster whose first job came 60 s ago saw 3 jobs in 60 s, not in an hour: the
    next 60 s are expected to bring them again (spread over the hour, the forecast
    would foresee almost nothing in the minutes that matter)."""
    past = [_past(NOW - 60.0), _past(NOW - 40.0), _past(NOW - 5.0)]
    model = ArrivalModel("recent", window_s=3600.0)
    got = expected(model, past, NOW, since=NOW - 60.0)
    assert [e.after_s for e in got] == pytest.approx([20.0, 40.0, 60.0])
    # arrivals on record for longer than the window: the whole window counts
    assert [e.after_s for e in expected(model, past, NOW, since=NOW - 7200.0)] == [
        1200.0,
        2400.0,
        3600.0,
    ]


def test_nothing_is_expected_without_the_model_or_without_recent_work() -> None:
    past = [_past(NOW - 10.0)]
    assert expected(ArrivalModel("none"), past, NOW) == []
    assert expected(ArrivalModel("recent"), [_past(NOW - 10.0, work=0.0)], NOW) == []
    assert expected(ArrivalModel("recent", max_jobs=0), past, NOW) == []


def test_the_count_is_bounded_and_the_nearest_are_kept() -> None:
    past = [_past(NOW - 10.0 * i) for i in range(1, 31)]
    got = expected(ArrivalModel("recent", window_s=600.0, max_jobs=4), past, NOW)
    assert [e.after_s for e in got] == pytest.approx([20.0, 40.0, 60.0, 80.0])


def test_a_bad_model_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        ArrivalModel("poisson")
    with pytest.raises(InvalidInputError):
        ArrivalModel("recent", window_s=0.0)
