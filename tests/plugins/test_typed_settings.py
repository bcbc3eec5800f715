"""A policy's settings dataclass is the schema of its [policies.NAME] table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.policies import NoSettings, PolicySpec
from hopsd.core.policies.common import BaselineSettings
from hopsd.core.policies.fifo import FifoPolicy
from hopsd.core.typed_settings import SettingsError, read_settings, settings_table


@dataclass(frozen=True)
class Knobs:
    label: str = "x"
    count: int = 2
    share: float = 0.5
    on: bool = True
    cap: float | None = None


def _error(table: dict[str, object]) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        read_settings(Knobs(), table)
    return caught.value


def test_a_table_fills_the_dataclass_and_leaves_the_rest_at_defaults() -> None:
    got = read_settings(Knobs(), {"count": 7, "share": 1, "cap": 3.5})
    assert got == Knobs(count=7, share=1.0, cap=3.5)
    assert isinstance(got.share, float)
    assert read_settings(Knobs(count=9), {}) == Knobs(count=9)  # a variant's defaults stay
    assert settings_table(got) == {"label": "x", "count": 7, "share": 1.0, "on": True, "cap": 3.5}


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    err = _error({"cont": 3})
    assert err.key == "cont"
    assert str(err) == "unknown key (known: label, count, share, on, cap)"


@pytest.mark.parametrize(
    ("table", "key", "says"),
    [
        ({"count": True}, "count", "expected int, got bool True"),
        ({"count": 2.5}, "count", "expected int, got float 2.5"),
        ({"share": "half"}, "share", "expected float, got str 'half'"),
        ({"on": 1}, "on", "expected bool, got int 1"),
        ({"label": 3}, "label", "expected str, got int 3"),
        ({"share": math.inf}, "share", "must be a finite number, got inf"),
        ({"cap": math.nan}, "cap", "must be a finite number, got nan"),
    ],
)
def test_a_wrong_value_is_named_by_its_key(table: dict[str, object], key: str, says: str) -> None:
    err = _error(table)
    assert (err.key, str(err)) == (key, says)


def test_the_dataclass_own_checks_keep_their_key() -> None:
    with pytest.raises(SettingsError) as caught:
        read_settings(BaselineSettings(), {"queue_order": "lifo"})
    assert caught.value.key == "queue_order" and "unknown 'lifo'" in str(caught.value)


def test_other_refusals_of_the_dataclass_are_the_table_s() -> None:
    @dataclass(frozen=True)
    class Picky:
        low: int = 1
        high: int = 2

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError("low must not exceed high")

    with pytest.raises(SettingsError) as caught:
        read_settings(Picky(), {"low": 5})
    assert (caught.value.key, str(caught.value)) == ("", "low must not exceed high")


@dataclass
class Mutable:
    x: int = 1


@dataclass(frozen=True)
class NoDefault:
    x: int


@dataclass(frozen=True)
class ListValued:
    xs: list[int] = field(default_factory=list)


@pytest.mark.parametrize(
    ("defaults", "says"),
    [
        (Mutable(), "must be a frozen dataclass"),
        (NoDefault(1), "NoDefault.x needs a default"),
        (ListValued(), "ListValued.xs: type list\\[int\\] is not one of bool, int, float, str"),
        ({"x": 1}, "must be a dataclass instance, got dict"),
        (NoSettings, "must be a dataclass instance, got type"),
    ],
)
def test_a_spec_refuses_settings_a_table_could_not_fill(defaults: object, says: str) -> None:
    with pytest.raises(InvalidInputError, match=f"policy 'p': .*{says}"):
        PolicySpec("p", lambda _: FifoPolicy(), defaults)


def test_a_spec_builds_only_with_its_own_settings_and_under_its_own_name() -> None:
    spec = PolicySpec("p", lambda _: FifoPolicy(), NoSettings())
    with pytest.raises(InvalidInputError, match="policy 'p' built a policy named 'fifo'"):
        spec.build()
    fifo_like = PolicySpec("fifo", lambda _: FifoPolicy(), NoSettings())
    with pytest.raises(InvalidInputError, match="takes NoSettings, got Knobs"):
        fifo_like.build(Knobs())
    assert fifo_like.build(NoSettings()).name == "fifo"
    with pytest.raises(SettingsError, match=r"unknown key \(known: none\)"):
        fifo_like.settings({"anything": 1})


def test_hops_settings_replace_the_scheduler_s_only_where_set() -> None:
    from hopsd.core.policies.hops import HOPS, HopsSettings
    from hopsd.core.settings import Settings

    scheduler = Settings(priority="las", lam=3.0)
    only_priority = HOPS.build(HOPS.settings({"priority": "ftf"}))
    assert only_priority._settings(scheduler) == Settings(priority="ftf", lam=3.0)  # type: ignore[attr-defined]
    assert HOPS.build()._settings(scheduler) == scheduler  # type: ignore[attr-defined]
    with pytest.raises(SettingsError, match="unknown 'fifo'"):
        HopsSettings(priority="fifo")
