"""Configuration generation (step 3 of a round): where could a job run on one GPU type?

Given the idle GPUs ``S_t`` of every node ``t`` of a type:

- every demand ``R_k`` with ``R_k <= S_t`` gives the aggregated configuration
  ``{t: R_k}`` (a node that is exactly filled is a valid fit);
- jobs that tolerate being split (low placement sensitivity, or high
  sensitivity but a minimum demand larger than any node of the type) also get
  distributed configurations, and so does every count larger than any node of
  the type, whatever the job's sensitivity: starting at each node with idle GPUs, the
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
place) is therefore part of a node's class too, and so is the node's learned
speed prior (:mod:`hopsd.core.nodespeed`): a server other jobs found slow is not
the same offer as its full-speed siblings. Configurations that differ only by swapping such
nodes form a :class:`ConfigGroup`. A group can be cut down to a few
representatives (``per_group``): the capacity rows of the ILP stay per node, so
each job keeps a real node to land on, and a rotating ``offset`` hands different
jobs different representatives so that, together, the jobs still see every node.
This is what keeps the ILP small on large clusters; ``per_group=None`` keeps
every configuration (the exact model).

A layout is a function of the cluster, the type and the idle (and settled) GPUs
of the type's nodes, and successive planning calls often see the same ones (a
round's main plan sees every GPU of the cluster): :func:`shared_layout` hands
out the layout built for them before, with its walks, groups and
configurations, rather than building them again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopsd.core.errors import UnknownGpuTypeError
from hopsd.core.model import Cluster, Configuration, Job, Node

#: Parts of a configuration as (index into the layout's node list, GPUs).
_Parts = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ConfigGroup:
    """Configurations equivalent for one job; they share one throughput estimate."""

    gpus: int
    configs: tuple[Configuration, ...]


#: A group's members and the (ascending) positions among them a job may not use.
_Members = tuple[list[_Parts], tuple[int, ...]]


def _rotate(
    items: Sequence[_Parts], skip: Sequence[int], keep: int | None, offset: int
) -> list[_Parts]:
    """``keep`` members from ``offset`` on (cyclically), passing over the ``skip`` positions."""
    n = len(items) - len(skip)
    if not skip:
        if keep is None or keep >= n:
            return list(items)
        return [items[(offset + r) % n] for r in range(keep)]
    if keep is None or keep >= n:
        gone = set(skip)
        return [p for i, p in enumerate(items) if i not in gone]
    out = []
    for r in range(keep):
        k = (offset + r) % n  # the k-th member that is not skipped
        for s in skip:
            if s <= k:
                k += 1
        out.append(items[k])
    return out


class _Shared:
    """One demand's candidates on a layout and their job-independent groups.

    ``groups`` holds (index of the first member among the candidates, members,
    their candidate indices); ``where`` maps a candidate to (group, position).
    """

    def __init__(
        self, candidates: list[_Parts], groups: list[tuple[int, list[_Parts], list[int]]]
    ) -> None:
        self.candidates = candidates
        self.groups = groups
        self.plain: list[_Members] = [(members, ()) for _, members, _ in groups]
        self.where: dict[int, tuple[int, int]] = {
            c: (g, p) for g, (_, _, index) in enumerate(groups) for p, c in enumerate(index)
        }
        self._by_node: dict[int, list[int]] | None = None
        self._alone: dict[int, list[_Parts]] = {}

    def alone(self, c: int) -> list[_Parts]:
        """Candidate ``c`` as a group of its own (one list per candidate, kept)."""
        found = self._alone.get(c)
        if found is None:
            found = [self.candidates[c]]
            self._alone[c] = found
        return found

    def touching(self, nodes: Sequence[int]) -> list[int]:
        """Candidates (ascending) that use any of ``nodes``."""
        if not nodes:
            return []
        if self._by_node is None:
            by_node: dict[int, list[int]] = {}
            for c, parts in enumerate(self.candidates):
                for i, _ in parts:
                    by_node.setdefault(i, []).append(c)
            self._by_node = by_node
        found: set[int] = set()
        for i in nodes:
            found.update(self._by_node.get(i, ()))
        return sorted(found)


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
        speeds: Mapping[str, float] | None = None,
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
        known = speeds or {}
        self.speed: tuple[float, ...] = tuple(known.get(n.id, 1.0) for n in self.nodes)
        self._suffix = [0] * (len(self.nodes) + 1)
        for i in range(len(self.nodes) - 1, -1, -1):
            self._suffix[i] = self._suffix[i + 1] + self.idle[i]
        self._index = {n.id: i for i, n in enumerate(self.nodes)}
        self._walks: dict[int, list[_Parts]] = {}
        self._groups: dict[tuple[int, bool], _Shared] = {}
        self._configs: dict[_Parts, Configuration] = {}
        self._cuts: dict[tuple[int, int | None, int], ConfigGroup] = {}
        self._may_split: dict[tuple[int, ...], bool] = {}

    @property
    def total_idle(self) -> int:
        return self._suffix[0]

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

    def _shared(self, gpus: int, distributed: bool) -> _Shared:
        """Candidates of one demand and shape, grouped by per-node class (cached per layout)."""
        key = (gpus, distributed)
        found = self._groups.get(key)
        if found is not None:
            return found
        if distributed:
            candidates = self._walk(gpus)
        else:
            candidates = [((i, gpus),) for i in range(len(self.nodes)) if self.idle[i] >= gpus]
        by_signature: dict[tuple[tuple[int, int, float, int], ...], int] = {}
        groups: list[tuple[int, list[_Parts], list[int]]] = []
        for c, parts in enumerate(candidates):
            signature = tuple((self.idle[i], self.settled[i], self.speed[i], g) for i, g in parts)
            slot = by_signature.get(signature)
            if slot is None:
                by_signature[signature] = len(groups)
                groups.append((c, [parts], [c]))
            else:
                groups[slot][1].append(parts)
                groups[slot][2].append(c)
        found = _Shared(candidates, groups)
        self._groups[key] = found
        return found

    def _grouped(self, gpus: int, distributed: bool, local: Sequence[int]) -> list[_Members]:
        """Equivalence groups of one demand's configurations, in order of first appearance.

        Nodes in ``local`` (where the estimator knows this very job) are not
        interchangeable with their peers: every candidate using one is a group of
        its own, and the shared groups lose those members. Such candidates are
        found through the nodes they touch, so a job with entity knowledge costs
        as many steps as it has such candidates, not as the type has nodes.
        """
        shared = self._shared(gpus, distributed)
        touched = shared.touching(local)
        if not touched:
            return shared.plain
        skips: dict[int, list[int]] = {}
        for c in touched:
            group, position = shared.where[c]
            skips.setdefault(group, []).append(position)
        entries: list[tuple[int, _Members]] = []
        for g, (first, members, index) in enumerate(shared.groups):
            skip = skips.get(g)
            if skip is None:
                entries.append((first, (members, ())))
                continue
            if len(skip) == len(members):
                continue  # every member uses a node this job is known on
            skip.sort()
            kept = next(p for p in range(len(members)) if p not in skip)
            entries.append((index[kept], (members, tuple(skip))))
        entries.extend((c, (shared.alone(c), ())) for c in touched)
        entries.sort(key=lambda e: e[0])
        return [members for _, members in entries]

    def may_split(self, job: Job) -> bool:
        """Whether any demand of the job has a distributed walk here at all.

        Saves asking for the job's placement sensitivity when the answer
        cannot change its configurations.
        """
        demands = job.demands_on(self.gpu_type)
        found = self._may_split.get(demands)
        if found is None:  # many jobs share a demand set: answer each set once
            found = any(len(self._walk(g)) > 0 for g in demands if g <= self.total_idle)
            self._may_split[demands] = found
        return found

    def splittable(self, job: Job, high_sensitivity: bool) -> bool:
        """Whether ``job`` may be offered distributed configurations on this type."""
        return not high_sensitivity or job.min_demand > self.max_node_gpus

    def splits(self, job: Job, high_sensitivity: bool, gpus: int) -> bool:
        """Whether ``job`` may be offered ``gpus`` GPUs over several nodes of this type.

        A placement-sensitive job is not split where one node could hold the count
        (the method's rule), but a count no node of the type holds has no
        aggregated alternative: refusing it capped a job that scales across
        servers (yolov3 on Sia's cluster: 4 of 24 T4s, 8 of 16 A100s) below what
        its larger counts would train, which the ILP can weigh on estimates.
        """
        return self.splittable(job, high_sensitivity) or gpus > self.max_node_gpus

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
        index = self._index
        local = sorted(index[n] for n in distinct if n in index) if distinct else []
        out: list[ConfigGroup] = []
        config = self._config
        for gpus in job.demands_on(self.gpu_type):  # only counts the type can hold for it
            if gpus > self.total_idle:
                break
            shapes = [False, True] if self.splits(job, high_sensitivity, gpus) else [False]
            for distributed in shapes:
                for members, skip in self._grouped(gpus, distributed, local):
                    if skip:
                        chosen = _rotate(members, skip, per_group, offset)
                        out.append(ConfigGroup(gpus, tuple(config(p) for p in chosen)))
                        continue
                    # Jobs share a group's members: build each cut of them once per
                    # layout (every members list lives as long as the layout).
                    start = offset % len(members) if per_group is not None else 0
                    key = (id(members), per_group, start)
                    group = self._cuts.get(key)
                    if group is None:
                        chosen = _rotate(members, (), per_group, start)
                        group = ConfigGroup(gpus, tuple(config(p) for p in chosen))
                        self._cuts[key] = group
                    out.append(group)
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


#: Layouts kept by :func:`shared_layout` (the most recently used ones): enough for a round's
#: main plan on every type and the fragment plans between rounds, few enough that a
#: long-running daemon on a large cluster does not hold many large layouts.
SHARED_LAYOUTS = 32

_LayoutKey = tuple[int, str, tuple[int, ...], tuple[int, ...] | None, tuple[float, ...]]
_recent: OrderedDict[_LayoutKey, tuple[Cluster, TypeLayout]] = OrderedDict()


def shared_layout(
    cluster: Cluster,
    gpu_type: str,
    free: Mapping[str, int],
    settled: Mapping[str, int] | None = None,
    speeds: Mapping[str, float] | None = None,
) -> TypeLayout:
    """``TypeLayout(cluster, gpu_type, free, settled, speeds)``, the same object while they are
    the same: the layout and all it caches depend on nothing else, and are immutable
    to its users. Keyed by the cluster's identity and held with it, so another
    cluster (or one rebuilt with other nodes) never meets this one's layouts.
    """
    typed = cluster.nodes_of_type(gpu_type)
    idle = tuple(free.get(n.id, n.gpus) for n in typed)
    after = None if settled is None else tuple(settled.get(n.id, n.gpus) for n in typed)
    known = speeds or {}
    key = (id(cluster), gpu_type, idle, after, tuple(known.get(n.id, 1.0) for n in typed))
    found = _recent.get(key)
    if found is not None and found[0] is cluster:
        _recent.move_to_end(key)
        return found[1]
    layout = TypeLayout(cluster, gpu_type, free, settled, speeds)
    _recent[key] = (cluster, layout)
    _recent.move_to_end(key)
    while len(_recent) > SHARED_LAYOUTS:
        _recent.popitem(last=False)
    return layout
