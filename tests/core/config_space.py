"""Step 3 of a round as one call: every configuration of a job on one GPU type.

Planning builds a :class:`hopsd.core.configgen.TypeLayout` once per type and
pass and asks it for each job's groups; the tests ask for one job's whole
configuration space at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hopsd.core.configgen import TypeLayout
from hopsd.core.model import Cluster, Configuration, Job


def generate_configurations(
    job: Job,
    gpu_type: str,
    free: Mapping[str, int],
    cluster: Cluster,
    high_sensitivity: bool,
    **cut: Any,
) -> list[Configuration]:
    """All configurations of ``job`` on ``gpu_type`` given idle GPUs ``free`` (step 3).

    Nodes missing from ``free`` count as entirely idle; ``cut`` is
    :meth:`TypeLayout.groups`'s (``distinct``, ``per_group``, ``offset``).
    """
    groups = TypeLayout(cluster, gpu_type, free).groups(job, high_sensitivity, **cut)
    return [config for group in groups for config in group.configs]
