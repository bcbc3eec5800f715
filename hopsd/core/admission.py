"""Admission: the one rule for whether a job's request can ever be scheduled.

hopsd applies it to every tagged job it observes, and ``hops submit`` applies
it before anything reaches Slurm, so nothing accepted at submit is refused
later for a reason already known at submit (a refusal only hopsd can know,
such as a cluster that shrank after submission, is still hopsd's to give).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopsd.core.capacity import node_sizes, per_type
from hopsd.core.model import Cluster


@dataclass(frozen=True)
class Admission:
    """The demand options that can run and, when the job must be refused, why."""

    demands: tuple[int, ...]
    refusal: str = ""

    @property
    def admitted(self) -> bool:
        return not self.refusal


def admit(
    demands: Sequence[int],
    total_samples: float,
    batch_size: int,
    *,
    largest_config: int,
    max_demand: int,
    per_type: Mapping[str, int] | None = None,
    types: Sequence[str] = (),
    exclude_types: Sequence[str] = (),
) -> Admission:
    """Keep the demand options a single-type configuration can hold, or refuse the job.

    ``largest_config`` is the GPUs of the biggest single-type configuration of
    the managed partitions; ``max_demand`` the admin's cap on any one option.
    With ``per_type`` (GPUs of each managed type), the job's GPU-type
    constraints are checked against the managed types and only the types they
    allow count towards the largest configuration.
    """
    if not demands:
        return Admission((), "no GPU counts given")
    where = "the managed partitions"
    if per_type is not None:
        allowed, refusal = allowed_types(types, exclude_types, per_type)
        if refusal:
            return Admission((), refusal)
        largest_config = max((per_type[t] for t in allowed), default=0)
        if types or exclude_types:
            where = f"the GPU types it may run on ({', '.join(allowed)})"
    if max(demands) > max_demand:
        return Admission(
            (), f"demand {max(demands)} GPUs exceeds scheduler.max_demand_gpus={max_demand}"
        )
    kept = runnable(demands, largest_config)
    if not kept:
        return Admission(
            (),
            f"smallest demand {min(demands)} GPUs exceeds the largest configuration "
            f"of {where} ({largest_config} GPUs)",
        )
    if total_samples < batch_size:
        return Admission((), f"total samples {total_samples:g} below one batch ({batch_size})")
    return Admission(kept)


def largest_config(cluster: Cluster) -> int:
    """GPUs of the cluster's biggest single-type configuration: placements never span
    types, so no demand above it can ever run."""
    return max(per_type(cluster, node_sizes(cluster)).values(), default=0)


def runnable(demands: Sequence[int], largest: int) -> tuple[int, ...]:
    """The demand options a configuration of at most ``largest`` GPUs can hold.

    The one rule every world applies: hopsd's adoption (:func:`admit`) and its
    snapshot (a cluster that shrank since), ``hops submit``, the simulator and
    replay keep the same options, so a job one of them can run the others can.
    """
    return tuple(d for d in demands if d <= largest)


def allowed_types(
    types: Sequence[str], exclude_types: Sequence[str], managed: Mapping[str, int]
) -> tuple[tuple[str, ...], str]:
    """The managed GPU types a job may run on, or a refusal naming what is wrong.

    A type the cluster does not manage is refused rather than ignored: a typo
    in ``--exclude-types`` would otherwise silently allow the very type meant.
    """
    unknown = sorted({t for t in (*types, *exclude_types) if t not in managed})
    if unknown:
        return (), (
            f"unknown GPU type {', '.join(unknown)} "
            f"(managed types: {', '.join(sorted(managed)) or 'none'})"
        )
    wanted = set(types) if types else set(managed)
    allowed = tuple(sorted(t for t in wanted if t not in set(exclude_types)))
    if not allowed:
        return (), "--types and --exclude-types leave no GPU type to run on"
    return allowed, ""


def type_limits(
    types: Sequence[str], exclude_types: Sequence[str], managed: Sequence[str]
) -> tuple[tuple[str, int], ...]:
    """The job's GPU-type constraints as per-type GPU limits (0: never on this type).

    This is the representation the core already honours everywhere
    (``Job.max_gpus``): candidates, every policy and the step's plan rules.
    """
    banned = set(exclude_types)
    if types:
        banned |= {t for t in managed if t not in set(types)}
    return tuple((t, 0) for t in sorted(banned))
