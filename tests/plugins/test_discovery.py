"""Policies found through the entry-point group hops.policies, beside the built-in ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_dists import IDLE, write_dist

from hopsd.core.errors import InvalidInputError
from hopsd.core.policies import BUILTIN_POLICIES
from hopsd.core.policies.fifo import FIFO
from hopsd.plugins import (
    PluginError,
    get_policy,
    is_policy,
    policy_names,
    policy_settings,
    policy_spec,
    register_policy,
)


def test_a_declared_policy_is_listed_before_any_import_and_built_with_its_table(
    site_dir: Path,
) -> None:
    write_dist(site_dir, "hops-idle", {"idle": "idle_policy:SPEC"}, {"idle_policy": IDLE})
    assert "idle" in policy_names() and is_policy("idle")
    assert "idle_policy" not in sys.modules  # listing reads metadata only
    own = policy_settings("idle", {"note": "quiet", "level": 3, "weight": 2, "loud": True})
    policy = get_policy("idle", own)
    assert "idle_policy" in sys.modules
    assert policy.name == "idle"
    assert policy.own == own  # type: ignore[attr-defined]
    assert (own.note, own.level, own.weight, own.loud) == ("quiet", 3, 2.0, True)  # type: ignore[attr-defined]
    assert get_policy("idle").own.note == "idle"  # type: ignore[attr-defined]  # the defaults


def test_without_the_distribution_the_name_is_unknown(site_dir: Path) -> None:
    assert not is_policy("idle")
    with pytest.raises(InvalidInputError, match="unknown policy 'idle'; known: fifo"):
        get_policy("idle")


def test_two_distributions_naming_one_target_declare_one_policy(site_dir: Path) -> None:
    write_dist(site_dir, "hops-idle", {"idle": "idle_policy:SPEC"}, {"idle_policy": IDLE})
    write_dist(site_dir, "idle-again", {"idle": "idle_policy:SPEC"})
    assert get_policy("idle").name == "idle"


def test_two_targets_for_one_name_are_refused_naming_both(site_dir: Path) -> None:
    write_dist(site_dir, "hops-idle", {"idle": "idle_policy:SPEC"}, {"idle_policy": IDLE})
    write_dist(site_dir, "idle-fork", {"idle": "idle_fork:SPEC"})
    with pytest.raises(PluginError, match="declared more than once") as caught:
        get_policy("idle")
    assert "hops-idle" in str(caught.value) and "idle-fork" in str(caught.value)


def test_a_plugin_cannot_take_a_builtin_name(site_dir: Path) -> None:
    write_dist(site_dir, "hops-idle", {"fifo": "idle_policy:SPEC"}, {"idle_policy": IDLE})
    with pytest.raises(PluginError, match="'fifo' is declared more than once"):
        get_policy("fifo")


def test_hops_own_metadata_is_not_read(site_dir: Path) -> None:
    """Built-ins come from the code: stale metadata of an older hops changes nothing."""
    write_dist(site_dir, "hops-scheduler", {"fifo": "gone:FIFO", "old-policy": "gone:OLD"})
    assert policy_spec("fifo") is FIFO
    assert "old-policy" not in policy_names()
    assert set(BUILTIN_POLICIES) <= set(policy_names())


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("missing_module:SPEC", "cannot be loaded: ModuleNotFoundError"),
        ("idle_policy:NOPE", "cannot be loaded: AttributeError"),
        ("idle_policy:NOT_A_SPEC", "is a int, not a PolicySpec"),
        ("idle_policy:MISNAMED", "is the spec of 'other'"),
    ],
)
def test_a_broken_plugin_is_one_line_naming_it(site_dir: Path, target: str, says: str) -> None:
    write_dist(site_dir, "hops-idle", {"idle": target}, {"idle_policy": IDLE})
    with pytest.raises(PluginError, match=says) as caught:
        get_policy("idle")
    assert f"policy 'idle' ({target}, from hops-idle)" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_policy_registered_in_code_is_found_and_may_not_shadow_a_declared_one(
    site_dir: Path,
) -> None:
    from dataclasses import replace

    mine = replace(FIFO, name="my-fifo")
    register_policy(mine)
    register_policy(mine)  # the same spec again changes nothing
    assert policy_spec("my-fifo") is mine and "my-fifo" in policy_names()
    with pytest.raises(InvalidInputError, match="already registered"):
        register_policy(replace(FIFO, name="my-fifo"))
    with pytest.raises(InvalidInputError, match="already registered"):
        register_policy(replace(FIFO, name="hops"))
