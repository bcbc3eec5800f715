"""Cost of one hopsd tick with many pending hops jobs and many running jobs, on the live cluster.

Submits N held, tagged jobs (``--pending``) and a job array of M tiny running
CPU-only jobs (``--running``; not hops jobs: the test cluster has 18 GPUs), plus
a small baseline set of pending jobs measured in the same run. Drives a few
ticks of the real daemon code in-process against the CLI port and prints per-step
times, Slurm calls per tick, the process's resident memory, the ratio against the
baseline, and how long ``hops status`` takes on the resulting ledger. Jobs are
cancelled at the end.

A queue beyond Slurm's default 10,000 jobs and thousands of running jobs need
the test cluster started with room for them, for example::

    HOPS_MAX_JOB_COUNT=20000 HOPS_MAX_ARRAY_SIZE=10001 HOPS_NODE_CPUS=512 \\
        eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/daemon_tick.py --pending 10000 --running 2000 [--json]

Before the first tick is timed the benchmark waits for slurmctld to go quiet
(``sdiag``: nothing queued for its agents or for slurmdbd, twice a second
apart; at most ``--quiet-wait-s``): twelve thousand submissions leave it
writing accounting records for a while, which a daemon started on a settled
queue would not meet. It waits so before submitting too: an earlier run's
cancelled jobs keep it ending them on the nodes. The wait and each tick's
seconds in Slurm commands (by command) are printed with the figures.

``--record FILE.json.xz`` keeps the big run's ``squeue --json`` output (the
fixture ``benchmarks/squeue_parse.py`` times the parser and assembly on).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import itertools
import json
import logging
import lzma
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from hops_conf import live, render

from hopsd.config import parse_config
from hopsd.core.step import RoundClock
from hopsd.daemon.tick import Tick
from hopsd.daemon.tick_result import TickResult
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.slurm.factory import make_port
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.runner import CompletedRun, CountingRunner, Runner, SubprocessRunner
from hopsd.slurm.tag import HopsTag

#: The live cluster with the defaults' hour-long rounds: one tick is all that is timed.
CHANGES = {
    "slurm": {"timeout_s": 120.0},
    "scheduler": {
        "round_length_s": 3600.0,
        "queue_refresh_s": 30.0,
        "restart_penalty_s": None,
        "solver_time_limit_s": None,
        "max_demand_gpus": None,
    },
    "gpu_types.k80": None,
}

STEPS = ("observe_s", "reconcile_s", "resume_s", "decide_s", "record_s", "enact_s", "total_s")


def rss_mb() -> float:
    """The process's resident memory now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TimedRunner:
    """Wraps a runner and keeps each command's wall seconds, under its verb."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.spent: list[tuple[str, float]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        done = self.inner(argv, timeout)
        words = [w for w in argv if not w.startswith("-") and "=" not in w and w != "env"]
        verb = " ".join(words[:2]) if words[:1] == ["scontrol"] else (words[:1] or ["?"])[0]
        self.spent.append((verb, done.duration_s))
        return done

    def by_verb(self, start: int, end: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for verb, seconds in self.spent[start:end]:
            out[verb] = round(out.get(verb, 0.0) + seconds, 3)
        return out


def sdiag_queues() -> tuple[int, int] | None:
    """slurmctld's agent queue and slurmdbd agent queue sizes (sdiag), None if unread."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=False, timeout=60)
    sizes = {}
    for line in out.stdout.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("Agent queue size", "DBD Agent queue size"):
            sizes[name.strip()] = int(value.split()[0])
    if len(sizes) < 2:
        return None
    return sizes["Agent queue size"], sizes["DBD Agent queue size"]


def wait_quiet(limit_s: float) -> float:
    """Seconds waited until slurmctld queues nothing for its agents or slurmdbd (two reads
    a second apart), at most ``limit_s``."""
    started = time.monotonic()
    quiet = 0
    while time.monotonic() - started < limit_s and quiet < 2:
        queues = sdiag_queues()
        quiet = quiet + 1 if queues == (0, 0) else 0
        if quiet < 2:
            time.sleep(1.0)
    return round(time.monotonic() - started, 1)


def submit_many(port, script: Path, n: int, prefix: str) -> list[int]:  # type: ignore[no-untyped-def]
    demands = [(1,), (1, 2), (2, 4), (1, 2, 4), (4,)]

    def one(i: int) -> int:
        tag = HopsTag(demands[i % len(demands)], 10_000 + 100 * i)
        args = ["-J", f"{prefix}{i}", "-o", "/dev/null", "-t", "5"]
        return int(port.submit(SubmitRequest(str(script), sbatch_args=args, tag=tag)))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, range(n)))


