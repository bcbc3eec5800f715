"""hopsd.slurm: the Slurm port (protocol, CLI and pyslurm backends, pure parsers)."""

from hopsd.slurm.errors import (
    PlacementError,
    SlurmAccountingDisabledError,
    SlurmCommandError,
    SlurmError,
    SlurmJobNotFoundError,
    SlurmParseError,
    SlurmTimeoutError,
    SlurmUnavailableError,
    SubmitArgumentError,
    TagError,
)
from hopsd.slurm.factory import make_port, pyslurm_unavailable_reason
from hopsd.slurm.port import AccountingRecord, Placement, SlurmJob, SlurmNode, SlurmPort
from hopsd.slurm.tag import HopsTag

__all__ = [
    "AccountingRecord",
    "HopsTag",
    "Placement",
    "PlacementError",
    "SlurmAccountingDisabledError",
    "SlurmCommandError",
    "SlurmError",
    "SlurmJob",
    "SlurmJobNotFoundError",
    "SlurmNode",
    "SlurmParseError",
    "SlurmPort",
    "SlurmTimeoutError",
    "SlurmUnavailableError",
    "SubmitArgumentError",
    "TagError",
    "make_port",
    "pyslurm_unavailable_reason",
]
