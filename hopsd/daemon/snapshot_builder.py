"""From observed Slurm state and ledger rows to the core's :class:`Snapshot`.

The cluster is the managed inventory (:mod:`hopsd.core.inventory`, the rule
``hops submit`` and ``hops status`` use too). What hops may
hand out on a node (its capacity) is the node's GPUs minus those held by jobs
hops does not manage, zero on down or drained nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from hopsd.config import HopsConfig
from hopsd.core.admission import largest_config, type_limits
from hopsd.core.capacity import left, node_sizes, per_type
from hopsd.core.inventory import NodeFacts, managed_nodes
from hopsd.core.model import Cluster, Configuration, Job, Node
from hopsd.daemon.views import ObservedJob, ObservedNode
from hopsd.ledger.records import JobRecord
from hopsd.slurm.tag import HopsTag, try_decode


@dataclass(frozen=True)
class ClusterView:
    """The managed cluster: core nodes, the partition that pins each node's type, capacity."""

    cluster: Cluster
    partition_of: Mapping[str, str]
    capacity: Mapping[str, int]

    def largest_config(self) -> int:
        """GPUs of the biggest single-type configuration: the largest demand that can ever run."""
        return largest_config(self.cluster)

    def per_type(self) -> dict[str, int]:
        """GPUs of each managed type (what GPU-type constraints are checked against)."""
        return per_type(self.cluster, node_sizes(self.cluster))


def node_facts(nodes: Sequence[ObservedNode]) -> list[NodeFacts]:
    return [NodeFacts(n.name, n.gpu_type, n.gpus, n.partitions) for n in nodes]


def build_cluster_view(
    nodes: Sequence[ObservedNode], config: HopsConfig, hops_held: Mapping[str, int]
) -> ClusterView:
    """The managed cluster; ``hops_held`` is GPUs per node held by hops jobs the plan knows."""
    observed = {n.name: n for n in nodes}
    partition_of: dict[str, str] = {}
    core_nodes: list[Node] = []
    capacity: dict[str, int] = {}
    for managed in managed_nodes(node_facts(nodes), config.partitions, config.node_types):
        node = observed[managed.name]
        partition_of[node.name] = managed.partition
        core_nodes.append(Node(node.name, managed.gpu_type, node.gpus, managed.partition))
        foreign = left(node.gpus_used, hops_held.get(node.name, 0))
        capacity[node.name] = left(node.gpus, foreign) if node.usable else 0
    types = {n.gpu_type for n in core_nodes}
    cluster = Cluster.build((config.gpu_type(t) for t in sorted(types)), core_nodes)
    return ClusterView(cluster, partition_of, capacity)


def observed_config(job: ObservedJob, cluster: Cluster) -> Configuration | None:
    """The configuration a running job holds, or None if it is not (wholly) on managed nodes."""
    if not job.nodes or not all(cluster.has_node(n) for n in job.nodes):
        return None
    kinds = {cluster.node(n).gpu_type for n in job.nodes}
    if len(kinds) != 1:
        return None
    held = sorted((n for n, g in job.nodes.items() if g > 0), key=cluster.position)
    if not held:
        return None
    return Configuration(kinds.pop(), tuple((n, job.nodes[n]) for n in held))


def adopted_tag(row: JobRecord, seen: ObservedJob) -> HopsTag | None:
    """The tag a job was adopted with: its owner may edit the Slurm comment later, and an
    edited comment must not change the job's constraints (the reconciler reports it).

    A row adopted before the ledger kept tags gets Slurm's current one recorded by
    this tick's reconcile; until then that one stands.
    """
    if not row.adopted_tag:
        return seen.tag
    return _decoded(row.adopted_tag)


@lru_cache(maxsize=65536)  # a cyclic scan of a longer queue would never hit
def _decoded(comment: str) -> HopsTag | None:
    return try_decode(comment)[0]


def with_tag_rules(job: Job, tag: HopsTag | None, cluster: Cluster) -> Job:
    """The core job with its adopted tag's GPU-type constraints (:func:`adopted_tag`)."""
    if tag is None or not (tag.types or tag.exclude_types):
        return job
    managed = sorted(cluster.gpu_types)
    return job.with_limits(type_limits(tag.types, tag.exclude_types, managed))


def crowded_out(
    targets: Mapping[str, Configuration],
    nodes: Sequence[ObservedNode],
    hops_running: Mapping[str, int],
) -> set[str]:
    """Released jobs Slurm cannot launch where hops put them: another job took the GPUs,
    or the node went down or was drained before the launch.

    Between hopsd's release and Slurm's next scheduling pass, a job hops does
    not manage may start on the GPUs the release named; the released job then
    waits for them. A job Slurm requeued itself when its node failed waits,
    released, for that node. Counted as hops's own, those GPUs would be planned
    as if hops held them. Such jobs (``targets``: job id to target) are given,
    in order, the room left by other jobs and hops's running ones on usable
    nodes; those that do not fit are returned, to be planned again as queued.
    """
    room: dict[str, int] = {}
    for seen in nodes:
        foreign = left(seen.gpus_used, hops_running.get(seen.name, 0))
        free = left(left(seen.gpus, foreign), hops_running.get(seen.name, 0))
        room[seen.name] = free if seen.usable else 0
    out: set[str] = set()
    for job_id, config in targets.items():
        if all(gpus <= room.get(name, 0) for name, gpus in config.parts):
            for name, gpus in config.parts:
                room[name] -= gpus
        else:
            out.add(job_id)
    return out
