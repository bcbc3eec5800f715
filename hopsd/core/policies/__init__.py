"""Scheduling policies behind one interface: hops and the baselines it is measured against.

A policy turns a :class:`~hopsd.core.snapshot.Snapshot` into a
:class:`~hopsd.core.model.Plan`, once per round (:meth:`Policy.plan`) and for
GPUs that fall idle inside a round (:meth:`Policy.plan_fragment`, where every
running job keeps its place). Every policy, built in or a plug-in, is described
by a :class:`PolicySpec`: its name, its own settings (a frozen dataclass with
defaults, read from ``[policies.NAME]``) and a factory that builds a fresh
instance from them, fresh because some baselines keep bookkeeping between
rounds (time received per GPU type, restart counts), as their schedulers do.

This package only describes policies. Finding them by name (the table below and
the ``hops.policies`` entry points of installed distributions) imports modules
and reads installed metadata, so it lives outside the pure core, in
:mod:`hopsd.plugins`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from hopsd.core.errors import InvalidInputError
from hopsd.core.typed_settings import SettingsError, check_settings, read_settings

if TYPE_CHECKING:  # annotations only: checking a policy name must not load the planner
    from hopsd.core.model import Plan
    from hopsd.core.settings import Settings
    from hopsd.core.snapshot import Snapshot


class Policy(Protocol):
    """One scheduling policy."""

    @property
    def name(self) -> str: ...

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """Start-of-round plan: may keep, move, preempt running jobs and start queued ones."""
        ...

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        """Within-round plan for idle GPUs: running jobs stay where they are."""
        ...


#: A policy name: it heads a TOML table, names output files and sits in comma lists.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")

S = TypeVar("S")


@dataclass(frozen=True)
class NoSettings:
    """The settings of a policy that has none of its own (its table must be empty)."""


@dataclass(frozen=True, eq=False)
class PolicySpec(Generic[S]):
    """What an entry point of the ``hops.policies`` group names: one policy, ready to build.

    ``defaults`` is an instance of the policy's settings dataclass; a variant
    (``hops-lr``, ``sia-arrival``) is another spec over the same dataclass with
    other defaults. ``factory`` gets the settings and returns a new policy whose
    ``name`` is this spec's.
    """

    name: str
    factory: Callable[[S], Policy]
    defaults: S
    summary: str = ""

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise InvalidInputError(
                f"policy name {self.name!r}: letters, digits, '-' and '_', not starting with - or _"
            )
        try:
            check_settings(self.defaults)
        except InvalidInputError as exc:
            raise InvalidInputError(f"policy {self.name!r}: {exc}") from exc

    @property
    def settings_type(self) -> type[S]:
        return type(self.defaults)

    def settings(self, table: Mapping[str, object] | None = None) -> S:
        """The defaults with a ``[policies.NAME]`` table's values; SettingsError names a key."""
        return read_settings(self.defaults, table or {})

    def build(self, settings: S | None = None) -> Policy:
        """A fresh policy with ``settings`` (None: the defaults)."""
        chosen = self.defaults if settings is None else settings
        if type(chosen) is not self.settings_type:
            raise InvalidInputError(
                f"policy {self.name!r} takes {self.settings_type.__name__}, "
                f"got {type(chosen).__name__}"
            )
        policy = self.factory(chosen)
        if policy.name != self.name:
            raise InvalidInputError(f"policy {self.name!r} built a policy named {policy.name!r}")
        return policy


def _builtin(module: str, specs: dict[str, str]) -> dict[str, str]:
    return {name: f"hopsd.core.policies.{module}:{attr}" for name, attr in specs.items()}


#: The built-in policies, as entry-point targets (``module:attribute``). hops reads
#: them from here, so a bare checkout knows them without installed metadata;
#: pyproject.toml declares the same under ``hops.policies`` for other tools (a
#: test keeps the two equal). Names are known without importing the policies,
#: whose solvers take seconds to load.
BUILTIN_POLICIES: Mapping[str, str] = MappingProxyType(
    {
        **_builtin("fifo", {"fifo": "FIFO"}),
        **_builtin("gavel", {"gavel": "GAVEL", "gavel-arrival": "GAVEL_ARRIVAL"}),
        **_builtin(
            "hops",
            {
                "hops": "HOPS",
                "hops-ftf": "HOPS_FTF",
                "hops-las": "HOPS_LAS",
                "hops-lr": "HOPS_LR",
                "hops-sjf": "HOPS_SJF",
                "hops-srtf": "HOPS_SRTF",
            },
        ),
        **_builtin("sia", {"sia": "SIA", "sia-arrival": "SIA_ARRIVAL"}),
    }
)


__all__ = [
    "BUILTIN_POLICIES",
    "NAME",
    "NoSettings",
    "Policy",
    "PolicySpec",
    "SettingsError",
]
