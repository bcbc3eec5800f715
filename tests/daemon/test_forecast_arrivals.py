"""hopsd's forecasts expect the arrivals hops.conf's [forecast] says, from the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from daemon_fakeport import NothingMeasured

from hopsd.config import ConfigError, parse_config
from hopsd.core.model import Cluster
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock
from hopsd.daemon.forecasting import measured_input

NOW = 50_000.0


@dataclass
class _Ended:
    submit_time: float
    demands: tuple[int, ...] = (2,)
    service_norm: float = 900.0
    user: str = "ada"
    batch_size: int = 64
    params: float = 1e6


@dataclass
class _Ledger(NothingMeasured):
    """The ledger's measured latencies (none yet) and the jobs that ended."""

    ended: list[_Ended] = field(default_factory=list)
    asked: list[tuple[float, float]] = field(default_factory=list)

    def finished_jobs(self, since: float, until: float) -> list[_Ended]:
        self.asked.append((since, until))
        return self.ended

    def first_submit_time(self) -> float | None:
        return min((e.submit_time for e in self.ended), default=None)


def _given(conf: str, ledger: _Ledger, test_only: bool = False):  # type: ignore[no-untyped-def]
    snapshot = Snapshot(NOW, Cluster.build([], []), ())
    config = parse_config(conf)
    return measured_input(ledger, config, snapshot, RoundClock(10.0), test_only=test_only)  # type: ignore[arg-type]


def test_by_default_start_and_eta_expect_none_and_test_only_the_recent_ones() -> None:
    ledger = _Ledger([_Ended(NOW - 600.0), _Ended(NOW - 7200.0)])
    assert _given("", ledger).arrivals.mode == "none"
    assert _given("", ledger).ended == () and ledger.asked == []  # nothing read
    asked = _given("", ledger, test_only=True)
    assert asked.arrivals.mode == "recent"
    # the job submitted before the window ended in it, but it is not of the window
    assert [(p.submit_time, p.work_s, p.user) for p in asked.ended] == [(NOW - 600.0, 900.0, "ada")]
    assert ledger.asked == [(NOW - 3600.0, NOW)]
    assert asked.arrivals_since == NOW - 7200.0  # the ledger's first job


def test_forecast_settings_are_read_and_checked() -> None:
    conf = '[forecast]\narrivals = "recent"\ntest_only_arrivals = "none"\nwindow_s = 600.0\n'
    given = _given(conf, _Ledger())
    assert (given.arrivals.mode, given.arrivals.window_s) == ("recent", 600.0)
    assert _given(conf, _Ledger(), test_only=True).arrivals.mode == "none"
    with pytest.raises(ConfigError, match=r"forecast\.arrivals"):
        parse_config('[forecast]\narrivals = "poisson"\n')
    with pytest.raises(ConfigError, match=r"forecast\.window_s"):
        parse_config("[forecast]\nwindow_s = 0.0\n")
