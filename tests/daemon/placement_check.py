"""Whether Slurm holds a job where hops placed it: the contract and live tests' check.

After ``update_pending`` Slurm reports the request back in its own spelling,
and a running job shows where Slurm put its GPUs (an uneven job total is
spread by Slurm itself); these compare either with the placement asked for.
"""

from __future__ import annotations

from hopsd.slurm.port import Placement, SlurmJob


def gres_request(placement: Placement) -> str:
    """The GPU request Slurm reports back after ``update_pending`` (``gres:gpu:M``)."""
    if placement.uniform:
        return f"gres:gpu:{placement.gpus_by_node[0][1]}"
    return f"gres:gpu:{placement.total_gpus}"


def mismatches(placement: Placement, job: SlurmJob) -> list[str]:
    """How a running job differs from ``placement`` (empty when it matches)."""
    problems = []
    if job.partition != placement.partition:
        problems.append(f"partition {job.partition!r} != {placement.partition!r}")
    if job.placement != placement.as_dict():
        problems.append(f"GPUs per node {job.placement} != {placement.as_dict()}")
    return problems


def pending_mismatches(placement: Placement, job: SlurmJob) -> list[str]:
    """How a pending job's request differs from ``placement`` after an update."""
    problems = []
    if job.partition != placement.partition:
        problems.append(f"partition {job.partition!r} != {placement.partition!r}")
    if set(job.requested_nodes) != set(placement.nodes):
        problems.append(f"requested nodes {job.requested_nodes} != {placement.nodes}")
    asked = gres_request(placement)
    if job.gres_request.replace("gres/", "gres:") != asked:
        problems.append(f"GPU request {job.gres_request!r} != {asked!r}")
    return problems
