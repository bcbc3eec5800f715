"""Admission: the one rule for whether a job's request can ever be scheduled.

hopsd applies it to every tagged job it observes, and ``hops submit`` applies
it before anything reaches Slurm, so nothing accepted at submit is refused
later for a reason already known at submit (a refusal only hopsd can know,
such as a cluster that shrank after submission, is still hopsd's to give).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
) -> Admission:
    """Keep the demand options a single-type configuration can hold, or refuse the job.

    ``largest_config`` is the GPUs of the biggest single-type configuration of
    the managed partitions; ``max_demand`` the admin's cap on any one option.
    """
    if not demands:
        return Admission((), "no GPU counts given")
    if max(demands) > max_demand:
        return Admission(
            (), f"demand {max(demands)} GPUs exceeds scheduler.max_demand_gpus={max_demand}"
        )
    kept = tuple(d for d in demands if d <= largest_config)
    if not kept:
        return Admission(
            (),
            f"smallest demand {min(demands)} GPUs exceeds the largest configuration "
            f"of the managed partitions ({largest_config} GPUs)",
        )
    if total_samples < batch_size:
        return Admission((), f"total samples {total_samples:g} below one batch ({batch_size})")
    return Admission(kept)
