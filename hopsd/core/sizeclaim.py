"""Trust, then verify: when hops stops believing the size a job claims.

A job's size (its total samples) comes from its owner, and a small claim buys
a lot: under the latency ratio a job's expected run time (eq. 9) is its size at
the estimated throughput, so a job claiming 64 samples looks like a job of
seconds, is served first and is never worth preempting. The claim is checked
against what is measured, once per scheduling step, for hopsd, the simulator
and replay alike (:func:`hopsd.core.step.schedule_step` applies it):

* **time**: a running job whose work so far, at the estimated throughput where
  it runs, exceeds ``factor`` times its claimed samples plus ``slack_s`` seconds
  of that throughput. Work so far is its attained service (GPU-seconds scaled
  by each type's speed) at the samples per speed-scaled GPU-second of its
  current placement: a job that ran ``t`` seconds on one placement has done
  ``t * rate``, so the rule reads "ran longer than ``factor`` times what its
  claim needs, plus ``slack_s``". With the defaults (2, 300 s) an honest job
  is doubted only when the estimate is more than twice too fast *and* the
  job ran five minutes past its claim at it;
* **progress**: reported samples done above ``progress_tolerance`` times the
  claim (the last batch may overshoot a little).

A doubted job is sized from what Slurm and its reports say instead:
``done + time left * rate``, where ``done`` is the larger of its reported and
its estimated work so far, the time left is its Slurm time limit minus the
current run's elapsed time (a whole limit while it waits: a requeued job's next
run gets a new one), and ``rate`` is its estimated throughput where it runs (or
eq. 9's rate at its mean demand while it waits). A job without a time limit is
taken to be half done (``2 * done``). Never below the claim. So a lie never
buys more than an honest submission: once doubted, the job ranks as a job at
least as long as its time limit allows, which an honest job of its real size
(its limit covering its run) would not rank below. Before the rule fires the
lie buys at most ``factor`` times the claimed run plus ``slack_s``.

A verdict is sticky: the job carries it (``Job.size_doubt``, kept in hopsd's
ledger) so a restarted daemon, or a step after a requeue, keeps doubting
without the evidence having to show again, and the reason is logged once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hopsd.core.errors import HopsError, InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Job

DOUBT = "size claim not believed"


@dataclass(frozen=True)
class SizeRule:
    """When a claimed size stops being believed; ``factor`` 0 switches the check off."""

    factor: float = 2.0
    slack_s: float = 300.0
    progress_tolerance: float = 1.05

    def __post_init__(self) -> None:
        if not (self.factor == 0 or self.factor >= 1) or not math.isfinite(self.factor):
            raise InvalidInputError(f"size check factor must be 0 (off) or >= 1, got {self.factor}")
        if not 0 <= self.slack_s < math.inf:
            raise InvalidInputError(f"size check slack must be finite and >= 0, got {self.slack_s}")
        if not 1 <= self.progress_tolerance < math.inf:
            raise InvalidInputError("size check progress tolerance must be >= 1")

    @property
    def enabled(self) -> bool:
        return self.factor > 0


@dataclass(frozen=True)
class SizeVerdict:
    """A job whose claim is not believed: the size it is planned with, and why."""

    job_id: str
    claimed: float
    believed: float
    reason: str
    new: bool


@dataclass(frozen=True)
class _Pace:
    """A job's estimated throughput and how much work its attained service stands for."""

    rate: float  # samples/s where it runs (or at its mean demand while it waits)
    per_service: float  # samples per speed-scaled GPU-second

    def done(self, job: Job) -> float:
        return job.attained_service * self.per_service


