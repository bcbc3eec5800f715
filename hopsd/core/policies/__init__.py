"""Scheduling policies behind one interface: hops and the baselines it is measured against.

A policy turns a :class:`~hopsd.core.snapshot.Snapshot` into a
:class:`~hopsd.core.model.Plan`, once per round (:meth:`Policy.plan`) and for
GPUs that fall idle inside a round (:meth:`Policy.plan_fragment`, where every
running job keeps its place). Policies are found by name in a registry of
factories, so a caller never branches on a policy name; each lookup returns a
fresh instance because some baselines keep bookkeeping between rounds (time
received per GPU type, restart counts), as their schedulers do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hopsd.core.errors import InvalidInputError
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


PolicyFactory = Callable[[], Policy]

_REGISTRY: dict[str, PolicyFactory] = {}
_LOADED = False

#: The names the built-in modules register (a test checks it against the registry):
#: enough to validate a configuration without importing the policies, whose
#: solvers take seconds to load.
BUILTIN_POLICIES = frozenset(
    {
        "fifo",
        "gavel",
        "gavel-arrival",
        "hops",
        "hops-ftf",
        "hops-las",
        "hops-lr",
        "hops-sjf",
        "hops-srtf",
        "sia",
        "sia-arrival",
    }
)


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make ``get_policy(name)`` build a policy with ``factory``."""
    if not name:
        raise InvalidInputError("a policy needs a non-empty name")
    known = _REGISTRY.get(name)
    if known is not None and known is not factory:
        raise InvalidInputError(f"a different policy is already registered as {name!r}")
    _REGISTRY[name] = factory


def _load_builtin() -> None:
    """Import the built-in policy modules once; each registers itself on import."""
    global _LOADED
    if _LOADED:
        return
    from hopsd.core.policies import fifo, gavel, hops, sia  # noqa: F401

    _LOADED = True


def get_policy(name: str) -> Policy:
    """A fresh instance of the policy registered as ``name``."""
    _load_builtin()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise InvalidInputError(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    return factory()


def is_policy(name: str) -> bool:
    """Whether ``name`` is a policy, without importing the built-in ones to find out."""
    return name in BUILTIN_POLICIES or name in _REGISTRY


def policy_names() -> tuple[str, ...]:
    """Registered policy names, sorted."""
    _load_builtin()
    return tuple(sorted(_REGISTRY))


__all__ = [
    "BUILTIN_POLICIES",
    "Policy",
    "PolicyFactory",
    "get_policy",
    "is_policy",
    "policy_names",
    "register_policy",
]
