"""hops on a centre's Slurm: a mixed workload while nodes drain, reserve and others' jobs churn.

hopsd (in process, the daemon's own tick) schedules hops jobs with staggered
arrivals on the live Slurm test cluster while:

* **foreign**: another Unix user's plain ``sbatch --gres=gpu:N`` jobs come and
  go on the v100 and a100 nodes;
* **drain**: the node of a running hops job is drained (``on_drain =
  "finish"``) and resumed later;
* **reservation**: a maintenance reservation on ``a100n2`` begins mid-run;
* **Slurm preemption**: root's plain job of a QOS that preempts ``normal``
  takes a node where only hops jobs run, and Slurm requeues them itself
  (``PreemptMode=REQUEUE``; left out where Slurm keeps no accounting).

A down node (slurmd killed) is not part of it. Run::

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/centre_faults.py [--json]

prints ``{"jobs", "faults", "finished_twice", "lost", "planned_on_foreign_gpus",
"requeued_foreign", "placed_into_reservation"}``: hops jobs, the faults injected
(with counts), jobs that finished more than once or not at all, tick-node pairs
where hops's plan and GPUs other jobs held throughout the tick exceeded a node,
other users' jobs requeued or named by a command hopsd ran, and hops jobs
placed on the reservation's node while it was coming (their 10-minute time
limits reach into it, so Slurm would not launch them there) or seen running on
it after it began. Goal: all five are 0.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "daemon"))

from centre_live import (
    accounting_kept,
    done_count,
    foreign,
    held_throughout,
    names_any,
    others_running,
    overbooked,
    preempting_qos,
    preemptor,
    reserved,
    resume,
    running_on,
    scontrol,
)
from daemon_live import LiveEnv
from figures import print_figures
from live_replay import quietly
from live_users import ensure_user
from sqlalchemy import select

from hopsd.daemon.tick import Tick
from hopsd.ledger.models import RunRow

OTHER_USER = "hopsother"
#: (second of arrival, demands, samples) of the hops jobs
HOPS_JOBS = [
    (0, (1, 2), 6000),
    (0, (2, 4), 16000),
    (3, (1,), 3000),
    (6, (2,), 8000),
    (9, (1, 2, 4), 12000),
    (15, (1,), 4000),
    (20, (2,), 6000),
    (30, (1, 2), 5000),
]
#: (second, node, GPUs, seconds it runs) of the other user's jobs
FOREIGN_JOBS = [
    (1, "v100n1", 2, 10),
    (5, "a100n1", 3, 12),
    (12, "v100n2", 2, 8),
    (18, "a100n1", 2, 10),
    (25, "v100n1", 3, 8),
    (33, "v100n2", 1, 10),
]
DRAIN_AT_S, RESUME_AT_S = 10.0, 45.0
RESERVATION_NODE, RESERVATION_IN_S = "a100n2", 40
PREEMPT_AT_S, PREEMPT_FOR_S, PREEMPT_QOS = 25.0, 10, "hopsbenchpreempt"
DEADLINE_S = 240.0


@dataclass
class Run:
    env: LiveEnv
    hops: list[int] = field(default_factory=list)
    theirs: list[int] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    drained: str = ""
    #: the node Slurm's preemption took ("" before; "-": not part of this run)
    preempted: str = ""
    overbooked: int = 0
    in_reservation: set[str] = field(default_factory=set)


def step_faults(run: Run, elapsed: float, user: str) -> None:
    """Submit what is due, drain the first node a hops job runs on, resume it later."""
    env = run.env
    while len(run.hops) < len(HOPS_JOBS) and HOPS_JOBS[len(run.hops)][0] <= elapsed:
        _, demands, samples = HOPS_JOBS[len(run.hops)]
        run.hops.append(env.submit(demands, samples, label=f"h{len(run.hops)}"))
    while len(run.theirs) < len(FOREIGN_JOBS) and FOREIGN_JOBS[len(run.theirs)][0] <= elapsed:
        _, node, gpus, seconds = FOREIGN_JOBS[len(run.theirs)]
        part = node.rstrip("0123456789").removesuffix("n")
        args = ("-p", part, "-w", node, f"--gres=gpu:{gpus}")
        run.theirs.append(foreign(env, *args, seconds=seconds, user=user))
    if not run.drained and elapsed >= DRAIN_AT_S:
        for job in run.hops:
            nodes = [n for n in running_on(env, job) if n != RESERVATION_NODE]
            if nodes:
                run.drained = nodes[0]
                scontrol("update", f"nodename={nodes[0]}", "state=drain", "reason=centre-bench")
                break
    if run.drained and elapsed >= RESUME_AT_S:
        resume(run.drained)
    if not run.preempted and elapsed >= PREEMPT_AT_S:
        preempt_hops_node(run)


def preempt_hops_node(run: Run) -> None:
    """Root's preempting job on all of a node where hops jobs alone run (no other user's
    job is preempted, so ``requeued_foreign`` stays hops's own)."""
    env = run.env
    others = {n for p in others_running(env, run.hops).values() for n in p}
    for job in run.hops:
        for node in running_on(env, job):
            if node not in (run.drained, RESERVATION_NODE) and node not in others:
                run.preempted = node
                preemptor(env, PREEMPT_QOS, node, run.sizes[node], PREEMPT_FOR_S)
                return


