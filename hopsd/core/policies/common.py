"""Small pieces the baseline policies share: rigid demands, queue order, packing, plan diffs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.core.capacity import headroom, held_gpus, node_capacity, per_type
from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, Job, Plan
from hopsd.core.plandiff import arrival_order
from hopsd.core.plandiff import diff_plan as core_diff_plan
from hopsd.core.policies import Policy, PolicySpec
from hopsd.core.priorities import PriorityContext, get_priority, order_jobs
from hopsd.core.snapshot import Snapshot
from hopsd.core.typed_settings import SettingsError

#: Queue orders a baseline may be given: the method's latency ratio, or submission order.
QUEUE_ORDERS = ("lr", "arrival")


@dataclass(frozen=True)
class BaselineSettings:
    """``[policies.sia]``, ``[policies.gavel]``: the queue order that breaks their ties."""

    queue_order: str = field(
        default="lr", metadata={"help": "ties broken by: lr (latency ratio) or arrival"}
    )

    def __post_init__(self) -> None:
        if self.queue_order not in QUEUE_ORDERS:
            known = ", ".join(QUEUE_ORDERS)
            raise SettingsError("queue_order", f"unknown {self.queue_order!r} (known: {known})")


def baseline_spec(
    name: str, build: Callable[[str, str], Policy], queue_order: str, summary: str
) -> PolicySpec[BaselineSettings]:
    """A baseline's spec: ``build(queue_order, name)`` with the settings' queue order."""
    return PolicySpec(
        name, lambda own: build(own.queue_order, name), BaselineSettings(queue_order), summary
    )


def rigid_demand(job: Job) -> int:
    """The median of the demand set (lower middle for an even count), used as a rigid demand."""
    return job.demands[(len(job.demands) - 1) // 2]


def ordered_queue(snapshot: Snapshot, estimator: Estimator, order: str) -> tuple[Job, ...]:
    """All jobs of the snapshot in queue order: LR (highest first) or submission order."""
    if order == "lr":
        ctx = PriorityContext(snapshot.now, snapshot.cluster, estimator, len(snapshot.jobs))
        return order_jobs(snapshot.jobs, get_priority("lr"), ctx)
    return arrival_order(snapshot.jobs)


def free_gpus(snapshot: Snapshot, holding: Iterable[Configuration] = ()) -> dict[str, int]:
    """GPUs of each node hops may hand out, minus what ``holding`` already takes."""
    return headroom(node_capacity(snapshot), held_gpus(holding))


def type_capacity(snapshot: Snapshot, free: Mapping[str, int] | None = None) -> dict[str, int]:
    """Usable GPUs per type (all capacity, or the ``free`` map given)."""
    return per_type(snapshot.cluster, free if free is not None else node_capacity(snapshot))


def fits(cfg: Configuration, free: Mapping[str, int]) -> bool:
    return all(free.get(n, 0) >= g for n, g in cfg.parts)


def take(cfg: Configuration, free: dict[str, int]) -> None:
    """Remove a configuration's GPUs from the free map (they must be free)."""
    for node_id, gpus in cfg.parts:
        if free[node_id] < gpus:
            raise AssertionError(f"node {node_id!r} over-booked")
        free[node_id] -= gpus


def pack(
    cluster: Cluster, gpu_type: str, count: int, free: Mapping[str, int]
) -> Configuration | None:
    """Place ``count`` GPUs of a type on the fewest nodes.

    One node if any can hold them all (the fullest such node: best fit, to keep
    whole nodes for large jobs); otherwise the nodes with the most idle GPUs
    first, in cluster order among equals. None when the type lacks the GPUs.
    """
    nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type and free.get(n.id, 0) > 0]
    if sum(free[n.id] for n in nodes) < count:
        return None
    single = [n for n in nodes if free[n.id] >= count]
    if single:
        best = min(single, key=lambda n: free[n.id])
        return Configuration.of(gpu_type, {best.id: count})
    parts: dict[str, int] = {}
    left = count
    for node in sorted(nodes, key=lambda n: -free[n.id]):
        give = min(free[node.id], left)
        parts[node.id] = give
        left -= give
        if left == 0:
            break
    order = {n.id: i for i, n in enumerate(cluster.nodes)}
    return Configuration(gpu_type, tuple(sorted(parts.items(), key=lambda p: order[p[0]])))


def canonical_config(cluster: Cluster, gpu_type: str, count: int) -> Configuration | None:
    """Where ``count`` GPUs of a type would sit on an empty cluster (fewest nodes)."""
    return pack(cluster, gpu_type, count, {n.id: n.gpus for n in cluster.nodes})


class CanonicalThroughput:
    """Throughput of a job in each type's canonical placement of ``count`` GPUs.

    Baselines that decide (type, count) before nodes value every option on the
    same canonical placement; it is built once per (type, count) and reused for
    every job of a round.
    """

    def __init__(self, cluster: Cluster, estimator: Estimator) -> None:
        self._cluster = cluster
        self._estimator = estimator
        self._configs: dict[tuple[str, int], Configuration | None] = {}

    def __call__(self, job: Job, gpu_type: str, count: int) -> float | None:
        """Samples/s, or None when the type cannot hold ``count`` GPUs at all."""
        key = (gpu_type, count)
        if key not in self._configs:
            self._configs[key] = canonical_config(self._cluster, gpu_type, count)
        cfg = self._configs[key]
        return None if cfg is None else self._estimator.throughput(job, cfg).samples_per_s


def place_by_type(
    cluster: Cluster,
    chosen: Mapping[str, tuple[str, int]],
    jobs: Mapping[str, Job],
    free: dict[str, int],
) -> dict[str, Configuration]:
    """Turn per-type GPU counts into placements, keeping a job's current placement when possible.

    Jobs that keep their (type, count) and whose GPUs are still free stay put;
    the rest are packed largest first. The counts per type must fit the free
    GPUs of the type (the caller checked it), so packing never fails.
    """
    out: dict[str, Configuration] = {}
    for job_id in sorted(chosen):
        cur = jobs[job_id].current
        gpu_type, count = chosen[job_id]
        if (
            cur is not None
            and cur.gpu_type == gpu_type
            and cur.total_gpus == count
            and fits(cur, free)
        ):
            take(cur, free)
            out[job_id] = cur
    rest = sorted((j for j in chosen if j not in out), key=lambda j: (-chosen[j][1], j))
    for job_id in rest:
        gpu_type, count = chosen[job_id]
        cfg = pack(cluster, gpu_type, count, free)
        if cfg is None:
            raise AssertionError(f"no room for job {job_id!r} on {gpu_type!r}")
        take(cfg, free)
        out[job_id] = cfg
    return out


def diff_plan(
    snapshot: Snapshot, placements: Mapping[str, Configuration], notes: Sequence[str] = ()
) -> Plan:
    """The plan that takes the snapshot to ``placements`` (the core's one diff, by job id)."""
    ordered = sorted(snapshot.jobs, key=lambda j: j.id)
    return core_diff_plan(ordered, placements, notes=notes)


def keep_running(snapshot: Snapshot, note: str) -> Plan:
    """Every running job stays, nothing starts: a round-based policy's answer inside a round."""
    return diff_plan(snapshot, {j.id: j.current for j in snapshot.running if j.current}, (note,))
