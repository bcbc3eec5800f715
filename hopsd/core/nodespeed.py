"""Per-server speed learned across jobs, and the prior it gives the estimator.

The entity layer knows a job on a server only once that job ran there; until
then the estimator falls back on the type layer (the job's best server of the
type), the theory layer or the admin's table, which do not tell the servers of
a type apart. Yet other jobs may long have shown that one server of the type
runs at half the pace of its siblings (older CPU, slower disk). Without that, a
new job is offered the slow and the fast server at the same value and may well
be packed onto the slow one.

**Speed factor** of a node (what ``hops nodes`` shows): the median, over jobs
measured on at least two servers of one GPU type at the same GPU count, of the
job's per-GPU throughput there divided by its best server's.

**Prior** of a node: the *largest* such ratio, i.e. the slowdown every compared
job felt (an impairment such as a slow disk hurts data-bound jobs only, and a
prior must not misjudge the others). For a (job, node) pair without an
entity-layer figure, the lower-layer figure is scaled by
``speed(node) / speed(reference)``, where the reference is the server that
figure came from: the job's best measured server of the type at that size
(type layer), its best one-GPU server (the profiling run behind the theory
layer), or a full-speed server (the admin's table).
Priors within :data:`TOLERANCE` of 1 count as full speed and the rest are
rounded to :data:`STEP`: measurement noise must not split interchangeable
servers into classes of their own. Measured (job, node) pairs keep their own
figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol, cast

from hopsd.core.learning import ENTITY_AGGREGATED
from hopsd.core.model import Cluster
from hopsd.core.throughput import InMemoryThroughputStore, ThroughputStore

#: Speed factors at least ``1 - TOLERANCE`` are taken as full speed (noise, and the
#: spread of a type's servers that only some jobs feel).
TOLERANCE = 0.2
#: Granularity of a slower server's prior (fewer distinct classes of nodes).
STEP = 0.05
#: A prior never goes below this (a factor is a ratio of positive throughputs).
FLOOR = 0.05


@dataclass
class SpeedEvidence:
    """Per (job, GPU type, GPU count), the per-GPU throughput measured on each node.

    Fed with entity-layer (one-node) figures; kept after the job ends, as the
    ledger keeps its rows, since finished jobs are what tells servers apart.
    """

    _groups: dict[tuple[str, str, int], dict[str, float]] = field(default_factory=dict)

    def note(self, job_id: str, gpu_type: str, gpus: int, node_id: str, per_gpu: float) -> None:
        if per_gpu > 0:
            self._groups.setdefault((job_id, gpu_type, gpus), {})[node_id] = per_gpu

    def ratios(self) -> dict[str, list[float]]:
        """Per node: its ratio to the job's best server of the type, one per job compared."""
        out: dict[str, list[float]] = {}
        for per_node in self._groups.values():
            if len(per_node) < 2:
                continue
            best = max(per_node.values())
            for node, per_gpu in per_node.items():
                out.setdefault(node, []).append(per_gpu / best)
        return out

    def factors(self) -> dict[str, tuple[float, int]]:
        """Per node: (median ratio to the job's best server of the type, jobs compared)."""
        return {node: (median(values), len(values)) for node, values in self.ratios().items()}


def evidence_of(
    rows: Iterable[tuple[str, str, int, float]], node_type: Mapping[str, str]
) -> SpeedEvidence:
    """Evidence from entity-layer one-node rows ``(job, node, gpus, per_gpu)``."""
    evidence = SpeedEvidence()
    for job_id, node_id, gpus, per_gpu in rows:
        evidence.note(job_id, node_type.get(node_id, ""), gpus, node_id, per_gpu)
    return evidence


def speed_factors(
    rows: Iterable[tuple[str, str, int, float]], node_type: Mapping[str, str]
) -> dict[str, tuple[float, int]]:
    """The factors ``hops nodes`` shows, from entity-layer one-node rows."""
    return evidence_of(rows, node_type).factors()


def speed_prior(evidence: SpeedEvidence) -> dict[str, float]:
    """The estimator's prior: nodes clearly slower than their best sibling for *every*
    job compared there (the largest ratio), rounded.

    How much a server's impairment costs depends on the job (a slow disk hurts
    data-bound jobs only), so the prior takes the slowdown every compared job
    felt, not the typical one: a job it would misjudge must be unlike all of them.
    """
    out: dict[str, float] = {}
    for node, values in evidence.ratios().items():
        factor = max(values)
        if factor < 1.0 - TOLERANCE:
            out[node] = max(round(factor / STEP) * STEP, FLOOR)
    return out


