"""Live: the daemon enacts an uneven distributed placement and the job runs exactly there.

Foreign (non-hops) jobs take both a100 nodes and three GPUs of v100n2, so the
only place for a job of demand {5} is v100n1:4 + v100n2:1. Needs
``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import subprocess

from daemon_live import LIVE, LiveEnv, drive
from placement_check import mismatches

from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_config, allocation_history
from hopsd.ledger.models import AllocationReason, JobState
from hopsd.slurm.port import Placement

pytestmark = LIVE

PLAN = {"v100n1": 4, "v100n2": 1}


def block(env: LiveEnv, *args: str) -> int:
    """A plain (non-hops) job holding GPUs until the test cancels it."""
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-J",
            f"{env.prefix}block",
            "-o",
            "/dev/null",
            "-t",
            "5",
            *args,
            "--wrap",
            "sleep 300",
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    job = int(out.stdout.strip().split(";")[0])
    env.blockers.append(job)
    return job


def running(env: LiveEnv, jobs: list[int]) -> bool:
    states = {j.job_id: j.state for j in env.port.list_jobs()}
    return all(states.get(j) == "RUNNING" for j in jobs)


def test_uneven_placement_runs_with_exactly_the_planned_gpus_per_node(env):
    blockers = [
        block(env, "-p", "a100", "-N", "2", "--gres=gpu:4"),
        block(env, "-p", "v100", "-w", "v100n2", "--gres=gpu:3"),
    ]
    assert drive(lambda: None, lambda: running(env, blockers), deadline_s=20, interval_s=0.5)
    job = env.submit((5,), 900, label="uneven")
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    seen: list[dict[str, int]] = []
    differences: list[list[str]] = []

    def step() -> None:
        tick.run_once()
        for slurm_job in env.port.list_jobs():
            if slurm_job.job_id == job and slurm_job.running:
                seen.append(slurm_job.placement)
                differences.append(mismatches(Placement.of("v100", PLAN), slurm_job))

    assert drive(step, env.all_terminal, deadline_s=45, interval_s=0.5)
    row = env.rows()[job]
    assert row.state == JobState.DONE, (row.state, row.state_reason)
    with env.sessions.begin() as s:
        starts = [
            allocation_config(a)
            for a in allocation_history(s, row.id)
            if a.reason == AllocationReason.START
        ]
    assert starts and starts[0] is not None and starts[0].as_dict() == PLAN
    assert seen, "the job was never observed running"
    assert all(m == [] for m in differences), differences
    assert all(p == PLAN for p in seen)
    events = env.events(job)
    assert [e["event"] for e in events].count("done") == 1, events
