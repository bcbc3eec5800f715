"""hops.conf parsing: defaults, the shipped example, and one clear error per bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopsd.config import ConfigError, HopsConfig, load_config, parse_config
from hopsd.core.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "hops.conf.example"


def test_example_parses_to_the_embedded_defaults() -> None:
    parsed = parse_config(EXAMPLE.read_text())
    defaults = HopsConfig()
    assert parsed.ledger_url == defaults.ledger_url
    assert parsed.settings() == defaults.settings()
    assert parsed.fairshare_weight == defaults.fairshare_weight
    assert (parsed.size_check_factor, parsed.size_check_slack_s) == (2.0, 300.0)


def test_values_reach_the_planner_settings() -> None:
    cfg = parse_config('[scheduler]\nlambda = 2\npriority = "ftf"\nsigma = 1.2\n')
    settings = cfg.settings()
    assert (settings.lam, settings.priority, settings.sigma) == (2.0, "ftf", 1.2)


def test_every_planner_knob_reaches_the_settings() -> None:
    text = (
        '[scheduler]\npriority = "ftf"\nlambda = 2\nsigma = 1.2\nrestart_penalty_s = 45\n'
        "round_length_s = 120\nmip_gap = 0.05\nsolver_time_limit_s = 3\n"
        "reference_throughput = 250\n"
    )
    knobs = parse_config(text).settings()
    assert (knobs.priority, knobs.lam, knobs.sigma, knobs.restart_penalty_s) == ("ftf", 2, 1.2, 45)
    assert (knobs.round_length_s, knobs.mip_gap) == (120, 0.05)
    assert (knobs.time_limit_s, knobs.reference_throughput) == (3, 250)
    assert (knobs.node_limit, knobs.max_plans) == (Settings().node_limit, Settings().max_plans)


def test_gpu_type_overrides() -> None:
    cfg = parse_config("[gpu_types.a100]\nspeed = 3\nb_net = 2e9\n")
    a100 = cfg.gpu_type("a100")
    assert a100.speed == 3.0 and a100.b_net == 2e9
    assert cfg.gpu_type("k80").speed == 1.0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[scheduler]\npriority = "fastest"\n', "scheduler.priority"),
        ("[scheduler]\nlambda = -1\n", "scheduler.lambda"),
        ('[scheduler]\nround_length_s = "5m"\n', "scheduler.round_length_s"),
        ("[scheduler]\nmip_gap = 1.5\n", "scheduler.mip_gap"),
        ('[slurm]\nbackend = "grpc"\n', "slurm.backend"),
        ('[slurm]\nbackend = "rest"\n', "slurm.rest_url"),
        ('[slurm]\nbackend = "rest"\nrest_url = "http://h:1"\n', "slurm.rest_token_file"),
        ('[slurm]\nrest_url = "h:1"\nbackend = "rest"\nrest_token_file = "t"\n', "slurm.rest_url"),
        ('[slurm]\nrest_version = "v0.0.38"\n', "slurm.rest_version"),
        ("[slurm]\ncolour = 1\n", "slurm.colour"),
        ("[bogus]\nx = 1\n", "[bogus]"),
        ("[gpu_types.v100]\nspeed = 0\n", "gpu_types.v100.speed"),
        ("[fairshare.shares]\nalice = -2\n", "fairshare.shares.alice"),
        ('[metrics]\naddress = "9464"\n', "metrics.address"),
    ],
)
def test_bad_values_name_their_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert key in str(err.value)


def test_invalid_toml_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[scheduler\n")


def test_hops_conf_env_and_explicit_path(tmp_path: Path) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text('[ledger]\nurl = "sqlite:///x.db"\n')
    assert load_config(None, {"HOPS_CONF": str(conf)}).ledger_url == "sqlite:///x.db"
    other = tmp_path / "other.conf"
    other.write_text('[ledger]\nurl = "sqlite:///y.db"\n')
    assert load_config(str(other), {"HOPS_CONF": str(conf)}).ledger_url == "sqlite:///y.db"
    assert load_config(None, {}).ledger_url == HopsConfig().ledger_url


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(str(tmp_path / "absent.conf"), {})


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("size_check_factor = 0.5", "size_check_factor"),
        ("size_check_slack_s = -1", "size_check_slack_s"),
    ],
)
def test_a_bad_size_check_is_refused_naming_its_key(line: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"scheduler.{key}"):
        parse_config(f"[scheduler]\n{line}\n")


@pytest.mark.parametrize(
    ("text", "guard"),
    [
        ("[scheduler]\nrestart_penalty_s = 45\nqueue_refresh_s = 10\n", 45.0),
        ("[scheduler]\nrestart_penalty_s = 5\nqueue_refresh_s = 10\n", 20.0),
    ],
)
def test_the_spare_guard_is_a_restart_or_two_refreshes(text: str, guard: float) -> None:
    assert parse_config(text).spare_guard_s == guard
