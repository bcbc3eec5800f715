"""The plain data the core reasons about: GPU types, nodes, jobs, configurations, plans.

Everything is frozen so a round's input cannot change under the planner and the
same input always yields the same plan.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from hopsd.core.capacity import held_gpus
from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError


@dataclass(frozen=True, slots=True)
class GpuType:
    """A resource type (GPU generation in a server class).

    ``b_link`` and ``b_net`` are the intra-node and network bandwidths in model
    parameters per second, measured offline per type (eq. 3 of the method).
    ``speed`` is the admin's relative speed used to normalise attained service.
    """

    name: str
    b_link: float = 2.5e9
    b_net: float = 1.25e9
    speed: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInputError("a GPU type needs a non-empty name")
        if self.b_link <= 0 or self.b_net <= 0:
            raise InvalidInputError(f"GPU type {self.name!r}: bandwidths must be > 0")
        if self.speed <= 0:
            raise InvalidInputError(f"GPU type {self.name!r}: speed must be > 0")


@dataclass(frozen=True, slots=True)
class Node:
    """One server. Its position in :attr:`Cluster.nodes` defines "consecutive" nodes."""

    id: str
    gpu_type: str
    gpus: int
    server_model: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            raise InvalidInputError("a node needs a non-empty id")
        if self.gpus < 0:
            raise InvalidInputError(f"node {self.id!r}: negative GPU count {self.gpus}")


@dataclass(frozen=True)
class Cluster:
    """GPU types and the ordered list of nodes that carry them."""

    gpu_types: Mapping[str, GpuType]
    nodes: tuple[Node, ...]
    _by_id: dict[str, Node] = field(init=False, compare=False, repr=False)
    _position: dict[str, int] = field(init=False, compare=False, repr=False)
    _total_gpus: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        by_id: dict[str, Node] = {}
        for node in self.nodes:
            if node.id in by_id:
                raise InvalidInputError(f"node id {node.id!r} appears twice")
            by_id[node.id] = node
            if node.gpu_type not in self.gpu_types:
                raise UnknownGpuTypeError(
                    f"node {node.id!r} carries unknown GPU type {node.gpu_type!r}"
                )
        # asked per node or per job every step: a large queue would rescan the nodes
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_position", {n.id: k for k, n in enumerate(self.nodes)})
        object.__setattr__(self, "_total_gpus", sum(n.gpus for n in self.nodes))

    @staticmethod
    def build(types: Iterable[GpuType], nodes: Iterable[Node]) -> Cluster:
        """Convenience constructor from plain iterables."""
        return Cluster({t.name: t for t in types}, tuple(nodes))

    @property
    def total_gpus(self) -> int:
        return self._total_gpus

    def has_node(self, node_id: str) -> bool:
        return node_id in self._by_id

    def position(self, node_id: str) -> int:
        """Where the node stands in :attr:`nodes` (configurations list parts in that order)."""
        return self._position[node_id]

    def node(self, node_id: str) -> Node:
        found = self._by_id.get(node_id)
        if found is None:
            raise InvalidInputError(f"unknown node {node_id!r}")
        return found

    def node_map(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def nodes_of_type(self, gpu_type: str) -> tuple[Node, ...]:
        if gpu_type not in self.gpu_types:
            raise UnknownGpuTypeError(f"unknown GPU type {gpu_type!r}")
        return tuple(n for n in self.nodes if n.gpu_type == gpu_type)

    def gpus_of_type(self, gpu_type: str) -> int:
        return sum(n.gpus for n in self.nodes_of_type(gpu_type))

    def type_fractions(self) -> dict[str, float]:
        """P(type=j) of eq. 9: the share of the cluster's GPUs each type holds."""
        total = self.total_gpus
        if total == 0:
            return {t: 0.0 for t in self.gpu_types}
        return {t: self.gpus_of_type(t) / total for t in sorted(self.gpu_types)}


