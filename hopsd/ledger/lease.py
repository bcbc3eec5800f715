"""The daemon lease: two hopsd against one ledger must never both act on Slurm.

The lease is one row per name with a holder and an expiry. Taking it is a single
conditional UPDATE ("set me as holder where nobody unexpired holds it"), which
both backends apply atomically, so of two daemons racing exactly one wins. The
holder renews it every tick (heartbeat); a daemon that stops renewing loses it
after ``ttl_s`` and another may take over.
"""

from __future__ import annotations

from sqlalchemy import and_, case, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from hopsd.core.errors import InvalidInputError
from hopsd.core.limits import MAX_LEASE_TTL_S
from hopsd.ledger.errors import FencedError, LeaseHeldError, LeaseLostError
from hopsd.ledger.models import LeaseRow
from hopsd.ledger.records import DEFAULT_LEASE, LeaseInfo, believed_expiry

__all__ = ["DEFAULT_LEASE", "LeaseInfo"]


def acquire_lease(
    session: Session, holder: str, ttl_s: float, now: float, name: str = DEFAULT_LEASE
) -> bool:
    """Take (or renew) the lease for ``holder``; False if someone else holds it unexpired."""
    _check(holder, ttl_s)
    if _take(session, holder, ttl_s, now, name):
        return True
    if lease_info(session, name) is not None:
        return False
    return _create(session, holder, ttl_s, now, name)


def ensure_lease(
    session: Session, holder: str, ttl_s: float, now: float, name: str = DEFAULT_LEASE
) -> LeaseInfo:
    """Like :func:`acquire_lease`, but raise :class:`LeaseHeldError` naming the holder."""
    if acquire_lease(session, holder, ttl_s, now, name):
        info = lease_info(session, name)
        assert info is not None
        return info
    info = lease_info(session, name)
    if info is None or info.holder is None:  # released between the two statements
        raise LeaseHeldError(name, "<unknown>", now)
    raise LeaseHeldError(name, info.holder, info.expires_at)


def renew_lease(
    session: Session, holder: str, ttl_s: float, now: float, name: str = DEFAULT_LEASE
) -> LeaseInfo:
    """Heartbeat: extend our unexpired lease, or raise :class:`LeaseLostError`.

    An expired lease is not silently re-taken here: another daemon may have
    acted in the meantime, so the caller must know and re-acquire deliberately.
    """
    _check(holder, ttl_s)
    stmt = (
        update(LeaseRow)
        .where(LeaseRow.name == name, LeaseRow.holder == holder, _unexpired(now))
        .values(heartbeat_at=now, expires_at=now + ttl_s)
        .execution_options(synchronize_session=False)
    )
    if session.execute(stmt).rowcount == 1:  # type: ignore[attr-defined]
        info = lease_info(session, name)
        assert info is not None
        return info
    info = lease_info(session, name)
    other = "<nobody>" if info is None or info.holder is None else info.holder
    expires = 0.0 if info is None else info.expires_at
    raise LeaseLostError(name, other, expires)


def release_lease(session: Session, holder: str, name: str = DEFAULT_LEASE) -> bool:
    """Give the lease up (clean shutdown) so a successor need not wait for expiry."""
    stmt = (
        update(LeaseRow)
        .where(LeaseRow.name == name, LeaseRow.holder == holder)
        .values(holder=None, expires_at=0.0)
        .execution_options(synchronize_session=False)
    )
    return bool(session.execute(stmt).rowcount == 1)  # type: ignore[attr-defined]


def lease_info(session: Session, name: str = DEFAULT_LEASE) -> LeaseInfo | None:
    """Who holds the lease and until when (for ``hops status`` and error messages)."""
    row = session.execute(
        select(
            LeaseRow.name,
            LeaseRow.holder,
            LeaseRow.acquired_at,
            LeaseRow.heartbeat_at,
            LeaseRow.expires_at,
            LeaseRow.token,
        ).where(LeaseRow.name == name)
    ).first()
    if row is None:
        return None
    heartbeat = None if row[3] is None else float(row[3])
    expires = believed_expiry(heartbeat, row[4])
    return LeaseInfo(row[0], row[1], row[2], heartbeat, expires, int(row[5] or 0))


def _unexpired(now: float) -> ColumnElement[bool]:
    """Held at ``now``: before the stored expiry and within the longest TTL of the heartbeat.

    A row written under a valid configuration always satisfies the second test
    while it satisfies the first, so it only ever retires rows no valid hopsd
    wrote (an infinite expiry, a NaN stored as NULL).
    """
    return and_(
        LeaseRow.expires_at > now,
        LeaseRow.heartbeat_at.is_not(None),
        LeaseRow.heartbeat_at > now - MAX_LEASE_TTL_S,
    )


def check_fence(session: Session, holder: str, token: int, name: str = DEFAULT_LEASE) -> None:
    """Raise :class:`FencedError` unless the lease still names ``holder`` with ``token``.

    A plain read, no row lock: a leader paused inside a transaction must not keep
    a standby from taking over. A batch that passed the check just before a
    takeover may commit just after it; its intents are then the new leader's to
    resume (every tick resumes pending intents), and the old leader cannot enact
    them, because every Slurm write checks again. Expiry is not compared: a
    holder whose clock runs behind must be stopped by the token, not by its own
    idea of the time.
    """
    found = session.execute(
        select(LeaseRow.token).where(
            LeaseRow.name == name, LeaseRow.holder == holder, LeaseRow.token == token
        )
    ).first()
    if found is not None:
        return
    info = lease_info(session, name)
    other = "<nobody>" if info is None or info.holder is None else info.holder
    raise FencedError(name, other, 0.0 if info is None else info.expires_at, token)


def _take(session: Session, holder: str, ttl_s: float, now: float, name: str) -> bool:
    stmt = (
        update(LeaseRow)
        .where(
            LeaseRow.name == name,
            or_(LeaseRow.holder.is_(None), LeaseRow.holder == holder, ~_unexpired(now)),
        )
        .values(
            holder=holder,
            # acquired_at marks when the current holder took over, not each renewal;
            # SET expressions see the row's old values on both backends.
            acquired_at=case((LeaseRow.holder == holder, LeaseRow.acquired_at), else_=now),
            # A new acquisition (another holder, or ours after it ran out) raises the
            # fencing token; renewing an unexpired lease of our own keeps it.
            token=case(
                ((LeaseRow.holder == holder) & _unexpired(now), LeaseRow.token),
                else_=LeaseRow.token + 1,
            ),
            heartbeat_at=now,
            expires_at=now + ttl_s,
        )
        .execution_options(synchronize_session=False)
    )
    return bool(session.execute(stmt).rowcount == 1)  # type: ignore[attr-defined]


def _create(session: Session, holder: str, ttl_s: float, now: float, name: str) -> bool:
    """Insert the lease row in a savepoint: a concurrent insert makes us lose, not fail."""
    try:
        with session.begin_nested():
            session.add(
                LeaseRow(
                    name=name,
                    holder=holder,
                    acquired_at=now,
                    heartbeat_at=now,
                    expires_at=now + ttl_s,
                    token=1,
                )
            )
    except IntegrityError:
        return False
    return True


def _check(holder: str, ttl_s: float) -> None:
    if not holder:
        raise InvalidInputError("a lease holder needs a non-empty name")
    if not 0 < ttl_s <= MAX_LEASE_TTL_S:
        raise InvalidInputError(f"lease ttl must be in (0, {MAX_LEASE_TTL_S:g}] s, got {ttl_s}")
