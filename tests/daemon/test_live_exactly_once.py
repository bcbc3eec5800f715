"""Exactly once on the live test cluster: a requeue racing a job's end, a move of a job
still completing, and outages longer than the lease.

Each test reproduces a fault that hops had before, deterministically: the race of
fault 1 is forced by handing the enactor a fresh read taken before the job ended
(Slurm itself then requeues the finished job, as it does in the real race).
"""

from __future__ import annotations

import signal
import time

import pytest
from daemon_live import LIVE, LiveEnv, cluster, drive, hopsd_process
from sqlalchemy import select

from hopsd.core.model import Configuration
from hopsd.daemon.decide import MOVE, Action, chains
from hopsd.daemon.enact import Enactor, SettleOptions, Step
from hopsd.daemon.tick import Tick
from hopsd.ledger.intents import record_intents
from hopsd.ledger.models import IntentAction, IntentRow, IntentState, JobState
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE


def submit_script(env: LiveEnv, label: str, body: str) -> int:
    """A held hops job running ``body``; every run appends 'start' to <label>.runs."""
    runs = env.root / f"{label}.runs"
    script = env.root / f"{label}.sh"
    script.write_text(f"#!/bin/bash\necho start >> {runs}\n{body}\n")
    args = ["-J", f"{env.prefix}{label}", "-o", str(env.root / "%j.out"), "--open-mode=append"]
    job = env.port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1000, 32)))
    env.submitted.append(job)
    return job


def runs_of(env: LiveEnv, label: str) -> int:
    path = env.root / f"{label}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def slurm_state(env: LiveEnv, job: int) -> str:
    seen = {j.job_id: j for j in env.port.list_jobs()}
    return seen[job].state if job in seen else "GONE"


def started_tick(env: LiveEnv, job: int) -> Tick:
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    assert drive(tick.run_once, lambda: slurm_state(env, job) == "RUNNING", deadline_s=40)
    tick.run_once()  # the ledger sees it running
    return tick


def move_steps(env: LiveEnv, job: int, node: str, partition: str, gpu_type: str) -> list[Step]:
    """The intents of a move, recorded as a round would record them."""
    rows = env.rows()
    action = Action(
        rows[job].id, job, MOVE, Configuration(gpu_type, ((node, 1),)), partition, 0, False
    )
    with env.sessions.begin() as s:
        return [Step.of(r) for r in record_intents(s, chains([action], {}), None, time.time())]


@pytest.mark.parametrize("lag", ["ended-seconds-before", "same-second"])
def test_requeue_racing_the_job_end_never_runs_the_job_again(env, lag):
    """Fault 1: the job's script ends just before hops's requeue reaches Slurm, seconds
    before (accounting tells) or within the same second (Slurm's job record tells)."""
    gate = env.root / "finish"
    job = submit_script(env, "race", f"while [ ! -e {gate} ]; do sleep 0.02; done")
    tick = started_tick(env, job)
    seen_running = {job}  # the fresh read hops takes right before requeueing
    gate.touch()
    if lag == "same-second":
        time.sleep(0.15)
    else:
        assert drive(lambda: None, lambda: slurm_state(env, job) == "COMPLETED", 20, 0.1)
        time.sleep(1.5)
    enactor = Enactor(env.port, env.sessions, time.time, lambda: seen_running)
    report = enactor.run(move_steps(env, job, "a100n2", "a100", "a100"))
    assert report.finished_early == [env.rows()[job].id]
    assert drive(tick.run_once, lambda: slurm_state(env, job) in ("CANCELLED", "GONE"), 20)
    time.sleep(3)  # had it been released, it would be running again by now
    assert runs_of(env, "race") == 1
    row = env.rows()[job]
    assert row.state == JobState.DONE, (row.state, row.state_reason)
    with env.sessions.begin() as s:
        intents = s.scalars(select(IntentRow).where(IntentRow.job_id == row.id)).all()
        done = [i.action for i in intents if i.state == IntentState.DONE]
        assert done.count(IntentAction.RELEASE) == 1  # released once, for its first start
        assert IntentAction.CANCEL in done


def test_move_waits_until_the_old_run_has_left_its_node(env):
    """Fault 2: a job that checkpoints for 3 s on SIGTERM is released only after that."""
    job = submit_script(
        env,
        "slowstop",
        "trap 'sleep 3; exit 0' TERM\nfor i in $(seq 1 600); do sleep 0.1 & wait $!; done",
    )
    tick = started_tick(env, job)
    node = env.rows()[job].current_parts[0][0]  # type: ignore[index]
    enactor = Enactor(
        env.port,
        env.sessions,
        time.time,
        lambda: {j.job_id for j in env.port.list_jobs() if j.running},
        settle=SettleOptions(timeout_s=30.0, quiet_s=1.5),
    )
    requeued_at = time.time()
    kind = node.rstrip("0123456789").removesuffix("n")  # a100n1 -> a100 (its partition)
    report = enactor.run(move_steps(env, job, node, kind, kind))
    released = time.time()
    assert [s.action for s in report.done][-1] == IntentAction.RELEASE
    assert released - requeued_at >= 3.0 + 1.5  # SIGTERM handling plus the quiet period
    runs = [r for r in env.port.runs([job]) if r.state == "REQUEUED"]
    assert runs and runs[-1].batch_end_time is not None
    assert released >= runs[-1].batch_end_time + 1.5
    assert drive(tick.run_once, lambda: runs_of(env, "slowstop") == 2, deadline_s=30)
    assert slurm_state(env, job) == "RUNNING"


@pytest.mark.slow
def test_hopsd_survives_a_slurmctld_outage_longer_than_its_lease(env):
    """Fault 3: the lease (3 s here) lapses during a 10 s outage; hopsd goes on."""
    proc = hopsd_process(env)
    try:
        first = env.submit((1,), 400, label="before")
        assert drive(lambda: None, lambda: env.rows().get(first) is not None, deadline_s=30)
        cluster("stop-ctld")
        try:
            time.sleep(10)
            assert proc.poll() is None, "hopsd exited during the outage"
        finally:
            cluster("start-ctld")
        after = env.submit((1,), 400, label="after")
        assert drive(lambda: None, env.all_terminal, deadline_s=120)
        assert proc.poll() is None
        assert env.rows()[after].state == JobState.DONE
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    log = (env.root / "hopsd.log").read_text()
    assert "another hopsd is running" not in log
