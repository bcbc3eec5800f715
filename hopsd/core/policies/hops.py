"""The Hops method itself: the round planner with a chosen queue priority.

``hops`` plans with the priority and lambda of the settings it is given (the
defaults are the paper's: latency ratio, lambda 1), so an operator's
``[scheduler] priority`` applies; ``hops-lr`` fixes those, ``hops-ftf`` uses the
finish-time fairness priority with lambda 2; ``hops-las``, ``hops-sjf`` and
``hops-srtf`` the orderings of the paper's ablation, with lambda 1. Each variant
is the same policy with other defaults for its own settings, so a
``[policies.NAME]`` table may still change them. The operator's other settings
(sigma, restart penalty, round length, solver bounds) pass through.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from hopsd.core.model import Plan
from hopsd.core.policies import PolicySpec
from hopsd.core.priorities import priority_names
from hopsd.core.rounds import plan_fragment, plan_round
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.typed_settings import SettingsError
from hopsd.core.urgency import RoundAges, early_round_at


@dataclass(frozen=True)
class HopsSettings:
    """``[policies.hops]`` (and its variants): the queue priority and lambda of eq. 11.

    Unset (the ``hops`` defaults), ``[scheduler] priority`` and ``lambda`` apply,
    so an operator who tunes the method in one place is not overridden.
    """

    priority: str | None = field(
        default=None, metadata={"help": "queue priority; unset: [scheduler] priority"}
    )
    lam: float | None = field(
        default=None, metadata={"help": "lambda of eq. 11; unset: [scheduler] lambda"}
    )
    early_round_lr: float = field(
        default=0.0,
        metadata={
            "help": "start a round early when a queued job's latency ratio passes this "
            "(0: rounds only on the clock; see hopsd.core.urgency)"
        },
    )
    early_round_gap_s: float = field(
        default=60.0, metadata={"help": "least seconds between a round and an early one"}
    )

    def __post_init__(self) -> None:
        if self.priority is not None and self.priority not in priority_names():
            known = ", ".join(priority_names())
            raise SettingsError("priority", f"unknown {self.priority!r} (known: {known})")
        if self.lam is not None and self.lam < 0:
            raise SettingsError("lam", f"must be >= 0, got {self.lam}")
        if self.early_round_lr < 0:
            raise SettingsError("early_round_lr", f"must be >= 0, got {self.early_round_lr}")
        if self.early_round_gap_s < 0:
            raise SettingsError("early_round_gap_s", f"must be >= 0, got {self.early_round_gap_s}")


class HopsPolicy:
    """Calls :func:`plan_round` / :func:`plan_fragment` with this policy's priority and lambda."""

    def __init__(self, name: str, own: HopsSettings) -> None:
        self.name = name
        self.own = own
        self._ages = RoundAges()

    def _settings(self, settings: Settings) -> Settings:
        if self.own.priority is not None:
            settings = replace(settings, priority=self.own.priority)
        if self.own.lam is not None:
            settings = replace(settings, lam=self.own.lam)
        return settings

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return plan_round(snapshot, self._settings(settings))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return plan_fragment(snapshot, self._settings(settings))

    def early_round_at(
        self, snapshot: Snapshot, settings: Settings, last_round_at: float | None
    ) -> float | None:
        """When a round is due before the clock's: :func:`hopsd.core.urgency.early_round_at`."""
        own = self.own
        age_of = self._ages.age_of(snapshot, settings, last_round_at)
        return early_round_at(
            snapshot, own.early_round_lr, last_round_at, own.early_round_gap_s, age_of
        )


def _spec(name: str, defaults: HopsSettings, summary: str) -> PolicySpec[HopsSettings]:
    return PolicySpec(name, partial(HopsPolicy, name), defaults, summary)


HOPS = _spec("hops", HopsSettings(), "the Hops method, with [scheduler] priority and lambda")
HOPS_LR = _spec("hops-lr", HopsSettings("lr", 1.0), "Hops with latency-ratio priority, lambda 1")
HOPS_FTF = _spec("hops-ftf", HopsSettings("ftf", 2.0), "Hops with finish-time fairness, lambda 2")
HOPS_LAS = _spec("hops-las", HopsSettings("las", 1.0), "Hops ordered by least attained service")
HOPS_SJF = _spec("hops-sjf", HopsSettings("sjf", 1.0), "Hops ordered shortest job first")
HOPS_SRTF = _spec("hops-srtf", HopsSettings("srtf", 1.0), "Hops ordered shortest remaining first")
