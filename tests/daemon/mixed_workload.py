"""A mixed workload on the live test cluster, and what it cost its jobs in lost work.

Shared by ``benchmarks/lost_work.py`` (which prints the figures) and the live
acceptance test (which asserts on them). A real hopsd runs with profiling on,
20 s rounds and a short checkpoint grace; the workload mixes:

* jobs with the probe that checkpoint on notice (``examples/train_synthetic.py``,
  which also checkpoints every few seconds of its own accord, like a real trainer);
* jobs without the probe (plain ``sleep`` scripts that note each start);
* one ``--no-preempt`` job and one ``--exclude-types k80`` job (both with the probe);
* optionally one job that ignores the notice (``tests/daemon/train_job.py
  --ignore-notice``, checkpointing every 1000 s, i.e. never).

A non-hops job holds both a100 nodes until the first wave's trainers run on the
slower types, so the plan has a reason to move them when the a100s free up; a
second wave arrives then and competes with the running jobs.

Lost work is read from the probe's own reports (``<spool>/<job>.jsonl``): each
run's records carry ``run`` (Slurm's restart count) and ``samples_done``; the
job reports where it resumes before its first iteration, so a run's first
record holds its resume point. A restart lost ``last samples reported by the
previous run - resume point of the next``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from daemon_live import PYTHON, LiveEnv, drive, hopsd_process
from sqlalchemy import select

from hopsd.ledger.jobs import TERMINAL_STATES
from hopsd.ledger.models import IntentAction, IntentRow, IntentState, JobState
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SYNTHETIC = ROOT / "examples" / "train_synthetic.py"
TRAIN_JOB = Path(__file__).with_name("train_job.py")

GRACE_S = 4.0
TICK_S = 1.0  # queue_refresh_s of the live tests' hops.conf
SCHEDULER = """
profiling = true
profiling_iterations = 5
profiling_timeout_s = 8.0
"""
# a release waits at most this long per tick for a requeued run's accounting record
# (slurmdbd lags under load), so ticks stay short and notices are timed to one
DAEMON = "requeue_wait_s = 2.0\n"
SPEEDS = "a100=4,v100=2"
# The a100 nodes are held by a non-hops job until the first wave's trainers have run
# this long on the slower types (or at most MAX_BLOCK_S): then the plan has moves to make.
SETTLE_S = 4.0
MAX_BLOCK_S = 90.0


@dataclass(frozen=True)
class Spec:
    """One job of the workload. ``kind``: probe, plain (no probe), deaf (ignores notices)."""

    label: str
    kind: str
    demands: tuple[int, ...]
    samples: int
    wave: int = 0
    no_preempt: bool = False
    exclude: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


WORKLOAD = (
    Spec("p1", "probe", (1, 2), 60000),
    Spec("p2", "probe", (2, 4), 80000),
    Spec("p3", "probe", (1,), 30000),
    Spec("u1", "plain", (1,), 30),  # seconds of sleep
    Spec("u2", "plain", (2,), 40),
    Spec("np", "probe", (2,), 30000, no_preempt=True),
    Spec("xt", "probe", (1, 2), 40000, exclude=("k80",)),
    Spec("p4", "probe", (2,), 40000, wave=1),
    Spec("u3", "plain", (1,), 20, wave=1),
)
# on the k80 until the a100s free up, where it gains most: the plan moves it
DEAF = Spec("deaf", "deaf", (1, 2, 4), 8000, types=("k80", "a100"))


@dataclass
class Run:
    """One run of an instrumented job, from its probe reports."""

    run: int
    resumed_at: float | None
    last_reported: float
    nodes: set[str] = field(default_factory=set)


@dataclass
class JobOutcome:
    """What happened to one job: its runs, starts, hops's requeues and its notices."""

    spec: Spec
    slurm_id: int
    state: str
    total: float
    runs: list[Run]
    starts: int
    stops: list[str]  # why hops requeued it, in order: "plan" or "profiling"
    notices: int

    @property
    def plan_requeues(self) -> int:
        return self.stops.count("plan")

    @property
    def profiling_requeues(self) -> int:
        return self.stops.count("profiling")

    def losses(self) -> list[tuple[str, float]]:
        """Per restart: why the job stopped, and the samples it reported done before the
        stop that the next run did not resume from."""
        out = []
        for k, (before, after) in enumerate(zip(self.runs, self.runs[1:], strict=False)):
            why = self.stops[k] if k < len(self.stops) else "other"
            if after.resumed_at is not None:
                out.append((why, max(before.last_reported - after.resumed_at, 0.0)))
        return out

    @property
    def lost(self) -> float:
        return sum(n for _, n in self.losses())


