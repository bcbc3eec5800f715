"""hopsd's HTTP endpoint under slow clients, on the live test cluster.

One hopsd runs against the test cluster with a live test's hops.conf, ledger
and spool (``tests/daemon/daemon_live.py``), its endpoint on 127.0.0.1. First
it runs quietly (the baseline, measured in this run); then ``--clients``
concurrent clients connect for ``--seconds`` seconds, each sending its request
head one byte per second and never finishing it (a client the server cuts off
waits half a second and connects again); meanwhile a scraper asks for
``/metrics`` once a second.

    HOPS_CLUSTER_PORT=... HOPS_CLUSTER_DIR=... (cluster up, SLURM_CONF exported)
    .venv/bin/python benchmarks/endpoint_load.py --json

prints one JSON object: tick times and intervals (quiet and loaded, with their
ratio), hopsd's threads and resident memory (quiet and loaded), the clients the
server cut off or refused, the scrapes answered, and the endpoint's log lines
per 100 failed clients. Goals: ``tick_max_ratio <= 2``, threads and memory
bounded (``threads_max_load`` a small constant above ``threads_quiet``),
``log_lines_per_100_failed <= 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from daemon_live import LiveEnv, hopsd_process, serve_metrics

_TICK = re.compile(r"^ts=(\S+) .*event=tick .*total_s=([0-9.]+)")


@dataclass
class Load:
    """What the clients saw."""

    connections: int = 0
    cut_off: int = 0
    scrapes: int = 0
    scrapes_ok: int = 0
    stop: bool = False


@dataclass
class Samples:
    """hopsd's threads and resident memory over time."""

    at: list[float] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)


def sample(pid: int, samples: Samples, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        samples.at.append(time.time())
        samples.threads.append(int(fields["Threads"]))
        samples.rss_kib.append(int(fields["VmRSS"].split()[0]))


async def slow_client(port: int, load: Load) -> None:
    head = b"GET /metrics HTTP/1.1\r\nHost: hops\r\nX-Slow: " + b"a" * 4096
    while not load.stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            load.cut_off += 1
            await asyncio.sleep(0.5)
            continue
        load.connections += 1
        try:
            for byte in head:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1.0)
                if load.stop or reader.at_eof():
                    break
        except OSError:
            pass
        finally:
            writer.close()
        load.cut_off += 1  # no answer came: cut off, evicted, or given up at the end
        if not load.stop:
            await asyncio.sleep(0.5)


def scrape(port: int, load: Load) -> None:
    while not load.stop:
        load.scrapes += 1
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                load.scrapes_ok += r.status == 200
        except OSError:
            pass
        time.sleep(1.0)


async def attack(port: int, clients: int, seconds: float, load: Load) -> None:
    tasks = [asyncio.create_task(slow_client(port, load)) for _ in range(clients)]
    await asyncio.sleep(seconds)
    load.stop = True
    await asyncio.wait(tasks, timeout=5)


def ticks(log: str) -> list[tuple[float, float]]:
    """(wall time, duration) of each tick hopsd logged."""
    out = []
    for line in log.splitlines():
        if m := _TICK.match(line):
            stamp = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ")
            at = stamp.replace(tzinfo=UTC).timestamp()
            out.append((at, float(m.group(2))))
    return out


def phase_figures(
    all_ticks: list[tuple[float, float]], start: float, end: float
) -> dict[str, float]:
    inside = [(at, d) for at, d in all_ticks if start <= at < end]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(inside)]
    return {
        "ticks": len(inside),
        "tick_max_s": max((d for _, d in inside), default=0.0),
        "tick_mean_s": sum(d for _, d in inside) / max(len(inside), 1),
        "interval_max_s": max(gaps, default=0.0),
    }


def window(samples: Samples, start: float, end: float) -> tuple[list[int], list[int]]:
    picked = [i for i, at in enumerate(samples.at) if start <= at < end]
    return [samples.threads[i] for i in picked], [samples.rss_kib[i] for i in picked]


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hops-endpoint-"))
    env = LiveEnv.create(work)  # the live tests' hops.conf, ledger and spool, migrated
    port = serve_metrics(env)
    log_path = work / "hopsd.log"
    proc = hopsd_process(env, log=log_path, args=["--log-level", "debug"])
    samples, stop = Samples(), threading.Event()
    sampler = threading.Thread(target=sample, args=(proc.pid, samples, stop), daemon=True)
    sampler.start()
    try:
        time.sleep(3.0)  # start-up
        quiet_start = time.time()
        time.sleep(args.quiet)
        load_start = time.time()
        load = Load()
        scraper = threading.Thread(target=scrape, args=(port, load), daemon=True)
        scraper.start()
        asyncio.run(attack(port, args.clients, args.seconds, load))
        load_end = time.time()
        scraper.join(timeout=10)
        time.sleep(2.0)
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    log = log_path.read_text(errors="replace")
    return figures(log, samples, load, (quiet_start, load_start, load_end), args)


def figures(
    log: str, samples: Samples, load: Load, marks: tuple[float, float, float], args: Any
) -> dict[str, Any]:
    quiet_start, load_start, load_end = marks
    all_ticks = ticks(log)
    quiet = phase_figures(all_ticks, quiet_start, load_start)
    loaded = phase_figures(all_ticks, load_start, load_end)
    q_threads, q_rss = window(samples, quiet_start, load_start)
    l_threads, l_rss = window(samples, load_start, load_end)
    endpoint_lines = sum(
        1 for line in log.splitlines() if "logger=hopsd.endpoint" in line or "Traceback" in line
    )
    failed = max(load.cut_off, 1)
    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "quiet": quiet,
        "load": loaded,
        "tick_max_ratio": round(loaded["tick_max_s"] / max(quiet["tick_max_s"], 1e-9), 3),
        "tick_mean_ratio": round(loaded["tick_mean_s"] / max(quiet["tick_mean_s"], 1e-9), 3),
        "interval_max_ratio": round(
            loaded["interval_max_s"] / max(quiet["interval_max_s"], 1e-9), 3
        ),
        "threads_quiet": max(q_threads, default=0),
        "threads_max_load": max(l_threads, default=0),
        "rss_mib_quiet": round(max(q_rss, default=0) / 1024, 1),
        "rss_mib_max_load": round(max(l_rss, default=0) / 1024, 1),
        "connections": load.connections,
        "failed_clients": load.cut_off,
        "scrapes": load.scrapes,
        "scrapes_ok": load.scrapes_ok,
        "endpoint_log_lines": endpoint_lines,
        "log_lines_per_100_failed": round(100 * endpoint_lines / failed, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--quiet", type=float, default=20.0, help="baseline seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if "SLURM_CONF" not in os.environ:
        print("endpoint_load: export the test cluster's SLURM_CONF", file=sys.stderr)
        return 2
    result = run(args)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
