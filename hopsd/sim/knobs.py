"""Per-policy knobs of a simulation: round length, restart penalty, profiling time,
checkpoint notice; and each policy's own settings.

The published schedulers were evaluated with different round mechanics (Gavel
with 360 s rounds and free preemption, Sia with 60 s rounds and restore costs of
tens to hundreds of seconds), so a comparison must be able to give each policy
its own. A simulation TOML holds defaults for every policy and per-policy
overrides::

    round_length_s = 300      # defaults for every policy
    restart_penalty_s = 30
    profiling_s = 60
    notice_grace_s = 120      # a notice's grace before each move (0, the default: none)

    [policies.gavel]          # overrides for one policy
    round_length_s = 360
    restart_penalty_s = 0

    [policies.sia]
    round_length_s = 60

    [policies.fifo]
    backfill = false          # not a knob: the policy's own setting

Command-line values (``hops simulate --round-length ...``) replace the file's
defaults; a policy's own table still wins over both, since it was written for
that policy. The knobs each policy ran with are recorded in ``results.json``.

The same file may name a sweep's workloads in ``[workloads.NAME]`` tables;
those are read by :mod:`hopsd.sim.sweep`, not here.

Any other key of a ``[policies.NAME]`` table is one of the policy's own
settings, as in hops.conf's table of that name: this module keeps those keys
as written (``SimKnobs.settings``); the policy's settings dataclass checks them
when the run loads the policy (:func:`hopsd.sim.run.policy_settings_of`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hopsd.core.errors import InvalidInputError
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.input_file import read_input

KEYS = ("round_length_s", "restart_penalty_s", "profiling_s", "notice_grace_s")


class KnobsError(InvalidInputError):
    """A simulation TOML that cannot describe the knobs."""


@dataclass(frozen=True)
class Knobs:
    """Values set for one policy (or for all); None leaves the engine's default."""

    round_length_s: float | None = None
    restart_penalty_s: float | None = None
    profiling_s: float | None = None
    notice_grace_s: float | None = None

    def over(self, base: Knobs) -> Knobs:
        """These values where set, ``base``'s elsewhere."""
        return Knobs(
            *(getattr(self, k) if getattr(self, k) is not None else getattr(base, k) for k in KEYS)
        )

    def apply(self, config: EngineConfig) -> EngineConfig:
        """The engine configuration with these values put in."""
        settings = config.settings
        if self.round_length_s is not None:
            settings = replace(settings, round_length_s=self.round_length_s)
        if self.restart_penalty_s is not None:
            settings = replace(settings, restart_penalty_s=self.restart_penalty_s)
        profile_s = self.profiling_s if self.profiling_s is not None else config.profile_s
        grace = self.notice_grace_s if self.notice_grace_s is not None else config.notice_grace_s
        return replace(config, settings=settings, profile_s=profile_s, notice_grace_s=grace)


@dataclass(frozen=True)
class SimKnobs:
    """Defaults for every policy plus per-policy overrides."""

    defaults: Knobs = field(default_factory=Knobs)
    per_policy: Mapping[str, Knobs] = field(default_factory=dict)
    #: each [policies.NAME] table's other keys: the policy's own settings, unchecked yet
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: the file they came from, for messages
    where: str = "simulation file"

    def for_policy(self, name: str) -> Knobs:
        return self.per_policy.get(name, Knobs()).over(self.defaults)

    def with_defaults(self, values: Knobs) -> SimKnobs:
        """Command-line values replace the file's defaults (per-policy tables still win)."""
        return replace(self, defaults=values.over(self.defaults))

    def config_for(self, name: str, base: EngineConfig) -> EngineConfig:
        return self.for_policy(name).apply(base)


def effective(config: EngineConfig) -> dict[str, float]:
    """The knobs an engine configuration runs with, as recorded in results.json (the
    notice grace only when set: a run without one records, and keys its sweep cells,
    as before the knob existed)."""
    knobs = {
        "round_length_s": config.settings.round_length_s,
        "restart_penalty_s": config.settings.restart_penalty_s,
        "profiling_s": config.profile_s,
    }
    if config.notice_grace_s > 0:
        knobs["notice_grace_s"] = config.notice_grace_s
    return knobs


def _knobs(where: str, table: Mapping[str, Any]) -> Knobs:
    values: dict[str, float] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise KnobsError(f"{where}: unknown key {key!r}; known: {', '.join(KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise KnobsError(f"{where}: {key} must be a number of seconds, got {value!r}")
        if value < 0 or (key == "round_length_s" and value <= 0):
            raise KnobsError(
                f"{where}: {key} must be {'> 0' if key == 'round_length_s' else '>= 0'}"
            )
        values[key] = float(value)
    return Knobs(**values)


def parse_knobs(data: Mapping[str, Any], where: str = "simulation file") -> SimKnobs:
    """Knobs of an already-parsed simulation document."""
    # [workloads.NAME] tables are a sweep's (hopsd.sim.sweep), not knobs
    top = {k: v for k, v in data.items() if k not in ("policies", "workloads")}
    policies = data.get("policies", {})
    if not isinstance(policies, dict):
        raise KnobsError(f"{where}: [policies] must hold one table per policy")
    per_policy: dict[str, Knobs] = {}
    settings: dict[str, dict[str, Any]] = {}
    for name, table in policies.items():
        if not isinstance(table, dict):
            raise KnobsError(f"{where}: [policies.{name}] must be a table")
        knobs = {k: v for k, v in table.items() if k in KEYS}
        per_policy[name] = _knobs(f"{where}: [policies.{name}]", knobs)
        settings[name] = {k: v for k, v in table.items() if k not in KEYS}
    return SimKnobs(_knobs(where, top), per_policy, settings, where)


def load_knobs(path: str | Path) -> SimKnobs:
    """Read a simulation TOML."""
    p = Path(path)
    text = read_input(p, KnobsError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnobsError(f"{p}: cannot parse: {exc}") from exc
    return parse_knobs(data, where=str(p))
