"""hopsd with faults and an adoption filter injected: what live tests and benchmarks run.

    python tests/daemon/faulty_hopsd.py [--adopt-prefix P] [--crash-after-intents]
        [--crash-after-actions N] HOPSD-ARGUMENTS...

It runs hopsd's own main (:func:`hopsd.daemon.main.main`) with
:class:`hopsd.daemon.faults.Hooks`: ``--adopt-prefix`` keeps the daemon off
every job whose name lacks the prefix (others' jobs on the shared test
cluster), the crash options SIGKILL it right after a decision's intents are
committed (before any Slurm call), or right after its N-th Slurm action (e.g.
between the update and the release of a start). Every other argument is hopsd's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hopsd.daemon.faults import Hooks
from hopsd.daemon.main import main as hopsd_main
from hopsd.daemon.views import ObservedJob

#: This launcher, for a command line.
LAUNCHER = Path(__file__).resolve()


def die() -> None:
    """Die as ``kill -9`` would kill: no finally, no lease release, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Crash:
    """Faults that kill hopsd at one of the two points crash safety is tested at."""

    after_intents: bool = False
    after_actions: int | None = None

    def intents_committed(self) -> None:
        if self.after_intents:
            die()

    def action_taken(self, count: int) -> None:
        if self.after_actions is not None and count >= self.after_actions:
            die()


def prefix_filter(prefix: str | None) -> Callable[[ObservedJob], bool] | None:
    """Adopt only the jobs whose name starts with ``prefix`` (all without one)."""
    if not prefix:
        return None
    return lambda job: job.name.startswith(prefix)


def command(*hopsd_args: str, adopt_prefix: str = "", faults: Sequence[str] = ()) -> list[str]:
    """The command line of this launcher for ``hopsd HOPSD_ARGS`` with these hooks."""
    prefix = ["--adopt-prefix", adopt_prefix] if adopt_prefix else []
    return [sys.executable, str(LAUNCHER), *prefix, *faults, *hopsd_args]


def hooks_and_rest(argv: Sequence[str]) -> tuple[Hooks, list[str]]:
    """Split the launcher's own options (the hooks) from hopsd's arguments."""
    parser = argparse.ArgumentParser(prog="faulty_hopsd", allow_abbrev=False, add_help=False)
    parser.add_argument("--adopt-prefix", default=None)
    parser.add_argument("--crash-after-intents", action="store_true")
    parser.add_argument("--crash-after-actions", type=int, default=None)
    ours, rest = parser.parse_known_args(list(argv))
    if ours.crash_after_actions is not None and ours.crash_after_actions < 1:
        parser.error("--crash-after-actions must be >= 1")
    faults = Crash(ours.crash_after_intents, ours.crash_after_actions)
    return Hooks(faults=faults, adopt_filter=prefix_filter(ours.adopt_prefix)), rest


def main(argv: Sequence[str] | None = None) -> int:
    hooks, rest = hooks_and_rest(sys.argv[1:] if argv is None else argv)
    return hopsd_main(rest, hooks=hooks)


if __name__ == "__main__":
    sys.exit(main())
