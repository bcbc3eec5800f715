"""How a job's time is charged: the one rule the daemon, the simulator and replay share.

A job's clock runs in one of three ways between two observations:

* **on GPUs** (running, a profiling run, a run restarting after a move): the
  interval is *service*, ``gpus * dt`` GPU-seconds and ``gpus * speed * dt``
  normalised by the GPU type's speed. LAS orders by the latter, fair share
  sums it per user, and the owner pays for every GPU it holds, training or
  not (a restart's start-up holds GPUs as surely as training does);
* **waiting** (queued, preempted, requeued, or waiting for a GPU to profile on):
  the interval is *wait*, the numerator of the latency ratio;
* **elsewhere** (ended, or running where hops cannot tell): nothing is charged.

A profiling run holds GPUs and trains the job: it is service, not waiting.
Live and simulated runs both charge it so; before, the daemon called it
service and the simulator waiting, and LR and LAS saw different inputs in the
two worlds.

Between two observations hopsd sees a job only as Slurm states it at the
second one; where Slurm states a run's start or end inside the interval
(:func:`charge_split`), the interval is split there: the wait ends at the
start, the service at the end. A short job that starts and ends between two
ticks is charged its run, not a wait as long as the interval.

A job's restart count follows one rule too (:func:`restarts_after`): every run
that is requeued to run again is a restart, a profiling run's end included.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hopsd.core.errors import InvalidInputError


class Clock(enum.Enum):
    """What a job's time counts as between two observations."""

    ON_GPUS = "on_gpus"
    WAITING = "waiting"
    NONE = "none"


@dataclass(frozen=True)
class Charge:
    """What one interval adds to a job's counters."""

    wait_s: float = 0.0
    service_gpu_s: float = 0.0
    service_norm: float = 0.0


NOTHING = Charge()


def clock_of(status: str, holds_gpus: bool) -> Clock:
    """The clock of a job in ``status`` (the ledger's or the simulator's state names).

    ``holds_gpus`` says whether it has a placement now: a profiling job runs
    on GPUs while its run is placed and waits between its runs.
    """
    if status == "running":  # where it runs not yet known: nothing to charge it with
        return Clock.ON_GPUS if holds_gpus else Clock.NONE
    if status == "profiling":
        return Clock.ON_GPUS if holds_gpus else Clock.WAITING
    if status in ("queued", "preempted", "requeued", "arriving"):
        return Clock.WAITING
    return Clock.NONE


def charge(clock: Clock, dt: float, gpus: int = 0, speed: float = 1.0) -> Charge:
    """What ``dt`` seconds on ``clock`` cost: service on ``gpus`` GPUs of ``speed``, or wait."""
    if dt < 0:
        raise InvalidInputError(f"an interval must be >= 0 s, got {dt}")
    if clock is Clock.ON_GPUS:
        if gpus <= 0:
            raise InvalidInputError(f"a job on GPUs holds at least one, got {gpus}")
        return Charge(service_gpu_s=gpus * dt, service_norm=gpus * speed * dt)
    if clock is Clock.WAITING:
        return Charge(wait_s=dt)
    return NOTHING


@dataclass(frozen=True)
class StatedRun:
    """A run as Slurm states it at an observation: its start, its end (None while it runs),
    the GPUs it holds and their type's speed (0 GPUs where Slurm names no nodes), and the
    resolution of the stated times (Slurm's are whole seconds, cut down: a run that began
    just after an observation can be stated as starting up to a second before it)."""

    start: float
    end: float | None
    gpus: int
    speed: float = 1.0
    resolution_s: float = 0.0


def charge_split(
    clock: Clock, since: float, now: float, gpus: int, speed: float, run: StatedRun | None
) -> Charge:
    """What the interval ``(since, now]`` costs a job whose clock was ``clock`` at ``since``,
    split at Slurm's stated start and end of ``run`` where they fall inside it.

    * waiting, and the run started inside the interval (to the times' resolution): wait
      until the start, service on the run's GPUs from then until its end or ``now`` (a start
      well before the interval is a past run's, e.g. of a job cancelled after its requeue:
      the rule below);
    * on GPUs, and the run ended inside the interval: service until the end, nothing after;
    * otherwise the whole interval on ``clock`` (:func:`charge`).

    Without the split, a job that started and ended between two observations was charged a
    wait as long as the interval and no service at all.
    """
    if now < since:
        raise InvalidInputError(f"an interval must be >= 0 s, got {now - since}")
    if run is None:
        return charge(clock, now - since, gpus, speed)
    end = now if run.end is None else min(max(run.end, since), now)
    if clock is Clock.WAITING and since - run.resolution_s < run.start <= now:
        wait = charge(Clock.WAITING, max(min(run.start, end) - since, 0.0))
        ran = max(end - max(run.start, since), 0.0)
        served = charge(Clock.ON_GPUS, ran, run.gpus, run.speed) if run.gpus else NOTHING
        return Charge(wait.wait_s, served.service_gpu_s, served.service_norm)
    if clock is Clock.ON_GPUS and run.end is not None:
        return charge(clock, end - since, gpus, speed)
    return charge(clock, now - since, gpus, speed)


class RunEnd(enum.Enum):
    """How one of a job's runs ends, as far as its restart count is concerned."""

    REQUEUED = "requeued"  # stopped to run again: a profiling run's end, a move, a preemption
    UNSTARTED = "unstarted"  # released, then held again before it ever ran
    ENDED = "ended"  # the job is over


def restarts_after(restarts: int, end: RunEnd) -> int:
    """The job's restart count once one of its runs has ended so.

    A requeued run is a restart whatever asked for it (the profiling queue
    handing the job to its next GPU type, a move, a preemption): the job's
    process stops, starts again and pays its start-up. Slurm counts requeues
    the same way, so hopsd takes the count from Slurm and the simulator counts
    by this rule; the count is what ``hops status`` shows and what a learned
    restart price depends on (:func:`hopsd.core.gains.learned_restart_s`).
    """
    if restarts < 0:
        raise InvalidInputError(f"a restart count must be >= 0, got {restarts}")
    return restarts + 1 if end is RunEnd.REQUEUED else restarts
