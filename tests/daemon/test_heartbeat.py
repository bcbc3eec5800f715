"""The lease heartbeat: renewed whatever the ticks do, taken back after an outage,
and enacting stops at once when another daemon took it."""

from __future__ import annotations

import pytest
from daemon_fakeport import FakeClock, FakePort
from sqlalchemy.exc import OperationalError

from hopsd.config import HopsConfig
from hopsd.daemon.heartbeat import LeaseKeeper, LeaseUnconfirmedError
from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger.errors import LeaseLostError
from hopsd.ledger.lease import acquire_lease, ensure_lease, lease_info
from hopsd.ledger.unit import Ledger
from hopsd.slurm.tag import HopsTag

TTL = 20.0


def keeper(sessions, clock: FakeClock, holder: str = "me:1") -> LeaseKeeper:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        info = ensure_lease(s, holder, TTL, clock())
    lease = LeaseKeeper(sessions, holder, TTL, clock=clock)
    lease.confirmed(info.expires_at)
    return lease


def test_beats_extend_the_lease_without_any_tick(sessions, clock):  # type: ignore[no-untyped-def]
    lease = keeper(sessions, clock)
    for _ in range(10):
        clock.advance(lease.interval_s)
        assert lease.beat()
    assert lease.may_act() and lease.beats == 10
    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None and info.expires_at == clock() + TTL


def test_own_lease_expired_during_an_outage_is_taken_back(sessions, clock):  # type: ignore[no-untyped-def]
    """The old code stopped here, naming itself as 'another hopsd'."""
    lease = keeper(sessions, clock)
    clock.advance(10 * TTL)  # the ledger (or slurmctld) was away far longer than the TTL
    assert not lease.may_act()
    with pytest.raises(LeaseUnconfirmedError):
        lease.check()
    assert lease.beat()
    assert lease.retaken == 1 and lease.lost is None and lease.may_act()
    lease.check()


def test_lease_taken_by_another_daemon_is_lost_for_good(sessions, clock):  # type: ignore[no-untyped-def]
    lease = keeper(sessions, clock)
    clock.advance(2 * TTL)
    with sessions.begin() as s:
        assert acquire_lease(s, "other:2", TTL, clock())  # a standby took over the expired lease
    assert not lease.beat()
    assert isinstance(lease.lost, LeaseLostError) and lease.lost.holder == "other:2"
    with pytest.raises(LeaseLostError):
        lease.check()
    clock.advance(10 * TTL)
    assert not lease.beat()  # never takes it back once lost


def test_ledger_errors_keep_the_lease_only_until_its_confirmed_expiry(sessions, clock):  # type: ignore[no-untyped-def]
    lease = keeper(sessions, clock)

    class Broken:
        def begin(self):  # type: ignore[no-untyped-def]
            raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    lease.ledger = Ledger(Broken())  # type: ignore[arg-type]
    clock.advance(lease.interval_s)
    assert not lease.beat() and lease.may_act()  # still well inside the TTL
    clock.advance(TTL)
    assert not lease.beat() and not lease.may_act()
    lease.ledger = Ledger(sessions)
    assert lease.beat() and lease.may_act()


def test_enactment_stops_at_once_when_the_lease_is_lost(  # type: ignore[no-untyped-def]
    config: HopsConfig, port: FakePort, sessions, clock
):
    lease = keeper(sessions, clock)
    tick = Tick(config, port, sessions, clock=clock, lease=lease)
    service = Service(tick, lease=lease)
    first = port.add_job(HopsTag((1,), 10_000))
    assert service.run_once() is not None and port.actions(first) == ["update", "release"]
    clock.advance(2 * TTL)
    with sessions.begin() as s:
        assert acquire_lease(s, "other:2", TTL, clock())
    lease.beat()
    second = port.add_job(HopsTag((1,), 10_000))
    assert service.run_once() is None
    assert port.actions(second) == []  # nothing done in Slurm under a lost lease
    assert isinstance(service.fatal, LeaseLostError)
