"""Fixtures for CLI tests: a real SQLite ledger and a recording stand-in for Slurm."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hopsd.core.model import Configuration
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import JobProgress, JobSpec, add_job, apply_progress, set_current_config
from hopsd.ledger.jobs import transition as job_transition
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import JobRow, JobState, RefusalRow
from hopsd.ledger.predictions import write as write_predictions
from hopsd.ledger.records import Prediction
from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.ledger.usage import add_usage
from hopsd.slurm.port import AccountingRecord, SlurmJob, SlurmNode, SubmitRequest


@dataclass
class RecordingPort:
    """Answers node listings from a fixed list and records submissions and cancels."""

    nodes: list[SlurmNode]
    submitted: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    name: str = "recording"
    jobs: list[SlurmJob] = field(default_factory=list)
    ended: list[AccountingRecord] = field(default_factory=list)

    def list_jobs(self) -> list[SlurmJob]:
        return list(self.jobs)

    def accounting(self, job_ids: Any) -> list[AccountingRecord]:
        return [r for r in self.ended if r.job_id in set(job_ids)]

    def list_nodes(self) -> list[SlurmNode]:
        return list(self.nodes)

    def submit(self, request: SubmitRequest) -> int:
        self.submitted.append(
            {"script": request.script_path, "args": tuple(request.sbatch_args), "tag": request.tag}
        )
        return 1000 + len(self.submitted)

    def cancel(self, job_id: int, as_user: str | None = None) -> None:
        self.cancelled.append(job_id)


NODES = [
    SlurmNode("k80n1", ("k80", "all"), "k80", 2, 0, "IDLE"),
    SlurmNode("v100n1", ("v100", "all"), "v100", 4, 2, "MIXED"),
    SlurmNode("v100n2", ("v100", "all"), "v100", 4, 0, "IDLE"),
    SlurmNode("a100n1", ("a100", "all"), "a100", 4, 4, "ALLOCATED"),
]


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> RecordingPort:
    fake = RecordingPort(list(NODES))
    monkeypatch.setattr("hopsd.slurm.factory.make_port", lambda *a, **k: fake)
    return fake


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated SQLite ledger with a small history, and HOPS_CONF pointing at it."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    now = time.time()
    with sessions.begin() as session:
        running = add_job(
            session,
            JobSpec("j101", "alice", (1, 2), 1e6, now - 3600, slurm_job_id=101, account="ml"),
            now - 3600,
        )
        job_transition(running, JobState.QUEUED, now - 3600)
        job_transition(running, JobState.RUNNING, now - 3000)
        running.first_start_time = now - 3000
        set_current_config(running, Configuration.of("v100", {"v100n1": 2}))
        waiting = add_job(
            session,
            JobSpec("j102", "bob", (2, 4), 5e5, now - 1800, slurm_job_id=102, account="ml"),
            now - 1800,
        )
        job_transition(waiting, JobState.QUEUED, now - 1800)
        session.flush()
        apply_progress(
            session,
            [
                JobProgress(
                    "j101",
                    wait_time=600,
                    service_gpu_s=6000,
                    service_norm=6000,
                    samples_done=4e5,
                    latency_ratio=0.2,
                    estimate_source="type",
                ),
                JobProgress("j102", wait_time=1800, latency_ratio=4.5, estimate_source="table"),
            ],
            now,
        )
        running = session.get(JobRow, "j101")
        assert running is not None
        running.ftf_rho = 1.1  # as hopsd records it each tick (the core's Themis rho)
        running.plan_reason = "running on v100 v100n1:1"  # the last step's reason
        add_usage(session, "alice", "ml", now - 100, 6000, 6000)
        # the forecast of hopsd's last round: 102 starts on 101's GPUs when 101 ends
        write_predictions(
            session,
            [
                Prediction("j101", now - 30, "running", None, now + 1500),
                Prediction("j102", now - 30, "queued", now + 1500, now + 4000, "v100", 2),
            ],
        )
        store = SqlThroughputStore(session, now)
        store.set_type_aggregated("j101", "v100", 1, 100.0)
        store.set_entity_aggregated("j101", "v100n1", 1, 100.0)
        store.set_entity_aggregated("j101", "v100n2", 1, 60.0)
        # a tagged job hopsd refused to adopt (it has no job row)
        session.add(
            RefusalRow(
                slurm_job_id=103,
                user="bob",
                reason="total samples 10 below one batch (32)",
                refused_at=now - 60,
            )
        )
    engine.dispose()
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    yield url
