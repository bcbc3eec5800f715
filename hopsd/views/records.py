"""Plain data behind ``hops status``/``fairness``/``nodes``: built from ledger records and nodes.

Kept apart from rendering so the JSON schema is one function's output and the
tables are a view of the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hopsd.core.fairshare import standings
from hopsd.core.inventory import facts_of, managed_nodes
from hopsd.core.metrics import jain_index, raqlr
from hopsd.ledger.records import JobRecord, JobState

if TYPE_CHECKING:
    from hopsd.slurm.port import SlurmNode

ACTIVE = (
    JobState.SUBMITTED,
    JobState.PROFILING,
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.PREEMPTED,
    JobState.REQUEUED,
)
WAITING = (JobState.QUEUED, JobState.PREEMPTED, JobState.REQUEUED, JobState.SUBMITTED)
STARVING_LR = 3.0
"""A waiting job above this latency ratio is flagged starving (the method keeps max LR near 3)."""


@dataclass(frozen=True)
class TypeSummary:
    gpu_type: str
    nodes: int
    gpus_total: int
    gpus_busy: int
    gpus_idle: int
    queued: int

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def type_summaries(
    nodes: Sequence[SlurmNode],
    partitions: Sequence[str],
    node_types: Mapping[str, str],
    queued: int,
) -> list[TypeSummary]:
    """GPUs total/busy/idle per type over the managed nodes (the core's inventory rule)."""
    managed = {m.name: m.gpu_type for m in managed_nodes(facts_of(nodes), partitions, node_types)}
    totals: dict[str, list[int]] = {}
    for node in nodes:
        gpu_type = managed.get(node.name)
        if gpu_type is None:
            continue
        entry = totals.setdefault(gpu_type, [0, 0, 0, 0])
        entry[0] += 1
        entry[1] += node.gpus_total
        entry[2] += min(node.gpus_alloc, node.gpus_total)
        entry[3] += node.gpus_free
    return [TypeSummary(t, v[0], v[1], v[2], v[3], queued) for t, v in sorted(totals.items())]


def user_fairness(
    usage: Mapping[str, float],
    shares: Mapping[str, float],
    users: Iterable[str],
    key: str = "user",
) -> tuple[list[dict[str, Any]], float]:
    """Each owner's share of decayed normalised GPU time vs their fair share, and Jain's index.

    The standings and the factor are the core's (:mod:`hopsd.core.fairshare`), so what
    is shown is what hopsd applies. Jain's index is taken over usage/fair-share
    ratios, so 1.0 means every owner got exactly their configured share.
    """
    rows: list[dict[str, Any]] = []
    ratios: list[float] = []
    for s in standings(usage, shares, users):
        ratios.append(s.ratio)
        rows.append(
            {
                key: s.name,
                "usage_norm_gpu_s": round(s.usage, 1),
                "usage_share": round(s.usage_share, 4),
                "fair_share": round(s.fair_share, 4),
                "ratio": round(s.ratio, 3),
                "factor": round(s.factor, 4),
            }
        )
    jain = jain_index(ratios) if ratios and any(r > 0 for r in ratios) else 1.0
    return rows, jain


def raqlr_of(latency_ratios: Sequence[float]) -> float:
    """RAQLR: mean latency ratio of the jobs that finished in the window (the core's rule)."""
    return raqlr(list(latency_ratios))


def starving(job: JobRecord) -> bool:
    return job.state in WAITING and (job.latency_ratio or 0.0) > STARVING_LR
