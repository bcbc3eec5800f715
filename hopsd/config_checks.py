"""The checks of hops.conf values that are more than a type: ranges, relations, shapes.

Every number must be finite (TOML accepts ``nan`` and ``inf``, and a NaN
passes every ``<`` test, so a range check alone lets it through), within a range
that makes sense on its own, and consistent with the others (a lease that runs
out between two ticks would be lost every tick). Addresses, ledger URLs and the
notice signal are checked for their shape here too, so a bad one is one line at
start instead of a traceback or a file of that name in the working directory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hopsd.core.limits import MAX_LEASE_TTL_S

if TYPE_CHECKING:
    from hopsd.config import HopsConfig


class ConfigError(ValueError):
    """A hops.conf that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Bound:
    """An allowed interval of one numeric setting (``low_open``: ``low`` itself refused)."""

    attr: str
    low: float
    high: float
    low_open: bool = False

    def problem(self, value: float) -> str | None:
        """Why ``value`` is refused, or None."""
        if not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if value < self.low or (self.low_open and value == self.low):
            return f"must be {'>' if self.low_open else '>='} {self.low:g}, got {value:g}"
        if value > self.high:
            return f"must be <= {self.high:g}, got {value:g}"
        return None


_DAY = 86400.0
_YEAR = 365 * _DAY

#: Every numeric setting (key as written in hops.conf) and its range.
BOUNDS: dict[str, Bound] = {
    "ledger.retention_days": Bound("retention_days", 0, 36500),
    "slurm.timeout_s": Bound("slurm_timeout_s", 0, 3600, low_open=True),
    "scheduler.round_length_s": Bound("round_length_s", 0, _DAY, low_open=True),
    "scheduler.queue_refresh_s": Bound("queue_refresh_s", 0, _DAY, low_open=True),
    "scheduler.lambda": Bound("lam", 0, 100),
    "scheduler.sigma": Bound("sigma", 0, 100, low_open=True),
    "scheduler.restart_penalty_s": Bound("restart_penalty_s", 0, _DAY),
    "scheduler.profiling_iterations": Bound("profiling_iterations", 1, 1_000_000),
    "scheduler.profiling_timeout_s": Bound("profiling_timeout_s", 0, _DAY, low_open=True),
    "scheduler.mip_gap": Bound("mip_gap", 0, 0.999),
    "scheduler.solver_time_limit_s": Bound("solver_time_limit_s", 0, 3600, low_open=True),
    "scheduler.reference_throughput": Bound("reference_throughput", 0, 1e12, low_open=True),
    "scheduler.max_demand_gpus": Bound("max_demand_gpus", 1, 1_000_000),
    "scheduler.size_check_factor": Bound("size_check_factor", 0, 1e6),
    "scheduler.size_check_slack_s": Bound("size_check_slack_s", 0, _YEAR),
    "slurm.policy_refresh_s": Bound("slurm_policy_refresh_s", 0, _DAY, low_open=True),
    "fairshare.weight": Bound("fairshare_weight", 0, 1e6),
    "fairshare.half_life_h": Bound("fairshare_half_life_h", 0, 24 * 3650, low_open=True),
    "daemon.lease_ttl_s": Bound("lease_ttl_s", 0, MAX_LEASE_TTL_S, low_open=True),
    "daemon.requeue_quiet_s": Bound("requeue_quiet_s", 0, 3600),
    "daemon.requeue_wait_s": Bound("requeue_wait_s", 0, 3600),
    "daemon.spool_retention_s": Bound("spool_retention_s", 0, _YEAR),
    "daemon.checkpoint_grace_s": Bound("checkpoint_grace_s", 0, _DAY),
    "forecast.window_s": Bound("forecast_window_s", 0, 7 * _DAY, low_open=True),
}

#: The modes of ``[forecast] arrivals`` (the forecast's arrival models, :mod:`hopsd.sim.arrivals`).
#: They live here because the submitit plug-in reads hops.conf and may not import the simulator.
ARRIVAL_MODES = ("recent", "none")

