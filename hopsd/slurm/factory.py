"""Choosing a Slurm backend: the CLI by default, slurmrestd or pyslurm on request."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from hopsd.core.errors import missing_extra
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.port import SlurmPort
from hopsd.slurm.runner import PrefixRunner, Runner, SubprocessRunner

log = logging.getLogger(__name__)
BACKENDS = ("cli", "pyslurm", "rest")


@dataclass(frozen=True)
class RestSettings:
    """Where slurmrestd listens, the file holding the JWT, and the data parser to speak."""

    url: str
    token_file: str
    version: str = "v0.0.42"


class SlurmSettings(Protocol):
    """The ``[slurm]`` keys of hops.conf the port is made from (``HopsConfig`` has them)."""

    @property
    def slurm_backend(self) -> str: ...
    @property
    def slurm_timeout_s(self) -> float: ...
    @property
    def slurm_command_prefix(self) -> tuple[str, ...]: ...
    @property
    def slurm_rest_url(self) -> str: ...
    @property
    def slurm_rest_token_file(self) -> str: ...
    @property
    def slurm_rest_version(self) -> str: ...


def pyslurm_unavailable_reason() -> str | None:
    """Why the pyslurm backend cannot be used here, or ``None`` when it can."""
    try:
        import hopsd.slurm.pyslurm_backend  # noqa: F401
    except ImportError as exc:
        return (
            f"pyslurm does not import ({exc}): PyPI's pyslurm 25.11 builds only against "
            "Slurm 25.11, and Debian ships Slurm 22.05, 24.11 and 26.05, so it must be "
            "built for this cluster's release by hand"
        )
    return None


def port_from_config(config: SlurmSettings, *, run: Runner | None = None) -> SlurmPort:
    """The port hops.conf's ``[slurm]`` section describes."""
    rest = None
    if config.slurm_backend == "rest":
        rest = RestSettings(
            config.slurm_rest_url, config.slurm_rest_token_file, config.slurm_rest_version
        )
    return make_port(
        config.slurm_backend,
        run=run,
        timeout_s=config.slurm_timeout_s,
        command_prefix=config.slurm_command_prefix,
        rest=rest,
    )


def make_port(
    backend: str = "cli",
    *,
    run: Runner | None = None,
    timeout_s: float = 30.0,
    command_prefix: Sequence[str] = (),
    rest: RestSettings | None = None,
) -> SlurmPort:
    """The port for ``backend``; an unusable pyslurm falls back to the CLI with a log line.

    ``command_prefix`` (``[slurm] command_prefix``) goes before every Slurm command,
    also the few the REST backend leaves to the commands (requeue, sacct).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown Slurm backend {backend!r}; choose one of {BACKENDS}")
    runner = run or SubprocessRunner()
    if command_prefix:
        runner = PrefixRunner(runner, tuple(command_prefix))
    cli = CliSlurm(run=runner, timeout_s=timeout_s)
    if backend == "cli":
        return cli
    if backend == "rest":
        if rest is None:
            raise ValueError("the 'rest' backend needs [slurm] rest_url and rest_token_file")
        try:
            from hopsd.slurm.rest_backend import rest_from_settings
        except ImportError as exc:  # httpx is the rest extra
            raise missing_extra("the 'rest' Slurm backend", "httpx", "rest") from exc

        return rest_from_settings(
            rest.url, rest.token_file, version=rest.version, timeout_s=timeout_s, cli=cli
        )
    reason = pyslurm_unavailable_reason()
    if reason is not None:
        log.warning(
            "Slurm backend 'pyslurm' unavailable: %s; falling back to the CLI backend", reason
        )
        return cli
    from hopsd.slurm.pyslurm_backend import PyslurmSlurm

    return PyslurmSlurm(cli=cli)
