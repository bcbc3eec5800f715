"""Typed failures of the Slurm port.

The daemon treats them differently: an unavailable controller means "skip this
tick and try again", a command error means "this one action was refused", a
malformed tag means "ignore this job's hops metadata".
"""

from __future__ import annotations

from collections.abc import Sequence

from hopsd.core.errors import HopsError, InvalidInputError


class SlurmError(HopsError):
    """Base class of every failure talking to Slurm."""


class SlurmCommandError(SlurmError):
    """A Slurm command ran and refused the request; names it and quotes Slurm's stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str, stdout: str = "") -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        self.stdout = stdout.strip()
        said = self.stderr or self.stdout or "(no output)"
        super().__init__(f"`{' '.join(self.argv)}` failed with exit code {returncode}: {said}")


class SlurmUnavailableError(SlurmError):
    """slurmctld (or its configuration) cannot be reached: the whole cluster is out of reach."""


class SlurmTimeoutError(SlurmUnavailableError):
    """A Slurm command did not answer within its deadline (a dead controller usually)."""


class SlurmAuthError(SlurmUnavailableError):
    """slurmrestd refused the credentials (no token, a bad or expired one).

    An unavailability, not a refusal of one action: nothing works until the
    token file is renewed, and the daemon's back-off then retries the tick.
    """


class SlurmParseError(SlurmError):
    """Slurm answered something the parsers cannot read (unknown version, truncated reply)."""


class TagError(InvalidInputError):
    """A hops tag that is malformed, oversized or out of range; the daemon ignores such jobs."""


class PlacementError(InvalidInputError):
    """A placement the port refuses to enact (empty, non-positive GPUs, unknown nodes)."""


class SlurmJobNotFoundError(SlurmCommandError):
    """Slurm does not know the job id (it finished long ago or never existed)."""


class SlurmAccountingDisabledError(SlurmCommandError):
    """``sacct`` is refused because the cluster runs without slurmdbd."""


class SubmitArgumentError(InvalidInputError):
    """Extra sbatch arguments that would override what hops must set itself."""
