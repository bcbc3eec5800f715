"""What the estimator may know about a job, and the lookup interface that holds it.

The three layers of the Hops estimator are looked up top-down:
entity (this job on this very node) -> type (this job on this GPU type) ->
theory (profiled per-phase times put through eqs. 1-5). The ledger implements
:class:`ThroughputStore` against SQL; :class:`InMemoryThroughputStore` is the
in-process implementation the simulator and tests use.

All throughputs are *per GPU*, in samples per second, so that the slowest-node
rule ``min_i(per_gpu_i) * sum_i(gpus_i)`` can be applied to any configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from hopsd.core.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class Mixture:
    """Two-component normal mixture of a time (seconds): cache hit vs. miss.

    With probability ``p_hit`` a draw comes from N(mu_hit, sigma_hit), otherwise
    from N(mu_miss, sigma_miss). A stable quantity is ``Mixture.constant(t)``.
    """

    p_hit: float
    mu_hit: float
    sigma_hit: float = 0.0
    mu_miss: float = 0.0
    sigma_miss: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_hit <= 1.0:
            raise InvalidInputError(f"mixture p_hit must be in [0, 1], got {self.p_hit}")
        if min(self.mu_hit, self.mu_miss, self.sigma_hit, self.sigma_miss) < 0:
            raise InvalidInputError("mixture means and sigmas must be >= 0")

    @staticmethod
    def constant(t: float) -> Mixture:
        return Mixture(1.0, t, 0.0, t, 0.0)

    @property
    def p_miss(self) -> float:
        return 1.0 - self.p_hit

    @property
    def mean(self) -> float:
        return self.p_hit * self.mu_hit + self.p_miss * self.mu_miss


@dataclass(frozen=True, slots=True)
class PhaseProfile:
    """Theory-layer entry: basic per-iteration times of a job on one GPU type.

    ``t_f``, ``t_b``, ``t_u``: forward, backward, weight update (seconds, per
    iteration at the job's per-GPU batch size). ``pattern`` 1 overlaps data
    loading with compute, 2 does not. ``data`` is T_d, ``sync_wait`` is T_w;
    both are mixtures whose components are correlated (hit with hit).
    """

    t_f: float
    t_b: float
    t_u: float
    pattern: int = 1
    data: Mixture = field(default_factory=lambda: Mixture.constant(0.0))
    sync_wait: Mixture = field(default_factory=lambda: Mixture.constant(0.0))

    def __post_init__(self) -> None:
        if min(self.t_f, self.t_b, self.t_u) < 0:
            raise InvalidInputError("phase times must be >= 0")
        if self.pattern not in (1, 2):
            raise InvalidInputError(f"pattern must be 1 or 2, got {self.pattern}")


@runtime_checkable
class ThroughputStore(Protocol):
    """Read side of the three-layer store. Every method returns None when unknown."""

    def entity_aggregated(self, job_id: str, node_id: str, gpus: int) -> float | None:
        """Measured per-GPU throughput of the job using ``gpus`` GPUs on this node alone."""
        ...

    def entity_distributed(self, job_id: str, node_id: str, n_nodes: int) -> float | None:
        """Measured per-GPU throughput on this node when the job spans ``n_nodes`` nodes."""
        ...

    def type_aggregated(self, job_id: str, gpu_type: str, gpus: int) -> float | None:
        """Measured per-GPU throughput with ``gpus`` GPUs on one node of this type."""
        ...

    def type_distributed(self, job_id: str, gpu_type: str, n_nodes: int) -> float | None:
        """Measured per-GPU throughput across ``n_nodes`` nodes of this type."""
        ...

    def profile(self, job_id: str, gpu_type: str) -> PhaseProfile | None:
        """Profiled basic times of the job on this type (theory layer)."""
        ...


def _key_ok(value: float) -> None:
    if value <= 0:
        raise InvalidInputError(f"a measured throughput must be > 0, got {value}")


def _measured(
    table: dict[tuple[str, str, int], float], key: tuple[str, str, int], thr: float
) -> None:
    """Keep one layer's measured throughput under its key, refused unless positive."""
    _key_ok(thr)
    table[key] = thr


@dataclass
class InMemoryThroughputStore:
    """Dict-backed :class:`ThroughputStore`, with writers for each layer."""

    _entity_agg: dict[tuple[str, str, int], float] = field(default_factory=dict)
    _entity_dist: dict[tuple[str, str, int], float] = field(default_factory=dict)
    _type_agg: dict[tuple[str, str, int], float] = field(default_factory=dict)
    _type_dist: dict[tuple[str, str, int], float] = field(default_factory=dict)
    _profiles: dict[tuple[str, str], PhaseProfile] = field(default_factory=dict)
    _speeds: dict[str, float] = field(default_factory=dict)

    def node_speeds(self) -> dict[str, float]:
        """Per-node speed prior learned across jobs (:mod:`hopsd.core.nodespeed`)."""
        return self._speeds

    def set_node_speeds(self, speeds: Mapping[str, float]) -> None:
        """Replace the per-node prior (nodes not named run at their type's full speed)."""
        for speed in speeds.values():
            _key_ok(speed)
        self._speeds = dict(speeds)

    def entity_aggregated(self, job_id: str, node_id: str, gpus: int) -> float | None:
        return self._entity_agg.get((job_id, node_id, gpus))

    def entity_distributed(self, job_id: str, node_id: str, n_nodes: int) -> float | None:
        return self._entity_dist.get((job_id, node_id, n_nodes))

    def type_aggregated(self, job_id: str, gpu_type: str, gpus: int) -> float | None:
        return self._type_agg.get((job_id, gpu_type, gpus))

    def type_distributed(self, job_id: str, gpu_type: str, n_nodes: int) -> float | None:
        return self._type_dist.get((job_id, gpu_type, n_nodes))

    def profile(self, job_id: str, gpu_type: str) -> PhaseProfile | None:
        return self._profiles.get((job_id, gpu_type))

    def set_entity_aggregated(self, job_id: str, node_id: str, gpus: int, thr: float) -> None:
        _measured(self._entity_agg, (job_id, node_id, gpus), thr)

    def set_entity_distributed(self, job_id: str, node_id: str, n_nodes: int, thr: float) -> None:
        _measured(self._entity_dist, (job_id, node_id, n_nodes), thr)

    def set_type_aggregated(self, job_id: str, gpu_type: str, gpus: int, thr: float) -> None:
        _measured(self._type_agg, (job_id, gpu_type, gpus), thr)

    def set_type_distributed(self, job_id: str, gpu_type: str, n_nodes: int, thr: float) -> None:
        _measured(self._type_dist, (job_id, gpu_type, n_nodes), thr)

    def set_profile(self, job_id: str, gpu_type: str, profile: PhaseProfile) -> None:
        self._profiles[(job_id, gpu_type)] = profile

    def forget_job(self, job_id: str) -> None:
        """Drop everything known about a finished job, to bound memory in long runs."""
        for table in (self._entity_agg, self._entity_dist, self._type_agg, self._type_dist):
            for key in [k for k in table if k[0] == job_id]:
                del table[key]
        for pkey in [k for k in self._profiles if k[0] == job_id]:
            del self._profiles[pkey]
