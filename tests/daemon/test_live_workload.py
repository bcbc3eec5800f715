"""End to end on the live Slurm test cluster: a workload completes exactly once, where planned.

Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import subprocess

import pytest
from daemon_live import LIVE, LiveEnv, drive
from sqlalchemy import select
from tick_steps import observe_and_reconcile

from hopsd.core.model import Configuration
from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_config, allocation_history
from hopsd.ledger.models import AllocationReason, AllocationRow, IntentAction, JobState
from hopsd.ledger.throughput_store import SqlThroughputStore

pytestmark = LIVE

WORKLOAD = [  # (demand set, samples, per-type speed-ups of the model)
    ((1,), 900, ""),
    ((1, 2), 1600, ""),
    ((2, 4), 3000, "a100=6"),
    ((1, 2, 4), 2400, ""),
    ((1,), 600, "v100=3"),
    ((2,), 1200, ""),
    ((1, 2), 1000, "a100=2"),
    ((4,), 3200, ""),
    ((1,), 700, ""),
    ((1, 2, 4), 2000, "k80=1.5"),
    ((2, 4), 2200, ""),
    ((1,), 500, ""),
    ((1, 2), 1400, "a100=5"),
]


def last_placement(env: LiveEnv, job_id: str) -> set[str]:
    with env.sessions.begin() as s:
        allocs = [
            a
            for a in allocation_history(s, job_id)
            if a.reason in (AllocationReason.START, AllocationReason.MOVE, AllocationReason.KEEP)
        ]
    assert allocs, f"job {job_id} has no start allocation"
    return {str(p[0]) for p in allocs[-1].parts or []}


def test_workload_completes_exactly_once_where_the_ledger_says(env):
    jobs = [env.submit(d, n, type_speed=s, label=f"w{i}") for i, (d, n, s) in enumerate(WORKLOAD)]
    tick = Tick(
        env.config,
        env.port,
        env.sessions,
        adopt_filter=env.adopt_filter(),
        call_count=lambda: len(env.runner.calls),
    )
    results = []
    reservation_reads: list[int] = []
    commands: list[list[str]] = []  # each tick's Slurm commands, named when a bound fails

    def step() -> None:
        first = len(env.runner.calls)
        results.append(tick.run_once())
        made = env.runner.calls[first:]
        reservation_reads.append(sum(1 for argv in made if "reservation" in argv))
        commands.append([" ".join(str(a) for a in argv[:3]) for argv in made])

    assert drive(step, env.all_terminal, deadline_s=120)

    rows = env.rows()
    for job in jobs:
        row = rows[job]
        assert row.state == JobState.DONE, (job, row.state, row.state_reason)
        events = env.events(job)
        assert [e["event"] for e in events].count("done") == 1, events
        starts = [e for e in events if e["event"] == "start"]
        assert 1 <= len(starts) <= 1 + row.restarts
        # where the job really ran (its own report) is where the ledger placed it
        assert set(starts[-1]["nodes"]) == last_placement(env, row.id)
        assert row.service_gpu_s > 0, (job, row.service_gpu_s, events)
        assert row.samples_done == row.total_samples, (job, row.samples_done, events)
    # reads stay batched, none is made per job: a tick observes at most three times
    # (first, after resumed intents, after enacting a requeue of an unplanned start),
    # each the queue (its narrow read may need the full one) and the nodes; it re-checks
    # the running jobs before requeues at most twice (resumed intents, the plan's), and
    # reads accounting at most twice per reconciliation (jobs gone, requeued runs' ends).
    # Every other call is one per action taken (two for a requeue: the operator's hold
    # follows it), two batched reads (queue, accounting) per round of waiting for
    # requeued jobs to leave their nodes, and the reservations, read again at most every
    # queue_refresh_s.
    for r, reads, made in zip(results, reservation_reads, commands, strict=True):
        assert reads <= 1
        assert 1 <= r.observations <= 3, made
        assert r.batched_reads <= 3 * r.observations + 2 * 2 + 2 * r.observations, made
        enacted = [e for e in (r.enacted, r.resumed) if e is not None]
        actions = sum(len(e.done) + len(e.failed) for e in enacted)
        taken = [s for e in enacted for s in e.done]
        requeues = sum(1 for s in taken if s.action == IntentAction.REQUEUE_HOLD)
        polls = sum(e.settle_polls for e in enacted)
        bound = r.batched_reads + actions + requeues + 2 * polls + reads
        assert r.slurm_calls <= bound, made
    # accounting agrees on the nodes, when slurmdbd is there
    try:
        records = {r.job_id: r for r in env.port.accounting(jobs)}
    except Exception as exc:
        pytest.skip(f"accounting unavailable: {exc}")
    for job in jobs:
        if job in records and records[job].nodes:
            assert set(records[job].nodes) == last_placement(env, rows[job].id), job
            assert records[job].state == "COMPLETED"
            # the ledger charged at least the last run Slurm accounts for, however short
            # (its times are whole seconds: one second of slack per GPU)
            last_run = records[job].gpus * (records[job].elapsed_s - 1)
            assert rows[job].service_gpu_s >= last_run, (job, rows[job].service_gpu_s)


def block_nodes(nodes: str, gpus: int, name: str) -> int:
    """A non-hops job holding ``gpus`` GPUs on each of ``nodes`` (occupied capacity)."""
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-J",
            name,
            "-p",
            "all",
            "-w",
            nodes,
            f"-N{len(nodes.split(','))}",
            f"--gres=gpu:{gpus}",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=20,
    )
    return int(out.stdout.strip().split(";")[0])


def seed(env: LiveEnv, job: int, per_gpu: dict[str, float]) -> None:
    """Tell the estimator what the job does per GPU type (as profiling would)."""
    with env.sessions.begin() as s:
        store = SqlThroughputStore(s, 0.0)
        for kind, thr in per_gpu.items():
            for gpus in (1, 2, 4, 8):
                store.set_type_aggregated(str(job), kind, gpus, thr)
            for n_nodes in (2,):
                store.set_type_distributed(str(job), kind, n_nodes, thr)


def placements_of_round(env: LiveEnv) -> dict[str, Configuration]:
    """The latest start/move/keep placement of every job, from the allocation history."""
    with env.sessions.begin() as s:
        rows = s.scalars(select(AllocationRow).order_by(AllocationRow.id)).all()
        out: dict[str, Configuration] = {}
        for r in rows:
            config = allocation_config(r)
            if config is not None:
                out[r.job_id] = config
    return out


def tick_once_running(env: LiveEnv, blocker: int) -> Tick:
    """The test's tick, handed over once ``blocker`` holds its nodes."""
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    assert drive(
        lambda: None,
        lambda: any(j.job_id == blocker and j.running for j in env.port.list_jobs()),
        20,
    )
    return tick


