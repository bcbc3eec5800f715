"""hops.conf: the operator's configuration, read from TOML and validated key by key.

Both ``hops`` and ``hopsd`` find it via ``--config FILE`` or the ``HOPS_CONF``
environment variable; with neither, embedded defaults apply. Any invalid value
raises :class:`ConfigError` naming the offending key, so the admin sees one
clear line instead of a traceback.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hopsd.config_checks import (
    ConfigError,
    check_arrivals,
    check_fairshare_source,
    check_ledger_url,
    check_notice_signal,
    check_numbers,
    split_address,
)
from hopsd.core.model import GpuType
from hopsd.core.priorities import priority_names
from hopsd.core.settings import Settings
from hopsd.core.typed_settings import SettingsError
from hopsd.plugins import is_policy, policy_names

DEFAULT_LEDGER_URL = "sqlite:///" + str(Path("/var/lib/hops/ledger.sqlite"))


@dataclass(frozen=True)
class GpuTypeConfig:
    """Per-type overrides: relative speed and interconnect bandwidths (params/s)."""

    speed: float = 1.0
    b_link: float = 2.5e9
    b_net: float = 1.25e9

    def to_core(self, name: str) -> GpuType:
        return GpuType(name, b_link=self.b_link, b_net=self.b_net, speed=self.speed)


@dataclass(frozen=True)
class HopsConfig:
    """Everything hops.conf can set, with embedded defaults."""

    path: str | None = None
    ledger_url: str = DEFAULT_LEDGER_URL
    # What the CLI reads through: a role that may only SELECT ("" = ledger_url).
    ledger_read_url: str = ""
    # Rounds, intents and allocations older than this are pruned (0 keeps all).
    retention_days: float = 90.0
    slurm_backend: str = "cli"
    slurm_timeout_s: float = 20.0
    # Words put before every Slurm command (["ssh", "slurm-head"], a chroot wrapper):
    # hopsd may run on a service host, or beside another Slurm release.
    slurm_command_prefix: tuple[str, ...] = ()
    # backend = "rest": slurmrestd's URL, a file holding a JWT, the data parser.
    slurm_rest_url: str = ""
    slurm_rest_token_file: str = ""
    slurm_rest_version: str = "v0.0.42"
    # Running hops jobs on a drained node: "finish" there, or "move" off at the next round.
    on_drain: str = "finish"
    partitions: tuple[str, ...] = ()
    node_types: Mapping[str, str] = field(default_factory=dict)
    round_length_s: float = 300.0
    queue_refresh_s: float = 30.0
    lam: float = 1.0
    sigma: float = 1.4
    priority: str = "lr"
    # Which policy plans (hops, or a baseline run live for comparison).
    policy: str = "hops"
    restart_penalty_s: float = 30.0
    profiling_iterations: int = 20
    profiling: bool = False
    profiling_timeout_s: float = 60.0
    mip_gap: float = 0.01
    solver_time_limit_s: float = 10.0
    reference_throughput: float = 100.0
    fairshare_weight: float = 0.0
    fairshare_half_life_h: float = 168.0
    shares: Mapping[str, float] = field(default_factory=dict)
    # Where the shares come from: "hops.conf" (shares above) or "slurm" (sshare's tree).
    fairshare_source: str = "hops.conf"
    # Plan within the GPU limits of Slurm's associations and QOS (sacctmgr), and how
    # long what was read from Slurm's accounting database (limits, shares) is trusted.
    slurm_limits: bool = False
    slurm_policy_refresh_s: float = 300.0
    gpu_types: Mapping[str, GpuTypeConfig] = field(default_factory=dict)
    max_demand_gpus: int = 256
    metrics_address: str = "127.0.0.1:9464"
    # Report and mode files of jobs; "" means each job's own Slurm working
    # directory, used only under the checks of hopsd.daemon.spool.
    spool_dir: str = ""
    lease_ttl_s: float = 120.0
    # A second hopsd on the same ledger waits for the lease and takes over when
    # the leader's runs out; false: it exits (4) naming the holder.
    standby: bool = True
    # A requeued job is released only this long after its previous run left its
    # nodes, and a release waits at most requeue_wait_s per tick for that.
    requeue_quiet_s: float = 1.5
    requeue_wait_s: float = 20.0
    # Seconds after a job's end at which hopsd removes its spool files.
    spool_retention_s: float = 3600.0
    # Before a move or preemption hopsd sends this signal to the job's batch step and
    # waits up to checkpoint_grace_s for the probe to report a checkpoint (0: no notice).
    notice_signal: str = "USR1"
    checkpoint_grace_s: float = 120.0
    # A job's claimed size stops being believed once its work so far passes
    # size_check_factor times the claim plus size_check_slack_s seconds of its
    # estimated throughput (hopsd.core.sizeclaim; factor 0: never checked).
    size_check_factor: float = 2.0
    size_check_slack_s: float = 300.0
    # What START/ETA and ``hops submit --test-only`` foresee of jobs not yet submitted
    # (hopsd.sim.arrivals): "none", or "recent" (the last window's arrivals again).
    # Offline (benchmarks/forecast_accuracy.py) "recent" made START and ETA worse and
    # --test-only better, hence the two defaults.
    forecast_arrivals: str = "none"
    forecast_test_only_arrivals: str = "recent"
    forecast_window_s: float = 3600.0
    # Each policy's own settings, [policies.NAME] as written: their keys belong to
    # the policy, so they are checked where it is loaded (:func:`policy_settings`).
    policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def settings(self) -> Settings:
        """The core's planner settings derived from this configuration.

        Each planner knob the configuration names alike is taken as it is; the
        solver's time limit is the one knob named otherwise here (beside the
        profiling and Slurm timeouts).
        """
        alike = {f.name for f in fields(self)} & {f.name for f in fields(Settings)}
        knobs = {name: getattr(self, name) for name in alike}
        return Settings(**knobs, time_limit_s=self.solver_time_limit_s)

    @property
    def spare_guard_s(self) -> float:
        """How near its end a running job is spared a move or preemption: within one
        restart (moving it would cost more than it has left) or two of hopsd's queue
        refreshes (the move could not be enacted before it ends). hopsd's step and
        ``hops replay`` plan with the same guard."""
        return max(self.restart_penalty_s, 2 * self.queue_refresh_s)

    def gpu_type(self, name: str) -> GpuType:
        """The core GpuType of ``name``, with this file's overrides or the defaults."""
        return self.gpu_types.get(name, GpuTypeConfig()).to_core(name)


