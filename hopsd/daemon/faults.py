"""The daemon's injection port: faults where crash safety is at stake, and an adoption filter.

Exactly-once enactment is only proven by killing hopsd where a crash hurts most:
right after a decision's intents are committed and before any Slurm call, or
between two Slurm actions of one chain. Those two points are :class:`Faults`
methods the tick and the enactor call; production passes :class:`NoFaults` and
so never dies there, nor reads any variable asking it to. A caller that builds
the daemon itself (a test's launcher, a benchmark) passes :class:`Hooks` to
``hopsd.daemon.main.main`` with faults of its own, and may narrow adoption to
its own jobs so that it never touches others' on a shared cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hopsd.daemon.views import ObservedJob


class Faults(Protocol):
    """Where an injected fault may strike; each call returns (no fault) or never does."""

    def intents_committed(self) -> None:
        """A decision's intents are in the ledger; none of their Slurm calls is made yet."""

    def action_taken(self, count: int) -> None:
        """The ``count``-th Slurm action of this process succeeded and is marked done."""


class NoFaults:
    """Production's faults: none."""

    def intents_committed(self) -> None:
        return None

    def action_taken(self, count: int) -> None:
        return None


@dataclass(frozen=True)
class Hooks:
    """What a caller of the daemon's main injects; the default is production's."""

    faults: Faults = field(default_factory=NoFaults)
    # Adopt only the hops jobs it accepts (None: all of them).
    adopt_filter: Callable[[ObservedJob], bool] | None = None