@dataclass
class Outcome:
    """The whole workload's outcome and the figures ``benchmarks/lost_work.py`` prints."""

    jobs: list[JobOutcome]
    elapsed_s: float
    log: str

    def figures(self) -> dict[str, Any]:
        probed = [j for j in self.jobs if j.spec.kind == "probe"]
        lost = sum(j.lost for j in probed)
        total = sum(j.total for j in probed)
        plain = [j.starts for j in self.jobs if j.spec.kind == "plain"]
        return {
            "jobs": len(self.jobs),
            "restarts": sum(max(j.starts - 1, 0) for j in self.jobs),
            "lost_samples": lost,
            "lost_fraction": round(lost / total, 5) if total else 0.0,
            "lost_at_plan_stops": sum(n for j in probed for w, n in j.losses() if w == "plan"),
            "lost_at_profiling_stops": sum(
                n for j in probed for w, n in j.losses() if w == "profiling"
            ),
            "max_starts_uninstrumented": max(plain, default=0),
            # the acceptance's reading: starts beyond those the plan's own moves caused
            "max_starts_uninstrumented_unmoved": max(
                (j.starts - j.plan_requeues for j in self.jobs if j.spec.kind == "plain"),
                default=0,
            ),
            "plan_requeues": sum(j.plan_requeues for j in self.jobs),
            "profiling_requeues": sum(j.profiling_requeues for j in self.jobs),
            "notices": sum(j.notices for j in self.jobs),
            "lost_by_job": {j.spec.label: j.lost for j in probed if j.lost},
            "elapsed_s": round(self.elapsed_s, 1),
        }


def script(env: LiveEnv, spec: Spec) -> str:
    """The batch script of one job of the workload."""
    head = f"#!/bin/bash\nexport HOPS_SPOOL_DIR={env.spool}\nexport HOPS_PROBE_FLUSH_S=1\n"
    if spec.kind == "plain":
        note = f'echo "start $(date +%s.%N)" >> {env.root}/$SLURM_JOB_ID.starts\n'
        return f"#!/bin/bash\n{note}sleep {spec.samples}\n"
    if spec.kind == "deaf":
        return head + (
            f"exec {PYTHON} {TRAIN_JOB} --samples {spec.samples} --batch 32 --base 50 "
            "--checkpoint-every 1000 --ignore-notice\n"
        )
    return head + (
        f"exec {PYTHON} {TRAIN_SYNTHETIC} --samples {spec.samples} --batch 32 "
        f"--speed {SPEEDS} --checkpoint-every 5\n"
    )


def submit(env: LiveEnv, spec: Spec) -> int:
    path = env.root / f"{spec.label}.sh"
    path.write_text(script(env, spec))
    samples = spec.samples * 100 if spec.kind == "plain" else spec.samples  # 100/s per GPU
    tag = HopsTag(
        spec.demands,
        float(samples),
        32,
        no_preempt=spec.no_preempt,
        exclude_types=spec.exclude,
        types=spec.types,
    )
    args = ["-J", f"{env.prefix}{spec.label}", "-o", str(env.root / "%j.out"),
            "--open-mode=append", "-t", "15", "-D", str(env.root)]  # fmt: skip
    job = env.port.submit(SubmitRequest(str(path), sbatch_args=args, tag=tag))
    env.submitted.append(job)
    return job


def block_a100(env: LiveEnv) -> int:
    """A non-hops job holding every GPU of both a100 nodes."""
    out = subprocess.run(
        ["sbatch", "--parsable", "-J", f"{env.prefix}block", "-p", "all", "-w", "a100n1,a100n2",
         "-N2", "--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 300"],
        capture_output=True, text=True, check=True, timeout=20,
    )  # fmt: skip
    job = int(out.stdout.strip().split(";")[0])
    env.blockers.append(job)
    return job


def probe_runs(env: LiveEnv, job: int) -> list[Run]:
    """Each run of a job from its probe reports: resume point, last samples reported, nodes."""
    path = env.spool / f"{job}.jsonl"
    if not path.exists():
        return []
    runs: dict[int, Run] = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        n = int(rec.get("run", 0))
        run = runs.setdefault(n, Run(n, None, 0.0))
        run.nodes.add(str(rec.get("node", "")))
        done = rec.get("samples_done")
        if done is None:
            continue
        if run.resumed_at is None and rec.get("kind") == "start":
            run.resumed_at = float(done)
        run.last_reported = max(run.last_reported, float(done))
    return [runs[n] for n in sorted(runs)]