#: Signals a job can catch and act on as a notice. KILL and STOP cannot be caught;
#: the stop, fault and child signals would stop, crash or confuse a job that has
#: no handler, instead of warning it.
NOTICE_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "ALRM", "URG", "WINCH")

_URL_SCHEME = re.compile(r"(sqlite|postgresql|postgres)(\+[a-z0-9_]+)?://", re.IGNORECASE)
_HOST = re.compile(r"[A-Za-z0-9._-]{0,253}")


def check_numbers(config: HopsConfig) -> None:
    """Each numeric setting within its range, then the ranges relative to each other."""
    for key, bound in BOUNDS.items():
        problem = bound.problem(float(getattr(config, bound.attr)))
        if problem:
            raise ConfigError(f"{key}: {problem}")
    if 0 < config.size_check_factor < 1:
        raise ConfigError(
            "scheduler.size_check_factor: must be 0 (no check) or >= 1, "
            f"got {config.size_check_factor:g}"
        )
    if config.lease_ttl_s <= config.queue_refresh_s:
        raise ConfigError(
            f"daemon.lease_ttl_s: must be longer than a tick (scheduler.queue_refresh_s = "
            f"{config.queue_refresh_s:g}), got {config.lease_ttl_s:g}"
        )
    for user, share in config.shares.items():
        if (
            not isinstance(share, int | float)
            or isinstance(share, bool)
            or not 0 < share < math.inf
        ):
            raise ConfigError(
                f"fairshare.shares.{user}: must be a finite number > 0, got {share!r}"
            )


def check_notice_signal(name: str) -> None:
    """A signal a job can catch as a notice (``USR1`` or ``SIGUSR1``)."""
    if name.removeprefix("SIG") not in NOTICE_SIGNALS:
        raise ConfigError(
            f"daemon.notice_signal: must be one of {', '.join(NOTICE_SIGNALS)} "
            f"(a signal a job can catch), got {name!r}"
        )


def split_address(key: str, address: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); an empty host means every interface."""
    host, sep, port = address.rpartition(":")
    if not sep or not _HOST.fullmatch(host):
        raise ConfigError(f"{key}: expected HOST:PORT, got {address!r}")
    if not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{key}: port must be a number from 0 to 65535, got {port!r}")
    return host, int(port)


def check_ledger_url(key: str, url: str) -> None:
    """An SQLite or PostgreSQL URL (its scheme written out), or an absolute file path.

    A relative bare word (``notaurl``) would silently become an SQLite file in
    whatever directory hopsd or hops was started from.
    """
    if url.startswith("/"):
        return
    if not _URL_SCHEME.match(url):
        raise ConfigError(
            f"{key}: expected sqlite:////ABSOLUTE/PATH, postgresql+psycopg://... "
            f"or an absolute file path, got {url!r}"
        )


#: Where ``[fairshare]`` takes the shares from: its own ``shares``, or Slurm's association tree.
SHARE_SOURCES = ("hops.conf", "slurm")


def check_fairshare_source(config: HopsConfig) -> None:
    """A known source of shares, and only one copy of them."""
    if config.fairshare_source not in SHARE_SOURCES:
        known = " or ".join(map(repr, SHARE_SOURCES))
        raise ConfigError(f"fairshare.source: must be {known}, got {config.fairshare_source!r}")
    if config.fairshare_source == "slurm" and config.shares:
        raise ConfigError(
            'fairshare.shares: given while fairshare.source = "slurm" takes the shares '
            "from Slurm's association tree; remove one of them"
        )


def check_arrivals(config: HopsConfig) -> None:
    """The forecast's arrival models are ones it knows (:mod:`hopsd.sim.arrivals`)."""
    for key, mode in (
        ("forecast.arrivals", config.forecast_arrivals),
        ("forecast.test_only_arrivals", config.forecast_test_only_arrivals),
    ):
        if mode not in ARRIVAL_MODES:
            known = " or ".join(map(repr, ARRIVAL_MODES))
            raise ConfigError(f"{key}: must be {known}, got {mode!r}")
