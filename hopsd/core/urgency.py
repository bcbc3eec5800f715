"""Early rounds: a queued job whose latency ratio passes a bound gets a round before the clock's.

A round replans everything: it may shrink or move running jobs to make room.
Between rounds only idle GPUs are handed out (fragment plans), so where hops has
grown its running jobs over every GPU, a job that arrives just after a round
waits up to a whole round for one. For a short job that wait is its latency
ratio (LR, eq. 8: time waited over the age it would run unhindered): on Sia's
published workloads short jobs of 4-6 minutes waited up to 267 s of a 300 s
round, an LR of 0.94, where a scheduler with 60 s rounds kept every LR under
0.25. Shorter rounds for everyone cost what a round costs: more moves of long
jobs, and a round's restart price judged over less time.

So the clock keeps its length, and a round also starts early at the instant a
queued job's LR passes ``bound``, at most once per job (a job that had
passed it before the last round was seen by that round) and never sooner than
``gap_s`` after the last round, so a burst of arrivals shares one round.
"""

from __future__ import annotations

from collections.abc import Callable

from hopsd.core.estimator import Estimator
from hopsd.core.model import Job
from hopsd.core.priorities import PriorityContext, age
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot

#: A job's age (eq. 9, seconds): what its latency ratio divides by.
AgeOf = Callable[[Job], float]


def asked_early_round(
    policy: object, snapshot: Snapshot, settings: Settings, last_round_at: float | None
) -> float | None:
    """The early round ``policy`` asks for, if it has the optional ``early_round_at`` method.

    The method is optional so a policy written for the three-method protocol
    keeps working (it then plans on the clock alone); a wrapper policy (closing
    nodes, quotas) passes the question on to the policy it wraps through here.
    """
    hook = getattr(policy, "early_round_at", None)
    if hook is None:
        return None
    at: float | None = hook(snapshot, settings, last_round_at)
    return at


def early_round_at(
    snapshot: Snapshot,
    bound: float,
    last_round_at: float | None,
    gap_s: float,
    age_of: AgeOf,
) -> float | None:
    """When the next early round is due (None: none is), given the last round's instant.

    The instant is the first one at which a queued job's LR reaches ``bound``
    among jobs that reach it after the last round, moved to ``gap_s`` after
    that round when it comes sooner. An instant in the past means: due now.
    """
    if bound <= 0.0 or last_round_at is None or not snapshot.queued:
        return None
    earliest: float | None = None
    for job in snapshot.queued:
        crossing = snapshot.now + bound * age_of(job) - job.wait_time
        if crossing <= last_round_at:
            continue  # the last round already saw it past the bound
        if earliest is None or crossing < earliest:
            earliest = crossing
    if earliest is None:
        return None
    return max(earliest, last_round_at + gap_s)


class RoundAges:
    """Ages of the queued jobs, each estimated once a round, when first asked.

    hopsd asks for the early round at every tick, with every queued job of a
    large centre in the snapshot; an age changes only as the throughput store
    learns, which a round takes in, so one estimate per job and round serves.
    A job first asked about later in the round is estimated on the store of
    that step (a job that just finished profiling is seen with its profiles).
    """

    def __init__(self) -> None:
        self._round: float | None = None
        self._ages: dict[str, float] = {}

    def age_of(self, snapshot: Snapshot, settings: Settings, round_at: float | None) -> AgeOf:
        """The age function for ``snapshot``; estimates are dropped when a new round began."""
        if round_at != self._round:
            self._round = round_at
            self._ages = {}
        ages = self._ages
        ctx: PriorityContext | None = None  # built on the first job not estimated yet

        def age_of(job: Job) -> float:
            nonlocal ctx
            found = ages.get(job.id)
            if found is None:
                if ctx is None:
                    estimator = Estimator(snapshot.cluster, snapshot.store, settings)
                    ctx = PriorityContext(
                        snapshot.now, snapshot.cluster, estimator, len(snapshot.jobs)
                    )
                found = ages[job.id] = age(job, ctx)
            return found

        return age_of