@dataclass(frozen=True, slots=True)
class Configuration:
    """A placement ``{node_id: gpus}`` on nodes of one GPU type.

    ``parts`` is kept sorted by node id order given at construction (the caller
    passes them in cluster order) so equal placements compare equal.
    """

    gpu_type: str
    parts: tuple[tuple[str, int], ...]
    # Derived once: the planner asks for them hundreds of thousands of times a round.
    total_gpus: int = field(init=False, compare=False, repr=False)
    node_ids: tuple[str, ...] = field(init=False, compare=False, repr=False)
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.parts:
            raise InvalidInputError("a configuration needs at least one node")
        ids = tuple(p[0] for p in self.parts)
        if len(set(ids)) != len(ids):
            raise InvalidInputError(f"configuration lists a node twice: {list(ids)}")
        for node_id, gpus in self.parts:
            if gpus <= 0:
                raise InvalidInputError(f"configuration gives node {node_id!r} {gpus} GPUs")
        object.__setattr__(self, "total_gpus", sum(g for _, g in self.parts))
        object.__setattr__(self, "node_ids", ids)
        object.__setattr__(self, "_hash", hash((self.gpu_type, self.parts)))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def of(gpu_type: str, mapping: Mapping[str, int]) -> Configuration:
        return Configuration(gpu_type, tuple(sorted(mapping.items())))

    @property
    def n_nodes(self) -> int:
        return len(self.parts)

    @property
    def distributed(self) -> bool:
        return len(self.parts) > 1

    def as_dict(self) -> dict[str, int]:
        return dict(self.parts)


def _check_demands(job_id: str, demands: tuple[int, ...]) -> None:
    # a scheduling step builds every job anew and jobs share a few demand sets:
    # each distinct (hashable) set is judged once
    judge = _tuple_problem if isinstance(demands, tuple) else _demands_problem
    problem = judge(demands)
    if problem is not None:
        raise InvalidInputError(f"job {job_id!r}: {problem}")


@lru_cache(maxsize=4096)
def _tuple_problem(demands: tuple[int, ...]) -> str | None:
    return _demands_problem(demands)


def _demands_problem(demands: tuple[int, ...]) -> str | None:
    """What is wrong with a demand set, if anything."""
    if not demands:
        return "empty demand set"
    if any(d <= 0 for d in demands):
        return f"demands must be positive, got {demands}"
    if list(demands) != sorted(set(demands)):
        return f"demand set must be strictly increasing, got {demands}"
    return None


