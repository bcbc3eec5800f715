"""Throughput estimator: the fine-grained heterogeneous sensing of the Hops method.

Per node of a configuration the estimator looks the job up top-down and stops at
the first layer that knows it:

1. ``entity`` -- measured on this very node (aggregated table keyed by GPU count
   when the configuration is one node, distributed table keyed by node count
   otherwise);
2. ``type`` -- measured on this GPU type (the same two tables);
3. ``theory`` -- the profiled phase times put through eqs. 1-5
   (``per_gpu = batch_size / E[T_iter]``);
4. ``table`` -- the admin's reference table,
   ``settings.reference_throughput * gpu_type.speed``.

Below the entity layer the figure does not depend on the node; it is scaled by
the node's speed prior learned from other jobs (:mod:`hopsd.core.nodespeed`),
against the server the figure came from, so a server other jobs found slow is
not offered at its faster siblings' value. Without a prior the factor is 1.

The configuration then runs at the pace of its slowest node:
``min_i(per_gpu_i) * sum_i(gpus_i)``.

An :class:`Estimator` is meant to live for one planning round: it memoises
every answer, so data written to the store during the round is not seen until a
new estimator is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.nodespeed import NodePrior
from hopsd.core.settings import Settings
from hopsd.core.theory_answers import SHARED_THEORY_ANSWERS
from hopsd.core.throughput import PhaseProfile, ThroughputStore

#: Layers from most to least specific; an estimate reports the least specific one used.
SOURCES: tuple[str, ...] = ("entity", "type", "theory", "table")
_RANK = {name: rank for rank, name in enumerate(SOURCES)}
_UNSEEN = object()  # memo miss (None is a memoised answer: never profiled there)


def communication_time(
    params: float, n_gpus: int, n_nodes: int, b_link: float, b_net: float
) -> float:
    """T_c of eq. 3: ring all-reduce inside one node, the network across nodes.

    One GPU alone never communicates (``(N-1)/N = 0``).
    """
    if n_gpus <= 0 or n_nodes <= 0:
        raise InvalidInputError(f"need at least one GPU and one node, got {n_gpus} / {n_nodes}")
    if n_nodes == 1:
        return params / b_link * (n_gpus - 1) / n_gpus
    return params / b_net


def _branch_time(
    pattern: int, t_d: float, compute_and_sync: float, t_f: float, t_w: float
) -> float:
    """T_iter given one (hit or miss) draw of data time and sync wait: eq. 1 or 2."""
    if pattern == 1:
        return max(t_d, compute_and_sync) + t_f + t_w
    return t_d + compute_and_sync + t_f + t_w


def _shared_hit_probability(profile: PhaseProfile) -> float:
    """Probability of the hit event that T_d and T_w share.

    The data loader drives the cache event, so the data mixture's ``p_hit`` is
    used and T_w follows it (hit with hit). When the data time does not depend
    on the event (equal means, e.g. a constant T_d), the sync wait's own
    ``p_hit`` is used instead, so a mixture recorded only for T_w is not lost.
    Either way the result is exact whenever one of the two is event-independent.
    """
    if profile.data.mu_hit == profile.data.mu_miss:
        return profile.sync_wait.p_hit
    return profile.data.p_hit


def expected_iteration_time(
    profile: PhaseProfile,
    params: float,
    n_gpus: int,
    n_nodes: int,
    b_link: float,
    b_net: float,
    tcomm_overlap: float = 0.2,
) -> float:
    """E[T_iter] of eqs. 1-5 for a job on ``n_gpus`` GPUs of ``n_nodes`` nodes, in seconds.

    The two-component mixture is taken as
    ``p_hit * E[T_iter | hit] + (1 - p_hit) * E[T_iter | miss]``, where in each
    branch T_d and T_w take that branch's mean (they are correlated, hit with
    hit); see :func:`_shared_hit_probability` for which ``p_hit`` is used.
    Within a branch the component means are used, as the method does.
    """
    t_c = communication_time(params, n_gpus, n_nodes, b_link, b_net)
    # both branches share the compute and all-reduce part: max(T_b + exposed T_c, T_c) + T_u
    compute_and_sync = max(profile.t_b + tcomm_overlap * t_c, t_c) + profile.t_u
    p_hit = _shared_hit_probability(profile)
    data, wait, pattern, t_f = profile.data, profile.sync_wait, profile.pattern, profile.t_f
    hit = _branch_time(pattern, data.mu_hit, compute_and_sync, t_f, wait.mu_hit)
    miss = _branch_time(pattern, data.mu_miss, compute_and_sync, t_f, wait.mu_miss)
    return p_hit * hit + (1.0 - p_hit) * miss


@dataclass(frozen=True, slots=True)
class Estimate:
    """Throughput of a job in one configuration (samples/s)."""

    samples_per_s: float
    per_gpu: float
    source: str


class Estimator:
    """Answers "how fast would this job run here?" for one planning round.

    Node and type maps are built once; answers are memoised per
    ``(job.id, config)`` and ``(job.id, gpu_type)`` because the planner asks the
    same questions many thousands of times per round.
    """

    def __init__(self, cluster: Cluster, store: ThroughputStore, settings: Settings) -> None:
        self._cluster = cluster
        self._store = store
        self._settings = settings
        self._overlap = settings.tcomm_overlap
        self._nodes: dict[str, Node] = cluster.node_map()
        self._types: dict[str, GpuType] = dict(cluster.gpu_types)
        self._fractions: Mapping[str, float] = MappingProxyType(cluster.type_fractions())
        self._table: dict[str, float] = {
            name: settings.reference_throughput * t.speed for name, t in self._types.items()
        }
        self._config_memo: dict[tuple[str, Configuration], Estimate] = {}
        self._type_memo: dict[tuple[str, str], float] = {}
        self._seconds_per_sample_memo: dict[str, float] = {}
        self._theory_memo: dict[tuple[str, str, int, int], float | None] = {}
        SHARED_THEORY_ANSWERS.new_round()
        self._valid: set[Configuration] = set()
        self._prior = NodePrior(cluster, store)

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def type_fractions(self) -> Mapping[str, float]:
        """P(type=j) of eq. 9, computed once; read-only."""
        return self._fractions

    def throughput(self, job: Job, config: Configuration) -> Estimate:
        """Total and per-GPU throughput of ``job`` in ``config``, slowest node setting the pace."""
        key = (job.id, config)
        found = self._config_memo.get(key)
        if found is not None:
            return found
        estimate = self._estimate(job, config)
        self._config_memo[key] = estimate
        return estimate

    def per_gpu_on_node(self, job: Job, node_id: str, config: Configuration) -> tuple[float, str]:
        """Per-GPU throughput of ``job`` on one node of ``config``, and the layer that knew it."""
        gpu_type = self._check_config(config)
        if node_id not in config.node_ids:
            raise InvalidInputError(f"node {node_id!r} is not part of configuration {config}")
        return self._node_lookup(job, node_id, gpu_type, config)

    def speed_key(self, config: Configuration) -> tuple[float, ...]:
        """The node-speed priors of ``config``'s nodes (empty when its type has none):
        placements that differ in it are not interchangeable below the entity layer."""
        prior = self._prior
        if not prior.uneven(config.gpu_type):
            return ()
        return tuple(prior.speed(n) for n, _ in config.parts)

    def node_speed(self, node_id: str) -> float:
        """The node's speed prior relative to the best server of its type (1.0: full speed)."""
        return self._prior.speed(node_id)

    def type_per_gpu(self, job: Job, gpu_type: str) -> float:
        """Per-GPU throughput of ``job`` on a single GPU of ``gpu_type`` (used by eq. 9).

        Lookup: type table at one GPU -> theory (one GPU, no communication) -> table.
        """
        key = (job.id, gpu_type)
        found = self._type_memo.get(key)
        if found is not None:
            return found
        gpu = self._types.get(gpu_type)
        if gpu is None:
            raise UnknownGpuTypeError(f"unknown GPU type {gpu_type!r}")
        value = self._store.type_aggregated(job.id, gpu_type, 1)
        if value is None:
            value = self._theory(job, gpu, 1, 1)
        if value is None:
            value = self._table[gpu_type]
        self._type_memo[key] = value
        return value

    def seconds_per_sample(self, job: Job) -> float:
        """``sum_j P(type=j) / type_per_gpu(job, j)``: the GPU-seconds a sample costs on a
        GPU drawn at random from the cluster (the type-dependent part of eq. 9).

        Types without GPUs are skipped. Memoised per job, since every priority needs it.
        """
        found = self._seconds_per_sample_memo.get(job.id)
        if found is not None:
            return found
        total = 0.0
        for gpu_type, share in self._fractions.items():
            if share > 0.0:
                total += share / self.type_per_gpu(job, gpu_type)
        if total <= 0.0:
            raise InvalidInputError("the cluster has no GPUs: a job's age is undefined")
        self._seconds_per_sample_memo[job.id] = total
        return total

    def _estimate(self, job: Job, config: Configuration) -> Estimate:
        gpu_type = self._check_config(config)
        parts = config.parts
        total = config.total_gpus
        if len(parts) == 1:  # one node sets the pace alone (most configurations)
            per_gpu, source = self._lookup(job, parts[0][0], gpu_type, total, 1)
            return Estimate(per_gpu * total, per_gpu, source)
        n_nodes = len(parts)
        slowest = float("inf")
        worst_rank = 0
        for node_id, _ in parts:
            per_gpu, source = self._lookup(job, node_id, gpu_type, total, n_nodes)
            slowest = min(slowest, per_gpu)
            worst_rank = max(worst_rank, _RANK[source])
        return Estimate(slowest * total, slowest, SOURCES[worst_rank])

    def per_gpu_one_each(self, job: Job, gpu_type: str, node_id: str, n_nodes: int) -> float:
        """Per-GPU throughput on ``node_id`` when the job holds one GPU on each of ``n_nodes``
        nodes of ``gpu_type``, ``node_id`` among them (eq. 10's probes).

        The same top-down lookup as :meth:`throughput`, without building and memoising
        a configuration: the planner asks it for every queued job and type, each call.
        """
        node = self._nodes.get(node_id)
        if node is None or node.gpu_type != gpu_type or node.gpus < 1:
            raise InvalidInputError(f"node {node_id!r} has no {gpu_type!r} GPU to probe")
        return self._lookup(job, node_id, self._types[gpu_type], n_nodes, n_nodes)[0]

    def _check_config(self, config: Configuration) -> GpuType:
        """Reject configurations the cluster cannot hold; returns the configuration's type.

        A configuration found valid once is not checked again: the planner asks
        about the same (shared, immutable) placements for job after job.
        """
        gpu = self._types.get(config.gpu_type)
        if gpu is not None and config in self._valid:
            return gpu
        if gpu is None:
            raise UnknownGpuTypeError(f"configuration uses unknown GPU type {config.gpu_type!r}")
        for node_id, gpus in config.parts:
            node = self._nodes.get(node_id)
            if node is None:
                raise InvalidInputError(f"configuration uses unknown node {node_id!r}")
            if node.gpu_type != config.gpu_type:
                raise InvalidInputError(
                    f"node {node_id!r} carries {node.gpu_type!r}, not {config.gpu_type!r}"
                )
            if gpus > node.gpus:
                raise InvalidInputError(f"node {node_id!r} has {node.gpus} GPUs, asked {gpus}")
        self._valid.add(config)
        return gpu

    def _node_lookup(
        self, job: Job, node_id: str, gpu: GpuType, config: Configuration
    ) -> tuple[float, str]:
        return self._lookup(job, node_id, gpu, config.total_gpus, len(config.parts))

    def _lookup(
        self, job: Job, node_id: str, gpu: GpuType, n_gpus: int, n_nodes: int
    ) -> tuple[float, str]:
        """Per-GPU throughput on one node of a placement of ``n_gpus`` over ``n_nodes``."""
        store = self._store
        job_id = job.id
        # a distributed run is keyed by its node count, one node's by its GPU count
        distributed = n_nodes > 1
        if distributed:
            size = n_nodes
            value = store.entity_distributed(job_id, node_id, size)
            if value is not None:
                return value, "entity"
            value = store.type_distributed(job_id, gpu.name, size)
        else:
            size = n_gpus
            value = store.entity_aggregated(job_id, node_id, size)
            if value is not None:
                return value, "entity"
            value = store.type_aggregated(job_id, gpu.name, size)
        source = "type"
        if value is None:
            source = "theory"
            value = self._theory(job, gpu, n_gpus, n_nodes)
        if value is None:
            source = "table"
            value = self._table[gpu.name]
        # what other jobs showed of this server, against the one the figure came from
        scale = self._prior.scale(job_id, node_id, gpu.name, size, distributed, source)
        return value * scale, source

    def _theory(self, job: Job, gpu: GpuType, n_gpus: int, n_nodes: int) -> float | None:
        """Per-GPU throughput from the profile, or None when the job was never profiled here.

        Memoised by shape: every placement of the same GPU and node count shares it,
        and each node of a distributed placement asks for it again.
        """
        key = (job.id, gpu.name, n_gpus, n_nodes)
        memo = self._theory_memo
        value = memo.get(key, _UNSEEN)
        if value is _UNSEEN:
            value = memo[key] = self._theory_uncached(job, gpu, n_gpus, n_nodes)
        return value  # type: ignore[return-value]

    def _theory_uncached(self, job: Job, gpu: GpuType, n_gpus: int, n_nodes: int) -> float | None:
        profile = self._store.profile(job.id, gpu.name)
        if profile is None:
            return None
        answers = SHARED_THEORY_ANSWERS.table(profile)
        overlap = self._overlap
        key = (job.params, job.batch_size, n_gpus, n_nodes, gpu.b_link, gpu.b_net, overlap)
        value = answers.get(key)
        if value is None:
            value = answers[key] = _theory_per_gpu(job, profile, gpu, n_gpus, n_nodes, overlap)
        return value


def _theory_per_gpu(
    job: Job, profile: PhaseProfile, gpu: GpuType, n_gpus: int, n_nodes: int, overlap: float
) -> float:
    """Per-GPU throughput of eqs. 1-5: the job's batch over its expected iteration time."""
    t_iter = expected_iteration_time(
        profile, job.params, n_gpus, n_nodes, gpu.b_link, gpu.b_net, overlap
    )
    if t_iter <= 0:
        raise InvalidInputError(
            f"job {job.id!r}: profile on {gpu.name!r} gives a non-positive iteration time"
        )
    return job.batch_size / t_iter
