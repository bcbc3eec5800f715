"""Crash safety and controller outage on the live Slurm test cluster.

hopsd runs under :mod:`faulty_hopsd`, whose ``--crash-after-intents`` and
``--crash-after-actions N`` faults SIGKILL it right after it committed a
decision's intents, or after its N-th Slurm action (e.g. between update and release).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from centre_live import check_exactly_once, tick_while_away
from daemon_live import LIVE, cluster, drive, hopsd_process
from sqlalchemy import select

from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import IntentRow, IntentState, JobState

pytestmark = LIVE

AFTER_INTENTS = ("--crash-after-intents",)
AFTER_FIRST_ACTION = ("--crash-after-actions", "1")


def stop(proc: subprocess.Popen[bytes], sig: int) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout=30)


def test_sigkill_at_random_points_loses_nothing_and_starts_nothing_twice(env):
    rng = random.Random(7)
    for i in range(6):
        env.submit((1, 2), rng.choice([800, 1500, 2500]), label=f"c{i}")
    kills = 0
    # 1: die right after a decision's intents are committed, before any Slurm call
    proc = hopsd_process(env, AFTER_INTENTS)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    kills += 1
    with env.sessions.begin() as s:
        assert s.scalars(select(IntentRow).where(IntentRow.state == IntentState.PENDING)).all()
    # 2: die between the update and the release of a start
    proc = hopsd_process(env, AFTER_FIRST_ACTION)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    kills += 1
    # 3..: killed from outside at random instants, with new jobs arriving
    for round_ in range(4):
        if round_ == 2:
            for i in range(3):
                env.submit((1, 2, 4), 1200, label=f"late{i}")
            proc = hopsd_process(env, AFTER_INTENTS)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=15)
        else:
            proc = hopsd_process(env)
            time.sleep(rng.uniform(0.5, 4.0))
        stop(proc, signal.SIGKILL)
        kills += 1
    assert kills >= 5
    final = hopsd_process(env)
    try:
        assert drive(lambda: None, env.all_terminal, deadline_s=120)
    finally:
        assert stop(final, signal.SIGTERM) == 0  # SIGTERM: finish the tick, exit cleanly
    check_exactly_once(env)


def daemon_pids() -> set[str]:
    """``name pid`` lines of the cluster's daemons (a fresh ``up`` changes them all)."""
    pids = Path(os.environ.get("HOPS_CLUSTER_DIR", "/var/tmp/hops-cluster")) / "pids"
    lines = pids.read_text().splitlines() if pids.exists() else []
    return {line.split()[0] if line.startswith("slurmctld") else line for line in lines}


@pytest.mark.slow
def test_slurmctld_outage_backs_off_and_recovers_without_loss(env, caplog):
    caplog.set_level(logging.INFO)
    for i in range(4):
        env.submit((1, 2), 2500, label=f"o{i}")
    service = Service(Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter()))
    running = lambda: sum(r.state == JobState.RUNNING for r in env.rows().values()) == 4  # noqa: E731
    assert drive(service.run_once, running, deadline_s=40)
    before = daemon_pids()
    cluster("stop-ctld")
    try:
        tick_while_away(service.run_once, 30)
        assert service.failures >= 2
    finally:
        cluster("start-ctld")
    if daemon_pids() - {"slurmctld"} != before - {"slurmctld"}:
        pytest.skip("the test cluster was re-created by another process during the outage")
    assert drive(service.run_once, env.all_terminal, deadline_s=120)
    messages = caplog.text
    assert "event=slurm-unavailable" in messages and "event=slurm-recovered" in messages
    check_exactly_once(env)
