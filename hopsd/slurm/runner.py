"""The one seam through which the CLI backend runs Slurm commands.

Everything the backend does goes through a ``Runner`` (``argv, timeout -> CompletedRun``),
so tests can record or count calls and a dead controller can be simulated by a
configuration, never by patching ``subprocess`` globally.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hopsd.slurm.errors import SlurmTimeoutError, SlurmUnavailableError


@dataclass(frozen=True, slots=True)
class CompletedRun:
    """What a finished command left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Runner(Protocol):
    """Runs ``argv`` and returns its result; raises ``SlurmTimeoutError`` past ``timeout``."""

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun: ...


@dataclass
class SubprocessRunner:
    """Runs commands as child processes, inheriting the environment (``SLURM_CONF`` included).

    ``env`` adds or overrides variables, e.g. a different ``SLURM_CONF``. The
    child gets its own process group so a timeout kills it and anything it
    spawned, instead of waiting on a pipe an orphan still holds.
    """

    env: Mapping[str, str] | None = None

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=self._environment(),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SlurmUnavailableError(f"`{argv[0]}` is not installed or not on PATH") from exc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise SlurmTimeoutError(
                f"`{' '.join(argv)}` gave no answer within {timeout:g} s "
                "(is slurmctld running and reachable?)"
            ) from exc
        return CompletedRun(tuple(argv), proc.returncode, out, err, time.monotonic() - started)

    def _environment(self) -> dict[str, str] | None:
        if not self.env:
            return None
        merged = dict(os.environ)
        merged.update(self.env)
        return merged


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill the child's whole process group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


@dataclass(frozen=True)
class PrefixRunner:
    """Puts ``prefix`` before every command: ``ssh slurm-head``, or a wrapper that runs
    another Slurm release's commands (``docker/cluster.sh`` writes ``slurm-exec``).

    Why a runner: every Slurm command of the CLI backend already goes through one,
    so hopsd on a service host needs no other change. The prefix is given as
    separate words and never goes through a shell on this side.
    """

    inner: Runner
    prefix: tuple[str, ...]

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        done = self.inner([*self.prefix, *argv], timeout)
        # Callers and their error messages speak of the Slurm command itself.
        return CompletedRun(tuple(argv), done.returncode, done.stdout, done.stderr, done.duration_s)


@dataclass
class CountingRunner:
    """Wraps a runner and records every argv it was asked to run (benchmarks and tests)."""

    inner: Runner
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        self.calls.append(tuple(argv))
        return self.inner(argv, timeout)
