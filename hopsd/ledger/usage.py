"""GPU usage per user and account over time, for fairness reports.

Usage accrues into fixed buckets (one hour by default) per (user, account), so
the table grows with time and users, not with ticks or jobs. Decayed usage
weighs each bucket by ``0.5 ** (age / half_life)`` where the age is measured
from the bucket's end: the convention of fair-share schedulers, which lets
recent consumption count fully and old consumption fade.
"""

from __future__ import annotations

import math
from typing import Literal

from sqlalchemy import ColumnElement, Float, case, func, literal, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from hopsd.core.errors import InvalidInputError
from hopsd.ledger.models import UsageRow
from hopsd.ledger.records import UsageTotals

GroupBy = Literal["user", "account"]

DEFAULT_BUCKET_S = 3600.0
MAX_HALVINGS = 1000.0


def bucket_start(at: float, bucket_s: float = DEFAULT_BUCKET_S) -> float:
    """Start of the bucket that contains instant ``at`` (aligned to the epoch)."""
    return math.floor(at / bucket_s) * bucket_s


def add_usage(
    session: Session,
    user: str,
    account: str,
    at: float,
    gpu_s: float,
    gpu_s_norm: float,
    bucket_s: float = DEFAULT_BUCKET_S,
) -> UsageRow:
    """Add GPU-seconds consumed at instant ``at`` to its bucket (created when missing)."""
    if gpu_s < 0 or gpu_s_norm < 0:
        raise InvalidInputError("usage must be >= 0 GPU-seconds")
    if bucket_s <= 0:
        raise InvalidInputError("bucket length must be > 0")
    start = bucket_start(at, bucket_s)
    stmt = select(UsageRow).where(
        UsageRow.user == user, UsageRow.account == account, UsageRow.interval_start == start
    )
    row = session.scalars(stmt).first()
    if row is None:
        row = UsageRow(
            user=user,
            account=account,
            interval_start=start,
            interval_end=start + bucket_s,
            gpu_s=0.0,
            gpu_s_norm=0.0,
        )
        session.add(row)
    row.gpu_s += gpu_s
    row.gpu_s_norm += gpu_s_norm
    return row


def usage_between(
    session: Session, start: float, end: float, by: GroupBy = "user"
) -> dict[str, UsageTotals]:
    """Raw totals of the buckets that start in ``[start, end)``, per user or account."""
    key = _key_column(by)
    stmt = (
        select(key, func.sum(UsageRow.gpu_s), func.sum(UsageRow.gpu_s_norm))
        .where(UsageRow.interval_start >= start, UsageRow.interval_start < end)
        .group_by(key)
    )
    return {str(k): UsageTotals(float(a), float(b)) for k, a, b in session.execute(stmt)}


def decayed_usage(
    session: Session,
    now: float,
    half_life_s: float,
    by: GroupBy = "user",
    normalised: bool = True,
) -> dict[str, float]:
    """Usage per user or account with each bucket decayed by its age at ``now``.

    One aggregate query: the rows returned grow with the owners, never with the
    length of the history.
    """
    key = _key_column(by)
    stmt = select(key, func.sum(_decayed(now, half_life_s, normalised))).group_by(key)
    return {str(name): float(value or 0.0) for name, value in session.execute(stmt)}


def decayed_usage_by_owner(
    session: Session, now: float, half_life_s: float, normalised: bool = True
) -> tuple[dict[str, float], dict[str, float]]:
    """Decayed usage per user and per account from one query grouped by (user, account)."""
    stmt = select(
        UsageRow.user, UsageRow.account, func.sum(_decayed(now, half_life_s, normalised))
    ).group_by(UsageRow.user, UsageRow.account)
    users: dict[str, float] = {}
    accounts: dict[str, float] = {}
    for user, account, value in session.execute(stmt):
        users[str(user)] = users.get(str(user), 0.0) + float(value or 0.0)
        accounts[str(account)] = accounts.get(str(account), 0.0) + float(value or 0.0)
    return users, accounts


def _decayed(now: float, half_life_s: float, normalised: bool) -> ColumnElement[float]:
    """``amount * 0.5 ** (max(now - end, 0) / half_life)`` in SQL: the one decay rule.

    A bucket that has not ended yet weighs 1, as its age is clamped at zero.
    """
    if half_life_s <= 0:
        raise InvalidInputError(f"half-life must be > 0, got {half_life_s}")
    amount = UsageRow.gpu_s_norm if normalised else UsageRow.gpu_s
    at = literal(float(now), Float)
    age = at - UsageRow.interval_end
    halvings = age / literal(float(half_life_s), Float)
    weight = case(
        (age <= 0.0, literal(1.0, Float)),
        # PostgreSQL raises on underflow where Python returns 0.0: a bucket a
        # thousand half-lives old weighs below 1e-301, so it weighs nothing.
        (halvings >= MAX_HALVINGS, literal(0.0, Float)),
        else_=func.power(literal(0.5, Float), halvings),
    )
    return amount * weight


def _key_column(by: GroupBy) -> InstrumentedAttribute[str]:
    if by == "user":
        return UsageRow.user
    if by == "account":
        return UsageRow.account
    raise InvalidInputError(f"usage can be grouped by 'user' or 'account', not {by!r}")
