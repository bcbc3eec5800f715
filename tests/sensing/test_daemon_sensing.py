"""Sensing and the profiling queue in the daemon, against the daemon tests' in-memory Slurm."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort, small_cluster
from sensing_conf import sensing_config
from spool_tick import row_of
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hops_probe import Probe
from hopsd.config import HopsConfig
from hopsd.core.step import RoundClock
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import JobState, ProfileRow, ThroughputLayer, ThroughputRow
from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.slurm.tag import HopsTag


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    path = tmp_path / "spool"
    path.mkdir()
    return path


def config_of(spool: Path, profiling: bool) -> HopsConfig:
    return sensing_config(profiling)


def make_tick(spool: Path, sessions: sessionmaker[Session], port: FakePort, clock: FakeClock, *,
              profiling: bool = True) -> Tick:  # fmt: skip
    sensing = Sensing(spool, uid_of=lambda user: os.getuid())
    return Tick(config_of(spool, profiling), port, sessions, clock=clock, sensing=sensing)


def job_probe(
    spool: Path, job: int, node: str, restarts: int, wall: FakeClock | None = None
) -> tuple[Probe, list[float]]:
    """The probe as the job would build it on ``node`` (mode file included), on a fake clock
    (its wall clock ``wall`` when given, the daemon's: report times then line up with hopsd's)."""
    t = [0.0]
    env = {
        "SLURM_JOB_ID": str(job),
        "HOPS_SPOOL_DIR": str(spool / "alice"),  # the job's user's directory hopsd made
        "SLURMD_NODENAME": node,
        "SLURM_RESTART_COUNT": str(restarts),
        "HOPS_PROBE_WARMUP": "0",
        "HOPS_PROBE_FLUSH_S": "1",
    }
    on_wall = (lambda: wall() + t[0]) if wall is not None else (lambda: 1e9 + t[0])
    return Probe(environ=env, clock=lambda: t[0], wall=on_wall), t


def train(
    probe: Probe, t: list[float], n: int, phases: dict[str, float], samples: int = 32
) -> None:
    for _ in range(n):
        with probe.iteration(samples=samples) as it:
            for name, dt in phases.items():
                with it.phase(name):
                    t[0] += dt


PHASES = {"data": 0.02, "forward": 0.02, "backward": 0.05, "update": 0.01}  # 0.1 s


def _profiling(spool: Path, sessions: sessionmaker[Session], gpus: int):  # type: ignore[no-untyped-def]
    """A new job of ``gpus`` on the small cluster, after the first tick: profiling."""
    port, clock = FakePort(small_cluster()), FakeClock()
    job = port.add_job(HopsTag((gpus,), 1e6))
    tick = make_tick(spool, sessions, port, clock)
    tick.run_once()
    assert row_of(sessions, job).state == JobState.PROFILING
    return port, clock, tick, job


def test_a_new_job_is_profiled_on_each_type_then_queued(sessions, spool: Path) -> None:
    port, clock, tick, job = _profiling(spool, sessions, 2)
    assert port.actions(job) == ["update", "release"]
    first = dict(port.jobs[job].placement)
    assert sum(first.values()) == 1  # one GPU of one type
    mode = json.loads((spool / "alice" / f"{job}.mode").read_text())
    assert mode == {"mode": "profile", "iterations": 3, "run": 0, "gpus": 1}

    seen_types = []
    for restarts in (0, 1):
        (node,) = port.jobs[job].placement
        probe, t = job_probe(spool, job, node, restarts, wall=clock)
        assert probe.mode == "profile"
        train(probe, t, 3, PHASES)
        clock.advance(1)
        tick.run_once()  # profile read: the job is told to checkpoint, as before a move
        assert port.actions(job)[-1] == "signal" and port.jobs[job].state == "RUNNING"
        clock.advance(1)
        tick.run_once()  # within the grace: neither requeued nor stopped a second time
        assert port.actions(job).count("signal") == restarts + 1
        assert port.jobs[job].state == "RUNNING"
        seen_types.append(port.jobs[job].partition)
        probe.checkpointed(0.5)
        clock.advance(1)
        tick.run_once()  # the checkpoint report ends the grace: requeued (and placed anew)
        assert port.actions(job).count("requeue_hold") == restarts + 1
        assert port.jobs[job].restarts == restarts + 1
        clock.advance(1)
        tick.run_once()  # placed on the next type, or queued and planned
    assert sorted(seen_types) == ["fast", "slow"]
    with sessions.begin() as s:
        profiles = {p.gpu_type: p for p in s.scalars(select(ProfileRow))}
        assert set(profiles) == {"k80", "a100"}
        assert all(p.iterations == 3 and p.pattern == 2 for p in profiles.values())
        assert profiles["k80"].t_b == pytest.approx(0.05)
        entity = s.scalars(
            select(ThroughputRow).where(ThroughputRow.layer == ThroughputLayer.ENTITY_AGGREGATED)
        ).all()
        assert {r.size for r in entity} == {1} and entity[0].per_gpu == pytest.approx(320.0)
    # the profiling order is gone; the planned run was told its GPUs instead
    after = json.loads((spool / "alice" / f"{job}.mode").read_text())
    assert "mode" not in after and after["gpus"] == 2 and after["run"] == port.jobs[job].restarts
    row = row_of(sessions, job)
    assert row.state in (JobState.QUEUED, JobState.RUNNING)
    assert port.jobs[job].state == "RUNNING" and sum(port.jobs[job].placement.values()) == 2
    assert row.estimate_source == "theory"  # no measured row at 2 GPUs yet


def profile_both_types(spool: Path, port: FakePort, tick: Tick, clock: FakeClock, job: int) -> None:
    """Drive ``job`` through its profiling runs on the two types (probe reports each)."""
    for restarts in (0, 1):
        (node,) = port.jobs[job].placement
        probe, t = job_probe(spool, job, node, restarts, wall=clock)
        train(probe, t, 3, PHASES)
        clock.advance(1)
        tick.run_once()  # profile read: the job is told to checkpoint
        probe.checkpointed(0.5)
        clock.advance(1)
        tick.run_once()  # the checkpoint report ends the grace: requeued held
        clock.advance(1)
        tick.run_once()  # placed on the next type, or queued and planned


def test_a_job_of_a_model_measured_before_is_not_profiled_again(sessions, spool: Path) -> None:
    """A job naming a model an earlier job of the same batch size was profiled on (both
    types) is queued and started at once, with no profiling run and so no requeue, and its
    profiles are the earlier job's; the same model at another batch size, or a job naming
    no model, is profiled as usual."""
    port, clock = FakePort(small_cluster()), FakeClock()
    tick = make_tick(spool, sessions, port, clock)
    first = port.add_job(HopsTag((1,), 1e6, model="resnet50"))
    tick.run_once()
    profile_both_types(spool, port, tick, clock, first)
    with sessions.begin() as s:
        measured = {
            p.gpu_type: (p.t_f, p.t_b) for p in s.scalars(select(ProfileRow)) if p.iterations
        }
    assert set(measured) == {"k80", "a100"}

    again = port.add_job(HopsTag((1,), 1e6, model="resnet50"))
    other_batch = port.add_job(HopsTag((1,), 1e6, batch_size=64, model="resnet50"))
    no_model = port.add_job(HopsTag((1,), 1e6))
    clock.advance(1)
    tick.run_once()
    row = row_of(sessions, again)
    assert row.state in (JobState.QUEUED, JobState.RUNNING), row.state
    assert "measured on every type" in (row.state_reason or "")
    assert port.jobs[again].restarts == 0 and "requeue_hold" not in port.actions(again)
    with sessions.begin() as s:
        known = {
            p.gpu_type: (p.t_f, p.t_b, p.iterations)
            for p in s.scalars(select(ProfileRow).where(ProfileRow.job_id == str(again)))
        }
    assert known == {t: (*v, 0) for t, v in measured.items()}  # the earlier job's, as derived
    assert row_of(sessions, other_batch).state == JobState.PROFILING
    assert row_of(sessions, no_model).state == JobState.PROFILING


def test_a_job_without_probe_times_out_once_and_is_queued(sessions, spool: Path) -> None:
    port, clock, tick, job = _profiling(spool, sessions, 1)
    clock.advance(3)
    tick.run_once()  # still within the timeout
    assert port.actions(job) == ["update", "release"]
    clock.advance(3)
    tick.run_once()  # 6 s > 5 s: requeued held, no report ever: no probe
    assert port.actions(job)[-1] == "requeue_hold"
    assert "signal" not in port.actions(job)  # nothing would hear a notice: none is sent
    clock.advance(1)
    tick.run_once()
    row = row_of(sessions, job)
    assert row.state in (JobState.QUEUED, JobState.RUNNING)
    assert "gave no report" in row.state_reason or row.state == JobState.RUNNING
    assert port.jobs[job].state == "RUNNING"
    assert row.estimate_source == "table"
    assert row.wait_time > 0  # the held profiling wait counts as waiting


@pytest.mark.parametrize("restart_at", ["run", "held"])
def test_a_job_without_probe_is_started_at_most_twice_across_a_daemon_restart(
    sessions, spool: Path, restart_at: str
) -> None:
    """One silent profiling run ends profiling, even when hopsd restarts during the run
    or between its requeue and the next placement (what the step is told is in the ledger)."""
    port, clock = FakePort(small_cluster()), FakeClock()
    job = port.add_job(HopsTag((1,), 1e6))
    tick = make_tick(spool, sessions, port, clock)
    tick.run_once()  # the profiling run is placed and released
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    if restart_at == "run":
        tick = make_tick(spool, sessions, port, clock)  # a new daemon, no memory
    for _ in range(3):
        clock.advance(3)
        tick.run_once()
        if port.actions(job)[-1] == "requeue_hold":
            break
    assert port.actions(job)[-1] == "requeue_hold"
    if restart_at == "held":
        tick = make_tick(spool, sessions, port, clock)
    for _ in range(8):
        clock.advance(3)
        tick.run_once()
    row = row_of(sessions, job)
    assert "gave no report" in row.state_reason or row.state == JobState.RUNNING
    assert port.jobs[job].state == "RUNNING"
    assert port.actions(job).count("release") == 2  # one profiling run, then its real run


def test_profiling_jobs_are_not_planned_and_their_gpus_are_kept(sessions, spool: Path) -> None:
    port, clock = FakePort(small_cluster()), FakeClock()
    prof = port.add_job(HopsTag((1,), 1e6))
    tick = make_tick(spool, sessions, port, clock)
    tick.run_once()  # prof starts profiling on one GPU
    (node,) = port.jobs[prof].placement
    # everything else is taken by a foreign job except the profiling node's 3 free GPUs
    others = {n.name: n.gpus for n in port.nodes if n.name != node}
    port.add_job(None, held=False, running_on=others)
    tick.reconciler.profile_new_jobs = False  # the next job goes straight to the queue
    big = port.add_job(HopsTag((4,), 1e6))
    clock.advance(2)  # within the profiling timeout
    tick.round_clock = RoundClock(tick.settings.round_length_s)  # a full round: all re-planned
    result = tick.run_once()
    assert result.decision is not None and result.decision.kind == "round"
    assert row_of(sessions, big).state == JobState.QUEUED
    planned = {a.job_id for a in (*result.decision.plan.keep, *result.decision.plan.move)}
    assert str(prof) not in planned and str(prof) not in result.decision.plan.preempt
    assert port.jobs[big].state == "PENDING"  # 3 free GPUs on the node: no room for 4
    assert port.jobs[prof].placement == {node: 1}  # never moved by the planner


def _running_job(sessions, spool: Path, clock: FakeClock):  # type: ignore[no-untyped-def]
    port = FakePort(small_cluster())
    job = port.add_job(HopsTag((1,), 1e6))
    tick = make_tick(spool, sessions, port, clock, profiling=False)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    (node,) = port.jobs[job].placement
    return port, tick, job, node


def test_running_reports_fill_entity_and_type_layers(sessions, spool: Path) -> None:
    clock = FakeClock()
    port, tick, job, node = _running_job(sessions, spool, clock)
    probe, t = job_probe(spool, job, node, 0)
    train(probe, t, 20, PHASES)  # 0.1 s per iteration of 32 samples: 320 samples/s
    probe.progress(640)
    probe.flush()
    clock.advance(1)
    tick.run_once()
    kind = port.jobs[job].partition
    gpu_type = {"slow": "k80", "fast": "a100"}[kind]
    with sessions.begin() as s:
        store = SqlThroughputStore(s)
        assert store.entity_aggregated(str(job), node, 1) == pytest.approx(320.0)
        assert store.type_aggregated(str(job), gpu_type, 1) == pytest.approx(320.0)
        row = get_job(s, str(job))
        assert row is not None and row.samples_done == 640 and row.estimate_source == "entity"
    # a second server of the type, twice as slow: the type layer keeps the best one
    with sessions.begin() as s:
        other = next(n.name for n in port.nodes if n.partition == kind and n.name != node)
        SqlThroughputStore(s).observe(ThroughputLayer.ENTITY_AGGREGATED, str(job), other, 1, 160.0)
    train(probe, t, 20, PHASES)
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        assert SqlThroughputStore(s).type_aggregated(str(job), gpu_type, 1) == pytest.approx(320.0)


def test_reports_of_an_earlier_run_only_count_as_progress(sessions, spool: Path) -> None:
    clock = FakeClock()
    _, tick, job, node = _running_job(sessions, spool, clock)
    probe, t = job_probe(spool, job, node, restarts=3)  # not the run Slurm runs now
    train(probe, t, 20, PHASES)
    probe.progress(900)
    probe.flush()
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        assert SqlThroughputStore(s).entity_aggregated(str(job), node, 1) is None
        row = get_job(s, str(job))
        assert row is not None and row.samples_done == 900


def test_progress_only_jobs_are_measured_from_samples_per_wall_time(sessions, spool) -> None:
    clock = FakeClock()
    _, tick, job, node = _running_job(sessions, spool, clock)
    probe, t = job_probe(spool, job, node, 0)
    probe.progress(0)
    t[0] += 1.0
    probe.progress(100)  # written at wall 1e9 + 1
    clock.advance(1)
    tick.run_once()
    t[0] += 2.0
    probe.progress(500)  # 400 samples in 2 s on 1 GPU
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        assert SqlThroughputStore(s).entity_aggregated(str(job), node, 1) == pytest.approx(200.0)
        row = get_job(s, str(job))
        assert row is not None and row.estimate_source == "progress"


def test_data_time_history_refits_the_mixture(sessions, spool: Path) -> None:
    clock = FakeClock()
    port, tick, job, node = _running_job(sessions, spool, clock)
    gpu_type = {"slow": "k80", "fast": "a100"}[port.jobs[job].partition]
    with sessions.begin() as s:
        from hopsd.core.throughput import PhaseProfile

        SqlThroughputStore(s).set_profile(str(job), gpu_type, PhaseProfile(0.02, 0.05, 0.01), 20)
    probe, t = job_probe(spool, job, node, 0)
    for i in range(100):  # 70 % hits at 10 ms, 30 % misses at 50 ms
        data = 0.05 if i % 10 in (1, 4, 8) else 0.01
        train(probe, t, 1, {"data": data + (i % 3) * 1e-4, "forward": 0.02, "backward": 0.05})
    probe.close()
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        prof = s.get(ProfileRow, (str(job), gpu_type))
        assert prof is not None and prof.iterations == 20
        assert prof.data_p_hit == pytest.approx(0.7, abs=0.01)
        assert prof.data_mu_hit == pytest.approx(0.0101, abs=5e-4)
        assert prof.data_mu_miss == pytest.approx(0.0501, abs=5e-4)