def tick_once(run: Run, tick: Tick, sizes: dict[str, int], reservation_at: float) -> None:
    env = run.env
    before = others_running(env, run.hops)
    result = quietly(tick.run_once)  # the solver's banner must not reach --json's stdout
    after = others_running(env, run.hops)
    if result.decision is not None and result.decision.planned is not None:
        run.overbooked += len(overbooked(sizes, result.decision, held_throughout(before, after)))
    decision = result.decision
    if decision is not None:  # Slurm launches none of them there: their limits reach into it
        placed = (*decision.plan.start, *decision.plan.move)
        run.in_reservation |= {a.job_id for a in placed if RESERVATION_NODE in dict(a.config.parts)}
    if time.time() >= reservation_at:
        for job in run.hops:
            if RESERVATION_NODE in running_on(env, job):
                run.in_reservation.add(str(job))


def measure(run: Run) -> dict[str, object]:
    env = run.env
    done = {job: done_count(env, job) for job in run.hops}
    runs = env.port.runs(run.theirs)
    per_job: dict[int, int] = {}
    for r in runs:
        per_job[r.job_id] = per_job.get(r.job_id, 0) + 1
    named = {j for j in run.theirs if any(names_any(a, [j]) for a in env.runner.calls)}
    requeued = {j for j, n in per_job.items() if n > 1} | named
    with env.sessions.begin() as s:  # hops jobs whose run the ledger says Slurm preempted
        ended = select(RunRow.job_id).where(RunRow.ended == "preempted by slurm")
        by_slurm = len(set(s.scalars(ended)))
    return {
        "jobs": len(run.hops),
        "faults": {
            "foreign_jobs": len(run.theirs),
            "drain": 1 if run.drained else 0,
            "reservation": 1,
            "slurm_preemption": "not included" if run.preempted in ("", "-") else by_slurm,
            "down_node": "not included",
        },
        "finished_twice": sum(1 for n in done.values() if n > 1),
        "lost": sum(1 for n in done.values() if n == 0),
        "planned_on_foreign_gpus": run.overbooked,
        "requeued_foreign": len(requeued),
        "placed_into_reservation": len(run.in_reservation),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    args = parser.parse_args()
    user = ensure_user(OTHER_USER)
    env = LiveEnv.create(Path(tempfile.mkdtemp(prefix="centre-")), grace_s=5.0)
    sizes = {n.name: n.gpus_total for n in env.port.list_nodes()}
    run = Run(env, sizes=sizes)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    started = time.time()
    qos = contextlib.nullcontext(PREEMPT_QOS)
    if accounting_kept():
        run.preempted = "-"  # no QOS without accounting
    else:
        qos = preempting_qos(PREEMPT_QOS)
    try:
        name = f"{env.prefix}maint"
        with qos, reserved(name, RESERVATION_NODE, start_in_s=RESERVATION_IN_S, minutes=10):
            reservation_at = started + RESERVATION_IN_S
            try:
                while time.time() - started < DEADLINE_S:
                    step_faults(run, time.time() - started, user)
                    tick_once(run, tick, sizes, reservation_at)
                    if len(run.hops) == len(HOPS_JOBS) and env.all_terminal():
                        break
                    time.sleep(0.5)
                figures = measure(run)
            finally:
                env.cleanup()  # before the preempting QOS goes: its job must be gone
    finally:
        if run.drained:
            resume(run.drained)
    figures["wall_s"] = round(time.time() - started, 1)
    print_figures(figures, args.json, 24, right=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
