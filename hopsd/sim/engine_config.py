"""The simulated world's settings, and the error a simulation stops on.

Kept apart from the engine so the tools that build a simulation (replay, the
knobs and seeds of an experiment, forecasts) name its settings without the
event loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from hopsd.core.errors import HopsError
from hopsd.core.settings import Settings


class SimulationError(HopsError):
    """The simulation cannot go on (a job can never run, a policy broke the rules)."""


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of the simulated world (the planner's own knobs live in ``settings``)."""

    settings: Settings = field(default_factory=Settings)
    profile_s: float = 60.0  # all of a job's profiling runs; 0: profiles known at arrival
    adoption_s: float = 0.0
    profile_noise: float = 0.03
    measure_noise: float = 0.03
    measure_after_s: float = 60.0
    fragments: bool = True
    refill_after_round: bool = True
    # Running jobs ending within this many seconds are not moved or preempted. hopsd
    # spares within max(restart penalty, two ticks); the published simulators the
    # baselines follow spare nothing, so 0 here unless a run asks for it.
    spare_guard_s: float = 0.0
    max_horizon_s: float = 60 * 86400.0
    seed: int = 0
    # The solver stops on work done (branch-and-bound nodes), never on seconds: a
    # time limit would let a busy or slow machine cut a solve short and change a plan.
    solver_by_work: bool = True
    # A forecast begins mid-life: at ``start_s`` the resumed jobs are on the cluster, and
    # the first round is due at ``first_round_s`` (the live round clock's next round).
    start_s: float = 0.0
    first_round_s: float = 0.0
    # A replay's rounds fall where hopsd's did: these instants (sorted), then one round
    # length apart after the last (a policy's early round moves the clock on as usual).
    round_times: tuple[float, ...] = ()
    partial: bool = False  # stop at the horizon with jobs unfinished instead of failing
    # A forecast stops planning once nothing waits or arrives (each running job then ends
    # at its pace where it is) and after ``max_rounds`` rounds (the rest left open).
    settle_when_served: bool = False
    max_rounds: int | None = None
    # ... and after ``max_steps`` scheduling steps (rounds, fragments, idle ones alike).
    max_steps: int | None = None
    # A job that ended frees its GPUs this much later (hopsd sees an end at its next
    # tick); its recorded end is when it ended.
    seen_after_end_s: float = 0.0
    # A move or preemption first gives the job a checkpoint notice: it runs on where it is
    # for this long, its target GPUs reserved (:mod:`hopsd.core.reserve`), then is requeued
    # and placed, as hopsd enacts it (hops.conf's checkpoint_grace_s, 120 s by default, for
    # a job whose probe reported). 0: moves are instant, as the published simulators the
    # baselines follow have them.
    notice_grace_s: float = 0.0


#: Branch-and-bound nodes per solve in a simulation. On paper-512 every solve of
#: hops and Sia closes the 1 % gap at the root node, so the limit only guards
#: against a pathological model running on unbounded.
SIM_NODE_LIMIT = 10_000


def by_work(settings: Settings) -> Settings:
    """``settings`` with the solver bounded by nodes instead of seconds (same on every machine)."""
    nodes = settings.node_limit or SIM_NODE_LIMIT
    return replace(settings, time_limit_s=math.inf, node_limit=nodes)
