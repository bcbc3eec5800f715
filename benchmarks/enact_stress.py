"""Exactly-once under stress, on the live Slurm test cluster and the local PostgreSQL.

A real hopsd process (the daemon's own code, with one benchmark-only change:
every round it also moves about half of the running jobs somewhere else) runs
short jobs of 5-20 s of work, so that job ends and requeues collide, on a
machine kept busy by CPU burners. Midway slurmctld is stopped, and later the
ledger database refuses connections, each for longer than the lease's TTL.
Every job checkpoints its work and logs each start and its completion, so
running a finished job again, a job failed by a move and a daemon that exited
are all counted from the outside:

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/enact_stress.py [--jobs 120] [--load 2] [--json]

prints ``{"jobs", "requeues", "finished_twice", "failed_by_hops",
"daemon_exits", "outage_s", ...}``. Goal: the three counts at 0, every job
finished once.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from figures import print_figures
from hops_conf import live, render

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SH = ROOT / "docker" / "cluster.sh"
ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
LEASE_TTL_S = 5.0


def conf_text(db: str, spool: Path) -> str:
    """The live cluster's hops.conf with 2 s rounds, free restarts and no notices."""
    changes = {
        "scheduler": {
            "round_length_s": 2.0,
            "restart_penalty_s": 0.0,
            "solver_time_limit_s": None,
        },
        "gpu_types.k80": None,
        "daemon": {"lease_ttl_s": LEASE_TTL_S, "checkpoint_grace_s": 0.0},
    }
    return render(live(f"postgresql+psycopg://postgres@127.0.0.1:5432/{db}", spool, changes))


JOB = """#!/bin/bash
# {work_ds} deciseconds of work, checkpointed, so a requeued run carries on
dir={dir}
echo "start $(date +%s.%N) ${{SLURM_RESTART_COUNT:-0}}" >> "$dir/$SLURM_JOB_ID.events"
t=$(cat "$dir/$SLURM_JOB_ID.ck" 2>/dev/null || echo 0)
while [ "$t" -lt {work_ds} ]; do sleep 0.2; t=$((t + 2)); echo "$t" > "$dir/$SLURM_JOB_ID.ck"; done
echo "done $(date +%s.%N)" >> "$dir/$SLURM_JOB_ID.events"
"""


# ---------------------------------------------------------------- the daemon side


def churning_daemon(conf: str, prefix: str) -> int:
    """hopsd's main with a Tick that also moves about half the running jobs each round.

    It adopts only the jobs named with ``prefix`` (this run's).
    """
    import dataclasses

    import hopsd.daemon.main as daemon_main
    from hopsd.core.model import Assignment, Configuration, Plan
    from hopsd.core.snapshot import Snapshot
    from hopsd.core.step import StepOptions
    from hopsd.daemon.faults import Hooks
    from hopsd.daemon.tick import Tick

    rng = random.Random(11)

    class ChurningTick(Tick):
        def _step_options(self) -> StepOptions:
            return StepOptions(spare_guard_s=0.0)  # no sparing: ends and requeues should collide

        def _record(self, session, built, decision, result, now):  # type: ignore[no-untyped-def]
            plan = self._churn(decision.plan, built.snapshot)
            super()._record(session, built, dataclasses.replace(decision, plan=plan), result, now)

        def _churn(self, plan: Plan, snap: Snapshot) -> Plan:
            used = plan.gpus_used()
            free = {n.id: snap.capacity_of(n.id) - used.get(n.id, 0) for n in snap.cluster.nodes}
            keep, moves = [], list(plan.move)
            for kept in plan.keep:
                gpus = kept.config.total_gpus
                options = [n for n in snap.cluster.nodes if free[n.id] >= gpus]
                options = [n for n in options if (n.id, gpus) not in kept.config.parts]
                if not options or rng.random() >= 0.5:
                    keep.append(kept)
                    continue
                node = rng.choice(options)
                free[node.id] -= gpus
                target = Configuration(node.gpu_type, ((node.id, gpus),))
                moves.append(Assignment(kept.job_id, target))
            return dataclasses.replace(plan, keep=tuple(keep), move=tuple(moves))

    daemon_main.Tick = ChurningTick  # type: ignore[misc]
    hooks = Hooks(adopt_filter=lambda job: job.name.startswith(prefix))
    return daemon_main.main(["--config", conf, "--log-level", "INFO"], hooks=hooks)


# ---------------------------------------------------------------- the outside


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def cluster(command: str) -> None:
    subprocess.run(["bash", str(CLUSTER_SH), command], check=True, timeout=120, capture_output=True)


def pg(sql: str, db: str = "test") -> None:
    with psycopg.connect(ADMIN_DSN.replace("dbname=test", f"dbname={db}"), autocommit=True) as c:
        c.execute(sql)  # type: ignore[arg-type]


