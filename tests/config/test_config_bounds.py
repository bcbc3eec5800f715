"""Every numeric setting must be finite and in range, and the settings agree with each other.

TOML reads ``nan`` and ``inf`` as floats; a NaN passes every ``<`` test, so
each key is tried with both, and with a value beyond its upper bound.
"""

from __future__ import annotations

import pytest

from hopsd.config import ConfigError, parse_config
from hopsd.config_checks import BOUNDS, NOTICE_SIGNALS

_INTS = {"scheduler.profiling_iterations", "scheduler.max_demand_gpus"}
_FLOAT_KEYS = sorted(set(BOUNDS) - _INTS)


def _conf(key: str, value: str) -> str:
    section, name = key.split(".", 1)
    # a long lease keeps the lease/tick relation out of the way of the key under test
    extra = "" if section == "daemon" else "[daemon]\nlease_ttl_s = 3600\n"
    return f"{extra}[{section}]\n{name} = {value}\n"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("key", _FLOAT_KEYS)
def test_non_finite_numbers_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key}: must be a finite number"):
        parse_config(_conf(key, value))


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_numbers_beyond_the_upper_bound_are_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key}: must be <="):
        parse_config(_conf(key, "1" + "0" * 13 if key in _INTS else "1e15"))


def test_the_upper_bounds_themselves_are_accepted() -> None:
    for key, bound in BOUNDS.items():
        if key == "scheduler.queue_refresh_s":
            continue  # must stay below the lease
        number = int(bound.high) if key in _INTS else bound.high
        parse_config(_conf(key, repr(number)))


@pytest.mark.parametrize(
    ("key", "value"), [("fairshare.shares.alice", "nan"), ("gpu_types.a100.speed", "inf")]
)
def test_non_finite_tables_are_refused(key: str, value: str) -> None:
    table, name = key.rsplit(".", 1)
    with pytest.raises(ConfigError, match=f"^{key}: must be"):
        parse_config(f"[{table}]\n{name} = {value}\n")


@pytest.mark.parametrize(("ttl", "tick"), [(30, 30), (10, 30), (0.5, 1)])
def test_a_lease_not_longer_than_a_tick_is_refused(ttl: float, tick: float) -> None:
    text = f"[scheduler]\nqueue_refresh_s = {tick}\n[daemon]\nlease_ttl_s = {ttl}\n"
    with pytest.raises(ConfigError, match=r"^daemon\.lease_ttl_s: must be longer than a tick"):
        parse_config(text)


def test_a_lease_longer_than_a_tick_is_accepted() -> None:
    text = "[scheduler]\nqueue_refresh_s = 30\n[daemon]\nlease_ttl_s = 31\n"
    assert parse_config(text).lease_ttl_s == 31.0


@pytest.mark.parametrize(
    "name", ["KILL", "SIGKILL", "STOP", "SIGSTOP", "TSTP", "SEGV", "CHLD", "CONT"]
)
def test_signals_a_job_cannot_treat_as_a_notice_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=r"^daemon\.notice_signal: must be one of"):
        parse_config(f'[daemon]\nnotice_signal = "{name}"\n')


@pytest.mark.parametrize("name", [*NOTICE_SIGNALS, "SIGUSR2", "SIGTERM"])
def test_catchable_notice_signals_are_accepted(name: str) -> None:
    assert parse_config(f'[daemon]\nnotice_signal = "{name}"\n').notice_signal == name


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("127.0.0.1:notaport", "port must be a number"),
        ("127.0.0.1:99999", "port must be a number"),
        ("127.0.0.1:", "port must be a number"),
        ("9464", "expected HOST:PORT"),
        ("bad host:9464", "expected HOST:PORT"),
        ("127.0.0.1:٩٤٦٤", "port must be a number"),
    ],
)
def test_bad_metrics_addresses_are_one_line(address: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^metrics.address: {message}"):
        parse_config(f'[metrics]\naddress = "{address}"\n')


@pytest.mark.parametrize("address", ["", "127.0.0.1:0", "0.0.0.0:9464", ":9464", "head1:65535"])
def test_good_metrics_addresses_are_accepted(address: str) -> None:
    assert parse_config(f'[metrics]\naddress = "{address}"\n').metrics_address == address


@pytest.mark.parametrize("key", ["url", "read_url"])
@pytest.mark.parametrize("url", ["notaurl", "ledger.sqlite", "mysql://db/hops", "~/ledger"])
def test_a_ledger_url_that_is_no_url_is_refused(key: str, url: str) -> None:
    with pytest.raises(ConfigError, match=f"^ledger.{key}: expected sqlite:////"):
        parse_config(f'[ledger]\n{key} = "{url}"\n')


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////var/lib/hops/ledger.sqlite",
        "/var/lib/hops/ledger.sqlite",
        "postgresql://hops@db/hops",
        "postgresql+psycopg://hops@db/hops",
    ],
)
def test_ledger_urls_are_accepted(url: str) -> None:
    assert parse_config(f'[ledger]\nurl = "{url}"\n').ledger_url == url
