"""Configuration generation (step 3 of a round): where could a job run on one GPU type?

Given the idle GPUs ``S_t`` of every node ``t`` of a type:

- every demand ``R_k`` with ``R_k <= S_t`` gives the aggregated configuration
  ``{t: R_k}`` (a node that is exactly filled is a valid fit);
- jobs that tolerate being split (low placement sensitivity, or high
  sensitivity but a minimum demand larger than any node of the type) also get
  distributed configurations: starting at each node with idle GPUs, the
  following nodes *with idle GPUs* in cluster order are filled as much as
  possible until ``R_k`` is reached. A start from which the remaining nodes
  cannot reach ``R_k`` ends the walk (later starts see even fewer GPUs), so the
  space stays O(N_type) per demand.

**Equivalent configurations.** Two nodes of a type with the same number of idle
GPUs are interchangeable for a job unless the estimator knows something about
the job on one of them (entity layer): the job runs equally fast on either and
each offers the same room. When running jobs are re-planned, their GPUs count
as idle, but a node whose running jobs will most likely stay is not the same
offer as an empty one; ``settled`` (the idle GPUs if every running job kept its
place) is therefore part of a node's class too. Configurations that differ only by swapping such
nodes form a :class:`ConfigGroup`. A group can be cut down to a few
representatives (``per_group``): the capacity rows of the ILP stay per node, so
each job keeps a real node to land on, and a rotating ``offset`` hands different
jobs different representatives so that, together, the jobs still see every node.
This is what keeps the ILP small on large clusters; ``per_group=None`` keeps
every configuration (the exact model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError
from hopsd.core.model import Cluster, Configuration, Job, Node

#: Parts of a configuration as (index into the layout's node list, GPUs).
_Parts = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ConfigGroup:
    """Configurations equivalent for one job; they share one throughput estimate."""

    gpus: int
    configs: tuple[Configuration, ...]


def check_free(free: Mapping[str, int], cluster: Cluster) -> None:
    """Refuse idle-GPU counts that no real node could report."""
    nodes = cluster.node_map()
    for node_id, idle in free.items():
        node = nodes.get(node_id)
        if node is None:
            raise InvalidInputError(f"idle GPUs given for unknown node {node_id!r}")
        if idle < 0:
            raise InvalidInputError(f"node {node_id!r}: negative idle GPU count {idle}")
        if idle > node.gpus:
            raise InvalidInputError(
                f"node {node_id!r}: {idle} idle GPUs but only {node.gpus} exist"
            )


def _rotate(items: Sequence[_Parts], keep: int | None, offset: int) -> list[_Parts]:
    if keep is None or keep >= len(items):
        return list(items)
    return [items[(offset + r) % len(items)] for r in range(keep)]


class TypeLayout:
    """Idle GPUs of one type, precomputed once per planning pass and shared by all jobs.

    The job-independent parts (which nodes have room, their classes, the
    distributed walks per demand) are cached; only nodes where a job has
    entity knowledge make its groups differ from the shared ones.
    """

    def __init__(
        self,
        cluster: Cluster,
        gpu_type: str,
        free: Mapping[str, int],
        settled: Mapping[str, int] | None = None,
    ) -> None:
        if gpu_type not in cluster.gpu_types:
            raise UnknownGpuTypeError(f"unknown GPU type {gpu_type!r}")
        self.gpu_type = gpu_type
        typed = cluster.nodes_of_type(gpu_type)
        self.max_node_gpus = max((n.gpus for n in typed), default=0)
        self.nodes: tuple[Node, ...] = tuple(n for n in typed if free.get(n.id, n.gpus) > 0)
        self.idle: tuple[int, ...] = tuple(free.get(n.id, n.gpus) for n in self.nodes)
        after = settled if settled is not None else free
        self.settled: tuple[int, ...] = tuple(after.get(n.id, n.gpus) for n in self.nodes)
        self._suffix = [0] * (len(self.nodes) + 1)
        for i in range(len(self.nodes) - 1, -1, -1):
            self._suffix[i] = self._suffix[i + 1] + self.idle[i]
        self._walks: dict[int, list[_Parts]] = {}
        self._groups: dict[tuple[int, bool], list[tuple[int, list[_Parts]]]] = {}
        self._configs: dict[_Parts, Configuration] = {}

    @property
    def total_idle(self) -> int:
        return self._suffix[0]

    def _key(self, index: int, distinct: frozenset[str]) -> tuple[str, int, int]:
        node_id = self.nodes[index].id
        if node_id in distinct:
            return node_id, -1, -1
        return "", self.idle[index], self.settled[index]

    def _walk(self, gpus: int) -> list[_Parts]:
        """Distributed walks for ``gpus``: consecutive nodes with room, each filled to the brim."""
        cached = self._walks.get(gpus)
        if cached is not None:
            return cached
        walks: list[_Parts] = []
        for start in range(len(self.nodes)):
            if self._suffix[start] < gpus:
                break
            if self.idle[start] >= gpus:
                continue  # it fits on this node alone: that is the aggregated config
            parts: list[tuple[int, int]] = []
            need = gpus
            index = start
            while need > 0:
                take = min(self.idle[index], need)
                parts.append((index, take))
                need -= take
                index += 1
            walks.append(tuple(parts))
        self._walks[gpus] = walks
        return walks

    def _grouped(
        self, gpus: int, distributed: bool, distinct: frozenset[str]
    ) -> list[tuple[int, list[_Parts]]]:
        """Equivalence groups (by per-node class and GPUs) of one demand's configurations."""
        shared = not distinct
        if shared:
            cached = self._groups.get((gpus, distributed))
            if cached is not None:
                return cached
        if distributed:
            candidates = self._walk(gpus)
        else:
            candidates = [((i, gpus),) for i in range(len(self.nodes)) if self.idle[i] >= gpus]
        groups: dict[tuple[tuple[tuple[str, int, int], int], ...], list[_Parts]] = {}
        for parts in candidates:
            signature = tuple((self._key(i, distinct), g) for i, g in parts)
            groups.setdefault(signature, []).append(parts)
        result = [(gpus, members) for members in groups.values()]
        if shared:
            self._groups[(gpus, distributed)] = result
        return result

    def may_split(self, job: Job) -> bool:
        """Whether any demand of the job has a distributed walk here at all.

        Saves asking for the job's placement sensitivity when the answer
        cannot change its configurations.
        """
        demands = job.demands_on(self.gpu_type)
        return any(len(self._walk(g)) > 0 for g in demands if g <= self.total_idle)

    def splittable(self, job: Job, high_sensitivity: bool) -> bool:
        """Whether ``job`` may be offered distributed configurations on this type."""
        return not high_sensitivity or job.min_demand > self.max_node_gpus

    def groups(
        self,
        job: Job,
        high_sensitivity: bool,
        *,
        distinct: frozenset[str] = frozenset(),
        per_group: int | None = None,
        offset: int = 0,
    ) -> list[ConfigGroup]:
        """The job's configuration groups on this type, cut to ``per_group`` each.

        ``offset`` rotates which members of a group are kept, so that different
        jobs are offered different (equivalent) nodes.
        """
        local = distinct.intersection(n.id for n in self.nodes) if distinct else frozenset()
        shapes = [False, True] if self.splittable(job, high_sensitivity) else [False]
        out: list[ConfigGroup] = []
        for gpus in job.demands_on(self.gpu_type):  # only counts the type can hold for it
            if gpus > self.total_idle:
                break
            for distributed in shapes:
                for total, members in self._grouped(gpus, distributed, local):
                    chosen = _rotate(members, per_group, offset)
                    out.append(ConfigGroup(total, tuple(self._config(p) for p in chosen)))
        return out

    def _config(self, parts: _Parts) -> Configuration:
        """The configuration of ``parts``, built once per layout: every job of a pass
        is offered the same placements, and they are immutable."""
        found = self._configs.get(parts)
        if found is None:
            named = sorted((self.nodes[i].id, g) for i, g in parts)
            found = Configuration(self.gpu_type, tuple(named))
            self._configs[parts] = found
        return found


def generate_configurations(
    job: Job,
    gpu_type: str,
    free: Mapping[str, int],
    cluster: Cluster,
    high_sensitivity: bool,
    *,
    distinct: frozenset[str] = frozenset(),
    per_group: int | None = None,
    offset: int = 0,
) -> list[Configuration]:
    """All configurations of ``job`` on ``gpu_type`` given idle GPUs ``free`` (step 3).

    Nodes missing from ``free`` count as entirely idle. ``distinct`` names nodes
    the job must not be treated as interchangeable on (entity knowledge);
    ``per_group``/``offset`` keep only that many rotating representatives of each
    group of equivalent configurations (``None``: keep all).
    """
    check_free(free, cluster)
    layout = TypeLayout(cluster, gpu_type, free)
    groups = layout.groups(
        job, high_sensitivity, distinct=distinct, per_group=per_group, offset=offset
    )
    return [config for group in groups for config in group.configs]
