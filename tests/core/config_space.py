"""Step 3 of a round as one call: every configuration of a job on one GPU type.

Planning builds a :class:`hopsd.core.configgen.TypeLayout` once per type and
pass and asks it for each job's groups; the tests ask for one job's whole
configuration space at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from hopsd.core.configgen import TypeLayout
from hopsd.core.model import Cluster, Configuration, Job


def generate_configurations(
    job: Job,
    gpu_type: str,
    free: Mapping[str, int],
    cluster: Cluster,
    high_sensitivity: bool,
    *,
    distinct: frozenset[str] = frozenset(),
    per_group: int | None = None,
    offset: int = 0,
) -> list[Configuration]:
    """All configurations of ``job`` on ``gpu_type`` given idle GPUs ``free`` (step 3).

    Nodes missing from ``free`` count as entirely idle. ``distinct`` names nodes
    the job must not be treated as interchangeable on (entity knowledge);
    ``per_group``/``offset`` keep only that many rotating representatives of each
    group of equivalent configurations (``None``: keep all).
    """
    layout = TypeLayout(cluster, gpu_type, free)
    groups = layout.groups(
        job, high_sensitivity, distinct=distinct, per_group=per_group, offset=offset
    )
    return [config for group in groups for config in group.configs]
