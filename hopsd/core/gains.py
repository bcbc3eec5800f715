"""The numbers of the ILP objective: prior weights, normalised gains and the restart discount.

Objective coefficient of job i in configuration j (eq. 11)::

    value_ij = w_i * G_ij * d_ij
    w_i      = ((prior_i + bias) / max_k(prior_k + bias)) ** lambda
    G_ij     = thr_ij / min_j' thr_ij'
    d_ij     = 1 for a job that never ran and for a running job's current placement,
               (round_length - restart_cost) / round_length (floored at 0)
               for any other placement of a running job (a move) and, with
               ``Settings.price_restarts``, for a queued job that ran before
               (it resumes from its checkpoint, which costs it a restart too).
               restart_cost is the job's own learned cost, else the prior
               restart_penalty (:func:`move_cost_s`).

With ``Settings.price_restarts`` a running job's columns (keep and moves) also
carry ``+ w_i * G_keep * p_i``, ``p_i = min(restart_cost / round_length, 1)``
(:func:`preemption_price`): preempting the job, i.e. choosing none of its
columns, forgoes that much, the restart it pays when it resumes. A waiting job
that ran before thus displaces a running one only when its gain over the round
exceeds both restarts, ``w_B G_B (L - c_B) > w_A G_A (L + c_A)``: equal jobs
never swap places round after round. (Pricing only the preemption or only the
resume was measured too: either leaves swaps of equal jobs in consecutive
rounds, or delays the start of long jobs and stretches the makespan.)

``bias`` is 0 when every priority is > 0, else ``|min prior| + 0.01`` (eq. 11).
Dividing by the largest biased priority before raising to ``lambda`` scales
every weight by the same constant, so the optimal plan is unchanged, but the
weights stay in ``(0, 1]`` for any ``lambda`` instead of overflowing. Weights
that would fall below :data:`WEIGHT_FLOOR` are raised to it: below that the
solver's tolerances could no longer tell a job from nothing, and a job so far
behind still deserves idle GPUs nobody ahead of it can use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from hopsd.core.errors import InvalidInputError

#: Smallest weight relative to the top job's (see module docstring).
WEIGHT_FLOOR = 1e-6


def priority_bias(priorities: Sequence[float]) -> float:
    """Eq. 11's bias: 0 if all priorities are positive, else ``|min| + 0.01``."""
    if not priorities:
        return 0.0
    low = min(priorities)
    if low > 0:
        return 0.0
    return abs(low) + 0.01


def prior_weights(priorities: Sequence[float], lam: float) -> list[float]:
    """``(prior_i + bias) ** lambda``, normalised so the largest weight is 1 (see module doc)."""
    if lam < 0:
        raise InvalidInputError(f"lambda must be >= 0, got {lam}")
    if any(not math.isfinite(p) for p in priorities):
        raise InvalidInputError("priorities must be finite numbers")
    if not priorities:
        return []
    bias = priority_bias(priorities)
    shifted = [p + bias for p in priorities]
    top = max(shifted)
    out: list[float] = []
    for s in shifted:
        log_w = lam * math.log(s / top)
        out.append(max(math.exp(log_w), WEIGHT_FLOOR))
    return out


def normalised_gains(throughputs: Sequence[float]) -> list[float]:
    """Sia's normalisation: each configuration's throughput over the job's slowest one."""
    if not throughputs:
        return []
    low = min(throughputs)
    if low <= 0 or not math.isfinite(low):
        raise InvalidInputError(f"throughputs must be positive and finite, got min {low}")
    return [t / low for t in throughputs]


def move_cost_s(restart_s: float | None, prior_s: float) -> float:
    """What moving or preempting a job costs: its own learned restart cost, else the prior."""
    return prior_s if restart_s is None else restart_s


def typical_restart_s(learned: Iterable[float | None], prior_s: float) -> float:
    """What a restart costs a job here that has learned none of its own: the median of
    the restart costs the other jobs learned, else the operator's prior.

    A restart is mostly the cluster's (requeue, pending, Slurm's launch, start-up)
    and little of the job's. Measured on the test cluster, whole moves cost 4-6 s
    where the prior said 2 s: jobs priced at the prior were moved again and again
    while those that had moved once were left alone. The median of what was learned
    prices every job's first move at what moves here really cost.
    """
    known = [v for v in learned if v is not None]
    return statistics.median(known) if known else prior_s


