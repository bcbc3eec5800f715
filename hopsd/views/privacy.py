"""The status page and its JSON as a viewer nobody vouches for may see them.

The page is served over plain HTTP: hopsd cannot tell who asks, so it shows
what Slurm's ``PrivateData`` lets *any* user see (:mod:`hopsd.core.privacy`
with the anonymous viewer): with ``jobs`` no job at all, with ``usage`` no
user's standing, with ``accounts`` no account names. A user sees their own
jobs with ``hops status``; operators see all there.
"""

from __future__ import annotations

from typing import Any

from hopsd.core.privacy import ANONYMOUS, PrivateData, Viewer, sees_account, sees_job, sees_usage

_NOBODY = Viewer(ANONYMOUS)


def public_status(doc: dict[str, Any], rules: PrivateData) -> dict[str, Any]:
    """The ``/status.json`` document without what the anonymous viewer may not see."""
    out = dict(doc)
    out["jobs"] = [_job(j, rules) for j in doc["jobs"] if sees_job(rules, _NOBODY, j["user"])]
    out["refused"] = [r for r in doc["refused"] if sees_job(rules, _NOBODY, r["user"])]
    return out


def public_fairness(doc: dict[str, Any], rules: PrivateData) -> dict[str, Any]:
    """The ``/fairness.json`` document: jobs by the job rule, standings by the usage rule."""
    out = dict(doc)
    out["jobs"] = [j for j in doc["jobs"] if sees_job(rules, _NOBODY, j["user"])]
    out["users"] = [u for u in doc["users"] if sees_usage(rules, _NOBODY, u["user"])]
    if not sees_account(rules, _NOBODY, "") or rules.usage:
        out["accounts"] = []
    return out


def public_job(job: dict[str, Any], rules: PrivateData) -> dict[str, Any]:
    """One job's ``/job/ID`` document (the caller checked the job may be seen): no
    account the anonymous viewer may not see, and not the script's path."""
    return {k: v for k, v in _job(job, rules).items() if k != "script"}


def _job(job: dict[str, Any], rules: PrivateData) -> dict[str, Any]:
    if "account" in job and not sees_account(rules, _NOBODY, job["user"]):
        return {**job, "account": ""}
    return job
