"""What one tick did and what each of its steps cost.

The tick fills a :class:`TickResult` as it goes; the service logs it, the
metrics read their series from it and tests check it, none of them needing
the tick's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from hopsd.daemon.decide import Action, Decision
from hopsd.daemon.enact import EnactReport
from hopsd.daemon.gpu_use import GpuUse
from hopsd.daemon.reconcile import ReconcileReport


@dataclass
class TickResult:
    """What one tick did and what each step cost (seconds)."""

    started_at: float
    observe_s: float = 0.0
    reconcile_s: float = 0.0
    resume_s: float = 0.0
    decide_s: float = 0.0
    record_s: float = 0.0
    enact_s: float = 0.0
    forecast_s: float = 0.0
    total_s: float = 0.0
    slurm_calls: int = 0
    # of them, the calls of the tick's own batched reads: its observations (the queue,
    # whose narrow read may need the full one, and the nodes), the re-check of running
    # jobs before requeues, accounting's reads of jobs gone from the queue and of
    # requeued runs' ends; not the enactor's settle polls nor the reservations' reads
    batched_reads: int = 0
    # observations made: the first, one after resumed intents, one after enacting a
    # requeue of an unplanned start
    observations: int = 0
    queued: int = 0
    running: int = 0
    decision: Decision | None = None
    actions: list[Action] = field(default_factory=list)
    reconcile: ReconcileReport | None = None
    enacted: EnactReport | None = None
    resumed: EnactReport | None = None
    latency_ratios: list[float] = field(default_factory=list)
    gpu_use: dict[str, GpuUse] = field(default_factory=dict)
    # shadow mode: decisions that differ from what was last said for their job
    would_enact: list[Action] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        """What each step cost (every ``*_s`` field, in step order) and the Slurm calls made."""
        costs = [f.name for f in fields(self) if f.name.endswith("_s")]
        return {name: getattr(self, name) for name in [*costs, "slurm_calls"]}
