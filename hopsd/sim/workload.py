"""Seeded workload generators, and the job description the simulator replays.

A job's size is drawn as GPU-hours in one of four classes (S < 1 h, M 1-10 h,
L 10-50 h, XL > 50 h) and turned into ``total_samples`` with the model's
reference rate: the cluster-weighted mean of its single-GPU throughput over the
GPU types (hosts of factor 1.0). Demand sets hold up to 8 options in 1-16 GPUs;
larger classes ask for more GPUs.

Presets (``paper-64``, ``paper-512``) follow the Hops paper's evaluation; the
class mix 40/35/20/5 (S/M/L/XL) and the ranges below are this project's choice.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from hopsd.core.errors import InvalidInputError
from hopsd.sim.truth import GroundTruth


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job as a trace describes it (what a user would submit)."""

    job_id: str
    submit_time: float
    demands: tuple[int, ...]
    total_samples: float
    model: str
    user: str = ""
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.submit_time < 0:
            raise InvalidInputError(f"job {self.job_id!r}: submit_time must be >= 0")
        if not self.demands or list(self.demands) != sorted(set(self.demands)):
            raise InvalidInputError(f"job {self.job_id!r}: demands must be strictly increasing")
        if self.demands[0] <= 0:
            raise InvalidInputError(f"job {self.job_id!r}: demands must be positive")
        if self.total_samples <= 0:
            raise InvalidInputError(f"job {self.job_id!r}: total_samples must be > 0")
        if self.batch_size is not None and self.batch_size <= 0:
            raise InvalidInputError(f"job {self.job_id!r}: batch_size must be > 0")


@dataclass(frozen=True, slots=True)
class SizeClass:
    """GPU-hour range (log-uniform draw) and the demand bounds this class asks for.

    A demand set runs from a lowest count drawn from ``low_demands`` to a highest
    drawn from ``top_demands`` (never below the lowest), with random counts between;
    a rigid job asks for the highest alone.
    """

    name: str
    weight: float
    min_gpu_h: float
    max_gpu_h: float
    low_demands: tuple[int, ...]
    top_demands: tuple[int, ...]


#: S < 1 h, M 1-10 h, L 10-40 h, XL 50-80 h GPU-hours, mix 40/35/20/5.
DEFAULT_CLASSES: tuple[SizeClass, ...] = (
    SizeClass("S", 0.40, 0.1, 1.0, (1, 2), (1, 2, 4)),
    SizeClass("M", 0.35, 1.0, 10.0, (1, 2, 4), (2, 4, 8)),
    SizeClass("L", 0.20, 10.0, 40.0, (4, 8), (8, 16)),
    SizeClass("XL", 0.05, 50.0, 80.0, (8,), (16,)),
)


@dataclass(frozen=True)
class WorkloadSpec:
    """How to draw a workload: count, Poisson arrival rate, size classes, model mix."""

    n_jobs: int
    jobs_per_hour: float
    classes: tuple[SizeClass, ...] = DEFAULT_CLASSES
    models: Mapping[str, float] = field(default_factory=dict)  # name -> weight; empty = uniform
    n_users: int = 10
    rigid_share: float = 0.2
    max_options: int = 8
    max_gpus: int = 16

    def __post_init__(self) -> None:
        if self.n_jobs <= 0 or self.jobs_per_hour <= 0:
            raise InvalidInputError("a workload needs n_jobs > 0 and jobs_per_hour > 0")


PRESETS: dict[str, WorkloadSpec] = {
    "paper-64": WorkloadSpec(n_jobs=25, jobs_per_hour=10.0),
    "paper-512": WorkloadSpec(n_jobs=500, jobs_per_hour=100.0),
}


def reference_rate(truth: GroundTruth, model: str) -> float:
    """Cluster-weighted mean single-GPU samples/s of a model (defines its GPU-hours)."""
    spec = truth.model(model)
    every = truth.cluster.type_fractions()
    fractions = {t: f for t, f in every.items() if spec.runs_on(t)}
    if len(fractions) < len(every):  # only the types it fits, their shares scaled to one
        held = sum(fractions.values())
        fractions = {t: f / held for t, f in fractions.items()}
    return sum(f * truth.single_gpu(model, t) for t, f in fractions.items() if f > 0)


def _demands(rng: random.Random, cls: SizeClass, spec: WorkloadSpec) -> tuple[int, ...]:
    low = min(rng.choice(cls.low_demands), spec.max_gpus)
    top = min(max(rng.choice(cls.top_demands), low), spec.max_gpus)
    if rng.random() < spec.rigid_share:
        return (top,)
    middle = list(range(low + 1, top))
    n_extra = rng.randint(0, min(len(middle), spec.max_options - 2))
    return tuple(sorted({low, top, *rng.sample(middle, n_extra)}))


def generate(spec: WorkloadSpec, truth: GroundTruth, seed: int) -> list[JobSpec]:
    """Draw ``spec.n_jobs`` jobs with Poisson arrivals; same seed, same jobs."""
    rng = random.Random(f"workload-{seed}")
    names = sorted(spec.models) if spec.models else sorted(truth.models)
    weights = [spec.models.get(n, 1.0) for n in names] if spec.models else [1.0] * len(names)
    class_weights = [c.weight for c in spec.classes]
    jobs: list[JobSpec] = []
    now = 0.0
    for index in range(spec.n_jobs):
        if index > 0:
            now += rng.expovariate(spec.jobs_per_hour / 3600.0)
        cls = rng.choices(spec.classes, class_weights)[0]
        model = rng.choices(names, weights)[0]
        gpu_h = math.exp(rng.uniform(math.log(cls.min_gpu_h), math.log(cls.max_gpu_h)))
        samples = gpu_h * 3600.0 * reference_rate(truth, model)
        jobs.append(
            JobSpec(
                job_id=f"j{index:04d}",
                submit_time=round(now, 3),
                demands=_demands(rng, cls, spec),
                total_samples=round(samples),
                model=model,
                user=f"user{rng.randrange(spec.n_users):02d}",
            )
        )
    return jobs