def start_running(n: int, prefix: str, wait_s: float) -> tuple[list[str], int]:
    """A job array of ``n`` one-CPU sleeps; returns its id and how many run after ``wait_s``."""
    if n <= 0:
        return [], 0
    argv = ["sbatch", "--parsable", f"--array=0-{n - 1}", "-p", "all", "-c", "1", "--mem=1"]
    argv += ["-t", "120", "-o", "/dev/null", "-J", f"{prefix}run", "--wrap", "sleep 7200"]
    array = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    array_id = array.stdout.strip().split(";")[0]
    deadline = time.monotonic() + wait_s
    running = 0
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-t", "R", "-n", f"{prefix}run", "-o", "%i"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        running = len(out.stdout.split())
        if running >= n:
            break
        time.sleep(5)
    return [array_id], running


def cancel(ids: Sequence[int | str]) -> None:
    for start in range(0, len(ids), 1000):
        chunk = [str(i) for i in ids[start : start + 1000]]
        subprocess.run(["scancel", *chunk], capture_output=True, check=False, timeout=300)


def status_seconds(ledger: Path, workdir: Path, runs: int = 3) -> dict[str, float]:
    """Median wall time of ``hops status`` (and ``--all``) as users run it, on this ledger."""
    conf = workdir / "status-hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{ledger}"\n')
    env = {**os.environ, "HOPS_CONF": str(conf)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    launcher = [sys.executable, "-c", "from hops_cli.launch import run; run()", "status"]
    out: dict[str, float] = {}
    for name, extra in (("status_s", []), ("status_all_s", ["--all"])):
        argv = [*launcher, *extra]
        subprocess.run(argv, env=env, capture_output=True, check=True, timeout=600)
        walls = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True, timeout=600)
            walls.append(time.perf_counter() - started)
        out[name] = round(statistics.median(walls), 3)
    return out


def record_squeue(path: Path) -> int:
    """Write ``squeue --json --states=all`` as the daemon reads it, xz-compressed."""
    out = subprocess.run(
        ["squeue", "--json", "--states=all"], capture_output=True, check=True, timeout=600
    )
    path.write_bytes(lzma.compress(out.stdout, preset=9))
    return len(out.stdout)


def _kept(result: TickResult) -> TickResult:
    """What the figures need of a tick's result: without the snapshot it planned, its
    scores, every job's reason and latency ratio. hopsd drops each result after its tick;
    kept whole here, each tick's snapshot of every job (about 7 MB at 12,000 jobs) and its
    reasons would count in the resident memory measured as hopsd's."""
    decision = result.decision
    if decision is not None:
        decision = replace(decision, planned=None, scores=None, reasons={})
    return replace(result, decision=decision, latency_ratios=[], gpu_use={})


def run_ticks(
    tick: Tick,
    ticks: int,
    profile: str | None = None,
    after_tick: Callable[[], None] = lambda: None,
) -> tuple[list[TickResult], list[float], list[float]]:
    """``ticks`` ticks; with ``profile``, the steady ones (all but the first) under cProfile,
    and the first (adoption) under its own, written to ``PROFILE.first``.

    Returns the results, the RSS after each tick and each tick's CPU seconds (this
    process's own: what other load on a shared machine does not inflate).
    """
    results: list[TickResult] = []
    rss: list[float] = []
    cpu: list[float] = []
    profiler, first = cProfile.Profile(), cProfile.Profile()
    for i in range(ticks):
        watching = None if profile is None else (profiler if i > 0 else first)
        if watching is not None:
            watching.enable()
        started = time.process_time()
        results.append(_kept(tick.run_once()))
        cpu.append(round(time.process_time() - started, 3))
        if watching is not None:
            watching.disable()
        rss.append(round(rss_mb(), 1))
        after_tick()
        tick.round_clock = RoundClock(tick.settings.round_length_s)  # a full round each tick
    if profile is not None:
        profiler.dump_stats(profile)
        first.dump_stats(f"{profile}.first")
    return results, rss, cpu


