"""The Hops method itself: the round planner with a chosen queue priority.

``hops`` plans with the priority and lambda of the settings it is given (the
defaults are the paper's: latency ratio, lambda 1), so an operator's
``[scheduler] priority`` applies; ``hops-lr`` fixes those, ``hops-ftf`` uses the
finish-time fairness priority with lambda 2; ``hops-las``, ``hops-sjf`` and
``hops-srtf`` the orderings of the paper's ablation, with lambda 1. The
operator's other settings (sigma, restart penalty, round length, solver bounds)
pass through.
"""

from __future__ import annotations

from dataclasses import replace

from hopsd.core.model import Plan
from hopsd.core.policies import Policy, PolicyFactory, register_policy
from hopsd.core.rounds import plan_fragment, plan_round
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot


class HopsPolicy:
    """Calls :func:`plan_round` / :func:`plan_fragment` with this policy's priority and lambda."""

    def __init__(self, name: str, priority: str | None, lam: float | None) -> None:
        self.name = name
        self.priority = priority
        self.lam = lam

    def _settings(self, settings: Settings) -> Settings:
        if self.priority is None or self.lam is None:
            return settings
        return replace(settings, priority=self.priority, lam=self.lam)

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return plan_round(snapshot, self._settings(settings))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return plan_fragment(snapshot, self._settings(settings))


#: policy name -> (priority, lambda); None: the settings' own
VARIANTS: dict[str, tuple[str | None, float | None]] = {
    "hops": (None, None),
    "hops-lr": ("lr", 1.0),
    "hops-ftf": ("ftf", 2.0),
    "hops-las": ("las", 1.0),
    "hops-sjf": ("sjf", 1.0),
    "hops-srtf": ("srtf", 1.0),
}


def _factory(name: str, priority: str | None, lam: float | None) -> PolicyFactory:
    def build() -> Policy:
        return HopsPolicy(name, priority, lam)

    return build


for _name, (_priority, _lam) in VARIANTS.items():
    register_policy(_name, _factory(_name, _priority, _lam))