_SECTIONS: dict[str, dict[str, tuple[str, type]]] = {
    "ledger": {
        "url": ("ledger_url", str),
        "read_url": ("ledger_read_url", str),
        "retention_days": ("retention_days", float),
    },
    "slurm": {
        "backend": ("slurm_backend", str),
        "timeout_s": ("slurm_timeout_s", float),
        "command_prefix": ("slurm_command_prefix", list),
        "rest_url": ("slurm_rest_url", str),
        "rest_token_file": ("slurm_rest_token_file", str),
        "rest_version": ("slurm_rest_version", str),
        "on_drain": ("on_drain", str),
        "partitions": ("partitions", list),
        "node_types": ("node_types", dict),
        "limits": ("slurm_limits", bool),
        "policy_refresh_s": ("slurm_policy_refresh_s", float),
    },
    "scheduler": {
        "round_length_s": ("round_length_s", float),
        "queue_refresh_s": ("queue_refresh_s", float),
        "lambda": ("lam", float),
        "sigma": ("sigma", float),
        "priority": ("priority", str),
        "policy": ("policy", str),
        "restart_penalty_s": ("restart_penalty_s", float),
        "profiling_iterations": ("profiling_iterations", int),
        "profiling": ("profiling", bool),
        "profiling_timeout_s": ("profiling_timeout_s", float),
        "mip_gap": ("mip_gap", float),
        "solver_time_limit_s": ("solver_time_limit_s", float),
        "reference_throughput": ("reference_throughput", float),
        "max_demand_gpus": ("max_demand_gpus", int),
        "size_check_factor": ("size_check_factor", float),
        "size_check_slack_s": ("size_check_slack_s", float),
    },
    "fairshare": {
        "weight": ("fairshare_weight", float),
        "half_life_h": ("fairshare_half_life_h", float),
        "shares": ("shares", dict),
        "source": ("fairshare_source", str),
    },
    "metrics": {"address": ("metrics_address", str)},
    "forecast": {
        "arrivals": ("forecast_arrivals", str),
        "test_only_arrivals": ("forecast_test_only_arrivals", str),
        "window_s": ("forecast_window_s", float),
    },
    "daemon": {
        "spool_dir": ("spool_dir", str),
        "lease_ttl_s": ("lease_ttl_s", float),
        "standby": ("standby", bool),
        "requeue_quiet_s": ("requeue_quiet_s", float),
        "requeue_wait_s": ("requeue_wait_s", float),
        "spool_retention_s": ("spool_retention_s", float),
        "notice_signal": ("notice_signal", str),
        "checkpoint_grace_s": ("checkpoint_grace_s", float),
    },
}


