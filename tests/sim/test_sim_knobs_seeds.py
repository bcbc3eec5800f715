"""Per-policy knobs of a simulation file, seed lists and the confidence intervals."""

from __future__ import annotations

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.knobs import Knobs, effective, parse_knobs
from hopsd.sim.seeds import aggregate, interval, parse_seeds


def test_policy_tables_win_over_defaults_and_flags_replace_defaults() -> None:
    knobs = parse_knobs(
        {
            "round_length_s": 300,
            "restart_penalty_s": 30,
            "policies": {"gavel": {"round_length_s": 360, "restart_penalty_s": 0}},
        }
    )
    knobs = knobs.with_defaults(Knobs(restart_penalty_s=45.0, profiling_s=20.0))
    gavel = knobs.config_for("gavel", EngineConfig())
    hops = knobs.config_for("hops", EngineConfig())
    assert (gavel.settings.round_length_s, gavel.settings.restart_penalty_s) == (360.0, 0.0)
    assert (hops.settings.round_length_s, hops.settings.restart_penalty_s) == (300.0, 45.0)
    assert gavel.profile_s == hops.profile_s == 20.0


def test_the_notice_grace_is_a_knob_of_its_own() -> None:
    knobs = parse_knobs({"notice_grace_s": 120, "policies": {"gavel": {"notice_grace_s": 0}}})
    assert knobs.config_for("hops", EngineConfig()).notice_grace_s == 120.0
    assert knobs.config_for("gavel", EngineConfig()).notice_grace_s == 0.0
    assert parse_knobs({}).config_for("hops", EngineConfig()).notice_grace_s == 0.0
    graced = knobs.config_for("hops", EngineConfig())
    assert effective(graced)["notice_grace_s"] == 120.0
    assert "notice_grace_s" not in effective(EngineConfig())  # results as before the knob


@pytest.mark.parametrize(
    "doc",
    [
        {"round_lenght_s": 1},
        {"round_length_s": 0},
        {"policies": {"sia": {"profiling_s": -1}}},
        {"notice_grace_s": -1},
    ],
)
def test_bad_knobs_are_refused(doc: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        parse_knobs(doc)


def test_seed_lists() -> None:
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("5,0-1,1") == [0, 1, 5]
    for bad in ("", "a", "3-1", "-2"):
        with pytest.raises(InvalidInputError):
            parse_seeds(bad)


def test_interval_hand_checked() -> None:
    # mean 2, sample sd 1, t(0.975, 2 dof) = 4.3027: half-width 4.3027 / sqrt(3) = 2.4841.
    ci = interval([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0
    assert ci["ci_high"] - 2.0 == pytest.approx(2.4841, abs=1e-4)
    assert interval([7.0]) == {"mean": 7.0, "ci_low": 7.0, "ci_high": 7.0, "n": 1}


def test_paired_ratio_is_per_seed_not_ratio_of_means() -> None:
    per_seed = {
        0: {"hops": {"avg_jct_h": 1.0}, "sia": {"avg_jct_h": 2.0}},
        1: {"hops": {"avg_jct_h": 3.0}, "sia": {"avg_jct_h": 3.0}},
    }
    out = aggregate(per_seed, "hops")
    assert out["paired_ratio"]["sia"]["avg_jct_h"]["mean"] == pytest.approx(0.75)  # (0.5 + 1) / 2
    assert out["summary"]["sia"]["avg_jct_h"]["mean"] == 2.5


def test_the_shipped_published_knobs_parse() -> None:
    from hopsd.sim.knobs import load_knobs
    from hopsd.sim.run import preset_path

    knobs = load_knobs(preset_path("published-knobs.toml"))
    assert knobs.for_policy("gavel") == Knobs(360.0, 0.0, None)
    assert knobs.for_policy("sia").round_length_s == 60.0
    assert knobs.for_policy("hops") == Knobs()
