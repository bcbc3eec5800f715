"""Planner settings: the operator's knobs, with the method's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from hopsd.core.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class Settings:
    """Knobs of one scheduling round.

    ``lam`` is lambda of eq. 11 (1 with LR, 2 with FTF); ``sigma`` the placement
    sensitivity threshold; ``restart_penalty_s`` what moving or preempting a
    running job costs (checkpoint + requeue); ``round_length_s`` the lease length
    against which that penalty is weighed; ``mip_gap`` and ``time_limit_s``
    bound the solver, and ``node_limit`` (branch-and-bound nodes per solve; None:
    no limit) bounds it by work done, which, unlike seconds, is the same on every
    machine; ``reference_throughput`` (per-GPU samples/s on a GPU type of
    speed 1.0) times each type's ``speed`` is the admin's table used for jobs the
    estimator knows nothing about yet; ``tcomm_overlap`` is the non-overlapped
    share of communication (0.2 in eqs. 1-2).
    """

    priority: str = "lr"
    lam: float = 1.0
    sigma: float = 1.4
    restart_penalty_s: float = 30.0
    round_length_s: float = 300.0
    mip_gap: float = 0.01
    time_limit_s: float = 10.0
    node_limit: int | None = None
    max_plans: int = 3
    tcomm_overlap: float = 0.2
    reference_throughput: float = 100.0
    # a preemption is priced at the preempted job's restart cost, and resuming a job that
    # ran before is discounted by its own like a move (hopsd.core.gains): a waiting job
    # displaces a running one only when it gains more than both, so equal jobs never swap
    price_restarts: bool = True

    def __post_init__(self) -> None:
        if self.lam < 0:
            raise InvalidInputError(f"lambda must be >= 0, got {self.lam}")
        if self.sigma <= 0:
            raise InvalidInputError(f"sigma must be > 0, got {self.sigma}")
        if self.restart_penalty_s < 0:
            raise InvalidInputError("restart_penalty_s must be >= 0")
        if self.round_length_s <= 0:
            raise InvalidInputError("round_length_s must be > 0")
        if not 0 <= self.mip_gap < 1:
            raise InvalidInputError("mip_gap must be in [0, 1)")
        if self.time_limit_s <= 0:
            raise InvalidInputError("time_limit_s must be > 0")
        if self.node_limit is not None and self.node_limit < 1:
            raise InvalidInputError("node_limit must be >= 1")
        if self.reference_throughput <= 0:
            raise InvalidInputError("reference_throughput must be > 0")
        if self.max_plans < 1:
            raise InvalidInputError("max_plans must be >= 1")
