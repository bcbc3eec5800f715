"""``hopsd --check``: is this host ready to run hopsd? One line per thing hopsd needs.

Each check asks what hopsd itself asks at start, with the same code, so a
pass here means hopsd will not refuse for that reason: the configuration
(:func:`hopsd.config.load_daemon_config`), Slurm (one node listing through the
configured backend, and through slurmrestd when it is the backend), the ledger
(reachable, schema at this hops's Alembic head), the shared spool
(:func:`hopsd.daemon.spool.check_root`) and the metrics address (bindable, or
already served by a hopsd). Nothing is scheduled, no lease is taken, nothing
is created: a check may run beside a live hopsd.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hopsd.config import ConfigError, HopsConfig, load_daemon_config
from hopsd.config_checks import split_address
from hopsd.slurm.port import SlurmPort

#: Exit status of ``hopsd --check`` when any check fails (0 when all pass).
EXIT_CHECK_FAILED = 1
#: How long the metrics check waits for an endpoint already listening to answer.
HEALTH_TIMEOUT_S = 2.0

PortMaker = Callable[[str, HopsConfig], SlurmPort]


@dataclass(frozen=True)
class CheckResult:
    """One line of the checklist: what was checked, whether it passed, why, what to do."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """``ok    name  detail`` or ``FAIL  name  reason -> what to do``."""
        said = self.detail if self.ok or not self.fix else f"{self.detail} -> {self.fix}"
        return f"{'ok' if self.ok else 'FAIL':<5} {self.name:<11} {said}"


def default_port(backend: str, config: HopsConfig) -> SlurmPort:
    """The port hopsd would use for ``backend`` (``cli`` alone: the commands it also runs)."""
    from hopsd.slurm.factory import make_port, port_from_config

    if backend == "cli":
        return make_port(
            "cli", timeout_s=config.slurm_timeout_s, command_prefix=config.slurm_command_prefix
        )
    return port_from_config(config)


def run_checks(config_path: str | None, port: PortMaker = default_port) -> list[CheckResult]:
    """Every check in order; without a usable configuration there is nothing else to check."""
    config, result = check_config(config_path)
    if config is None:
        return [result]
    return [
        result,
        *check_slurm(config, port),
        check_ledger(config),
        check_spool(config),
        check_metrics(config),
    ]


def check_config(config_path: str | None) -> tuple[HopsConfig | None, CheckResult]:
    """hops.conf through the validation hopsd starts with (each key's type, range, shape)."""
    try:
        config = load_daemon_config(config_path)
    except ConfigError as exc:
        return None, CheckResult("config", False, str(exc), "fix that key in hops.conf")
    return config, CheckResult("config", True, config.path or "built-in defaults (no hops.conf)")


def check_slurm(config: HopsConfig, port: PortMaker) -> list[CheckResult]:
    """One node listing through the commands (hopsd runs scontrol/sacct whatever the backend),
    then through the configured backend when it is another one."""
    from hopsd.slurm.factory import pyslurm_unavailable_reason

    results = [_list_nodes("slurm", port("cli", config), config)]
    if config.slurm_backend == "pyslurm" and (reason := pyslurm_unavailable_reason()):
        # hopsd starts anyway, on the commands checked above: worth a line, not a failure
        results.append(CheckResult("pyslurm", True, f"{reason}; hopsd uses the CLI backend"))
    elif config.slurm_backend != "cli":
        name = "slurmrestd" if config.slurm_backend == "rest" else config.slurm_backend
        results.append(_list_nodes(name, port(config.slurm_backend, config), config))
    return results


def _list_nodes(name: str, port: SlurmPort, config: HopsConfig) -> CheckResult:
    """Slurm answers, and the managed partitions hold GPU nodes hops can place jobs on."""
    from hopsd.core.inventory import facts_of, managed_nodes
    from hopsd.slurm.errors import SlurmAuthError, SlurmError

    try:
        listed = port.list_nodes()
    except SlurmAuthError as exc:
        return CheckResult(name, False, _first_line(exc), "renew the token (scontrol token)")
    except (SlurmError, OSError, ValueError) as exc:
        fix = "is slurmctld up, and may hopsd's user run sinfo/scontrol?"
        if name == "slurmrestd":
            fix = "is slurmrestd up at [slurm] rest_url, with a valid token?"
        return CheckResult(name, False, _first_line(exc), fix)
    known = {p for n in listed for p in n.partitions}
    missing = [p for p in config.partitions if p not in known]
    if missing:
        return CheckResult(
            name,
            False,
            f"partition {','.join(missing)} not in Slurm (it has {','.join(sorted(known)) or '-'})",
            "set [slurm] partitions to partitions Slurm has",
        )
    managed = managed_nodes(facts_of(listed), config.partitions, config.node_types)
    if not managed:
        return CheckResult(
            name,
            False,
            f"{len(listed)} nodes, none with GPUs in the managed partitions",
            "give the nodes gres=gpu:TYPE:N, or set [slurm] partitions / node_types",
        )
    gpus = sum(n.gpus for n in managed)
    return CheckResult(
        name,
        True,
        f"{port.name}: {len(listed)} nodes, {gpus} GPUs on {len(managed)} managed nodes",
    )


def check_ledger(config: HopsConfig) -> CheckResult:
    """The ledger answers and is at this hops's schema (what hopsd checks before it leads).

    Opened read-only, and a missing SQLite file is reported instead of created.
    """
    from hopsd.ledger import migrate
    from hopsd.ledger.engine import normalise_url, redact
    from hopsd.ledger.errors import LedgerError, SchemaNewerError, SchemaOutdatedError
    from hopsd.ledger.unit import LEDGER_FAILURES, Ledger

    url = normalise_url(config.ledger_url)
    where = redact(url)
    upgrade = "run `hops db upgrade` as hopsd's user"
    if url.get_backend_name() == "sqlite" and not Path(str(url.database or "")).exists():
        return CheckResult("ledger", False, f"no ledger at {url.database}", upgrade)
    try:
        ledger = Ledger.open(url, timeout_ms=2000, read_only=True)
    except LedgerError as exc:
        return CheckResult("ledger", False, f"{where}: {_first_line(exc)}", "fix [ledger] url")
    try:
        ledger.check_schema()
    except SchemaOutdatedError as exc:
        return CheckResult("ledger", False, _first_line(exc).split(": run")[0], upgrade)
    except SchemaNewerError as exc:
        return CheckResult("ledger", False, _first_line(exc).split("; ")[0], "upgrade hops")
    except LEDGER_FAILURES as exc:  # unreachable, refused, no rights
        return CheckResult(
            "ledger",
            False,
            f"{where}: {_first_line(exc)}",
            "is the database up, and do [ledger] url's host, user and password let hopsd in?",
        )
    finally:
        ledger.dispose()
    return CheckResult("ledger", True, f"{where} at revision {migrate.head_revision()}")


def check_spool(config: HopsConfig) -> CheckResult:
    """``[daemon] spool_dir`` passes the rules hopsd enforces at start (or could be made so)."""
    from hopsd.daemon.spool import check_creatable_root, check_root

    if not config.spool_dir:
        return CheckResult("spool", True, "not set: each job's working directory is its spool")
    root = Path(config.spool_dir)
    try:
        if os.path.lexists(root):
            check_root(root)
            return CheckResult("spool", True, f"{root}: hopsd's, writable only by it")
        check_creatable_root(root)
    except OSError as exc:  # UnsafeSpool, or a directory above it we may not even stat
        fix = f"make it uid {os.geteuid()}'s, writable by no other, or set [daemon] spool_dir"
        return CheckResult("spool", False, str(exc), fix)
    return CheckResult("spool", True, f"{root} does not exist yet; hopsd will create it (0755)")


def check_metrics(config: HopsConfig) -> CheckResult:
    """``metrics.address`` can be listened on, or a hopsd already answers ``/healthz`` there.

    hopsd exits (2) when it cannot listen, so a port taken by another program fails.
    """
    if not config.metrics_address:
        return CheckResult("metrics", True, "disabled ([metrics] address is empty)")
    host, port = split_address("metrics.address", config.metrics_address)
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        served = _served_by_hopsd(host or "127.0.0.1", port)
        if served is not None:
            return CheckResult("metrics", True, f"{config.metrics_address}: {served}")
        return CheckResult(
            "metrics",
            False,
            f"{config.metrics_address}: cannot listen: {exc.strerror or exc}",
            "stop what holds the port, or set [metrics] address to a free HOST:PORT",
        )
    return CheckResult("metrics", True, f"{config.metrics_address} is free")


def _served_by_hopsd(host: str, port: int) -> str | None:
    """What a hopsd listening at host:port says on ``/healthz``, or None when none answers."""
    url = f"http://{host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as reply:
            body = json.loads(reply.read(4096))
    except urllib.error.HTTPError as exc:  # 503: a hopsd that is serving, though unhealthy
        with contextlib.suppress(ValueError, OSError):
            body = json.loads(exc.read(4096))
            if isinstance(body, dict) and "status" in body:
                return f"already served by a hopsd (/healthz: {exc.code} {body['status']})"
        return None
    except (OSError, ValueError):
        return None
    if isinstance(body, dict) and "status" in body:
        return f"already served by a hopsd (/healthz: {body['status']})"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def report(results: list[CheckResult], as_json: bool) -> str:
    """The checklist as text lines, or as one JSON document for scripts."""
    if as_json:
        document: dict[str, Any] = {
            "ok": all(r.ok for r in results),
            "checks": [asdict(r) for r in results],
        }
        return json.dumps(document, indent=2)
    return "\n".join(r.line() for r in results)


def main_check(config_path: str | None, as_json: bool, port: PortMaker | None = None) -> int:
    """``hopsd --check [--json]``: print the checklist; 0 when every check passed."""
    results = run_checks(config_path, port or default_port)
    print(report(results, as_json))
    return 0 if all(r.ok for r in results) else EXIT_CHECK_FAILED
