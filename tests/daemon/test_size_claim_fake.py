"""The size check in hopsd (in-memory Slurm): a lie is caught once, kept, and said.

A job claims 64 samples but runs on; at 10 samples/s (k80 and a100 alike here)
its claim needs 6.4 s. With ``size_check_slack_s = 10`` hopsd stops believing
it once its work passes 2 * 64 + 10 * 10 = 228 samples (22.8 s of running),
records why in the ledger, logs it once, and a restarted hopsd keeps planning
the job from its time limit without logging it again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.core.sizeclaim import DOUBT
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.ledger.jobs import get_job
from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.slurm.tag import HopsTag


def doubt_of(sessions: sessionmaker[Session], job: int) -> str:
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        return row.size_doubt


def test_a_claim_its_run_contradicts_is_doubted_once_and_the_doubt_is_kept(
    config: HopsConfig,
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    config = dataclasses.replace(config, size_check_slack_s=10.0)
    job = port.add_job(HopsTag((1,), 64))
    port.jobs[job].time_limit_s = 600.0
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    with sessions.begin() as s:
        store = SqlThroughputStore(s, clock())
        for gpu_type in ("k80", "a100"):
            store.set_type_aggregated(str(job), gpu_type, 1, 10.0)
    for _ in range(4):  # 20 s: 200 samples of work, below 228
        clock.advance(5)
        tick.run_once()
    assert doubt_of(sessions, job) == ""
    for _ in range(4):  # 40 s in all: 400 samples
        clock.advance(5)
        result = tick.run_once()
    said = doubt_of(sessions, job)
    assert said.startswith(f"{DOUBT}: ran about ") and "sized from its time limit (600 s)" in said
    assert caplog.text.count("event=size-doubted") == 1
    decision = result.decision
    if decision is not None:  # planned this tick: the reason users see says it too
        assert decision.reasons[str(job)].endswith(f"({DOUBT})")
    caplog.clear()
    restarted = Tick(config, port, sessions, clock=clock)
    clock.advance(11)  # a full round
    again = restarted.run_once()
    assert again.decision is not None
    (verdict,) = again.decision.doubted
    assert verdict.job_id == str(job) and not verdict.new and verdict.reason == said
    assert verdict.believed > 64 * 10  # the time limit's worth, not the claim
    assert "event=size-doubted" not in caplog.text


def test_progress_beyond_the_claim_is_doubted_at_once(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    job = port.add_job(HopsTag((1,), 64))
    tick = Tick(config, port, sessions, clock=clock, sensing=Sensing(
        Path(config.spool_dir), uid_of=lambda user: os.getuid()))  # fmt: skip
    tick.run_once()
    (node,) = port.jobs[job].placement
    record = {"v": 1, "job": str(job), "run": 0, "node": node, "seq": 1, "at": clock() + 1,
              "kind": "checkpoint", "seconds": 0.5, "samples_done": 5000.0}  # fmt: skip
    (Path(config.spool_dir) / "alice").mkdir(exist_ok=True)
    with open(Path(config.spool_dir) / "alice" / f"{job}.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    clock.advance(2)
    tick.run_once()
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.samples_done == 64.0  # the ledger keeps it at the claim
    said = doubt_of(sessions, job)
    assert said == f"{DOUBT}: reported 5000 samples done, more than the 64 claimed"
    clock.advance(11)
    result = tick.run_once()  # the step plans it from then on from its time limit
    assert result.decision is not None
    (verdict,) = result.decision.doubted
    assert not verdict.new and verdict.believed > 64
