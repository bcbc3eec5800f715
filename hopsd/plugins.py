"""Policies by name: hops's own and those installed distributions declare as plug-ins.

A plug-in is a distribution with an entry point in the group ``hops.policies``:
its name is the policy's, its target a :class:`~hopsd.core.policies.PolicySpec`::

    [project.entry-points."hops.policies"]
    shortest-first = "my_policies:SHORTEST_FIRST"

The built-in policies are declared the same way, in
:data:`~hopsd.core.policies.BUILTIN_POLICIES` (mirrored in hops's
pyproject.toml), and are loaded by the same code: an entry point's target is
imported and checked to be a spec of that name. hops reads its own table rather
than its installed metadata, so a bare checkout, or an editable install whose
metadata is older than the code, still knows exactly its built-ins.

This is the one place that finds and loads policies; the daemon, the simulator,
the forecast and the configuration checks ask here. It is outside the core
because reading installed metadata and importing a named module are I/O the
pure core does not do. Names are listed from metadata alone, without importing
any policy, so checking a configuration stays fast; a spec is imported the first
time it is asked for, and kept. A distribution installed after that is seen by
the next process (restart hopsd to pick up a new plug-in).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from hopsd.core.errors import InvalidInputError, MissingExtraError
from hopsd.core.policies import BUILTIN_POLICIES, Policy, PolicySpec

GROUP = "hops.policies"
#: hops's own distribution: its entry points repeat BUILTIN_POLICIES, read from the code.
HOPS_DISTRIBUTION = "hops-scheduler"


class PluginError(InvalidInputError):
    """A declared policy that cannot be used: it does not load, or its name is taken twice."""


@dataclass(frozen=True)
class Declaration:
    """One policy as declared: name, ``module:attribute`` target, and who declares it."""

    name: str
    target: str
    origin: str


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def installed() -> tuple[Declaration, ...]:
    """The ``hops.policies`` entry points of installed distributions other than hops."""
    from importlib import metadata  # a few ms: only when a name is not a built-in

    found = []
    for point in metadata.entry_points(group=GROUP):
        origin = point.dist.name if point.dist is not None else "an unnamed distribution"
        if _canonical(origin) != HOPS_DISTRIBUTION:
            found.append(Declaration(point.name, point.value, origin))
    return tuple(found)


_REGISTERED: dict[str, PolicySpec[Any]] = {}
_LOADED: dict[str, PolicySpec[Any]] = {}


def declarations(name: str) -> list[Declaration]:
    """Every different declaration of ``name`` (one is the rule; two is an error to report)."""
    every = [Declaration(name, BUILTIN_POLICIES[name], "hops")] if name in BUILTIN_POLICIES else []
    every += [d for d in installed() if d.name == name]
    targets: dict[str, Declaration] = {}
    for d in every:
        targets.setdefault(d.target, d)  # the same target twice is one policy
    return list(targets.values())


def policy_names() -> tuple[str, ...]:
    """Every policy name hops can use here, sorted; imports no policy."""
    names = set(BUILTIN_POLICIES) | {d.name for d in installed()} | set(_REGISTERED)
    return tuple(sorted(names))


def is_policy(name: str) -> bool:
    """Whether ``name`` is a policy; a built-in name is answered without reading metadata."""
    return name in BUILTIN_POLICIES or name in _REGISTERED or name in policy_names()


def _unknown(name: str) -> InvalidInputError:
    return InvalidInputError(f"unknown policy {name!r}; known: {', '.join(policy_names())}")


def _load(declared: Declaration) -> PolicySpec[Any]:
    """Import a declaration's target and check it is the spec of that name."""
    from importlib import metadata

    where = f"policy {declared.name!r} ({declared.target}, from {declared.origin})"
    point = metadata.EntryPoint(declared.name, declared.target, GROUP)
    try:
        spec = point.load()
    except MissingExtraError:
        raise
    except Exception as exc:  # a plug-in's import may fail in any way: one line, not a traceback
        raise PluginError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    if not isinstance(spec, PolicySpec):
        raise PluginError(f"{where} is a {type(spec).__name__}, not a PolicySpec")
    if spec.name != declared.name:
        raise PluginError(f"{where} is the spec of {spec.name!r}")
    return spec


def policy_spec(name: str) -> PolicySpec[Any]:
    """The spec of ``name``, imported on first use."""
    known = _REGISTERED.get(name) or _LOADED.get(name)
    if known is not None:
        return known
    found = declarations(name)
    if not found:
        raise _unknown(name)
    if len(found) > 1:
        who = "; ".join(f"{d.target} from {d.origin}" for d in found)
        raise PluginError(f"policy {name!r} is declared more than once ({who}): remove one")
    spec = _load(found[0])
    _LOADED[name] = spec
    return spec


def policy_settings(name: str, table: Mapping[str, object] | None = None) -> object:
    """The typed settings of ``name`` from a ``[policies.NAME]`` table.

    SettingsError names the key a table gets wrong."""
    return policy_spec(name).settings(table)


def get_policy(name: str, settings: object | None = None) -> Policy:
    """A fresh instance of the policy ``name`` with ``settings`` (None: its defaults)."""
    return policy_spec(name).build(settings)


def register_policy(spec: PolicySpec[Any]) -> None:
    """Make ``spec`` a policy of this process without a distribution (tests, embedding hops)."""
    if _REGISTERED.get(spec.name, spec) is not spec or declarations(spec.name):
        raise InvalidInputError(f"a different policy is already registered as {spec.name!r}")
    _REGISTERED[spec.name] = spec


def forget() -> None:
    """Drop what was found, loaded and registered, so the next lookup reads metadata again."""
    installed.cache_clear()
    _REGISTERED.clear()
    _LOADED.clear()
