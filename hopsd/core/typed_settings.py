"""A policy's own settings: a frozen dataclass with defaults, filled from one TOML table.

hops.conf and the simulation file give each policy a ``[policies.NAME]`` table.
Its keys are the fields of the policy's settings dataclass, so the dataclass is
the whole schema: a plug-in declares its settings once, in Python, and hops
reads and checks the table for it. The checks are the ones hops.conf applies to
its own keys (no unknown key, the field's type, finite numbers) and each failure
names its key, so ``hopsd`` and ``hops simulate`` can say ``policies.NAME.key``
in one line instead of a traceback from inside a plug-in.

The dataclass must be frozen: one defaults instance is shared by every policy
built from a spec, and hopsd compares settings on reload to decide whether to
rebuild its policy, which a mutable instance would make unreliable.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from hopsd.core.errors import InvalidInputError

#: The value types a setting may have (each may also be ``| None``, for "not set":
#: TOML has no null, so None is only ever a default).
KINDS: tuple[type, ...] = (bool, int, float, str)

S = TypeVar("S")


class SettingsError(InvalidInputError):
    """A table that does not fit the settings; ``key`` is the offending key ("" for the table)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _kind(annotation: Any) -> type | None:
    """The one value type of ``X`` or ``X | None``; None when not one of :data:`KINDS`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _kind(members[0]) if len(members) == 1 else None
    return annotation if annotation in KINDS else None


#: field_kinds's answers, one per settings class (read once, asked every reload and forecast)
_KINDS: dict[type, Mapping[str, type]] = {}


def field_kinds(settings_type: type) -> Mapping[str, type]:
    """Each settable field's value type; InvalidInputError when the class cannot be read."""
    known = _KINDS.get(settings_type)
    if known is None:
        known = _KINDS[settings_type] = _read_kinds(settings_type)
    return known


def _read_kinds(settings_type: type) -> Mapping[str, type]:
    if not dataclasses.is_dataclass(settings_type):
        raise InvalidInputError(f"{settings_type.__name__} is not a dataclass")
    if not settings_type.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise InvalidInputError(f"{settings_type.__name__} must be a frozen dataclass")
    try:
        hints = typing.get_type_hints(settings_type)
    except Exception as exc:  # a forward reference its module cannot resolve
        raise InvalidInputError(f"{settings_type.__name__}: field types unreadable: {exc}") from exc
    kinds: dict[str, type] = {}
    for f in dataclasses.fields(settings_type):
        if not f.init:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InvalidInputError(f"{settings_type.__name__}.{f.name} needs a default")
        kind = _kind(hints[f.name])
        if kind is None:
            allowed = ", ".join(k.__name__ for k in KINDS)
            raise InvalidInputError(
                f"{settings_type.__name__}.{f.name}: type {hints[f.name]} is not one of {allowed}"
            )
        kinds[f.name] = kind
    return kinds


def check_settings(defaults: object) -> None:
    """Refuse defaults that are not an instance of a readable frozen dataclass."""
    if not dataclasses.is_dataclass(defaults) or isinstance(defaults, type):
        raise InvalidInputError(
            f"policy settings must be a dataclass instance, got {type(defaults).__name__}"
        )
    field_kinds(type(defaults))


def _value(key: str, value: object, kind: type) -> object:
    """``value`` as ``kind``, or the SettingsError naming ``key``."""
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise SettingsError(key, f"must be a finite number, got {value}")
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in (bool, str) and isinstance(value, kind):
        return value
    raise SettingsError(key, f"expected {kind.__name__}, got {type(value).__name__} {value!r}")


def read_settings(defaults: S, table: Mapping[str, object]) -> S:
    """``defaults`` with the table's values put in, checked key by key.

    The dataclass's own ``__post_init__`` then checks values together; a
    :class:`SettingsError` it raises keeps its key, any other refusal is
    reported against the whole table.
    """
    kinds = field_kinds(type(defaults))
    values: dict[str, object] = {}
    for key, value in table.items():
        if key not in kinds:
            known = ", ".join(kinds) or "none"
            raise SettingsError(key, f"unknown key (known: {known})")
        values[key] = _value(key, value, kinds[key])
    try:
        return dataclasses.replace(defaults, **values)  # type: ignore[type-var]
    except SettingsError:
        raise
    except (InvalidInputError, ValueError, TypeError) as exc:
        raise SettingsError("", str(exc)) from exc


def settings_table(settings: object) -> dict[str, object]:
    """The settings as a table again (what results.json records a policy ran with)."""
    kinds = field_kinds(type(settings))
    return {key: getattr(settings, key) for key in kinds}
