"""The Slurm port as hops.conf describes it, for the submitting process and inside jobs.

One place so the watcher (state reads), ``Job.cancel`` and the job's own
requeue all use the backend the operator configured (CLI, ssh prefix, REST).
"""

from __future__ import annotations

from hopsd.config import load_config
from hopsd.slurm.factory import port_from_config
from hopsd.slurm.port import SlurmPort


def configured_port(config_path: str | None = None) -> SlurmPort:
    """The port of ``config_path``, else of ``HOPS_CONF``, else hops's defaults."""
    return port_from_config(load_config(config_path))
