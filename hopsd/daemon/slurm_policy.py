"""The centre's policy as Slurm keeps it: GPU limits and fair shares, read and cached.

Limits and shares change when an administrator runs ``sacctmgr``, not every
tick, so they are read at most once per ``[slurm] policy_refresh_s``. A read
that fails (no accounting database, slurmdbd down) is logged once and the last
good answer kept: hops then plans as it did before, never refusing to plan.

:func:`quota_of` turns the limits into the core's :class:`~hopsd.core.quota.Quota`
for one tick: each planned job's groups (its account, its user in the account,
its QOS and its user and account in the QOS) and the GPUs that jobs hops does
not plan hold in each group.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from hopsd.config import HopsConfig
from hopsd.core.quota import Quota, group_keys
from hopsd.daemon.decide import Decision
from hopsd.daemon.views import Observation, ObservedJob
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.parse_limits import SlurmLimits, hops_shares
from hopsd.slurm.port import SlurmPolicyReads

log = logging.getLogger("hopsd.slurm_policy")
T = TypeVar("T")


@dataclass
class Cached(Generic[T]):
    """One read of Slurm, trusted for ``ttl_s``; a failed read keeps the last good answer."""

    read: Callable[[], T]
    ttl_s: float
    what: str
    clock: Callable[[], float] = time.monotonic
    value: T | None = None
    read_at: float | None = None
    failing: bool = field(default=False)

    def get(self) -> T | None:
        now = self.clock()
        if self.read_at is not None and now - self.read_at < self.ttl_s:
            return self.value
        self.read_at = now
        try:
            self.value = self.read()
        except SlurmError as exc:
            if not self.failing:
                log.warning("event=slurm-policy-unread what=%s error=%r", self.what, str(exc))
            self.failing = True
            return self.value
        if self.failing:
            log.info("event=slurm-policy-read what=%s", self.what)
        self.failing = False
        return self.value


@dataclass
class SlurmPolicy:
    """GPU limits and shares from Slurm, when hops.conf asks for them."""

    limits: Cached[SlurmLimits] | None = None
    shares: Cached[dict[str, float]] | None = None
    times: Cached[dict[str, float | None]] | None = None

    @staticmethod
    def of(port: object, *, limits: bool, shares: bool, ttl_s: float) -> SlurmPolicy:
        """The reads hops.conf asks for, through a port that offers them (else none)."""
        if not isinstance(port, SlurmPolicyReads):
            if limits or shares:
                log.warning("event=slurm-policy-unsupported backend=%r", type(port).__name__)
            return SlurmPolicy()
        reads = port
        return SlurmPolicy(
            Cached(reads.gpu_limits, ttl_s, "limits") if limits else None,
            Cached(lambda: hops_shares(reads.shares()), ttl_s, "shares") if shares else None,
            Cached(reads.partition_times, ttl_s, "partition-times") if limits else None,
        )

    def gpu_limits(self) -> SlurmLimits | None:
        return self.limits.get() if self.limits is not None else None

    def partition_times(self) -> dict[str, float | None]:
        """Each partition's MaxTime (None: unlimited); empty when not asked or never read."""
        return (self.times.get() if self.times is not None else None) or {}

    def share_table(self) -> dict[str, float] | None:
        """hops.conf-style shares from Slurm (None: not asked, or never read)."""
        return self.shares.get() if self.shares is not None else None


def quota_of(
    limits: SlurmLimits,
    obs: Observation,
    planned: Mapping[str, int],
    max_time_s: Mapping[str, float] | None = None,
) -> Quota:
    """The core's quota for one tick.

    ``planned`` maps each job of the snapshot to its Slurm id; every other job
    Slurm runs holds GPUs against its groups (``foreign``). Associations limited
    to one partition are not applied (hops plans across partitions). An account's
    limits cover its sub-accounts' jobs, as in Slurm. ``max_time_s``
    is each GPU type's partition MaxTime (:func:`type_max_times`).
    """
    grp: dict[str, int] = {}
    caps: dict[str, int] = {}
    parents = {a.account: a.parent for a in limits.assocs if not a.user and a.parent}
    for a in limits.assocs:
        if a.partition:
            continue
        key = f"account:{a.account}" if not a.user else f"assoc:{a.account}/{a.user}"
        _put(grp, key, a.grp_gpus)
        _put(caps, key, a.job_gpus)
    jobs = obs.job_map()
    owners = {j.slurm_id: (j.user, j.account, j.qos) for j in obs.jobs}
    for q in limits.qos:
        _put(grp, f"qos:{q.name}", q.grp_gpus)
        _put(caps, f"qos:{q.name}", q.job_gpus)
        for user, account, qos in owners.values():
            if qos == q.name:
                _put(grp, f"qos-user:{qos}/{user}", q.user_gpus)
                _put(grp, f"qos-account:{qos}/{account}", q.account_gpus)
    groups = {
        job_id: _keys(jobs[slurm_id], parents)
        for job_id, slurm_id in planned.items()
        if slurm_id in jobs
    }
    others = (j for j in obs.jobs if j.busy and j.slurm_id not in set(planned.values()))
    foreign = _held(others, parents)
    return Quota(grp, caps, foreign, groups, dict(max_time_s or {}))


def type_max_times(
    partition_of: Mapping[str, str],
    node_types: Mapping[str, str],
    times: Mapping[str, float | None],
) -> dict[str, float]:
    """Per GPU type, the shortest MaxTime of the partitions hops places its nodes through."""
    out: dict[str, float] = {}
    for node, partition in partition_of.items():
        most = times.get(partition)
        gpu_type = node_types.get(node)
        if most is not None and gpu_type is not None:
            out[gpu_type] = min(most, out.get(gpu_type, most))
    return out


def planned_ids(handles: Mapping[str, object], job_ids: Collection[str]) -> dict[str, int]:
    """Each snapshot job's Slurm id, from the assembled jobs' handles."""
    out: dict[str, int] = {}
    for job_id in job_ids:
        slurm_id = getattr(handles.get(job_id), "slurm_id", None)
        if isinstance(slurm_id, int):
            out[job_id] = slurm_id
    return out


def _keys(job: ObservedJob, parents: Mapping[str, str]) -> tuple[str, ...]:
    """The job's groups: its own (:func:`group_keys`) and every ancestor account's."""
    keys = list(group_keys(job.user, job.account, job.qos))
    account, seen = job.account, {job.account}
    while (parent := parents.get(account)) and parent not in seen:
        keys.append(f"account:{parent}")
        account = parent
        seen.add(parent)
    return tuple(keys)


def _held(jobs: Iterable[ObservedJob], parents: Mapping[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in jobs:
        for key in _keys(job, parents):
            out[key] = out.get(key, 0) + job.gpus
    return out


def _put(table: dict[str, int], key: str, value: int | None) -> None:
    if value is not None:
        table[key] = min(value, table.get(key, value))


def slurm_policy_of(config: HopsConfig, port: object) -> SlurmPolicy:
    """What hops.conf asks hopsd to read of the centre's policy in Slurm (limits, shares)."""
    return SlurmPolicy.of(
        port,
        limits=config.slurm_limits,
        shares=config.fairshare_source == "slurm",
        ttl_s=config.slurm_policy_refresh_s,
    )


def with_reasons(decision: Decision, waiting: Mapping[str, str]) -> Decision:
    """The decision, saying why each job Slurm's limits kept out of the plan waits."""
    told = {j: why for j, why in waiting.items() if j in decision.reasons}
    if not told:
        return decision
    return dataclasses.replace(decision, reasons={**decision.reasons, **told})
