"""Turning a failed command into the right typed error, from what Slurm printed."""

from __future__ import annotations

from hopsd.slurm.errors import (
    SlurmAccountingDisabledError,
    SlurmCommandError,
    SlurmError,
    SlurmJobNotFoundError,
    SlurmUnavailableError,
)
from hopsd.slurm.runner import CompletedRun

# Messages meaning "the controller (or the accounting daemon) is out of reach".
UNAVAILABLE_MARKERS = (
    "Unable to contact slurm controller",
    "Socket timed out on send/recv",
    "Could not establish a configuration source",
    "Zero Bytes were transmitted or received",
    "Problem talking to the database",
    "Connection refused",
    "Communication connection failure",
    "slurm_persist_conn_open",
)
NOT_FOUND_MARKERS = ("Invalid job id specified", "Invalid job id")
ACCOUNTING_OFF_MARKERS = ("accounting storage is disabled",)


def error_for(result: CompletedRun) -> SlurmError:
    """The typed error a failed ``result`` stands for."""
    said = f"{result.stderr}\n{result.stdout}"
    if any(m in said for m in UNAVAILABLE_MARKERS):
        quoted = (result.stderr or result.stdout).strip()
        return SlurmUnavailableError(f"`{' '.join(result.argv)}`: {quoted}")
    if any(m.lower() in said.lower() for m in ACCOUNTING_OFF_MARKERS):
        return SlurmAccountingDisabledError(
            result.argv, result.returncode, result.stderr, result.stdout
        )
    if any(m in said for m in NOT_FOUND_MARKERS):
        return SlurmJobNotFoundError(result.argv, result.returncode, result.stderr, result.stdout)
    return SlurmCommandError(result.argv, result.returncode, result.stderr, result.stdout)
