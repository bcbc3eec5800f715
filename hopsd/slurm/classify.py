"""One table of what Slurm's failures mean, for every backend.

The command backend sees Slurm's words on stderr; slurmrestd hands the same
words plus Slurm's error number (``slurm_errno.h``). Both are read here, so a
failure means the same typed error whichever way hops talks to Slurm.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum

from hopsd.slurm.errors import (
    SlurmAccountingDisabledError,
    SlurmCommandError,
    SlurmError,
    SlurmJobNotFoundError,
    SlurmUnavailableError,
)
from hopsd.slurm.runner import CompletedRun

#: Slurm error numbers (slurm_errno.h) hops tells apart.
SLURM_PROTOCOL_AUTHENTICATION_ERROR = 1007
ESLURM_INVALID_JOB_ID = 2017
ESLURM_ALREADY_DONE = 2021  # "Job/step already completing or completed"
ESLURM_AUTH_CRED_INVALID = 6001
AUTH_ERRORS = frozenset({SLURM_PROTOCOL_AUTHENTICATION_ERROR, ESLURM_AUTH_CRED_INVALID})

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
    # what `scontrol hold`, `release` and `requeuehold` say while slurmctld is down
    # (22.05 and 24.11; other commands say "Unable to contact"): read as a refusal,
    # a restart of slurmctld would fail the chain instead of leaving it to resume
    "Unexpected message received",
)
NOT_FOUND_MARKERS = ("Invalid job id specified", "Invalid job id")
ACCOUNTING_OFF_MARKERS = ("accounting storage is disabled",)
ALREADY_DONE_MARKERS = ("already completing or completed",)


class Failure(Enum):
    """What a Slurm failure means to hops, whatever backend reported it."""

    AUTH = "auth"
    UNAVAILABLE = "unavailable"
    ACCOUNTING_OFF = "accounting_off"
    NOT_FOUND = "not_found"
    ALREADY_DONE = "already_done"
    OTHER = "other"


def failure_of(said: str, numbers: Collection[object] = ()) -> Failure:
    """The meaning of Slurm's words ``said`` and error ``numbers``.

    Authentication comes first (a refused credential also reads as a failed
    connection), then reachability: an unreachable controller must never be
    read as "no such job", which would make hops forget a job.
    """
    if any(n in AUTH_ERRORS for n in numbers):
        return Failure.AUTH
    if any(m in said for m in UNAVAILABLE_MARKERS):
        return Failure.UNAVAILABLE
    if any(m.lower() in said.lower() for m in ACCOUNTING_OFF_MARKERS):
        return Failure.ACCOUNTING_OFF
    if ESLURM_INVALID_JOB_ID in numbers or any(m in said for m in NOT_FOUND_MARKERS):
        return Failure.NOT_FOUND
    if ESLURM_ALREADY_DONE in numbers or any(m in said for m in ALREADY_DONE_MARKERS):
        return Failure.ALREADY_DONE
    return Failure.OTHER


def error_for(result: CompletedRun) -> SlurmError:
    """The typed error a failed command ``result`` stands for."""
    failure = failure_of(f"{result.stderr}\n{result.stdout}")
    if failure is Failure.UNAVAILABLE:
        quoted = (result.stderr or result.stdout).strip()
        return SlurmUnavailableError(f"`{' '.join(result.argv)}`: {quoted}")
    if failure is Failure.ACCOUNTING_OFF:
        return SlurmAccountingDisabledError(
            result.argv, result.returncode, result.stderr, result.stdout
        )
    if failure is Failure.NOT_FOUND:
        return SlurmJobNotFoundError(result.argv, result.returncode, result.stderr, result.stdout)
    return SlurmCommandError(result.argv, result.returncode, result.stderr, result.stdout)
