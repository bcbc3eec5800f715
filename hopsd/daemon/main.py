"""Entry point of ``hopsd``: parse arguments, check config, schema and lease, run the service.

    hopsd [--config FILE] [--shadow] [--once] [--ticks N] [--no-standby]
    hopsd --check [--json] [--config FILE]
    hopsd db upgrade [--config FILE]
    hopsd --version

A hopsd that finds the lease held by another waits as a standby (``[daemon]
standby``, on by default): it polls the lease every quarter of its TTL (or every
tick, if shorter) and leads once the holder's lease has run out, i.e. within the
TTL plus one poll of the leader's death. ``--once`` and ``--no-standby`` do not
wait.

Exit codes: 0 fine, 2 bad configuration or usage (a ``metrics.address`` that
cannot be listened on included: a daemon without its health endpoint would look
dead to its probes), 3 ledger schema or database
problem, 4 another hopsd holds the ledger lease (not a standby). ``--check`` exits 1
when any of its checks fails (:mod:`hopsd.daemon.check`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import hopsd
from hopsd.config import ConfigError, HopsConfig, load_daemon_config
from hopsd.daemon.faults import Hooks
from hopsd.daemon.heartbeat import LeaseKeeper
from hopsd.daemon.logging import setup_logging
from hopsd.daemon.metrics import DaemonMetrics
from hopsd.daemon.readservice import Privacy, serve_reads
from hopsd.daemon.service import Service
from hopsd.daemon.spool import UnsafeSpool, prepare_root
from hopsd.daemon.test_only import Forecaster, test_only_payload
from hopsd.daemon.tick import Tick
from hopsd.holder import holder_name, local_dead
from hopsd.ledger import migrate
from hopsd.ledger.engine import redact
from hopsd.ledger.errors import LeaseHeldError, LedgerError
from hopsd.ledger.health import ping, probe_engine
from hopsd.ledger.records import LeaseInfo
from hopsd.ledger.unit import LEDGER_FAILURES, Ledger, LedgerLike, as_ledger
from hopsd.slurm.factory import port_from_config
from hopsd.slurm.privacy import read_privacy
from hopsd.slurm.runner import CountingRunner, SubprocessRunner
from hopsd.slurm.tag import HopsTag
from hopsd.solver_banner import silence_solver_banner
from hopsd.views.page import documents

log = logging.getLogger("hopsd")

EXIT_CONFIG, EXIT_LEDGER, EXIT_LEASE = 2, 3, 4
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    """hopsd's command line (the site's reference is generated from it)."""
    parser = argparse.ArgumentParser(
        prog="hopsd", description="Schedule hops-tagged Slurm jobs with the Hops method."
    )
    parser.add_argument("--version", action="version", version=f"hopsd {hopsd.__version__}")
    parser.add_argument("--config", help="hops.conf (default: $HOPS_CONF, else built-in)")
    parser.add_argument("--shadow", action="store_true", help="decide and log, enact nothing")
    parser.add_argument("--once", action="store_true", help="run one tick and exit")
    parser.add_argument("--ticks", type=int, default=None, help="exit after N ticks")
    parser.add_argument(
        "--no-standby",
        action="store_true",
        help="exit (4) if another hopsd holds the lease instead of waiting to take over",
    )
    parser.add_argument(
        "--log-level",
        default=None,
        type=str.upper,
        choices=LOG_LEVELS,
        help="debug, info, warning, error or critical, any case (default: $HOPS_LOG_LEVEL or info)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check config, Slurm, ledger, spool and metrics port, print a checklist and exit "
        "(0: all pass); schedules nothing, takes no lease",
    )
    parser.add_argument("--json", action="store_true", help="with --check: one JSON document")
    parser.add_argument("command", nargs="*", help="`db upgrade` migrates the ledger")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command and args.command != ["db", "upgrade"]:
        parser.error(f"unknown command {' '.join(args.command)!r} (known: db upgrade)")
    if args.json and not args.check:
        parser.error("--json goes with --check")
    if args.check and (args.command or args.once or args.ticks is not None or args.shadow):
        parser.error("--check runs alone: no db upgrade, --once, --ticks or --shadow with it")
    if args.ticks is not None and args.ticks < 1:
        parser.error("--ticks must be >= 1")
    return args


def take_lease(ledger: LedgerLike, config: HopsConfig, holder: str) -> LeaseInfo:
    """Take the lease (expiry and fencing token); take over a dead local hopsd's, refuse a
    live one."""
    ledger = as_ledger(ledger)
    while True:
        try:
            with ledger.unit() as unit:
                return unit.ensure_lease(holder, config.lease_ttl_s, time.time())
        except LeaseHeldError as exc:
            if not local_dead(exc.holder):
                raise
            # The holder was a hopsd of this host that no longer exists (killed or
            # crashed): nobody can act under that lease any more, so give it up for it.
            log.warning("event=lease-takeover holder=%s reason=%r", exc.holder, "process gone")
            with ledger.unit() as unit:
                if not unit.release_lease(exc.holder):
                    time.sleep(0.2)


def standby_poll_s(config: HopsConfig) -> float:
    """How often a standby tries the lease: a quarter TTL, or a tick if that is shorter."""
    return max(min(config.lease_ttl_s / 4.0, config.queue_refresh_s), 0.05)


def wait_as_standby(
    ledger: Ledger, config: HopsConfig, holder: str, stop: threading.Event
) -> LeaseInfo | None:
    """Poll for the lease until it is ours (its info) or ``stop`` is set (None).

    The leader renews every quarter TTL; once it stops (killed, host gone, cut
    off from the ledger) its lease runs out and the first poll after that wins.
    """
    poll = standby_poll_s(config)
    seen: str | None = None
    while not stop.is_set():
        try:
            return take_lease(ledger, config, holder)
        except LeaseHeldError as exc:
            if exc.holder != seen:
                seen = exc.holder
                log.info(
                    "event=standby leader=%s lease_ttl_s=%g poll_s=%g",
                    exc.holder,
                    config.lease_ttl_s,
                    poll,
                )
        except LEDGER_FAILURES as exc:
            log.warning("event=standby-ledger-unavailable error=%r", str(exc).splitlines()[0])
        stop.wait(poll)
    return None


def _stop_on_signals(stop: threading.Event) -> None:
    def on_stop(signum: int, _frame: object) -> None:
        log.info("event=signal name=%s stopping_standby", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)


def _service(
    args: argparse.Namespace,
    config: HopsConfig,
    hooks: Hooks,
    ledger: Ledger,
    lease: LeaseKeeper,
) -> tuple[Service, DaemonMetrics]:
    """The tick on Slurm and the ledger, the metrics it feeds and the service that runs it."""
    runner = CountingRunner(SubprocessRunner())
    port = port_from_config(config, run=runner)
    tick = Tick(
        config,
        port,
        ledger,
        shadow=args.shadow,
        lease=lease,
        call_count=lambda: len(runner.calls),
        adopt_filter=hooks.adopt_filter,
        faults=hooks.faults,
    )
    metrics = DaemonMetrics()
    metrics.watch(tick.reconciler.problems)
    reload = lambda: load_daemon_config(args.config)  # noqa: E731
    return Service(tick, metrics=metrics, reload=reload, lease=lease), metrics


def _forecaster(service: Service, reader: Ledger) -> Forecaster:
    """``--test-only`` for users who may not read the ledger: on the tick's current
    configuration and port, through the status page's read engine."""

    def compute(tag: HopsTag, user: str) -> dict[str, Any]:
        tick = service.tick
        with reader.reading() as unit:
            return test_only_payload(tick.config, unit, tick.port, tag, user)

    return Forecaster(compute)


