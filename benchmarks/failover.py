"""Failover of hopsd on the live test cluster: two daemons on one PostgreSQL ledger.

A workload of training jobs runs under two ``hopsd`` processes, each in a UTS
namespace of its own (a host name of its own, as on two service hosts, so the
standby cannot tell the leader died and must wait for its lease to run out).
The leader is SIGKILLed twice at different moments (while the first jobs are
being started, and later while jobs run and finish), and the killed daemon is
started again as the new standby. Then the leader is paused (SIGSTOP) until the
standby took over and woken (SIGCONT): the fencing token must keep it from
enacting anything.

    HOPS_CLUSTER_PORT=... HOPS_CLUSTER_DIR=... (cluster up, SLURM_CONF exported)
    .venv/bin/python benchmarks/failover.py --json

prints ``{"jobs", "takeover_s_max", "lost", "started_twice", "enacted_by_fenced", ...}``.
Goal: ``takeover_s_max <= lease_ttl_s + queue_refresh_s``, the last three 0.
``takeover_s`` is from the kill (or pause) to the standby's acquisition of the
lease, read from the ledger; its first tick starts at once after that.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from faulty_hopsd import command as hopsd_command
from figures import print_figures
from hops_conf import live, render

from hopsd.ledger import migrate
from hopsd.ledger.models import AllocationReason, AllocationRow, IntentRow, IntentState, JobRow
from hopsd.ledger.records import JobState, LeaseInfo
from hopsd.ledger.unit import Ledger
from hopsd.slurm.factory import make_port
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

ROOT = Path(__file__).resolve().parents[1]
TRAIN_JOB = ROOT / "tests" / "daemon" / "train_job.py"
PG_ADMIN = os.environ.get("HOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TERMINAL = {JobState.DONE, JobState.FAILED, JobState.CANCELLED}


def fresh_database(name: str) -> str:
    """Drop and create ``name`` next to the admin database; its SQLAlchemy URL."""
    import psycopg

    base = PG_ADMIN.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def conf_text(url: str, spool: Path, ttl: float, tick: float) -> str:
    """The live cluster's hops.conf with standbys, this run's lease TTL and tick."""
    changes = {
        "ledger": {"retention_days": 0.0},
        "scheduler": {"queue_refresh_s": tick},
        "daemon": {"lease_ttl_s": ttl, "standby": True},
    }
    return render(live(url, spool, changes))


@dataclass
class Daemon:
    """One hopsd process on a host name of its own."""

    host: str
    proc: subprocess.Popen[bytes]
    log: Path
    stopped_at: float | None = None

    @property
    def holder(self) -> str:
        return f"{self.host}:{self.proc.pid}"


@dataclass
class Run:
    root: Path
    config: Path
    url: str
    prefix: str
    ttl: float
    tick: float
    ledger: Ledger
    submitted: list[int] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)
    takeovers: list[float] = field(default_factory=list)
    counter: int = 0

    def start_daemon(self) -> Daemon:
        """hopsd in a UTS namespace with its own host name (``unshare`` as root)."""
        self.counter += 1
        host = f"hops-svc{self.counter}"
        log = self.root / f"{host}.log"
        hopsd = hopsd_command("--config", str(self.config), adopt_prefix=self.prefix)
        command = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *hopsd]
        out = log.open("ab")
        proc = subprocess.Popen(command, stdout=out, stderr=out)
        daemon = Daemon(host, proc, log)
        self.daemons.append(daemon)
        return daemon

    def standby(self) -> Daemon:
        """A new hopsd, returned once it waits as a standby (its start-up is not takeover)."""
        daemon = self.start_daemon()
        self.wait(
            f"{daemon.host} to stand by",
            lambda: "event=standby " in daemon.log.read_text(errors="replace"),
            120,
        )
        return daemon

    def lease(self) -> LeaseInfo | None:
        with self.ledger.reading() as unit:
            return unit.lease_info()

    def leader(self, timeout_s: float = 60.0) -> Daemon:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            info = self.lease()
            if info is not None and info.held_at(time.time()):
                for d in self.daemons:
                    if d.holder == info.holder and d.proc.poll() is None:
                        return d
            time.sleep(0.1)
        raise RuntimeError("no hopsd took the lease")

    def rows(self) -> dict[int, JobRow]:
        with self.ledger.sessions.begin() as s:
            return {int(r.slurm_job_id or 0): r for r in s.scalars(select(JobRow))}

    def count(self, state: JobState) -> int:
        return sum(r.state == state for r in self.rows().values())

    def wait(self, what: str, check: Any, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if check():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}")

    def take_over(self, old: Daemon, since: float) -> float:
        """Seconds from ``since`` until another daemon holds the lease (its acquired_at)."""
        end = time.monotonic() + 10 * self.ttl + 30
        while time.monotonic() < end:
            info = self.lease()
            if info is not None and info.holder and info.holder != old.holder:
                assert info.acquired_at is not None
                took = info.acquired_at - since
                self.takeovers.append(took)
                return took
            time.sleep(0.05)
        raise RuntimeError("the standby did not take over")


def submit(run: Run, port: Any, label: str, demands: tuple[int, ...], samples: float) -> None:
    spool = run.root / "spool"
    script = run.root / f"{label}.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"export HOPS_SPOOL_DIR={spool}\n"
        f"exec {sys.executable} {TRAIN_JOB} --samples {samples:g} --batch 32\n"
    )
    args = ["-J", f"{run.prefix}{label}", "-o", str(run.root / "%j.out"), "--open-mode=append"]
    args += ["-t", "10"]
    run.submitted.append(
        port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag(demands, samples, 32)))
    )


def kill(daemon: Daemon, sig: int) -> float:
    at = time.time()
    daemon.proc.send_signal(sig)
    daemon.stopped_at = at
    return at


def enacted_after(daemon: Daemon, since: float) -> int:
    """Slurm writes a daemon logged as done after ``since`` (ISO times in its log)."""
    count = 0
    for line in daemon.log.read_text(errors="replace").splitlines():
        if "event=enact " not in line or "result=ok" not in line or not line.startswith("ts="):
            continue
        stamp = line.split()[0][3:].replace("Z", "+00:00")
        if datetime.fromisoformat(stamp).timestamp() > since:
            count += 1
    return count


def verdict(run: Run) -> tuple[int, int]:
    """(lost, started_twice) over the submitted jobs, from the ledger and the job events."""
    rows = run.rows()
    lost = twice = 0
    for job in run.submitted:
        row = rows.get(job)
        events_file = run.root / "spool" / f"{job}.events"
        events = [
            json.loads(line)
            for line in (events_file.read_text().splitlines() if events_file.exists() else [])
            if line.strip()
        ]
        done = sum(e["event"] == "done" for e in events)
        starts = sum(e["event"] == "start" for e in events)
        if row is None or row.state != JobState.DONE or done != 1:
            lost += 1
            continue
        with run.ledger.sessions.begin() as s:
            planned = sum(
                a.reason in (AllocationReason.MOVE, AllocationReason.PREEMPT)
                for a in s.scalars(select(AllocationRow).where(AllocationRow.job_id == row.id))
            )
        if starts > 1 + row.restarts or row.restarts > planned or done > 1:
            twice += 1
    return lost, twice


def pending_intents(run: Run) -> int:
    with run.ledger.sessions.begin() as s:
        return sum(i.state == IntentState.PENDING for i in s.scalars(select(IntentRow)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--ttl", type=float, default=3.0, help="[daemon] lease_ttl_s")
    parser.add_argument("--tick", type=float, default=1.0, help="[scheduler] queue_refresh_s")
    parser.add_argument("--database", default="hops_failover")
    parser.add_argument("--no-pause", action="store_true", help="skip the SIGSTOP round")
    args = parser.parse_args(argv)
    if not os.environ.get("SLURM_CONF"):
        parser.error("SLURM_CONF unset: bring the test cluster up first")
    if shutil.which("unshare") is None:
        parser.error("unshare (util-linux) is needed to give each hopsd a host name")
    root = Path(tempfile.mkdtemp(prefix="hops-failover-"))
    (root / "spool").mkdir()
    url = fresh_database(args.database)
    migrate.upgrade(url)
    config = root / "hops.conf"
    config.write_text(conf_text(url, root / "spool", args.ttl, args.tick))
    run = Run(root, config, url, f"hopsf{uuid.uuid4().hex[:6]}-", args.ttl, args.tick,
              Ledger.open(url))  # fmt: skip
    port = make_port("cli", timeout_s=8.0)
    figures: dict[str, Any] = {}
    try:
        for i in range(args.jobs):
            submit(run, port, f"f{i}", (1, 2), (1500, 2500, 3500)[i % 3])
        first = run.start_daemon()
        run.wait("the first leader", lambda: run.lease() is not None, 60)
        run.standby()
        # kill 1: while the first jobs are being started
        leader = run.leader()
        run.wait("a first start", lambda: run.count(JobState.RUNNING) >= 1, 120)
        at = kill(leader, signal.SIGKILL)
        leader.proc.wait(timeout=30)
        run.take_over(leader, at)
        run.standby()
        # kill 2: later, once a job has finished
        run.wait("a finished job", lambda: run.count(JobState.DONE) >= 1, 300)
        leader = run.leader()
        at = kill(leader, signal.SIGKILL)
        leader.proc.wait(timeout=30)
        run.take_over(leader, at)
        run.standby()
        fenced = 0
        if not args.no_pause:
            # a pause: the leader stops, the standby takes over, the old one wakes up
            leader = run.leader()
            at = kill(leader, signal.SIGSTOP)
            run.take_over(leader, at)
            woke = time.time()
            leader.proc.send_signal(signal.SIGCONT)
            try:
                leader.proc.wait(timeout=30)  # it finds itself fenced and stops
            except subprocess.TimeoutExpired:
                leader.proc.kill()
            fenced = enacted_after(leader, woke)
        done = lambda: all(  # noqa: E731
            j in (rows := run.rows()) and rows[j].state in TERMINAL for j in run.submitted
        )
        run.wait("all jobs to end", done, 600)
        lost, twice = verdict(run)
        figures = {
            "jobs": len(run.submitted),
            "takeover_s_max": round(max(run.takeovers), 3),
            "lost": lost,
            "started_twice": twice,
            "enacted_by_fenced": fenced,
            "takeover_s": [round(t, 3) for t in run.takeovers],
            "goal_s": args.ttl + args.tick,
            "lease_ttl_s": args.ttl,
            "tick_s": args.tick,
            "pending_intents_left": pending_intents(run),
            "first_holder": first.holder,
        }
    finally:
        for d in run.daemons:
            if d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
                d.proc.terminate()
                try:
                    d.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    d.proc.kill()
        if run.submitted:
            subprocess.run(["scancel", *map(str, run.submitted)], capture_output=True, check=False)
        run.ledger.dispose()
    print_figures(figures, args.json, 22)
    if not args.json:
        print(f"logs in {root}")
    ok = (
        figures["takeover_s_max"] <= figures["goal_s"]
        and figures["lost"] == figures["started_twice"] == figures["enacted_by_fenced"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