class Run:
    def __init__(self, root: Path, jobs: int, seed: int) -> None:
        self.root = root
        self.prefix = f"hopsx{uuid.uuid4().hex[:5]}-"
        self.db = f"hops_stress_{os.getpid()}"
        self.spool = root / "spool"
        self.spool.mkdir()
        self.conf = root / "hops.conf"
        self.conf.write_text(conf_text(self.db, self.spool))
        self.rng = random.Random(seed)
        self.n_jobs = jobs
        self.ids: list[int] = []
        self.daemon: subprocess.Popen[bytes] | None = None
        self.daemon_exits = 0
        self.outage_s = 0.0

    def start_daemon(self) -> None:
        log = open(self.root / "hopsd.log", "ab")  # noqa: SIM115 - handed to the child
        command = [sys.executable, __file__, "--daemon", str(self.conf), "--prefix", self.prefix]
        self.daemon = subprocess.Popen(command, stdout=log, stderr=log)

    def check_daemon(self) -> None:
        if self.daemon is not None and self.daemon.poll() is not None:
            self.daemon_exits += 1
            print(f"hopsd exited with {self.daemon.returncode}; restarting", file=sys.stderr)
            self.start_daemon()

    def submit(self, i: int) -> None:
        script = self.root / f"j{i}.sh"
        script.write_text(JOB.format(dir=self.root, work_ds=self.rng.randint(50, 200)))
        script.chmod(0o755)
        demand = self.rng.choice(["1", "1", "1,2"])
        out = subprocess.run(
            [sys.executable, "-m", "hops_cli.main", "--config", str(self.conf), "submit",
             str(script), "--gpus", demand, "--samples", "1000", "--parsable", "--",
             "-J", f"{self.prefix}{i}", "-o", str(self.root / "%j.out"), "--open-mode=append"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        self.ids.append(int(out.stdout.strip().split(";")[0]))

    def events(self, job: int) -> list[str]:
        path = self.root / f"{job}.events"
        return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []

    def finished(self) -> int:
        return sum("done" in self.events(j) for j in self.ids)

    def outage(self, kind: str, seconds: float) -> None:
        started = time.monotonic()
        print(f"{kind} outage for {seconds:.0f} s", file=sys.stderr)
        if kind == "slurmctld":
            cluster("stop-ctld")
            try:
                self.sleep(seconds)
            finally:
                cluster("start-ctld")
        else:
            pg(f"ALTER DATABASE {self.db} ALLOW_CONNECTIONS false")
            pg(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{self.db}'"
            )
            try:
                self.sleep(seconds)
            finally:
                pg(f"ALTER DATABASE {self.db} ALLOW_CONNECTIONS true")
        self.outage_s += time.monotonic() - started

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.check_daemon()
            time.sleep(0.5)


def ledger_counts(db: str, prefix_ids: list[int]) -> dict[str, Any]:
    with psycopg.connect(ADMIN_DSN.replace("dbname=test", f"dbname={db}")) as c:
        requeues = c.execute(
            "SELECT count(*) FROM intents WHERE action = 'requeue_hold' AND state = 'done'"
        ).fetchone()
        states = dict(c.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
        finished_early = c.execute(
            "SELECT count(*) FROM intents WHERE action = 'cancel' AND state = 'done'"
        ).fetchone()
    return {
        "requeues": int(requeues[0]) if requeues else 0,
        "ledger_states": states,
        "requeues_that_hit_a_finished_run": int(finished_early[0]) if finished_early else 0,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from hopsd.ledger import migrate

    root = Path(tempfile.mkdtemp(prefix="hops-stress-"))
    bench = Run(root, args.jobs, args.seed)
    pg(f"DROP DATABASE IF EXISTS {bench.db}")
    pg(f"CREATE DATABASE {bench.db}")
    migrate.upgrade(f"postgresql+psycopg://postgres@127.0.0.1:5432/{bench.db}")
    deadline = time.time() + args.timeout
    burners = [multiprocessing.Process(target=burn, args=(deadline,)) for _ in range(args.load)]
    for p in burners:
        p.start()
    started = time.monotonic()
    bench.start_daemon()
    outages = [(args.jobs // 3, "slurmctld"), (2 * args.jobs // 3, "ledger")]
    try:
        for i in range(args.jobs):
            bench.submit(i)
            bench.sleep(args.gap)
        while bench.finished() < len(bench.ids) and time.time() < deadline:
            if outages and bench.finished() >= outages[0][0]:
                bench.outage(outages.pop(0)[1], LEASE_TTL_S * 3)
            bench.sleep(1.0)
        for _, kind in outages:  # a workload shorter than planned still sees both
            bench.outage(kind, LEASE_TTL_S * 3)
        while bench.finished() < len(bench.ids) and time.time() < deadline:
            bench.sleep(1.0)
        bench.sleep(5.0)  # a job run again would show up now
    finally:
        if bench.daemon is not None and bench.daemon.poll() is None:
            bench.daemon.send_signal(signal.SIGTERM)
            bench.daemon.wait(timeout=60)
        for p in burners:
            p.terminate()
        subprocess.run(["scancel", *map(str, bench.ids)], capture_output=True, check=False)
    counts = ledger_counts(bench.db, bench.ids)
    finished_twice = sum(bench.events(j).count("done") > 1 for j in bench.ids)
    failed = counts["ledger_states"].get("failed", 0)
    result = {
        "jobs": len(bench.ids),
        "finished": bench.finished(),
        "requeues": counts["requeues"],
        "finished_twice": finished_twice,
        "failed_by_hops": failed,
        "daemon_exits": bench.daemon_exits,
        "outage_s": round(bench.outage_s, 1),
        "requeues_that_hit_a_finished_run": counts["requeues_that_hit_a_finished_run"],
        "ledger_states": counts["ledger_states"],
        "wall_s": round(time.monotonic() - started, 1),
        "load_processes": args.load,
        "work_dir": str(root),
    }
    with contextlib.suppress(Exception):
        pg(f"DROP DATABASE IF EXISTS {bench.db} WITH (FORCE)")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between submissions")
    parser.add_argument("--load", type=int, default=2, help="CPU burners beside the cluster")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1500.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--daemon", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.daemon:
        return churning_daemon(args.daemon, args.prefix)
    if not os.environ.get("SLURM_CONF"):
        print("enact_stress: SLURM_CONF unset; bring the test cluster up first", file=sys.stderr)
        return 2
    result = run(args)
    print_figures(result, args.json, 36)
    ok = result["finished_twice"] == result["failed_by_hops"] == result["daemon_exits"] == 0
    return 0 if ok and result["finished"] == result["jobs"] else 1


if __name__ == "__main__":
    sys.exit(main())
