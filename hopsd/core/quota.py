"""GPU quotas: the centre's limits on the GPUs a user, account or QOS may hold at once.

Slurm keeps a job pending past an association's or QOS's GPU limit however
free the GPUs are (``AssocGrpGRES``, ``QOSMaxGRESPerUser``...). A plan that
starts such a job would hold GPUs back for nothing, so no plan may take a
group past its limit, counting the GPUs its jobs hops does not plan already
hold (other jobs of the user, profiling runs).

The rule is laid around a policy (:class:`QuotaPolicy`), so every policy keeps
it without knowing of it: before planning, each job's demands are cut to what
its groups have left (a job no demand of which fits is not offered); after
planning, a start that would take a group past its limit with the starts
before it is dropped. The step's refill then offers the GPUs it left to others.

Groups are plain keys; :func:`group_keys` names those of a job's user,
account and QOS, the way :mod:`hopsd.daemon.slurm_policy` names Slurm's limits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from hopsd.core.model import Job, Plan
from hopsd.core.policies import Policy
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.urgency import asked_early_round


def group_keys(user: str, account: str, qos: str = "") -> tuple[str, ...]:
    """The groups a job of ``user`` in ``account`` under ``qos`` counts towards."""
    keys = [f"account:{account}", f"assoc:{account}/{user}"]
    if qos:
        keys += [f"qos:{qos}", f"qos-user:{qos}/{user}", f"qos-account:{qos}/{account}"]
    return tuple(keys)


@dataclass(frozen=True)
class Quota:
    """Limits per group, and what holds GPUs against them outside the plan.

    ``limits``: most GPUs a group's running jobs may hold together.
    ``job_caps``: most GPUs any one job of the group may hold.
    ``foreign``: GPUs a group's jobs hold that no plan moves (other jobs, runs).
    ``groups``: each planned job's groups (a job not listed is in none).
    ``max_time_s``: per GPU type, the MaxTime of the partition hops places it
    through; a job whose own time limit is longer is never placed on that type
    (Slurm would keep it pending, ``PartitionTimeLimit``), nor moved there.
    """

    limits: Mapping[str, int] = field(default_factory=dict)
    job_caps: Mapping[str, int] = field(default_factory=dict)
    foreign: Mapping[str, int] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    max_time_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.limits and not self.job_caps and not self.max_time_s

    def too_short(self, job: Job) -> tuple[tuple[str, int], ...]:
        """Per-type limits of 0 where the partition's MaxTime is below the job's time limit.

        A running job keeps its own type: it runs there already, under its limit.
        """
        wanted = job.time_limit_s
        if wanted is None:
            return ()
        here = job.current.gpu_type if job.current is not None else None
        return tuple(
            (t, 0) for t, most in sorted(self.max_time_s.items()) if wanted > most and t != here
        )

    def left(self, key: str, taken: Mapping[str, int]) -> int | None:
        """GPUs ``key`` may still take beside ``taken`` (None: unlimited)."""
        limit = self.limits.get(key)
        if limit is None:
            return None
        return max(limit - self.foreign.get(key, 0) - taken.get(key, 0), 0)

    def job_room(self, job_id: str, taken: Mapping[str, int]) -> int | None:
        """Most GPUs one job may hold beside ``taken`` (None: unlimited)."""
        room: int | None = None
        for key in self.groups.get(job_id, ()):
            for bound in (self.left(key, taken), self.job_caps.get(key)):
                if bound is not None:
                    room = bound if room is None else min(room, bound)
        return room


def held_back(snapshot: Snapshot, quota: Quota, plan: Plan) -> dict[str, str]:
    """Why each queued job ``plan`` leaves waiting is held back by the quota, if it is.

    A job no demand of which fits what its groups have left once the plan is
    enacted, or whose time limit every GPU type's partition is too short for.
    """
    placed = plan.placements()
    after = {
        j.id: j.current.total_gpus
        for j in snapshot.running
        if j.current is not None and j.id not in plan.preempt
    }
    after.update({j: c.total_gpus for j, c in placed.items()})
    taken = held_by_group(quota, after)
    out: dict[str, str] = {}
    for job in snapshot.queued:
        if job.id in placed:
            continue
        if job.time_limit_s is not None and quota.max_time_s:
            limited = job.with_limits(quota.too_short(job))
            if not any(limited.demands_on(t) for t in snapshot.cluster.gpu_types):
                out[job.id] = "waiting: its time limit is above the MaxTime of every partition"
                continue
        bounds = [
            (bound, key)
            for key in quota.groups.get(job.id, ())
            for bound in (quota.left(key, taken), quota.job_caps.get(key))
            if bound is not None
        ]
        if bounds and min(bounds)[0] < job.min_demand:
            room, key = min(bounds)
            out[job.id] = (
                f"waiting: Slurm's GPU limit of {key} leaves {room} GPUs, "
                f"needs at least {job.min_demand}"
            )
    return out


def held_by_group(quota: Quota, placed: Mapping[str, int]) -> dict[str, int]:
    """GPUs each group's jobs hold, from ``{job: gpus}``."""
    out: dict[str, int] = {}
    for job_id, gpus in placed.items():
        for key in quota.groups.get(job_id, ()):
            out[key] = out.get(key, 0) + gpus
    return out