def _typed(key: str, value: Any, kind: type) -> Any:
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    if kind in (str, list, dict) and isinstance(value, kind):
        return tuple(value) if kind is list else value
    raise ConfigError(f"{key}: expected {kind.__name__}, got {type(value).__name__} {value!r}")


def _read_sections(raw: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for section, body in raw.items():
        if section in ("gpu_types", "policies"):
            continue
        if section not in _SECTIONS:
            raise ConfigError(f"[{section}]: unknown section (known: {', '.join(_SECTIONS)})")
        if not isinstance(body, dict):
            raise ConfigError(f"[{section}]: expected a table")
        for key, value in body.items():
            if key not in _SECTIONS[section]:
                known = ", ".join(_SECTIONS[section])
                raise ConfigError(f"{section}.{key}: unknown key (known: {known})")
            attr, kind = _SECTIONS[section][key]
            values[attr] = _typed(f"{section}.{key}", value, kind)
    return values


def _read_gpu_types(raw: Mapping[str, Any]) -> dict[str, GpuTypeConfig]:
    out: dict[str, GpuTypeConfig] = {}
    for name, body in raw.get("gpu_types", {}).items():
        if not isinstance(body, dict):
            raise ConfigError(f"gpu_types.{name}: expected a table")
        fields: dict[str, float] = {}
        for key, value in body.items():
            if key not in ("speed", "b_link", "b_net"):
                raise ConfigError(
                    f"gpu_types.{name}.{key}: unknown key (known: speed, b_link, b_net)"
                )
            number = _typed(f"gpu_types.{name}.{key}", value, float)
            if not 0 < number < math.inf:
                raise ConfigError(f"gpu_types.{name}.{key}: must be finite and > 0, got {number}")
            fields[key] = number
        out[name] = GpuTypeConfig(**fields)
    return out


def _read_policy_tables(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``[policies.NAME]`` tables, by name; a name no installed policy has is refused."""
    tables = raw.get("policies", {})
    if not isinstance(tables, dict):
        raise ConfigError("[policies]: expected one table per policy, [policies.NAME]")
    for name, body in tables.items():
        if not isinstance(body, dict):
            raise ConfigError(f"policies.{name}: expected a table")
        if not is_policy(name):
            known = ", ".join(policy_names())
            raise ConfigError(f"policies.{name}: unknown policy (known: {known})")
    return tables


def _check(config: HopsConfig) -> None:
    if config.slurm_backend not in ("cli", "pyslurm", "rest"):
        raise ConfigError(
            f"slurm.backend: must be 'cli', 'pyslurm' or 'rest', got {config.slurm_backend!r}"
        )
    _check_rest(config)
    if config.on_drain not in ("finish", "move"):
        raise ConfigError(f"slurm.on_drain: must be 'finish' or 'move', got {config.on_drain!r}")
    if not all(isinstance(word, str) and word for word in config.slurm_command_prefix):
        raise ConfigError(
            "slurm.command_prefix: must be a list of non-empty strings, "
            f"got {list(config.slurm_command_prefix)!r}"
        )
    if not is_policy(config.policy):
        known = ", ".join(policy_names())
        raise ConfigError(f"scheduler.policy: unknown {config.policy!r} (known: {known})")
    if config.priority not in priority_names():
        known = ", ".join(priority_names())
        raise ConfigError(f"scheduler.priority: unknown {config.priority!r} (known: {known})")
    check_numbers(config)
    check_arrivals(config)
    check_fairshare_source(config)
    for node, gpu_type in config.node_types.items():
        if not isinstance(gpu_type, str) or not gpu_type:
            raise ConfigError(f"slurm.node_types.{node}: must be a GPU type name")
    check_notice_signal(config.notice_signal)
    if config.spool_dir and (not config.spool_dir.startswith("/") or "," in config.spool_dir):
        raise ConfigError(
            f"daemon.spool_dir: must be an absolute path without commas, got {config.spool_dir!r}"
        )
    if config.metrics_address:
        split_address("metrics.address", config.metrics_address)
    check_ledger_url("ledger.url", config.ledger_url)
    if config.ledger_read_url:
        check_ledger_url("ledger.read_url", config.ledger_read_url)


def _check_rest(config: HopsConfig) -> None:
    """``backend = "rest"`` needs an http(s) URL and a token file."""
    if config.slurm_rest_version not in ("v0.0.40", "v0.0.41", "v0.0.42"):
        raise ConfigError(
            "slurm.rest_version: slurmrestd data parser v0.0.40, v0.0.41 or v0.0.42, "
            f"got {config.slurm_rest_version!r}"
        )
    if config.slurm_backend != "rest":
        return
    if not config.slurm_rest_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"slurm.rest_url: backend 'rest' needs an http(s) URL, got {config.slurm_rest_url!r}"
        )
    if not config.slurm_rest_token_file:
        raise ConfigError("slurm.rest_token_file: backend 'rest' needs a file holding a JWT")


def parse_config(text: str, path: str | None = None) -> HopsConfig:
    """Parse and validate hops.conf text; raise ConfigError naming the bad key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path or 'hops.conf'}: not valid TOML: {exc}") from exc
    values = _read_sections(raw)
    config = HopsConfig(
        path=path, gpu_types=_read_gpu_types(raw), policies=_read_policy_tables(raw), **values
    )
    _check(config)
    return config


def find_config_path(explicit: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """``--config`` wins, then ``HOPS_CONF``; None means embedded defaults."""
    env = os.environ if environ is None else environ
    return explicit or env.get("HOPS_CONF") or None


def load_config(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> HopsConfig:
    """Load hops.conf from ``--config``/``HOPS_CONF``, or return the embedded defaults."""
    path = find_config_path(explicit, environ)
    if path is None:
        return HopsConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    return parse_config(text, path)


def policy_settings(config: HopsConfig, name: str | None = None) -> object:
    """The typed settings of policy ``name`` (default: the configured one) from its
    ``[policies.NAME]`` table; imports that policy. ConfigError names the bad key."""
    chosen = config.policy if name is None else name
    from hopsd.plugins import PluginError, policy_spec

    try:
        return policy_spec(chosen).settings(config.policies.get(chosen))
    except SettingsError as exc:
        key = f"policies.{chosen}.{exc.key}" if exc.key else f"policies.{chosen}"
        raise ConfigError(f"{key}: {exc}") from exc
    except PluginError as exc:
        where = "scheduler.policy" if chosen == config.policy else f"policies.{chosen}"
        raise ConfigError(f"{where}: {exc}") from exc


def load_daemon_config(explicit: str | None = None) -> HopsConfig:
    """:func:`load_config`, and the configured policy can be built on this install.

    hopsd's own loader (start, reload, ``--check``): a baseline such as sia needs
    an extra of the slim install, and a missing one is a configuration error
    naming the key, not a traceback at the first tick; so is a plug-in that does
    not load or a ``[policies.NAME]`` table its policy does not accept (every
    table is checked, not only the configured policy's, so a typo waits for no
    policy switch). The CLI keeps the plain loader, which imports no policy.
    """
    config = load_config(explicit)
    from hopsd.core.errors import InvalidInputError
    from hopsd.plugins import get_policy

    for name in config.policies:
        policy_settings(config, name)
    settings = policy_settings(config)
    try:
        get_policy(config.policy, settings)
    except InvalidInputError as exc:  # a missing extra, a plug-in refusing its settings
        raise ConfigError(f"scheduler.policy: {exc}") from exc
    return config