def deaf_runs(env: LiveEnv, job: int) -> list[Run]:
    """Runs of the notice-ignoring stand-in, from its own start events."""
    out = []
    for n, ev in enumerate(e for e in env.events(job) if e["event"] == "start"):
        at = float(str(ev["samples_done"]))
        out.append(Run(n, at, at, {str(x) for x in cast(list[object], ev["nodes"])}))
    return out


def requeues(env: LiveEnv) -> dict[str, tuple[list[str], int]]:
    """Per ledger job id: why hops requeued it, in order ("plan" or "profiling"), and
    how many notices it was sent."""
    out: dict[str, tuple[list[str], int]] = {}
    with env.sessions.begin() as s:
        done = s.scalars(
            select(IntentRow).where(IntentRow.state == IntentState.DONE).order_by(IntentRow.id)
        ).all()
        for row in done:
            stops, notices = out.get(str(row.job_id), ([], 0))
            if row.action == IntentAction.NOTICE:
                notices += 1
            elif row.action == IntentAction.REQUEUE_HOLD:
                profiling = str(row.payload.get("reason", "")).startswith("profiling")
                stops.append("profiling" if profiling else "plan")
            out[str(row.job_id)] = (stops, notices)
    return out


#: Rounds long enough that moving a trainer to a faster type pays off within one: hopsd
#: prices a move at the restart it measured whole here (7-15 s from the decision to the
#: first iteration after it), and with 8 s rounds no move would ever pay.
ROUND_S = 20.0


def live_env(root: Path) -> LiveEnv:
    """The world of one run: profiling on, 20 s rounds, a short grace, short release waits."""
    return LiveEnv.create(root, extra=DAEMON, grace_s=GRACE_S, scheduler=SCHEDULER,
                          round_s=ROUND_S)  # fmt: skip


def outcome(env: LiveEnv, ids: dict[int, Spec], started: float, log: str) -> Outcome:
    rows = env.rows()
    counts = requeues(env)
    jobs = []
    for job, spec in ids.items():
        row = rows.get(job)
        if spec.kind == "plain":
            path = env.root / f"{job}.starts"
            runs: list[Run] = []
            starts = len(path.read_text().splitlines()) if path.exists() else 0
        else:
            runs = deaf_runs(env, job) if spec.kind == "deaf" else probe_runs(env, job)
            starts = len(runs)
        stops, notices = counts.get(row.id if row else "", ([], 0))
        state = row.state.value if row is not None else "unadopted"
        total = float(spec.samples) if spec.kind != "plain" else 0.0
        jobs.append(JobOutcome(spec, job, state, total, runs, starts, stops, notices))
    return Outcome(jobs, time.monotonic() - started, log)


def run_workload(
    env: LiveEnv,
    specs: Sequence[Spec] = WORKLOAD,
    deadline_s: float = 240.0,
    on_tick: Callable[[], object] = lambda: None,
) -> Outcome:
    """Submit the workload under a real hopsd, free the a100s once the first wave's
    trainers run (after profiling, on the slower types), wait for every job's end."""
    started = time.monotonic()
    blocker = block_a100(env)
    assert drive(
        lambda: None,
        lambda: any(j.job_id == blocker and j.running for j in env.port.list_jobs()),
        20,
    ), "the a100 blocker never started"
    ids = {submit(env, s): s for s in specs if s.wave == 0}
    trainers = [j for j, s in ids.items() if s.kind != "plain"]
    log_path = env.root / "hopsd.log"
    daemon = hopsd_process(env, log=log_path)
    try:
        running_since: float | None = None
        freed = False

        def step() -> None:
            nonlocal freed, running_since
            now = time.monotonic()
            if not freed and running_since is None and _all_running(env, trainers):
                running_since = now
            settled = running_since is not None and now - running_since >= SETTLE_S
            if not freed and (settled or now - started >= MAX_BLOCK_S):
                freed = True
                subprocess.run(["scancel", str(blocker)], check=False, timeout=20)
                ids.update({submit(env, s): s for s in specs if s.wave == 1})
            on_tick()

        def finished() -> bool:
            rows = env.rows()
            return freed and all(j in rows and rows[j].state in TERMINAL_STATES for j in ids)

        drive(step, finished, deadline_s)
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(timeout=30)
    return outcome(env, ids, started, log_path.read_text() if log_path.exists() else "")


def _all_running(env: LiveEnv, jobs: Sequence[int]) -> bool:
    """Every one of ``jobs`` runs for real (profiling over) or has ended."""
    rows = env.rows()
    done = (JobState.RUNNING, *TERMINAL_STATES)
    return all(j in rows and rows[j].state in done for j in jobs)
