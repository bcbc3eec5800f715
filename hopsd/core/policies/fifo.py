"""Plain Slurm as most clusters run it today: FIFO with EASY backfill, heterogeneity-agnostic.

* Each job asks for the median of its demand set, rigidly, and any GPU type.
* Jobs start in submission order on the first free GPUs in node order (one node
  when one node can hold the job, else the first type with enough free GPUs).
* When the head of the queue cannot start it gets a reservation: the earliest
  time enough GPUs of one type free up, from the running jobs' expected ends
  (the estimator's remaining time stands in for users' time limits). Later jobs
  may start ahead of it only if they end before that time, run on another type,
  or use GPUs the head will not need (EASY backfill).
* Nothing is ever preempted or moved; new jobs also start inside a round, as
  Slurm schedules on every job end.

``[policies.fifo] backfill = false`` turns backfill off: nothing starts while
the head of the queue waits (strict FIFO, as a cluster without the backfill
scheduler runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, Job, Plan
from hopsd.core.plandiff import arrival_order
from hopsd.core.policies import PolicySpec
from hopsd.core.policies.common import diff_plan, free_gpus, rigid_demand, take
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot


def first_fit(
    cluster: Cluster, count: int, free: Mapping[str, int], job: Job | None = None
) -> Configuration | None:
    """Slurm-like choice ignoring GPU speed: first node that holds the job, else first type.

    Types the job's profiles rule out for ``count`` GPUs are skipped, as a Slurm
    job constrained to the GPU types it fits would be.
    """
    limited = job is not None and bool(job.max_gpus)
    allowed = {t for t in cluster.gpu_types if job is None or count in job.demands_on(t)}
    for node in cluster.nodes:
        if (not limited or node.gpu_type in allowed) and free.get(node.id, 0) >= count:
            return Configuration.of(node.gpu_type, {node.id: count})
    for gpu_type in dict.fromkeys(n.gpu_type for n in cluster.nodes if n.gpu_type in allowed):
        nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type and free.get(n.id, 0) > 0]
        if sum(free[n.id] for n in nodes) < count:
            continue
        parts: list[tuple[str, int]] = []
        left = count
        for node in nodes:
            give = min(free[node.id], left)
            parts.append((node.id, give))
            left -= give
            if left == 0:
                return Configuration(gpu_type, tuple(parts))
    return None


class _Room:
    """Largest free node and type, so a job that cannot fit is turned away in O(1)."""

    def __init__(self, cluster: Cluster, free: Mapping[str, int]) -> None:
        self._types = {n.id: n.gpu_type for n in cluster.nodes}
        self._free = free
        self.refresh()

    def refresh(self) -> None:
        per_type: dict[str, int] = {}
        for node_id, gpus in self._free.items():
            per_type[self._types[node_id]] = per_type.get(self._types[node_id], 0) + gpus
        self._largest = max(per_type.values(), default=0)

    def may_fit(self, count: int) -> bool:
        return count <= self._largest


@dataclass
class Reservation:
    """The blocked head job's claim: from ``at`` on, it needs GPUs of ``gpu_type``."""

    gpu_type: str
    at: float
    spare: int  # GPUs of that type free at ``at`` beyond what the head needs


def _expected_end(job: Job, cfg: Configuration, now: float, est: Estimator) -> float:
    rate = est.throughput(job, cfg).samples_per_s
    return now + job.remaining_samples / rate if rate > 0 else float("inf")


def _reserve(
    snapshot: Snapshot,
    job: Job,
    count: int,
    free: Mapping[str, int],
    ends: list[tuple[float, Configuration]],
) -> Reservation | None:
    """Earliest instant some type the job may use has ``count`` free GPUs, replaying job ends."""
    best: Reservation | None = None
    for gpu_type in dict.fromkeys(n.gpu_type for n in snapshot.cluster.nodes):
        if count not in job.demands_on(gpu_type):
            continue
        have = sum(free.get(n.id, 0) for n in snapshot.cluster.nodes if n.gpu_type == gpu_type)
        at = snapshot.now
        for end, cfg in sorted((e for e in ends if e[1].gpu_type == gpu_type), key=lambda e: e[0]):
            if have >= count:
                break
            have += cfg.total_gpus
            at = end
        if have < count:
            continue
        if best is None or at < best.at:
            best = Reservation(gpu_type, at, have - count)
    return best


@dataclass(frozen=True)
class FifoSettings:
    """``[policies.fifo]``: whether later jobs may start around a blocked head."""

    backfill: bool = field(
        default=True, metadata={"help": "EASY backfill; false: strict FIFO behind a blocked head"}
    )


class FifoPolicy:
    """FIFO with EASY backfill over rigid median demands (see the module docstring)."""

    name = "fifo"

    def __init__(self, settings: FifoSettings | None = None) -> None:
        self.backfill = (settings or FifoSettings()).backfill

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        est = Estimator(snapshot.cluster, snapshot.store, settings)
        running = {j.id: j.current for j in snapshot.running if j.current is not None}
        free = free_gpus(snapshot, running.values())
        ends = [
            (_expected_end(j, j.current, snapshot.now, est), j.current)
            for j in snapshot.running
            if j.current is not None
        ]
        placements: dict[str, Configuration] = dict(running)
        reservation: Reservation | None = None
        blocked = False
        queue = arrival_order(snapshot.queued)
        room = _Room(snapshot.cluster, free)
        for job in queue:
            count = rigid_demand(job)
            cfg = first_fit(snapshot.cluster, count, free, job) if room.may_fit(count) else None
            if not blocked:
                if cfg is not None:
                    take(cfg, free)
                    room.refresh()
                    placements[job.id] = cfg
                    ends.append((_expected_end(job, cfg, snapshot.now, est), cfg))
                    continue
                blocked = True
                if not self.backfill:
                    break
                reservation = _reserve(snapshot, job, count, free, ends)
                continue
            if cfg is None or not self._may_backfill(job, cfg, snapshot.now, est, reservation):
                continue
            take(cfg, free)
            room.refresh()
            placements[job.id] = cfg
        return diff_plan(snapshot, placements, ("fifo",))

    @staticmethod
    def _may_backfill(
        job: Job, cfg: Configuration, now: float, est: Estimator, reservation: Reservation | None
    ) -> bool:
        if reservation is None or cfg.gpu_type != reservation.gpu_type:
            return True
        if _expected_end(job, cfg, now, est) <= reservation.at:
            return True
        if cfg.total_gpus <= reservation.spare:
            reservation.spare -= cfg.total_gpus
            return True
        return False

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """Slurm schedules on every job end; it never moves a job, so this is a plain round."""
        return self.plan(snapshot, settings)


FIFO = PolicySpec(
    "fifo", FifoPolicy, FifoSettings(), "plain Slurm: FIFO with EASY backfill, rigid demands"
)