def measure(
    args: argparse.Namespace,
    pending: int,
    running: int,
    workdir: Path,
    profile: str | None = None,
) -> dict[str, object]:
    ledger = workdir / f"ledger-{pending}.sqlite"
    # hopsd's own spool: without one, each job's files would land in its working directory
    spool = workdir / f"spool-{pending}"
    spool.mkdir(exist_ok=True)
    config = parse_config(render(live(f"sqlite:///{ledger}", spool, CHANGES)))
    migrate.upgrade(config.ledger_url)
    sessions = make_sessionmaker(make_engine(config.ledger_url, sqlite_begin="immediate"))
    timed = TimedRunner(SubprocessRunner())
    runner = CountingRunner(timed)
    port = make_port("cli", run=runner, timeout_s=config.slurm_timeout_s)
    script = workdir / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 2\n")
    prefix = f"hopsbench{uuid.uuid4().hex[:6]}-"
    wait_quiet(args.quiet_wait_s)  # an earlier run's thousands of ends may still be sent out
    started = time.perf_counter()
    ids: list[int | str] = list(submit_many(port, script, pending, prefix))
    submit_s = time.perf_counter() - started
    arrays, achieved = start_running(running, prefix, args.running_wait_s)
    quiet_wait_s = wait_quiet(args.quiet_wait_s)
    tick = Tick(
        config,
        port,
        sessions,
        call_count=lambda: len(runner.calls),
        adopt_filter=lambda job: job.name.startswith(prefix),
    )
    extra: dict[str, object] = {}
    try:
        marks = [len(timed.spent)]
        results, rss, cpu = run_ticks(
            tick, args.ticks, profile, lambda: marks.append(len(timed.spent))
        )
        extra["slurm_s_each_tick"] = [timed.by_verb(a, b) for a, b in itertools.pairwise(marks)]
        if running:
            extra["status"] = status_seconds(ledger, workdir)
            if args.record:
                extra["recorded_bytes"] = record_squeue(Path(args.record))
    finally:
        cancel([*ids, *arrays])
    first, rest = results[0], results[1:] or results
    return {
        "pending": pending,
        "running_asked": running,
        "running": achieved,
        "submit_s": round(submit_s, 3),
        "quiet_wait_s": quiet_wait_s,
        "first_tick": {k: round(v, 4) for k, v in first.figures().items()},
        "steady_tick_median": {
            k: round(statistics.median(r.figures()[k] for r in rest), 4)
            for k in (*STEPS, "slurm_calls")
        },
        "steady_total_s": [round(r.total_s, 3) for r in rest],
        "steady_forecast_s": [round(r.forecast_s, 3) for r in rest],
        # what the steps above leave out: assembly, latency ratios, profiling, forecast input
        "steady_unstepped_s": [
            round(r.total_s - r.forecast_s - sum(getattr(r, k) for k in STEPS[:-1]), 3)
            for r in rest
        ],
        "cpu_s_each_tick": cpu,
        "load_1min": round(os.getloadavg()[0], 2),
        "adopted": len(first.reconcile.adopted) if first.reconcile else 0,
        "started_per_tick": [len(r.actions) for r in results],
        "window": [len(r.decision.plan.window) if r.decision else 0 for r in results],
        "rss_mb_after_each_tick": rss,
        **extra,
    }


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send whatever native code prints (the solver's banner) to stderr, keeping --json clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", "--jobs", type=int, default=1000, dest="pending")
    parser.add_argument("--running", type=int, default=0)
    parser.add_argument("--running-wait-s", type=float, default=600.0)
    parser.add_argument("--quiet-wait-s", type=float, default=300.0)
    parser.add_argument("--baseline", type=int, default=10)
    parser.add_argument(
        "--ticks",
        type=int,
        default=12,
        help="ticks in all, the first adopting (default 12: on a busy test cluster one "
        "steady tick in three meets a slow Slurm answer, and the adoption's forecast "
        "falls in the second; the steady median needs more than three to say the usual)",
    )
    parser.add_argument("--record", help="write the big run's squeue --json here (.json.xz)")
    parser.add_argument(
        "--profile", help="write cProfile stats of the big run's steady ticks (first: FILE.first)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not os.environ.get("SLURM_CONF"):
        print("daemon_tick: SLURM_CONF unset; start the test cluster first", file=sys.stderr)
        return 2
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        base = measure(args, args.baseline, 0, Path(tmp))
        big = measure(args, args.pending, args.running, Path(tmp), args.profile)
    ratio = {
        k: round(big["steady_tick_median"][k] / base["steady_tick_median"][k], 2)  # type: ignore[index]
        if base["steady_tick_median"][k]  # type: ignore[index]
        else None
        for k in STEPS
    }
    out = {
        "baseline": base,
        "measured": big,
        "ratio_measured_over_baseline": ratio,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for run in (base, big):
        print(
            f"{run['pending']:>5} pending, {run['running']} running "
            f"(submitted in {run['submit_s']} s)"
        )
        print(f"      first tick (adopts all): {run['first_tick']}")
        print(f"      steady tick median     : {run['steady_tick_median']}")
        print(f"      steady totals          : {run['steady_total_s']}")
        print(f"      RSS after each tick MB : {run['rss_mb_after_each_tick']}")
        print(f"      slurmctld quiet after  : {run['quiet_wait_s']} s")
        print(f"      Slurm s each tick      : {run.get('slurm_s_each_tick')}")
        print(f"      starts per tick: {run['started_per_tick']}  window: {run['window']}")
    print(f"hops status on the big ledger: {big.get('status')}")
    print(f"peak RSS: {out['peak_rss_mb']} MB")
    print(f"ratio big / baseline (steady median): {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
