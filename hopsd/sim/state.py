"""What the simulator keeps: each job's state and counters, the jobs a forecast
resumes, per-round statistics and a run's result.

The engine (:mod:`hopsd.sim.engine`) updates these as time advances;
:mod:`hopsd.sim.metrics` and the plots read them afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Cluster, Configuration
from hopsd.core.throughput import InMemoryThroughputStore, PhaseProfile
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.truth import ModelSpec
from hopsd.sim.workload import JobSpec


@dataclass
class JobState:
    """Everything the simulator tracks about one job."""

    spec: JobSpec
    model: ModelSpec
    status: str = "pending"  # pending | arriving | profiling | queued | running | done
    ready_at: float = math.inf
    config: Configuration | None = None
    rate: float = 0.0
    samples_done: float = 0.0
    attained_service: float = 0.0  # GPU-seconds normalised by the types' speeds
    service_gpu_s: float = 0.0
    wait_time: float = 0.0
    run_time: float = 0.0
    penalty_until: float = 0.0
    config_since: float = 0.0
    has_run: bool = False
    restarts: int = 0
    first_start: float | None = None
    first_config: Configuration | None = None
    trained_at: float | None = None  # when its last sample was trained (its end)
    finish_time: float | None = None
    active_integral_at_submit: float = 0.0
    active_integral_at_finish: float = 0.0
    types_used: set[str] = field(default_factory=set)
    profiled: set[str] = field(default_factory=set)
    profiling_since: float = 0.0
    profiling_runs: int = 0

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size or self.model.batch_size

    def finish_eta(self, now: float, seen_after_s: float = 0.0) -> float:
        """When the job ends at its pace (plus ``seen_after_s``: when its end is seen)."""
        if self.status != "running" or self.rate <= 0:
            return math.inf
        if seen_after_s > 0 and self.trained_at is not None:
            return self.trained_at + seen_after_s
        left = self.spec.total_samples - self.samples_done
        return max(now, self.penalty_until) + max(left, 0.0) / self.rate + seen_after_s


@dataclass(frozen=True)
class Flight:
    """A move, preemption or start the simulator is enacting under a notice's grace.

    At ``until`` the job is requeued (when it ``runs_on`` its current GPUs, having
    heard the notice) and placed on ``target`` (None: a preemption, it queues).
    Until then the scheduler plans around it (:func:`hopsd.core.reserve.reserve`).
    """

    until: float
    target: Configuration | None
    runs_on: bool


@dataclass(frozen=True)
class Resumed:
    """A job already on the cluster when the run begins (a forecast from the live state).

    ``status`` is ``queued`` or ``running`` (on ``config``, without progress until
    ``busy_until``: a restart under way) or ``arriving`` (in its profiling phase,
    queued at ``ready_at``). The counters carry on from what hopsd charged so far.
    """

    status: str
    samples_done: float = 0.0
    wait_time: float = 0.0
    attained_service: float = 0.0
    restarts: int = 0
    has_run: bool = False
    config: Configuration | None = None
    busy_until: float = 0.0
    ready_at: float = 0.0
    first_start: float | None = None
    #: an arriving job whose profiling is under way live: at ``ready_at`` it is queued
    #: knowing every type, not profiled again
    profiled: bool = False
    #: its decided actions are still being taken live (a notice's grace, a placement
    #: waiting for its release): the engine enacts them as its own flight
    flight: Flight | None = None

    def __post_init__(self) -> None:
        if self.status not in ("queued", "running", "arriving"):
            raise InvalidInputError(
                f"a resumed job is queued, running or arriving, not {self.status!r}"
            )
        if (self.status == "running") != (self.config is not None):
            raise InvalidInputError("a resumed job has a configuration exactly when it runs")


@dataclass
class RoundStat:
    """What one round looked like (for the idle-GPU metric and the time-line plot)."""

    start: float
    idle_gpu_s_waiting: float = 0.0
    usable_idle_gpu_s: float = 0.0  # idle GPUs of types where some waiting job's R1 fits
    waiting_s: float = 0.0
    used_gpu_s: float = 0.0
    duration: float = 0.0
    effective_throughput: float = 0.0  # reference-GPU equivalents of work done per second


@dataclass
class EngineResult:
    """Raw outcome of one run; :mod:`hopsd.sim.metrics` turns it into figures."""

    policy: str
    jobs: list[JobState]
    rounds: list[RoundStat]
    total_gpus: int
    preemptions: int
    moves: int
    plans: int
    fragment_plans: int
    unmentioned_running: int
    wall_planning_s: float = 0.0


class EngineState:
    """The engine's state that both its mixins use.

    :class:`~hopsd.sim.scheduler_view.SchedulerView` builds the core's snapshot from
    it, :class:`~hopsd.sim.enact.PlanEnactor` applies plans to it. The engine sets it;
    declared once here so the two agree on its types.
    """

    cluster: Cluster
    config: EngineConfig
    now: float
    store: InMemoryThroughputStore
    active: dict[str, JobState]
    used: dict[str, int]
    profiling_used: dict[str, int]
    known: dict[tuple[str, int], dict[str, PhaseProfile]]
    # jobs whose move, preemption or start waits for a notice's grace to end
    flights: dict[str, Flight]

    def _landing(self) -> tuple[str, ...]:
        """The waiting starts of ``flights`` that may start now (the scheduler view's)."""
        raise NotImplementedError