def test_fast_type_goes_to_the_job_that_gains_most(env):
    """Contention: one free a100 node, one free v100 node, two rigid 4-GPU jobs."""
    blocker = block_nodes("a100n2,v100n2", 4, f"{env.prefix}block")
    env.blockers.append(blocker)
    flat = env.submit((4,), 1e6, type_speed="a100=1.1,v100=1.0", label="flat")
    gainer = env.submit((4,), 1e6, type_speed="a100=8", label="gainer")
    tick = tick_once_running(env, blocker)
    adopted = observe_and_reconcile(tick).adopted
    assert set(adopted) == {str(flat), str(gainer)}
    seed(env, gainer, {"k80": 100.0, "v100": 200.0, "a100": 800.0})
    seed(env, flat, {"k80": 100.0, "v100": 200.0, "a100": 220.0})
    result = tick.run_once()
    assert result.decision is not None and result.decision.kind == "round"
    placed = placements_of_round(env)
    assert placed[str(gainer)].gpu_type == "a100", placed
    assert placed[str(flat)].gpu_type == "v100", placed


def test_a_job_moved_by_requeue_finishes_exactly_once(env):
    """Started on the slow k80 while the rest is busy, moved to a100 when it frees."""
    blocker = block_nodes("a100n1,a100n2,v100n1,v100n2", 4, f"{env.prefix}block")
    env.blockers.append(blocker)
    mover = env.submit((2,), 5000, type_speed="a100=8", label="mover")
    tick = tick_once_running(env, blocker)
    assert observe_and_reconcile(tick).adopted == [str(mover)]
    seed(env, mover, {"k80": 100.0, "v100": 200.0, "a100": 800.0})
    tick.run_once()
    assert placements_of_round(env)[str(mover)].gpu_type == "k80"
    assert drive(tick.run_once, lambda: env.rows()[mover].state == JobState.RUNNING, 20)
    subprocess.run(["scancel", str(blocker)], check=True, timeout=20)
    assert drive(tick.run_once, env.all_terminal, deadline_s=90)
    row = env.rows()[mover]
    assert row.state == JobState.DONE
    with env.sessions.begin() as s:
        reasons = [(a.reason.value, a.gpu_type) for a in allocation_history(s, row.id)]
    assert ("move", "a100") in reasons, reasons
    events = env.events(mover)
    assert [(e["event"], e["gpu_type"]) for e in events] == [
        ("start", "k80"),
        ("start", "a100"),
        ("done", "a100"),
    ]
    assert row.restarts == 1
    assert events[1]["samples_done"] > 0  # resumed from its checkpoint, not from zero
