"""The ground truth a replay runs at: each live job's measured rates.

hopsd learned each job's per-GPU samples/s per GPU type and per server while it
ran; a replayed job runs at those, falling back to the nearest measured size,
then to another measured type scaled by the types' speeds, then to the type
table hopsd itself assumes for a job it never saw run. A server measured
slower or faster than its type is so for every job it holds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.core.model import Configuration, GpuType
from hopsd.sim.replay_inputs import ReplayRate
from hopsd.sim.truth import GroundTruth, ModelSpec

ENTITY_AGG = "entity_agg"
ENTITY_DIST = "entity_dist"
TYPE_AGG = "type_agg"
TYPE_DIST = "type_dist"


@dataclass
class JobRates:
    """One job's learned per-GPU samples/s, and how to answer for what it never ran."""

    types: Mapping[str, GpuType]
    reference: float
    by_layer: dict[str, dict[tuple[str, int], float]] = field(default_factory=dict)
    node_factor: dict[str, float] = field(default_factory=dict)

    def add(self, layer: str, place: str, size: int, per_gpu: float) -> None:
        if per_gpu > 0 and size > 0:
            self.by_layer.setdefault(layer, {})[(place, size)] = per_gpu

    def measured_types(self) -> set[str]:
        return {
            place for layer in (TYPE_AGG, TYPE_DIST) for place, _ in self.by_layer.get(layer, {})
        }

    def type_rate(self, gpu_type: str, gpus: int, n_nodes: int = 1) -> float:
        """Per-GPU rate on ``gpu_type``: exact size, nearest size, scaled type, type table."""
        own = self._type_rate(gpu_type, gpus, n_nodes)
        if own is not None:
            return own
        speed = self.types[gpu_type].speed if gpu_type in self.types else 1.0
        for other in sorted(self.measured_types()):
            found = self._type_rate(other, gpus, n_nodes)
            if found is not None and other in self.types:
                return found * speed / self.types[other].speed
        return self.reference * speed

    def _type_rate(self, gpu_type: str, gpus: int, n_nodes: int) -> float | None:
        layer, size = (TYPE_DIST, n_nodes) if n_nodes > 1 else (TYPE_AGG, gpus)
        exact = self.by_layer.get(layer, {}).get((gpu_type, size))
        if exact is not None:
            return exact
        # Nearest measured size on this type, either layer, by ratio of GPU counts.
        options: list[tuple[float, float]] = []
        for lay in (TYPE_AGG, TYPE_DIST):
            for (place, s), value in self.by_layer.get(lay, {}).items():
                if place == gpu_type:
                    options.append((abs(math.log(max(s, 1) / max(size, 1))), value))
        return min(options)[1] if options else None

    def node_rate(self, node: str, gpu_type: str, gpus_here: int, n_nodes: int) -> float:
        """Per-GPU rate one node of a configuration sustains (its own measurement first)."""
        layer, size = (ENTITY_DIST, n_nodes) if n_nodes > 1 else (ENTITY_AGG, gpus_here)
        exact = self.by_layer.get(layer, {}).get((node, size))
        if exact is not None:
            return exact
        total = gpus_here * n_nodes
        return self.type_rate(gpu_type, total, n_nodes) * self.node_factor.get(node, 1.0)


@dataclass(frozen=True, slots=True)
class AssumedModel(ModelSpec):
    """A live job as the scheduler first sees it: profiling tells it ``assumed`` per type.

    hopsd without profiling knows nothing of a new job but the type table
    (``reference_throughput * speed``) until it measures the job; the replay
    hands the simulated estimator that same table as the job's "profile", so
    the replay learns as late as hopsd did. With profiling on, ``assumed`` is the
    measured rates (what a profile would have found).
    """

    assumed: Mapping[str, float] = field(default_factory=dict)

    def compute_time(self, gpu_type: str, batch_size: int | None = None) -> float:
        """Seconds of compute per iteration at the assumed rate (the true one when none)."""
        batch = batch_size or self.batch_size
        return batch / self.assumed.get(gpu_type, self.throughput[gpu_type])


@dataclass
class ReplayTruth(GroundTruth):
    """Ground truth from measurements: each job (its own model) runs at its learned rates."""

    rates: Mapping[str, JobRates] = field(default_factory=dict)

    def _known_rates(self, model: str, config: Configuration) -> tuple[float, ...] | None:
        job = self.rates.get(model)
        if job is None:
            return None
        return tuple(
            job.node_rate(node, config.gpu_type, gpus, config.n_nodes)
            for node, gpus in config.parts
        )

    def _known_single_gpu(self, model: str, gpu_type: str) -> float | None:
        """The job's measured single-GPU rate on a type (ages and latency ratios use it)."""
        job = self.rates.get(model)
        return None if job is None else job.type_rate(gpu_type, 1)


def node_factors(
    rates: Sequence[ReplayRate], kind: Mapping[str, str]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """A server's measured rate over its type's at the same size: per job, and across jobs.

    A job never measured on a server takes the median factor other jobs saw there
    (a slow host is slow for everyone it holds back), else 1.
    """
    per_type = {
        (r.job_id, r.layer, r.place, r.size): r.per_gpu
        for r in rates
        if r.layer in (TYPE_AGG, TYPE_DIST)
    }
    own: dict[str, dict[str, list[float]]] = {}
    for r in rates:
        if r.layer not in (ENTITY_AGG, ENTITY_DIST) or r.per_gpu <= 0 or r.place not in kind:
            continue
        layer = TYPE_AGG if r.layer == ENTITY_AGG else TYPE_DIST
        typed = per_type.get((r.job_id, layer, kind[r.place], r.size))
        if typed is not None and typed > 0:
            own.setdefault(r.job_id, {}).setdefault(r.place, []).append(r.per_gpu / typed)
    per_job = {j: {n: statistics.fmean(v) for n, v in nodes.items()} for j, nodes in own.items()}
    across: dict[str, list[float]] = {}
    for nodes in per_job.values():
        for node, value in nodes.items():
            across.setdefault(node, []).append(value)
    return per_job, {n: statistics.median(v) for n, v in across.items()}