def check_sizes(
    jobs: Sequence[Job], estimator: Estimator, rule: SizeRule
) -> tuple[tuple[Job, ...], tuple[SizeVerdict, ...]]:
    """The jobs with doubted claims replaced by their believed sizes, and every verdict."""
    if not rule.enabled:
        return tuple(jobs), ()
    out: list[Job] = []
    verdicts: list[SizeVerdict] = []
    for job in jobs:
        verdict = judge(job, estimator, rule)
        if verdict is None:
            out.append(job)
            continue
        verdicts.append(verdict)
        out.append(
            dataclasses.replace(job, total_samples=verdict.believed, size_doubt=verdict.reason)
        )
    return tuple(out), tuple(verdicts)


def judge(job: Job, estimator: Estimator, rule: SizeRule) -> SizeVerdict | None:
    """The verdict on one job's claim (None: believed)."""
    # off GPUs only its reported progress can contradict its claim: the pace, an estimate
    # for every GPU type, is not needed for most of a long queue
    if (
        not job.size_doubt
        and job.current is None
        and not _progress_evidence(job.samples_done, job.total_samples, rule)
    ):
        return None
    try:
        pace = _pace(job, estimator)
    except (HopsError, ArithmeticError, ValueError):
        return None  # nothing to measure the claim against
    reason = job.size_doubt or _evidence(job, pace, rule)
    if not reason:
        return None
    believed, how = believed_size(job, pace)
    full = reason if job.size_doubt else f"{DOUBT}: {reason}; {how}"
    return SizeVerdict(job.id, job.total_samples, believed, full, not job.size_doubt)


def _pace(job: Job, estimator: Estimator) -> _Pace:
    if job.current is not None:
        rate = estimator.throughput(job, job.current).samples_per_s
        speed = estimator.cluster.gpu_types[job.current.gpu_type].speed
        return _Pace(rate, rate / (job.current.total_gpus * speed))
    service_per_sample = 0.0
    for gpu_type, share in estimator.type_fractions.items():
        if share > 0:
            speed = estimator.cluster.gpu_types[gpu_type].speed
            service_per_sample += share * speed / estimator.type_per_gpu(job, gpu_type)
    rate = job.avg_demand / estimator.seconds_per_sample(job)
    return _Pace(rate, 1.0 / service_per_sample)


def progress_doubt(samples_done: float, claimed: float, rule: SizeRule) -> str:
    """The doubt reported progress alone casts on a claim ("" when none).

    hopsd asks it where it reads a report (its ledger keeps samples done at the
    claim); the verdict is then kept on the job like any other.
    """
    said = _progress_evidence(samples_done, claimed, rule)
    return f"{DOUBT}: {said}" if rule.enabled and said else ""


def _progress_evidence(samples_done: float, claimed: float, rule: SizeRule) -> str:
    if samples_done > rule.progress_tolerance * claimed:
        return f"reported {samples_done:.0f} samples done, more than the {claimed:g} claimed"
    return ""


def _evidence(job: Job, pace: _Pace, rule: SizeRule) -> str:
    """Why the claim cannot be true, or "" while nothing contradicts it."""
    claim = job.total_samples
    said = _progress_evidence(job.samples_done, claim, rule)
    if said:
        return said
    if job.current is None or pace.rate <= 0:
        return ""
    done = pace.done(job)
    if done <= rule.factor * claim + rule.slack_s * pace.rate:
        return ""
    need = claim / pace.rate
    return (
        f"ran about {done / pace.rate:.0f} s, more than {rule.factor:g}x the {need:.0f} s "
        f"its {claim:g} samples need at the estimated {pace.rate:.3g} samples/s "
        f"plus {rule.slack_s:g} s"
    )


def believed_size(job: Job, pace: _Pace) -> tuple[float, str]:
    """The size a doubted job is planned with, and how it was found (see the module)."""
    done = max(job.samples_done, pace.done(job))
    if job.time_limit_s is None:
        return max(2.0 * done, job.total_samples), "sized as half done (no time limit)"
    elapsed = job.run_elapsed_s if job.current is not None else 0.0
    left = max(job.time_limit_s - elapsed, 0.0)
    believed = max(done + left * pace.rate, job.total_samples)
    return believed, f"sized from its time limit ({job.time_limit_s:.0f} s)"
