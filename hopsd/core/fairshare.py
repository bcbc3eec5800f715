"""Fair shares between users and accounts, layered on the method's job-level LR fairness.

The method itself is fair between *jobs* (latency ratio). A centre also wants
fairness between *users and accounts* over days, as Slurm's fair-share does:
each owner's usage of normalised GPU time decays with a half-life, is compared
with the owner's configured share, and gives a factor ``F = 2 ** (-usage/share)``
(Slurm's classic formula: 0.5 means exactly at share, 1 unused, -> 0 far over).

This module is the one owner of that rule: hopsd applies it, ``hops fairness``
shows it, the simulator and replay use it. hopsd hands each job's owner factor
``(2F_user * 2F_account) ** weight`` to the core as the job's ``share_factor``;
the planner multiplies the job's biased priority by it (``(prior + bias) * share_factor``, see
:func:`hopsd.core.priorities.share_keys`) for the queue order and the ILP
weight. Priorities keep their definitions, so this works the same for every
priority (LR, FTF, LAS, SJF, SRTF). ``weight = 0`` gives a factor of exactly 1:
the pure method.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hopsd.core.model import Job

ACCOUNT_PREFIX = "account:"
#: Smallest share factor handed to the planner (it must stay > 0).
MIN_FACTOR = 1e-9


def fairshare_factors(
    usage: Mapping[str, float], shares: Mapping[str, float], owners: Iterable[str]
) -> dict[str, float]:
    """``2 ** (-usage_fraction / share_fraction)`` for every owner seen in usage or owners.

    Shares default to 1 (equal); fractions are taken among the owners present,
    so an idle owner's share does not dilute everyone else's.
    """
    names = sorted(set(owners) | set(usage))
    if not names:
        return {}
    share = {n: float(shares.get(n, 1.0)) for n in names}
    share_total = sum(share.values())
    usage_total = sum(usage.get(n, 0.0) for n in names)
    out: dict[str, float] = {}
    for n in names:
        used = usage.get(n, 0.0) / usage_total if usage_total > 0 else 0.0
        out[n] = math.pow(2.0, -used / (share[n] / share_total))
    return out


@dataclass(frozen=True)
class FairShare:
    """Per-user and per-account factors of one tick, and the weight that applies them."""

    users: Mapping[str, float]
    accounts: Mapping[str, float]
    weight: float

    def multiplier(self, user: str, account: str) -> float:
        """The share factor of the owner's jobs: 1 at share, above 1 under it, below over it.

        Floored at :data:`MIN_FACTOR` so an owner far over a tiny share still
        has a valid (positive) factor rather than one rounded to zero.
        """
        if self.weight == 0:
            return 1.0
        f_user = self.users.get(user, 1.0)
        f_account = self.accounts.get(account, 1.0)
        value = math.pow(2.0 * f_user, self.weight) * math.pow(2.0 * f_account, self.weight)
        return max(value, MIN_FACTOR)


@dataclass(frozen=True)
class Usage:
    """Decayed normalised GPU-seconds per user and per account, as of the snapshot.

    The caller aggregates it (hopsd sums its ledger's usage rows in the
    database, two queries whatever the history); the scheduling step turns it
    into each job's share factor with :func:`apply_fair_share`.
    """

    users: Mapping[str, float] = field(default_factory=dict)
    accounts: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FairShareRule:
    """The operator's fair-share knobs: configured shares and the weight (0: off)."""

    shares: Mapping[str, float] = field(default_factory=dict)
    weight: float = 0.0


def apply_fair_share(jobs: Iterable[Job], usage: Usage, rule: FairShareRule) -> tuple[Job, ...]:
    """The jobs with their owners' share factors (every factor 1 when the weight is 0)."""
    job_list = tuple(jobs)
    if rule.weight == 0:
        return tuple(dataclasses.replace(j, share_factor=1.0) for j in job_list)
    owners = sorted({(j.user, j.account) for j in job_list})
    factors = fair_share(usage.users, usage.accounts, owners, rule.shares, rule.weight)
    return tuple(
        dataclasses.replace(j, share_factor=factors.multiplier(j.user, j.account)) for j in job_list
    )


def split_shares(shares: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """hops.conf's ``[fairshare] shares`` into user shares and account shares.

    Keys are user names, or ``account:NAME`` for an account.
    """
    users = {k: float(v) for k, v in shares.items() if not k.startswith(ACCOUNT_PREFIX)}
    accounts = {
        k[len(ACCOUNT_PREFIX) :]: float(v)
        for k, v in shares.items()
        if k.startswith(ACCOUNT_PREFIX)
    }
    return users, accounts


def fair_share(
    user_usage: Mapping[str, float],
    account_usage: Mapping[str, float],
    owners: Iterable[tuple[str, str]],
    shares: Mapping[str, float],
    weight: float,
) -> FairShare:
    """Fair-share factors from decayed usage per user and per account."""
    owner_list = list(owners)
    user_shares, account_shares = split_shares(shares)
    return FairShare(
        users=fairshare_factors(user_usage, user_shares, (u for u, _ in owner_list)),
        accounts=fairshare_factors(account_usage, account_shares, (a for _, a in owner_list)),
        weight=weight,
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one owner stands: share of decayed usage, fair share, their ratio, the factor."""

    name: str
    usage: float
    usage_share: float
    fair_share: float
    ratio: float
    factor: float


def standings(
    usage: Mapping[str, float], shares: Mapping[str, float], owners: Iterable[str]
) -> list[Standing]:
    """Every owner's standing against its share, with the factor hopsd applies to it."""
    names = sorted(set(owners) | set(usage))
    if not names:
        return []
    factors = fairshare_factors(usage, shares, names)
    weights = {n: float(shares.get(n, 1.0)) for n in names}
    total_weight = sum(weights.values())
    total_usage = sum(usage.get(n, 0.0) for n in names)
    out = []
    for n in names:
        fair = weights[n] / total_weight
        used = usage.get(n, 0.0) / total_usage if total_usage > 0 else 0.0
        out.append(Standing(n, usage.get(n, 0.0), used, fair, used / fair, factors[n]))
    return out
