"""Choosing a Slurm backend: the CLI by default, pyslurm on request when it imports."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.port import SlurmPort
from hopsd.slurm.runner import PrefixRunner, Runner, SubprocessRunner

log = logging.getLogger(__name__)
BACKENDS = ("cli", "pyslurm")


def pyslurm_unavailable_reason() -> str | None:
    """Why the pyslurm backend cannot be used here, or ``None`` when it can."""
    try:
        import hopsd.slurm.pyslurm_backend  # noqa: F401
    except ImportError as exc:
        return f"pyslurm does not import ({exc}); it must be built for this Slurm release"
    return None


def make_port(
    backend: str = "cli",
    *,
    run: Runner | None = None,
    timeout_s: float = 30.0,
    command_prefix: Sequence[str] = (),
) -> SlurmPort:
    """The port for ``backend``; an unusable pyslurm falls back to the CLI with a log line.

    ``command_prefix`` (``[slurm] command_prefix``) goes before every Slurm command.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown Slurm backend {backend!r}; choose one of {BACKENDS}")
    runner = run or SubprocessRunner()
    if command_prefix:
        runner = PrefixRunner(runner, tuple(command_prefix))
    cli = CliSlurm(run=runner, timeout_s=timeout_s)
    if backend == "cli":
        return cli
    reason = pyslurm_unavailable_reason()
    if reason is not None:
        log.warning(
            "Slurm backend 'pyslurm' unavailable: %s; falling back to the CLI backend", reason
        )
        return cli
    from hopsd.slurm.pyslurm_backend import PyslurmSlurm

    return PyslurmSlurm(cli=cli)
