"""A lease row no valid configuration could have written must not lock the ledger out.

An older hopsd run with ``lease_ttl_s = inf`` and then SIGKILLed leaves an
infinite expiry behind (PostgreSQL stores Infinity, SQLite stores Inf). Every
later hopsd, with a valid configuration, must read it without an error, and
the row must run out one longest-TTL after its last heartbeat, on both
backends and through both readers.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.errors import InvalidInputError
from hopsd.core.limits import MAX_LEASE_TTL_S
from hopsd.ledger.errors import LeaseHeldError
from hopsd.ledger.lease import acquire_lease, ensure_lease, lease_info, renew_lease
from hopsd.ledger.models import LeaseRow
from hopsd.ledger.reader import reading


def _leave_infinite_lease(Sessions: sessionmaker[Session], beat: float) -> None:
    with Sessions.begin() as s:
        assert acquire_lease(s, "old-host:99", ttl_s=60.0, now=beat)
        s.execute(update(LeaseRow).values(expires_at=math.inf))


def test_an_infinite_expiry_is_named_in_one_line_not_an_overflow(
    Sessions: sessionmaker[Session],
) -> None:
    _leave_infinite_lease(Sessions, beat=1000.0)
    with pytest.raises(LeaseHeldError) as err, Sessions.begin() as s:
        ensure_lease(s, "new-host:1", ttl_s=60.0, now=1010.0)
    assert err.value.holder == "old-host:99"
    assert err.value.expires_at == 1000.0 + MAX_LEASE_TTL_S
    assert "\n" not in str(err.value)


def test_an_infinite_lease_runs_out_one_longest_ttl_after_its_heartbeat(
    Sessions: sessionmaker[Session],
) -> None:
    _leave_infinite_lease(Sessions, beat=1000.0)
    after = 1000.0 + MAX_LEASE_TTL_S
    with Sessions.begin() as s:
        info = lease_info(s)
        assert info is not None and info.expires_at == after
        assert info.held_at(after - 1) and not info.held_at(after)
        assert not acquire_lease(s, "new-host:1", ttl_s=60.0, now=after - 1)
    with Sessions.begin() as s:
        assert acquire_lease(s, "new-host:1", ttl_s=60.0, now=after)
        taken = lease_info(s)
        assert taken is not None and taken.holder == "new-host:1" and taken.token == 2
        assert taken.expires_at == after + 60.0


def test_the_dead_holder_cannot_renew_its_infinite_lease_once_it_ran_out(
    Sessions: sessionmaker[Session],
) -> None:
    _leave_infinite_lease(Sessions, beat=1000.0)
    with Sessions.begin() as s:
        assert renew_lease(s, "old-host:99", 60.0, 1000.0 + 10).expires_at == 1070.0
    _leave_infinite_lease(Sessions, beat=2000.0)
    with pytest.raises(LeaseHeldError), Sessions.begin() as s:
        renew_lease(s, "old-host:99", 60.0, 2000.0 + MAX_LEASE_TTL_S)


def test_the_driver_reader_believes_the_same_expiry(
    migrated_url: str, Sessions: sessionmaker[Session]
) -> None:
    _leave_infinite_lease(Sessions, beat=1000.0)
    with reading(migrated_url) as reader:
        info = reader.lease_info()
    assert info is not None and info.expires_at == 1000.0 + MAX_LEASE_TTL_S


@pytest.mark.parametrize("ttl", [math.inf, math.nan, -1.0, 0.0, MAX_LEASE_TTL_S + 1])
def test_no_lease_is_granted_for_a_ttl_no_configuration_may_ask(
    Sessions: sessionmaker[Session], ttl: float
) -> None:
    with pytest.raises(InvalidInputError, match="lease ttl"), Sessions.begin() as s:
        acquire_lease(s, "host:1", ttl_s=ttl, now=0.0)