class NodeSpeedIndex(Protocol):
    """What a store may offer besides the three layers: the learned per-node prior."""

    def node_speeds(self) -> Mapping[str, float]: ...


def store_speeds(store: ThroughputStore) -> Mapping[str, float]:
    """The store's per-node prior, empty when it offers none."""
    getter = getattr(store, "node_speeds", None)
    if getter is None or not callable(getter):
        return {}
    return cast(NodeSpeedIndex, store).node_speeds()


class NodePrior:
    """Scales a job's lower-layer figure to one node of a type (see the module docstring).

    Built once per estimator; the reference of each (job, type, layer, size) is
    memoised since the planner asks for the same shapes again and again.
    """

    def __init__(self, cluster: Cluster, store: ThroughputStore) -> None:
        self._store = store
        speeds = store_speeds(store)
        self._speed = {n: s for n, s in speeds.items() if s != 1.0}
        self._typed: dict[str, tuple[str, ...]] = {}
        for node in cluster.nodes:
            self._typed.setdefault(node.gpu_type, ())
            self._typed[node.gpu_type] += (node.id,)
        self._uneven = {t for t, ids in self._typed.items() if any(n in self._speed for n in ids)}
        self._refs: dict[tuple[str, str, str, int, bool], float] = {}

    def speed(self, node_id: str) -> float:
        return self._speed.get(node_id, 1.0)

    def uneven(self, gpu_type: str) -> bool:
        """Whether some node of the type has a prior below full speed."""
        return gpu_type in self._uneven

    def scale(
        self, job_id: str, node_id: str, gpu_type: str, size: int, distributed: bool, source: str
    ) -> float:
        """Factor for a figure of layer ``source`` looked up at ``size`` for ``node_id``."""
        if gpu_type not in self._uneven:
            return 1.0
        key = (job_id, gpu_type, source, size, distributed)
        ref = self._refs.get(key)
        if ref is None:
            ref = self._reference(job_id, gpu_type, source, size, distributed)
            self._refs[key] = ref
        return self.speed(node_id) / ref

    def _reference(
        self, job_id: str, gpu_type: str, source: str, size: int, distributed: bool
    ) -> float:
        """Speed of the server the ``source`` figure was measured on (1.0 when unknown)."""
        if source == "table":
            return 1.0
        nodes = self._typed.get(gpu_type, ())
        store = self._store
        if source == "type" and distributed:
            # a distributed pace is its slowest node's
            seen = [n for n in nodes if store.entity_distributed(job_id, n, size) is not None]
            return min((self.speed(n) for n in seen), default=1.0)
        gpus = size if source == "type" else 1  # theory: the one-GPU profiling run
        best_node, best = "", 0.0
        for n in nodes:
            value = store.entity_aggregated(job_id, n, gpus)
            if value is not None and value > best:
                best_node, best = n, value
        return self.speed(best_node) if best_node else 1.0


class SpeedLearner:
    """Keeps a store's per-node prior up to date from the measurements learned one by one.

    The simulator (and so ``hops simulate``, ``hops replay`` and the forecast)
    learns as hopsd does; hopsd computes the same factors from its ledger rows.
    ``seed`` is a prior known before (a forecast starts from hopsd's): nodes
    the new evidence compares replace it, the others keep it.
    """

    def __init__(self, seed: Mapping[str, float] | None = None) -> None:
        self.evidence = SpeedEvidence()
        self._seed = dict(seed or {})
        self._stale = False

    def note(
        self, job_id: str, gpu_type: str, layer: str, place: str, size: int, per_gpu: float
    ) -> None:
        """One learned estimate; only one-node entity figures are evidence of a server."""
        if layer == ENTITY_AGGREGATED:
            self.evidence.note(job_id, gpu_type, size, place, per_gpu)
            self._stale = True

    def refresh(self, store: InMemoryThroughputStore) -> None:
        """Write the prior into ``store`` if anything was learned since the last call."""
        if not self._stale:
            return
        self._stale = False
        compared = self.evidence.ratios()
        prior = {n: s for n, s in self._seed.items() if n not in compared}
        prior.update(speed_prior(self.evidence))
        store.set_node_speeds(prior)