def run_daemon(args: argparse.Namespace, config: HopsConfig, hooks: Hooks | None = None) -> int:
    hooks = hooks or Hooks()
    ledger = Ledger.open(config.ledger_url, sqlite_begin="immediate")
    try:
        ledger.check_schema()
    except LedgerError as exc:
        print(f"hopsd: {exc}", file=sys.stderr)
        return EXIT_LEDGER
    holder = holder_name()
    lease = LeaseKeeper(ledger, holder, config.lease_ttl_s)
    service, metrics = _service(args, config, hooks, ledger, lease)
    checks = service.health_checks()
    after_tick = checks["ledger"]
    probe = probe_engine(config.ledger_url)
    checks["ledger"] = lambda: ping(probe) or after_tick()
    # The status page reads through an engine of its own (deferred BEGIN): a page
    # view never takes SQLite's write lock nor waits for a tick's.
    reader = Ledger.open(config.ledger_url, timeout_ms=2000, sqlite_begin="deferred")
    privacy = Privacy(lambda: read_privacy(SubprocessRunner()))
    reads = serve_reads(config.ledger_url, privacy.get, _forecaster(service, reader))
    try:
        # Before the lease: a daemon that cannot serve its endpoint exits holding nothing.
        metrics.serve(config.metrics_address, checks, documents(reader, config, privacy.rules))
    except OSError as exc:
        print(
            f"hopsd: metrics.address {config.metrics_address}: cannot listen: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        if reads is not None:
            reads.close()
        _dispose(ledger, reader, probe)
        return EXIT_CONFIG
    info: LeaseInfo | None = None
    if args.once or args.no_standby or not config.standby:
        try:
            info = take_lease(ledger, config, holder)
        except LeaseHeldError as exc:
            print(f"hopsd: {exc}", file=sys.stderr)
            metrics.close()
            if reads is not None:
                reads.close()
            _dispose(ledger, reader, probe)
            return EXIT_LEASE
    log.info(
        "event=start version=%s ledger=%s shadow=%s holder=%s",
        hopsd.__version__,
        redact(config.ledger_url),
        str(args.shadow).lower(),
        holder,
    )
    try:
        if info is None:
            info = _stand_by(ledger, config, holder, service)
            if info is None:
                return 0
        lease.confirmed(info.expires_at, info.token)
        if args.once:
            service.run_once()
        else:
            service.start(loops=args.ticks)
    finally:
        with ledger.unit() as unit:
            if (info := unit.lease_info()) is not None and info.holder == holder:
                unit.release_lease(holder)
        metrics.close()
        if reads is not None:
            reads.close()
        _dispose(ledger, reader, probe)
    return 1 if service.fatal is not None else 0


class _Disposable(Protocol):
    def dispose(self) -> None: ...


def _dispose(*engines: _Disposable) -> None:
    """Close the daemon's database connections (each engine keeps a pool)."""
    for engine in engines:
        engine.dispose()


def _stand_by(
    ledger: Ledger, config: HopsConfig, holder: str, service: Service
) -> LeaseInfo | None:
    """Wait as a standby (``hopsd_leader`` 0, healthy) until the lease is ours."""
    service.waiting = True
    service.metrics.leader.set(0)
    stop = threading.Event()
    _stop_on_signals(stop)
    info = wait_as_standby(ledger, config, holder, stop)
    service.waiting = False
    if info is not None:
        service.started_at = time.time()
        service.metrics.leader.set(1)
        log.info("event=leading holder=%s token=%d", holder, info.token)
    return info


def main(argv: list[str] | None = None, hooks: Hooks | None = None) -> int:
    """Run ``hopsd`` with ``argv``; ``hooks`` (faults, an adoption filter) are for callers
    that build the daemon themselves, production passes none (:mod:`hopsd.daemon.faults`)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging(args.log_level)
    if args.check:
        from hopsd.daemon.check import main_check

        return main_check(args.config, args.json)
    try:
        config = load_daemon_config(args.config)
    except ConfigError as exc:
        print(f"hopsd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == ["db", "upgrade"]:
        try:
            migrate.upgrade(config.ledger_url)
        except LedgerError as exc:
            print(f"hopsd: {exc}", file=sys.stderr)
            return EXIT_LEDGER
        print(f"hopsd: ledger {redact(config.ledger_url)} is at revision {migrate.head_revision()}")
        return 0
    if config.spool_dir:
        try:
            prepare_root(Path(config.spool_dir))
        except UnsafeSpool as exc:
            print(f"hopsd: daemon.spool_dir: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    silence_solver_banner()
    try:
        return run_daemon(args, config, hooks)
    except LedgerError as exc:
        print(f"hopsd: {exc}", file=sys.stderr)
        return EXIT_LEDGER


if __name__ == "__main__":
    sys.exit(main())