def offered(snapshot: Snapshot, quota: Quota, *, fragment: bool) -> Snapshot:
    """The snapshot with each queued job's demands cut to what its groups have left.

    Every job is also kept off the GPU types whose partition's MaxTime its time
    limit exceeds (:meth:`Quota.too_short`).

    In a round plan running jobs may be moved or preempted, so only foreign GPUs
    count against a group; in a fragment plan running jobs stay, so theirs count
    too. A running job keeps the size it runs at but is never grown past what is
    left. A queued job none of whose demands fits is left out of the plan.
    """
    taken: dict[str, int] = {}
    if fragment:
        running = {j.id: j.current.total_gpus for j in snapshot.running if j.current is not None}
        taken = held_by_group(quota, running)
    jobs: list[Job] = []
    for given in snapshot.jobs:
        job = given.with_limits(quota.too_short(given))
        room = quota.job_room(job.id, taken)
        if room is None:
            jobs.append(job)
            continue
        if job.current is not None:  # it may stay as it runs, never grow past the room
            room = max(room, job.current.total_gpus)
        fits = tuple(d for d in job.demands if d <= room)
        if fits:
            jobs.append(job if fits == job.demands else dataclasses.replace(job, demands=fits))
    if len(jobs) == len(snapshot.jobs) and all(
        a is b for a, b in zip(jobs, snapshot.jobs, strict=True)
    ):
        return snapshot
    return dataclasses.replace(snapshot, jobs=tuple(jobs))


def within(plan: Plan, quota: Quota) -> Plan:
    """``plan`` without the starts that would take a group past its limit.

    Starts are taken in the plan's order (the policy's), each kept while all
    its groups stay within their limits; moves and keeps are left alone: a
    running job already holds its GPUs, and :func:`offered` never let a move
    grow it past its groups' room.
    """
    staying = {a.job_id: a.config.total_gpus for a in (*plan.keep, *plan.move)}
    held = held_by_group(quota, staying)
    kept = []
    for start in plan.start:
        keys = quota.groups.get(start.job_id, ())
        gpus = start.config.total_gpus
        if any(_over(quota, k, held.get(k, 0) + gpus) for k in keys):
            continue
        kept.append(start)
        for key in keys:
            held[key] = held.get(key, 0) + gpus
    if len(kept) == len(plan.start):
        return plan
    return dataclasses.replace(plan, start=tuple(kept))


def _over(quota: Quota, key: str, held: int) -> bool:
    limit = quota.limits.get(key)
    return limit is not None and held + quota.foreign.get(key, 0) > limit


@dataclass(frozen=True)
class QuotaPolicy:
    """A policy whose plans keep ``quota``: demands cut before, excess starts dropped after."""

    inner: Policy
    quota: Quota

    @property
    def name(self) -> str:
        return self.inner.name

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        plan = self.inner.plan(offered(snapshot, self.quota, fragment=False), settings)
        return within(plan, self.quota)

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        plan = self.inner.plan_fragment(offered(snapshot, self.quota, fragment=True), settings)
        return within(plan, self.quota)

    def early_round_at(
        self, snapshot: Snapshot, settings: Settings, last_round_at: float | None
    ) -> float | None:
        """The wrapped policy's early round (:func:`hopsd.core.urgency.asked_early_round`)."""
        return asked_early_round(self.inner, snapshot, settings, last_round_at)


def with_quota(policy: Policy, quota: Quota) -> Policy:
    """``policy`` keeping ``quota`` (the policy itself when no limit applies)."""
    return policy if quota.empty else QuotaPolicy(policy, quota)