def learned_restart_s(
    checkpoint_s: float | None,
    startup_s: float | None,
    grace_s: float,
    restarts: int = 1,
    *,
    whole_s: float | None = None,
    model_s: float | None = None,
) -> float | None:
    """A job's restart cost from what was measured of it; None while nothing was.

    Best is a restart measured whole, from hops's decision to the first
    iteration after it (``whole_s``: checkpoint, requeue, the wait for the
    release, Slurm's launch, start-up), the job's own once it restarted, else
    its model's (``model_s``, earlier jobs of the same model). Without one, the
    parts the probe measured: the notice wait plus the time from the new start
    to the first iteration. A job that reported its checkpoint waits
    ``checkpoint_s``; one that restarted without ever reporting one is taken to
    ignore the notice and waits the whole grace period. A job never restarted
    has not been asked to checkpoint yet: until it has, its cost is the prior
    (None).
    """
    if whole_s is not None and restarts > 0:
        return whole_s
    if model_s is not None:
        return model_s
    if startup_s is None:
        return None
    if checkpoint_s is None:
        return startup_s + grace_s if restarts > 0 else None
    return startup_s + checkpoint_s


def resume_discount(round_length_s: float, restart_s: float) -> float:
    """Share of its GPU time a resumed job trains over its restart and one round: ``L / (L + c)``.

    A queued job that ran before pays its restart whenever it resumes; waiting
    saves none of it, while its GPUs idle meanwhile. Unlike a move (weighed
    against staying, :func:`restart_discount`, which reaches 0 at a round) a
    resume is weighed against not running at all: a costly restart puts the job
    behind jobs that train at once but never below idle GPUs. Close to
    ``(L - c) / L`` while ``c`` is small against a round.
    """
    if round_length_s <= 0:
        raise InvalidInputError("round length must be > 0")
    return round_length_s / (round_length_s + max(restart_s, 0.0))


def hears_notice(startup_s: float | None) -> bool:
    """Whether a job can take hops's checkpoint notice: its probe reported a run's start.

    The probe reports the start of every run at its first iteration; a job that
    never did runs without the probe (or a probe that cannot reach hopsd), and a
    notice to it would be waited out for nothing.
    """
    return startup_s is not None


def restart_price_s(
    checkpoint_s: float | None,
    startup_s: float | None,
    grace_s: float,
    restarts: int,
    ran_s: float,
    prior_s: float,
    *,
    whole_s: float | None = None,
    model_s: float | None = None,
) -> float | None:
    """What moving or preempting the job costs now (None: the prior, nothing learned).

    A job that ran before and never reported runs without the probe: a requeue
    loses its whole run so far (:func:`unreported_restart_s`). Otherwise what was
    measured of it (:func:`learned_restart_s`: a restart measured whole, its own
    or its model's, else its probe's parts). ``ran_s`` is 0 for a job not running.
    """
    if not hears_notice(startup_s) and restarts > 0 and ran_s > 0:
        return unreported_restart_s(ran_s, prior_s)
    return learned_restart_s(
        checkpoint_s, startup_s, grace_s, restarts, whole_s=whole_s, model_s=model_s
    )


def preemption_price(round_length_s: float, restart_s: float) -> float:
    """What preempting a running job costs, as a share of its value over one round.

    A preempted job pays its restart cost when it resumes: ``restart_s`` seconds
    without progress, ``restart_s / L`` of a round at its current rate. Charged
    at the preemption (the decision that causes it), a running job is worth
    ``1 + price`` times its rate to the plan, so a waiting job displaces it only
    when its own value exceeds that: two equal jobs never swap places. Capped at
    one round, like :func:`restart_discount`: a plan looks one round ahead.
    """
    if round_length_s <= 0:
        raise InvalidInputError("round length must be > 0")
    return min(max(restart_s, 0.0) / round_length_s, 1.0)


def unreported_restart_s(ran_s: float, prior_s: float) -> float:
    """Restart cost of a job that runs without the probe: all it did since it started.

    hops knows such a job only by a run that reported nothing (its profiling
    run); nothing shows that it checkpoints, so a requeue is taken to lose its
    run so far (at least the prior). Once that exceeds a round, moving it is
    worth nothing to the plan and preempting it costs a whole round: it keeps
    its GPUs unless a job gains more than that.
    """
    return max(ran_s, prior_s, 0.0)


def restart_discount(round_length_s: float, restart_penalty_s: float) -> float:
    """Share of a round a moved job still trains: ``(L - penalty) / L``, floored at 0."""
    if round_length_s <= 0:
        raise InvalidInputError("round length must be > 0")
    return max(round_length_s - restart_penalty_s, 0.0) / round_length_s
