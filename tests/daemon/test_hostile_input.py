"""Concrete attacks by one user on hopsd, against the in-memory Slurm: each costs only that job.

Every test runs a second, honest user's job beside the attacker's and checks
that it is still adopted and started, that the tick never raises, and that the
attacker's job carries the reason in its ledger row (what ``hops status`` shows).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort
from prometheus_client import generate_latest
from spool_tick import make_tick, row_of
from sqlalchemy import select

from hopsd.daemon.metrics import DaemonMetrics
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.spool import Spools
from hopsd.daemon.spool_budget import JOB_BUDGET_BYTES
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.models import JobState, ThroughputRow
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((1,), 1e6)


def running_attacker(config, port, sessions, clock) -> tuple[Tick, int]:  # type: ignore[no-untyped-def]
    bad = port.add_job(TAG, user="mallory")
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    assert port.jobs[bad].state == "RUNNING"
    return tick, bad


def ticks_with_a_victim(tick: Tick, port: FakePort, clock: FakeClock, n: int = 3) -> int:
    """Submit an honest job, run ``n`` ticks (none may raise); the victim must be running."""
    victim = port.add_job(TAG, user="alice")
    for _ in range(n):
        clock.advance(1)
        tick.run_once()
    assert port.jobs[victim].state == "RUNNING"
    return victim


def test_nested_brackets_in_a_progress_file_cost_only_that_job(config, port, sessions, clock):
    tick, bad = running_attacker(config, port, sessions, clock)
    (Path(config.spool_dir) / "mallory" / f"{bad}.progress.json").write_text("[" * 20000)
    victim = ticks_with_a_victim(tick, port, clock)
    row = row_of(sessions, bad)
    assert row.state == JobState.RUNNING
    assert "progress file ignored" in row.input_problem
    assert "nested deeper" in row.input_problem
    assert row_of(sessions, victim).input_problem == ""


def test_nested_lines_streamed_into_a_report_cost_only_that_job(config, port, sessions, clock):
    tick, bad = running_attacker(config, port, sessions, clock)
    report = Path(config.spool_dir) / "mallory" / f"{bad}.jsonl"
    victim = port.add_job(TAG, user="alice")
    for n in range(4):  # a new line every tick, below and above the line limit
        with report.open("a") as f:
            f.write("[" * (20_000 if n % 2 == 0 else 10_000) + "\n")
        clock.advance(1)
        tick.run_once()
    assert port.jobs[victim].state == "RUNNING"
    problem = row_of(sessions, bad).input_problem
    assert "record skipped" in problem and "nested deeper" in problem


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e999", "1" + "0" * 5000])
def test_a_progress_file_with_a_non_finite_number_is_refused(config, port, sessions, clock, number):
    tick, bad = running_attacker(config, port, sessions, clock)
    text = '{"samples_done": ' + number + ', "at": 5}'
    (Path(config.spool_dir) / "mallory" / f"{bad}.progress.json").write_text(text)
    ticks_with_a_victim(tick, port, clock)
    row = row_of(sessions, bad)
    assert row.samples_done == 0.0
    assert "progress file ignored" in row.input_problem
    json.dumps({"samples_done": row.samples_done}, allow_nan=False)  # standard JSON out


def test_a_progress_file_with_unknown_keys_or_a_wrong_shape_is_refused(
    config, port, sessions, clock
):
    tick, bad = running_attacker(config, port, sessions, clock)
    path = Path(config.spool_dir) / "mallory" / f"{bad}.progress.json"
    path.write_text(json.dumps({"samples_done": 10, "at": 1, "admin": True}))
    clock.advance(1)
    tick.run_once()
    assert "unknown keys 'admin'" in row_of(sessions, bad).input_problem
    path.write_text(json.dumps({"samples_done": 20, "at": 2}))
    clock.advance(1)
    tick.run_once()
    assert row_of(sessions, bad).samples_done == 20  # a good file is read again


def test_a_progress_file_claiming_nodes_the_job_does_not_hold_teaches_nothing(
    config, port, sessions, clock
):
    tick, bad = running_attacker(config, port, sessions, clock)
    (held,) = port.jobs[bad].placement
    other = next(n.name for n in port.nodes if n.name != held)
    claim = {"samples_done": 5, "at": 1, "per_gpu": 1e6, "nodes": [other], "gpus": 1}
    (Path(config.spool_dir) / "mallory" / f"{bad}.progress.json").write_text(json.dumps(claim))
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        places = set(s.scalars(select(ThroughputRow.place).where(ThroughputRow.job_id == str(bad))))
    assert places == set()
    assert "not where the job runs" in row_of(sessions, bad).input_problem
    assert row_of(sessions, bad).samples_done == 5  # its progress still counts


def test_samples_done_never_exceeds_the_jobs_size(config, port, sessions, clock):
    tick, bad = running_attacker(config, port, sessions, clock)
    body = {"samples_done": 1e15, "at": 1}
    (Path(config.spool_dir) / "mallory" / f"{bad}.progress.json").write_text(json.dumps(body))
    clock.advance(1)
    tick.run_once()
    assert row_of(sessions, bad).samples_done == TAG.total_samples


def test_any_exception_from_one_jobs_work_skips_only_that_job(
    config, port, sessions, clock, monkeypatch, caplog
):
    tick, bad = running_attacker(config, port, sessions, clock)
    metrics = DaemonMetrics()
    metrics.watch(tick.reconciler.problems)
    real = Sensing.ingest

    def ingest(self, store, row, seen, cfg, cluster):  # type: ignore[no-untyped-def]
        if seen.slurm_id == bad:
            raise ZeroDivisionError("a bug only this job's data reaches")
        return real(self, store, row, seen, cfg, cluster)

    monkeypatch.setattr(Sensing, "ingest", ingest)
    with caplog.at_level(logging.ERROR, logger="hopsd.problems"):
        ticks_with_a_victim(tick, port, clock, n=4)
    assert caplog.text.count("event=job-skipped") == 1  # once per job and cause
    assert "ZeroDivisionError" in row_of(sessions, bad).input_problem
    text = generate_latest(metrics.registry).decode()
    assert 'hopsd_job_failures_contained_total{step="reconcile"} 4.0' in text


def test_the_failed_jobs_interval_is_charged_once_it_works_again(
    config, port, sessions, clock, monkeypatch
):
    tick, bad = running_attacker(config, port, sessions, clock)
    clock.advance(1)
    tick.run_once()
    before = row_of(sessions, bad).service_gpu_s
    monkeypatch.setattr(Sensing, "ingest", lambda *a: 1 / 0)
    clock.advance(5)
    tick.run_once()
    assert row_of(sessions, bad).service_gpu_s == before  # the failed tick left it alone
    monkeypatch.undo()
    clock.advance(1)
    tick.run_once()
    assert row_of(sessions, bad).service_gpu_s == pytest.approx(before + 6.0)


def test_an_overlong_account_is_refused_at_adoption(config, port, sessions, clock):
    bad = port.add_job(TAG, user="mallory", account="a" * 100)
    good = port.add_job(TAG, user="alice")
    tick = make_tick(config, port, sessions, clock)
    result = tick.run_once()
    assert result.reconcile is not None
    assert [j for j, _ in result.reconcile.rejected] == [bad]
    assert "account" in result.reconcile.rejected[0][1]
    assert port.jobs[good].state == "RUNNING"


@pytest.mark.parametrize(
    ("work_dir", "why"),
    [
        ("relative/dir", "not an absolute path"),
        ("/home/m\x1b[31m", "control characters"),
        ("/" + "d" * 5000, "longer than"),
    ],
)
def test_an_unusable_working_directory_is_reported_once(work_dir: str, why: str) -> None:
    counted: list[str] = []
    problems = InputProblems(count_refused=counted.append)
    job = ObservedJob(7, "m", "a", "RUNNING", tag=TAG, work_dir=work_dir)
    spools = Spools(None, problems)
    spools.note([job])
    spools.note([job])
    assert spools.of(7) is None
    assert why in (problems.take(7) or "")
    assert counted == ["work_dir"]


# -- spool hygiene ----------------------------------------------------------------------


def test_a_finished_jobs_files_are_removed_after_the_retention(config, port, sessions):
    clock = FakeClock(time.time())
    config = dataclasses.replace(config, spool_retention_s=10.0)
    spool = Path(config.spool_dir)
    tick = make_tick(config, port, sessions, clock)
    done = port.add_job(TAG, user="alice")
    live = port.add_job(TAG, user="bob")
    tick.run_once()
    names = [f"{done}.jsonl", f"{done}.progress.json", f"{done}.mode", f"{done}.ckpt.json"]
    for name in names:
        (spool / "alice" / name).write_text("{}")  # each user's files are in their directory
    (spool / "bob" / f"{live}.mode").write_text("{}")
    port.finish(done)
    clock.advance(1)
    tick.run_once()
    assert row_of(sessions, done).state == JobState.DONE
    clock.advance(5)
    tick.run_once()
    assert all((spool / "alice" / n).exists() for n in names)  # within the retention
    clock.advance(6)
    tick.run_once()
    assert [p.name for p in (spool / "alice").iterdir()] == [f"{done}.ckpt.json"]
    assert [p.name for p in (spool / "bob").iterdir()] == [f"{live}.mode"]


def test_a_restarted_daemon_sweeps_stale_files_from_the_shared_spool(config, port, sessions):
    now = time.time()
    clock = FakeClock(now)
    config = dataclasses.replace(config, spool_retention_s=3600.0)
    spool = Path(config.spool_dir)
    live = port.add_job(TAG, user="bob")
    spool = spool / "carol"  # a user of jobs an earlier daemon saw
    spool.mkdir(mode=0o700)
    for name, age in [("999.jsonl", 7200), ("998.mode", 7200), ("997.jsonl", 10),
                      (f"{live}.jsonl", 7200), ("notes.txt", 7200)]:  # fmt: skip
        (spool / name).write_text("{}")
        os.utime(spool / name, (now - age, now - age))
    make_tick(config, port, sessions, clock).run_once()
    assert sorted(p.name for p in spool.iterdir()) == sorted(
        ["997.jsonl", f"{live}.jsonl", "notes.txt"]
    )


def test_a_running_jobs_file_past_its_spool_budget_is_removed_and_shown(
    config, port, sessions, clock
):
    tick, bad = running_attacker(config, port, sessions, clock)
    junk = Path(config.spool_dir) / "mallory" / "junk"
    junk.write_bytes(b"x" * (JOB_BUDGET_BYTES + 1024 * 1024))
    ticks_with_a_victim(tick, port, clock)
    assert not junk.exists()
    assert "junk" in row_of(sessions, bad).input_problem
    assert "budget" in row_of(sessions, bad).input_problem


def test_a_ledger_error_about_one_job_is_contained_but_infrastructure_errors_are_not() -> None:
    from hopsd.ledger.errors import IllegalTransitionError, LedgerUnavailableError

    problems = InputProblems()
    assert (
        problems.guard(5, "reconcile", _raise(IllegalTransitionError("5", "done", "running")))
        is None
    )
    assert "IllegalTransitionError" in (problems.take(5) or "")
    with pytest.raises(LedgerUnavailableError):
        problems.guard(5, "reconcile", _raise(LedgerUnavailableError("database is gone")))


def _raise(exc: Exception):  # type: ignore[no-untyped-def]
    def work() -> None:
        raise exc

    return work
