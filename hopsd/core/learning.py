"""The one rule for learning from a throughput measurement.

A measurement says: job J, placed in configuration C, trained at ``per_gpu``
samples per second per GPU (its real pace: a distributed job runs at its
slowest node's). hopsd gets it from a job's probe reports or progress file,
the simulator from its ground truth plus noise; both update the estimator's
measured layers (:mod:`hopsd.core.estimator`) with :func:`learn`, so the same
measurements give the same estimates in hopsd and in ``hops simulate`` /
``hops replay``:

* **entity** layer, per node of C (keyed by GPU count on one node, by node
  count across nodes): an exponentially weighted moving average,
  :func:`fold` -- the first measurement is taken as is, later ones move the
  estimate by ``ALPHA`` of the difference, so it follows slow drift (warming
  caches) without jumping on one noisy interval;
* **type** layer, for C's GPU type at that size: the *best* server of the type
  measured so far at that size -- the estimate for a server of the type the
  job has not run on, which one slow host's impairment must not drag down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Cluster, Configuration
from hopsd.core.throughput import ThroughputStore

#: Weight of a new measurement in the entity layer's moving average.
ALPHA = 0.3

ENTITY_AGGREGATED = "entity_agg"
ENTITY_DISTRIBUTED = "entity_dist"
TYPE_AGGREGATED = "type_agg"
TYPE_DISTRIBUTED = "type_dist"


@dataclass(frozen=True)
class Learned:
    """One estimate to store: ``layer`` as in the ledger, ``place`` a node or a GPU type,
    ``size`` a GPU count (aggregated) or node count (distributed)."""

    layer: str
    place: str
    size: int
    per_gpu: float


def fold(previous: float | None, measured: float, alpha: float = ALPHA) -> float:
    """The entity estimate after one more measurement (EWMA; the first is taken as is)."""
    if not (math.isfinite(measured) and measured > 0):
        raise InvalidInputError(f"a measured throughput must be finite and > 0, got {measured}")
    if not 0.0 < alpha <= 1.0:
        raise InvalidInputError(f"EWMA alpha must be in (0, 1], got {alpha}")
    if previous is None:
        return measured
    return (1.0 - alpha) * previous + alpha * measured


def learn(
    store: ThroughputStore,
    job_id: str,
    config: Configuration,
    cluster: Cluster,
    per_gpu: float,
) -> tuple[Learned, ...]:
    """What one measurement changes: the entity rows of C's nodes, then C's type row."""
    distributed = config.distributed
    size = config.n_nodes if distributed else config.total_gpus
    entity = ENTITY_DISTRIBUTED if distributed else ENTITY_AGGREGATED
    kind = TYPE_DISTRIBUTED if distributed else TYPE_AGGREGATED

    def known(job: str, node: str, n: int) -> float | None:
        if distributed:
            return store.entity_distributed(job, node, n)
        return store.entity_aggregated(job, node, n)

    updates = {node: fold(known(job_id, node, size), per_gpu) for node, _ in config.parts}
    peers = (n.id for n in cluster.nodes if n.gpu_type == config.gpu_type)
    best = _best(updates.get(n, known(job_id, n, size)) for n in peers)
    out = [Learned(entity, node, size, value) for node, value in updates.items()]
    if best is not None:
        out.append(Learned(kind, config.gpu_type, size, best))
    return tuple(out)


def _best(values: Iterable[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


class LearningStore(ThroughputStore, Protocol):
    """A throughput store that can also be written (the in-memory store is one)."""

    def set_entity_aggregated(self, job_id: str, node_id: str, gpus: int, thr: float) -> None: ...

    def set_entity_distributed(
        self, job_id: str, node_id: str, n_nodes: int, thr: float
    ) -> None: ...

    def set_type_aggregated(self, job_id: str, gpu_type: str, gpus: int, thr: float) -> None: ...

    def set_type_distributed(
        self, job_id: str, gpu_type: str, n_nodes: int, thr: float
    ) -> None: ...


def apply_learned(store: LearningStore, job_id: str, updates: Iterable[Learned]) -> None:
    """Write learned estimates into a store with the core's setters (the simulator's)."""
    for u in updates:
        if u.layer == ENTITY_AGGREGATED:
            store.set_entity_aggregated(job_id, u.place, u.size, u.per_gpu)
        elif u.layer == ENTITY_DISTRIBUTED:
            store.set_entity_distributed(job_id, u.place, u.size, u.per_gpu)
        elif u.layer == TYPE_AGGREGATED:
            store.set_type_aggregated(job_id, u.place, u.size, u.per_gpu)
        else:
            store.set_type_distributed(job_id, u.place, u.size, u.per_gpu)
