"""The document behind ``hops fairness --json`` and the status page's fairness tables."""

from __future__ import annotations

import time
from typing import Any

from hopsd.config import HopsConfig
from hopsd.core.fairshare import split_shares
from hopsd.ledger.unit import Unit
from hopsd.slurm.errors import SlurmError
from hopsd.views.records import ACTIVE, STARVING_LR, raqlr_of, starving, user_fairness


def configured_shares(config: HopsConfig) -> tuple[dict[str, float], str | None]:
    """The shares hopsd applies: hops.conf's, or Slurm's association tree's (``sshare``).

    When Slurm does not answer, equal shares and why (the standings are then
    against equal shares, and the document says so).
    """
    if config.fairshare_source != "slurm":
        return dict(config.shares), None
    from hopsd.slurm.factory import port_from_config
    from hopsd.slurm.parse_limits import hops_shares
    from hopsd.slurm.port import SlurmPolicyReads

    try:
        port = port_from_config(config)
        if not isinstance(port, SlurmPolicyReads):
            return {}, f"the {config.slurm_backend} backend cannot read Slurm's shares"
        return hops_shares(port.shares()), None
    except (SlurmError, ValueError) as exc:
        return {}, str(exc)


def fairness_payload(unit: Unit, config: HopsConfig, window_h: float) -> dict[str, Any]:
    """The ``--json`` document of ``hops fairness`` (stable schema, see README)."""
    now = time.time()
    rows = unit.jobs_in_states(ACTIVE)
    rows.sort(key=lambda r: (r.submit_time, r.slurm_job_id or 0))
    half_life = config.fairshare_half_life_h * 3600
    shares, shares_error = configured_shares(config)
    user_shares, account_shares = split_shares(shares)
    by_user, by_account = unit.decayed_usage(now, half_life)
    users, jain = user_fairness(by_user, user_shares, (r.user for r in rows))
    accounts, account_jain = user_fairness(
        by_account,
        account_shares,
        (r.account for r in rows),
        key="account",
    )
    lrs = unit.finished_latency_ratios(now - window_h * 3600)
    jobs = []
    for row in rows:
        jobs.append(
            {
                "job_id": row.slurm_job_id,
                "user": row.user,
                "state": str(row.state),
                "latency_ratio": None if row.latency_ratio is None else round(row.latency_ratio, 3),
                # Themis rho as hopsd computed it (the ftf priority's own definition)
                "ftf_rho": None if row.ftf_rho is None else round(row.ftf_rho, 3),
                "starving": starving(row),
            }
        )
    return {
        "jobs": jobs,
        "users": users,
        "accounts": accounts,
        "jain_users": round(jain, 4),
        "jain_accounts": round(account_jain, 4),
        "raqlr": round(raqlr_of(lrs), 3),
        "raqlr_window_h": window_h,
        "finished_in_window": len(lrs),
        "starving_threshold_lr": STARVING_LR,
        "shares_source": config.fairshare_source,
        **({"shares_error": shares_error} if shares_error else {}),
    }
