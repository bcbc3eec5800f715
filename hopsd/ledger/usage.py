"""GPU usage per user and account over time, for fairness reports.

Usage accrues into fixed buckets (one hour by default) per (user, account), so
the table grows with time and users, not with ticks or jobs. Decayed usage
weighs each bucket by ``0.5 ** (age / half_life)`` where the age is measured
from the bucket's end: the convention of fair-share schedulers, which lets
recent consumption count fully and old consumption fade.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from hopsd.core.errors import InvalidInputError
from hopsd.core.fairshare import decay
from hopsd.ledger.models import UsageRow

GroupBy = Literal["user", "account"]

DEFAULT_BUCKET_S = 3600.0


@dataclass(frozen=True)
class UsageTotals:
    """GPU-seconds of one user or account, raw and normalised by GPU-type speed."""

    gpu_s: float
    gpu_s_norm: float


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

    Sums per (key, bucket end) in SQL, then applies the weights in Python so the
    arithmetic is identical on every backend.
    """
    if half_life_s <= 0:
        raise InvalidInputError(f"half-life must be > 0, got {half_life_s}")
    key = _key_column(by)
    amount = UsageRow.gpu_s_norm if normalised else UsageRow.gpu_s
    stmt = select(key, UsageRow.interval_end, func.sum(amount)).group_by(key, UsageRow.interval_end)
    totals: dict[str, float] = {}
    for name, end, value in session.execute(stmt):
        weight = decay(now - float(end), half_life_s)
        totals[str(name)] = totals.get(str(name), 0.0) + float(value) * weight
    return totals


def _key_column(by: GroupBy) -> InstrumentedAttribute[str]:
    if by == "user":
        return UsageRow.user
    if by == "account":
        return UsageRow.account
    raise InvalidInputError(f"usage can be grouped by 'user' or 'account', not {by!r}")
