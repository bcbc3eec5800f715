"""The daemon lease: exclusive, renewable, expiring, and race-safe."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.errors import LeaseHeldError, LeaseLostError
from hopsd.ledger.lease import (
    acquire_lease,
    ensure_lease,
    lease_info,
    release_lease,
    renew_lease,
)


def test_second_daemon_is_refused_until_expiry(Sessions: sessionmaker[Session]) -> None:
    with Sessions.begin() as s:
        assert acquire_lease(s, "host-a:1", ttl_s=30.0, now=100.0)
    with Sessions.begin() as s:
        assert not acquire_lease(s, "host-b:2", ttl_s=30.0, now=110.0)
    with pytest.raises(LeaseHeldError) as err, Sessions.begin() as s:
        ensure_lease(s, "host-b:2", ttl_s=30.0, now=110.0)
    assert err.value.holder == "host-a:1" and err.value.expires_at == 130.0
    assert "host-a:1" in str(err.value) and "1970-01-01T00:02:10Z" in str(err.value)

    with Sessions.begin() as s:  # heartbeat pushes the expiry out
        info = renew_lease(s, "host-a:1", ttl_s=30.0, now=125.0)
        assert info.expires_at == 155.0 and info.acquired_at == 100.0
        assert acquire_lease(s, "host-a:1", ttl_s=30.0, now=126.0)  # re-acquire = renew
    with Sessions.begin() as s:
        assert not acquire_lease(s, "host-b:2", ttl_s=30.0, now=150.0)
        assert acquire_lease(s, "host-b:2", ttl_s=30.0, now=157.0)  # a dead holder expired
        info2 = lease_info(s)
        assert info2 is not None and info2.holder == "host-b:2" and info2.acquired_at == 157.0
    with pytest.raises(LeaseLostError, match="host-b:2"), Sessions.begin() as s:
        renew_lease(s, "host-a:1", ttl_s=30.0, now=158.0)


def test_release_lets_a_successor_in_immediately(Sessions: sessionmaker[Session]) -> None:
    with Sessions.begin() as s:
        ensure_lease(s, "old", ttl_s=300.0, now=0.0)
    with Sessions.begin() as s:
        assert not release_lease(s, "someone-else")
        assert release_lease(s, "old")
        info = lease_info(s)
        assert info is not None and not info.held_at(1.0)
    with Sessions.begin() as s:
        assert ensure_lease(s, "new", ttl_s=300.0, now=1.0).holder == "new"


def test_racing_daemons_exactly_one_wins(migrated_url: str, engine: Engine) -> None:
    contenders = 4
    barrier = threading.Barrier(contenders)
    results: dict[str, bool] = {}
    errors: list[BaseException] = []
    engines = [
        make_engine(migrated_url, timeout_ms=10_000, sqlite_begin="immediate")
        for _ in range(contenders)
    ]

    def contend(i: int) -> None:
        Sessions = make_sessionmaker(engines[i])
        try:
            barrier.wait()
            with Sessions.begin() as s:
                results[f"d{i}"] = acquire_lease(s, f"d{i}", ttl_s=60.0, now=1000.0)
        except BaseException as exc:  # surfaced below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for e in engines:
        e.dispose()
    assert errors == []
    winners = [name for name, won in results.items() if won]
    assert len(results) == contenders and len(winners) == 1
    with make_sessionmaker(engine)() as s:
        info = lease_info(s)
        assert info is not None and info.holder == winners[0]