@dataclass(frozen=True, slots=True)
class Job:
    """A hops job as the planner sees it.

    ``demands`` is the acceptable GPU counts R1 < ... < Rn. ``wait_time`` is the
    time spent queued so far (seconds), ``attained_service`` GPU-seconds
    normalised by GPU-type speed, ``samples_done`` progress. ``current`` is the
    placement of a running job (None when queued).

    ``share_factor`` (> 0, default 1) scales the job's *biased* priority in the
    planner's ordering and ILP weight, ``(prior + bias) * share_factor`` (see
    :func:`hopsd.core.priorities.share_keys`). It is how an operator's fairness
    between users or accounts (fair share) enters the plan without changing any
    priority's definition; 1 everywhere is the method as published.

    ``max_gpus`` lists, per GPU type, the most GPUs of that type the job can use
    (0: the model does not fit one GPU of the type); a type not listed limits
    nothing. It is what a job's profiles say a type cannot hold, so that no
    policy offers a count there that could never run (:meth:`demands_on`).
    A user's GPU-type constraints are limits of 0 on the types they exclude.

    ``restart_s`` is what moving or preempting this job costs as learned from
    its runs (:func:`hopsd.core.gains.learned_restart_s`); None: the
    operator's prior ``Settings.restart_penalty_s``.

    ``time_limit_s`` is the Slurm time limit of each of the job's runs (None:
    unlimited or unknown), ``run_elapsed_s`` how long its current run has run;
    ``size_doubt`` says why an earlier step stopped believing ``total_samples``
    ("" while it is believed). :mod:`hopsd.core.sizeclaim` reads the three.
    """

    id: str
    demands: tuple[int, ...]
    total_samples: float
    batch_size: int = 32
    params: float = 25e6
    submit_time: float = 0.0
    user: str = ""
    account: str = ""
    samples_done: float = 0.0
    attained_service: float = 0.0
    wait_time: float = 0.0
    current: Configuration | None = None
    share_factor: float = 1.0
    max_gpus: tuple[tuple[str, int], ...] = ()
    restart_s: float | None = None
    time_limit_s: float | None = None
    run_elapsed_s: float = 0.0
    size_doubt: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            raise InvalidInputError("a job needs a non-empty id")
        if not (math.isfinite(self.share_factor) and self.share_factor > 0):
            raise InvalidInputError(
                f"job {self.id!r}: share_factor must be finite and > 0, got {self.share_factor}"
            )
        _check_demands(self.id, self.demands)
        if self.total_samples <= 0:
            raise InvalidInputError(f"job {self.id!r}: total_samples must be > 0")
        if self.batch_size <= 0:
            raise InvalidInputError(f"job {self.id!r}: batch_size must be > 0")
        if self.params < 0:
            raise InvalidInputError(f"job {self.id!r}: params must be >= 0")
        if self.samples_done < 0 or self.attained_service < 0 or self.wait_time < 0:
            raise InvalidInputError(f"job {self.id!r}: negative progress, service or wait")
        if self.restart_s is not None and not 0 <= self.restart_s < math.inf:
            raise InvalidInputError(f"job {self.id!r}: restart cost must be finite and >= 0")
        if any(limit < 0 for _, limit in self.max_gpus):
            raise InvalidInputError(f"job {self.id!r}: a per-type GPU limit must be >= 0")
        if self.time_limit_s is not None and not 0 < self.time_limit_s < math.inf:
            raise InvalidInputError(f"job {self.id!r}: time limit must be finite and > 0")
        if not 0 <= self.run_elapsed_s < math.inf:
            raise InvalidInputError(f"job {self.id!r}: run time must be finite and >= 0")

    def with_limits(self, limits: tuple[tuple[str, int], ...]) -> Job:
        """This job with further per-type limits (the tighter one wins on a type)."""
        if not limits:
            return self
        merged = dict(self.max_gpus)
        for name, limit in limits:
            merged[name] = min(limit, merged.get(name, limit))
        return dataclasses.replace(self, max_gpus=tuple(sorted(merged.items())))

    def demands_on(self, gpu_type: str) -> tuple[int, ...]:
        """The demands a GPU type can hold for this job (all of them unless ``max_gpus`` says)."""
        for name, limit in self.max_gpus:
            if name == gpu_type:
                return tuple(d for d in self.demands if d <= limit)
        return self.demands

    @property
    def min_demand(self) -> int:
        return self.demands[0]

    @property
    def avg_demand(self) -> float:
        return sum(self.demands) / len(self.demands)

    @property
    def running(self) -> bool:
        return self.current is not None

    @property
    def remaining_samples(self) -> float:
        return max(self.total_samples - self.samples_done, 0.0)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One job placed in one configuration."""

    job_id: str
    config: Configuration


@dataclass(frozen=True)
class Plan:
    """The diff a round produces, which an executor (Slurm or the simulator) applies.

    ``start``: queued jobs to place. ``keep``: running jobs that stay where they
    are. ``move``: running jobs to requeue and re-place at ``config``.
    ``preempt``: running jobs to requeue-hold without a new place.
    """

    start: tuple[Assignment, ...] = ()
    keep: tuple[Assignment, ...] = ()
    move: tuple[Assignment, ...] = ()
    preempt: tuple[str, ...] = ()
    window: tuple[str, ...] = ()
    objective: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def placements(self) -> dict[str, Configuration]:
        """Where every job holds GPUs after the plan is applied."""
        out = {a.job_id: a.config for a in self.keep}
        out.update({a.job_id: a.config for a in self.start})
        out.update({a.job_id: a.config for a in self.move})
        return out

    def gpus_used(self) -> dict[str, int]:
        """GPUs taken per node after the plan is applied."""
        return held_gpus(self.placements().values())


@dataclass(frozen=True, slots=True)
class NodeClosing:
    """A node that stops taking work: drained, or held by a reservation that begins soon.

    ``at`` is when jobs can no longer run there (``math.inf`` for a drained node
    whose jobs may finish; the drain instant when they are to move).
    ``move_from`` is when the planner starts moving running jobs that would not
    finish by ``at``: early enough that their checkpoint notice and requeue are
    done before it.
    """

    at: float
    move_from: float

    @staticmethod
    def drained(now: float, move: bool) -> NodeClosing:
        """A drained node: its jobs finish there, or move off at the next round."""
        return NodeClosing(now, now) if move else NodeClosing(math.inf, math.inf)
