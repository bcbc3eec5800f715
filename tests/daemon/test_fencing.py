"""Fencing: a hopsd that lost the lease enacts nothing, even when it still believes it leads.

The attack: the leader is paused (or its clock runs behind), a standby takes
the lease over, and the old leader wakes with a lease that looks valid by its
own clock. Expiry alone lets it record and enact; the fencing token, checked in
the ledger with every intent batch and before every Slurm write, stops it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from daemon_fakeport import FakeClock, FakePort

from hopsd.config import HopsConfig
from hopsd.daemon.heartbeat import LeaseKeeper
from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.daemon.tick_result import TickResult
from hopsd.ledger.errors import FencedError
from hopsd.ledger.lease import acquire_lease, check_fence, ensure_lease, lease_info
from hopsd.ledger.records import IntentState
from hopsd.ledger.unit import Ledger
from hopsd.slurm.tag import HopsTag

TTL = 20.0


def keeper(sessions, clock: FakeClock, holder: str) -> LeaseKeeper:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        info = ensure_lease(s, holder, TTL, clock())
    lease = LeaseKeeper(sessions, holder, TTL, clock=clock)
    lease.confirmed(info.expires_at, info.token)
    return lease


def token(sessions) -> int:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None
        return info.token


def test_every_acquisition_raises_the_token_and_renewal_keeps_it(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        assert acquire_lease(s, "a:1", TTL, 100.0)
    assert token(sessions) == 1
    with sessions.begin() as s:
        assert acquire_lease(s, "a:1", TTL, 105.0)  # renewal while unexpired
    assert token(sessions) == 1
    with sessions.begin() as s:
        assert not acquire_lease(s, "b:2", TTL, 110.0)  # held: refused, token untouched
    assert token(sessions) == 1
    with sessions.begin() as s:
        assert acquire_lease(s, "b:2", TTL, 200.0)  # a's lease ran out: b takes over
    assert token(sessions) == 2
    with sessions.begin() as s:
        assert acquire_lease(s, "b:2", TTL, 300.0)  # b's own, after it ran out: new acquisition
    assert token(sessions) == 3
    with sessions.begin() as s:
        check_fence(s, "b:2", 3)
        with pytest.raises(FencedError):
            check_fence(s, "b:2", 2)
        with pytest.raises(FencedError):
            check_fence(s, "a:1", 3)


def _standby_takes_over(sessions, clock_b: FakeClock) -> LeaseKeeper:  # type: ignore[no-untyped-def]
    """The standby's clock is ahead: by its time the leader's lease has run out."""
    with sessions.begin() as s:
        assert acquire_lease(s, "standby:2", TTL, clock_b())
    lease = LeaseKeeper(sessions, "standby:2", TTL, clock=clock_b)
    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None
    lease.confirmed(info.expires_at, info.token)
    return lease


def test_a_paused_leader_that_wakes_after_a_takeover_records_and_enacts_nothing(  # type: ignore[no-untyped-def]
    config: HopsConfig, port: FakePort, sessions
):
    clock_a = FakeClock()
    old = keeper(sessions, clock_a, "leader:1")
    service = Service(Tick(config, port, sessions, clock=clock_a, lease=old), lease=old)
    first = port.add_job(HopsTag((1,), 10_000))
    assert service.run_once() is not None and port.actions(first) == ["update", "release"]

    # The leader stops (SIGSTOP, a VM paused, its clock behind): no heartbeat, no
    # tick, and its own clock does not move. The standby takes the lease over.
    _standby_takes_over(sessions, FakeClock(clock_a() + 2 * TTL))
    second = port.add_job(HopsTag((1,), 10_000))

    # It wakes: by its clock the lease it confirmed is still good for ~TTL.
    assert old.may_act()
    assert service.run_once() is None
    assert port.actions(second) == []  # no Slurm write for the new job
    assert isinstance(service.fatal, FencedError)
    with Ledger(sessions).reading() as unit:
        assert unit.pending_intents() == []  # and no intent recorded under the old token
    assert old.fenced == 1


def test_intents_recorded_before_the_pause_are_not_enacted_by_the_old_leader(  # type: ignore[no-untyped-def]
    config: HopsConfig, port: FakePort, sessions
):
    """Paused between recording a batch and enacting it: the standby enacts it, once."""
    clock_a = FakeClock()
    old = keeper(sessions, clock_a, "leader:1")
    tick = Tick(config, port, sessions, clock=clock_a, lease=old)
    clock_b = FakeClock(clock_a() + 2 * TTL)
    new_lease: list[LeaseKeeper] = []
    enact: Callable[[TickResult], object] = tick._enact

    def pause_then_enact(result: TickResult) -> object:
        new_lease.append(_standby_takes_over(sessions, clock_b))
        return enact(result)

    tick._enact = pause_then_enact  # type: ignore[method-assign,assignment]
    job = port.add_job(HopsTag((1,), 10_000))
    with pytest.raises(FencedError):
        tick.run_once()
    assert port.actions(job) == []  # the old leader wrote nothing to Slurm
    with Ledger(sessions).reading() as unit:
        assert {i.state for i in unit.pending_intents()} == {IntentState.PENDING}

    standby = Tick(config, port, sessions, clock=clock_b, lease=new_lease[0])
    assert Service(standby, lease=new_lease[0]).run_once() is not None
    assert port.actions(job) == ["update", "release"]  # taken over and done exactly once


def test_without_the_token_check_the_same_wake_up_would_enact(  # type: ignore[no-untyped-def]
    config: HopsConfig, port: FakePort, sessions
):
    """The attack is real: with the expiry check alone the woken leader acts."""
    clock_a = FakeClock()
    old = keeper(sessions, clock_a, "leader:1")
    tick = Tick(config, port, sessions, clock=clock_a, lease=old)
    tick.ledger.fence = None  # no token with the intent batch
    tick.enactor.guard = lambda: None if old.may_act() else pytest.fail("expired")
    _standby_takes_over(sessions, FakeClock(clock_a() + 2 * TTL))
    job = port.add_job(HopsTag((1,), 10_000))
    assert tick.run_once() is not None
    assert port.actions(job) == ["update", "release"]  # enacted under a lease it lost


def test_a_standby_reports_not_leading_and_healthy_until_it_takes_over(  # type: ignore[no-untyped-def]
    config: HopsConfig, port: FakePort, sessions
):
    """hopsd_leader is 0 and /healthz's tick check passes while waiting; 1 once it leads."""
    import dataclasses
    import threading
    import time

    from hopsd.daemon import main as hopsd_main

    with sessions.begin() as s:
        held = ensure_lease(s, "otherhost:1", 1.0, time.time())
    fast = dataclasses.replace(config, lease_ttl_s=1.0, queue_refresh_s=0.1)
    lease = LeaseKeeper(sessions, "standby:2", fast.lease_ttl_s)
    service = Service(Tick(fast, port, sessions, lease=lease), lease=lease)
    service.started_at = time.time() - 3600  # a tick this old would be stale
    seen: list[tuple[float, str | None]] = []

    def sample() -> None:
        while len(seen) < 3:
            if service.waiting:
                seen.append(
                    (service.metrics.leader._value.get(), service.health_checks()["tick"]())
                )  # type: ignore[attr-defined]
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    info = hopsd_main._stand_by(Ledger(sessions), fast, "standby:2", service)
    sampler.join(timeout=5)
    assert seen and all(value == 0 and problem is None for value, problem in seen)
    assert info is not None and info.holder == "standby:2" and info.token == held.token + 1
    assert time.time() >= held.expires_at  # not before the holder's lease ran out
    assert service.metrics.leader._value.get() == 1  # type: ignore[attr-defined]
