"""The job-side probe: both modes, the record format, limits, never raising into training."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hops_probe as probe_module
from hops_probe import MAX_SAMPLES_PER_RECORD, Probe


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def make(tmp_path: Path, clock: Clock, **env: str) -> Probe:
    base = {
        "SLURM_JOB_ID": "42",
        "HOPS_SPOOL_DIR": str(tmp_path),
        "SLURMD_NODENAME": "v100n1",
        "HOPS_PROBE_FLUSH_S": "5",
    }
    base.update(env)
    return Probe(environ=base, clock=clock, wall=lambda: 1.7e9)


def step(p: Probe, clock: Clock, d: float, f: float, b: float, u: float, w: float = 0.0) -> None:
    with p.iteration(samples=32) as it:
        for name, dt in (("data", d), ("forward", f), ("backward", b), ("sync", w), ("update", u)):
            with it.phase(name):
                clock.advance(dt)


def records(tmp_path: Path, job: str = "42") -> list[dict[str, object]]:
    path = tmp_path / f"{job}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_running_mode_flushes_data_and_sync_times_at_most_every_interval(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="4.5")
    assert p.mode == "run"
    for _ in range(4):  # 4 x 1.0 s: no flush before 4.5 s have passed
        step(p, clock, d=0.1, f=0.2, b=0.5, u=0.1, w=0.1)
    assert records(tmp_path) == []
    step(p, clock, d=0.1, f=0.2, b=0.5, u=0.1, w=0.1)
    p.progress(160)
    (rec,) = records(tmp_path)
    assert rec["kind"] == "run" and rec["job"] == "42" and rec["node"] == "v100n1"
    assert rec["iterations"] == 5 and rec["samples"] == 160
    assert rec["seconds"] == pytest.approx(5.0)
    assert rec["t_d"] == pytest.approx([0.1] * 5) and rec["t_w"] == pytest.approx([0.1] * 5)
    assert rec["run"] == 0 and rec["v"] == 1


def test_running_mode_does_not_time_compute_phases(tmp_path: Path) -> None:
    p = make(tmp_path, Clock())
    with p.iteration(samples=1) as it:
        assert it.phase("forward") is it.phase("backward")  # the shared no-op
        assert it.phase("data") is not it.phase("forward")


def test_profile_mode_from_the_mode_file_reports_means_then_keeps_running(tmp_path: Path) -> None:
    (tmp_path / "42.mode").write_text(json.dumps({"mode": "profile", "iterations": 3, "run": 2}))
    clock = Clock()
    p = make(tmp_path, clock, SLURM_RESTART_COUNT="2", HOPS_PROBE_WARMUP="1")
    assert p.mode == "profile" and p.iterations == 3
    step(p, clock, d=9.0, f=9.0, b=9.0, u=9.0)  # warm-up: not counted
    step(p, clock, d=0.1, f=0.2, b=0.4, u=0.1)
    step(p, clock, d=0.3, f=0.2, b=0.4, u=0.1)
    assert records(tmp_path) == []
    step(p, clock, d=0.2, f=0.2, b=0.4, u=0.1)
    (rec,) = records(tmp_path)
    assert rec["kind"] == "profile" and rec["run"] == 2 and rec["iterations"] == 3
    assert rec["t_f"] == pytest.approx(0.2) and rec["t_b"] == pytest.approx(0.4)
    assert rec["t_u"] == pytest.approx(0.1) and rec["t_d_wait"] == pytest.approx(0.2)
    assert rec["t_iter"] == pytest.approx(0.9)
    assert rec["t_d"] == pytest.approx([0.1, 0.3, 0.2])
    assert p.profiled and p.mode == "run"
    for _ in range(7):  # 7 x 0.8 s: one flush after the default 5 s
        step(p, clock, d=0.1, f=0.2, b=0.4, u=0.1)
    assert [r["kind"] for r in records(tmp_path)] == ["profile", "run"]


def test_a_mode_file_for_another_run_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "42.mode").write_text(json.dumps({"mode": "profile", "iterations": 3, "run": 0}))
    assert make(tmp_path, Clock(), SLURM_RESTART_COUNT="1").mode == "run"
    assert make(tmp_path, Clock(), HOPS_PROBE_MODE="profile").mode == "profile"
    (tmp_path / "42.mode").write_text("not json")
    assert make(tmp_path, Clock()).mode == "run"


def test_loader_times_replace_in_loop_waits(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1")
    p.data_time(0.7)
    step(p, clock, d=0.01, f=0.2, b=0.5, u=0.3)
    (rec,) = records(tmp_path)
    assert rec["loader"] is True and rec["t_d"] == [0.7]


def test_only_rank_zero_writes_and_off_writes_nothing(tmp_path: Path) -> None:
    clock = Clock()
    # torchrun's rank 1; Lightning's second process on node 0 and first on node 1 (its
    # launcher sets LOCAL_RANK and NODE_RANK only, in a batch step whose SLURM_PROCID is 0)
    others = ({"RANK": "1"}, {"LOCAL_RANK": "1", "SLURM_PROCID": "0"},
              {"LOCAL_RANK": "0", "NODE_RANK": "1", "SLURM_PROCID": "0"})  # fmt: skip
    for env in (*others, {"HOPS_PROBE_MODE": "off"}):
        p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1", **env)
        step(p, clock, 0.5, 0.5, 0.5, 0.5)
        p.close()
    assert records(tmp_path) == []


def test_lightnings_first_process_and_an_srun_task_zero_write(tmp_path: Path) -> None:
    clock = Clock()
    for env in ({"LOCAL_RANK": "0", "NODE_RANK": "0"}, {"SLURM_PROCID": "0"}):
        p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1", **env)
        assert p.writer


def test_samples_per_record_are_bounded(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1000")
    for _ in range(3 * MAX_SAMPLES_PER_RECORD):
        step(p, clock, 0.001, 0.001, 0.001, 0.001)
    p.close()
    (rec,) = records(tmp_path)
    assert rec["iterations"] == 3 * MAX_SAMPLES_PER_RECORD
    assert len(rec["t_d"]) == MAX_SAMPLES_PER_RECORD


def test_the_file_starts_afresh_beyond_its_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_module, "MAX_FILE_BYTES", 2000)
    clock = Clock()
    p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1")
    for _ in range(40):
        step(p, clock, 0.5, 0.2, 0.2, 0.1)
    size = (tmp_path / "42.jsonl").stat().st_size
    assert 0 < size <= 2000 + 1000
    assert all(r["kind"] == "run" for r in records(tmp_path))


def test_progress_only_reports_samples_done(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock, HOPS_PROBE_FLUSH_S="1")
    p.progress(0)
    clock.advance(2.0)
    p.progress(640)
    (rec,) = records(tmp_path)
    assert rec["iterations"] == 0 and rec["samples_done"] == 640


def test_an_unwritable_spool_never_raises(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path / "missing", clock, HOPS_PROBE_FLUSH_S="1")
    step(p, clock, 0.5, 0.5, 0.5, 0.5)
    p.close()
    assert p.errors >= 1


def test_a_run_started_without_slurms_start_time_is_timed_from_its_process_start() -> None:
    """Without ``SLURM_JOB_START_TIME`` (Slurm before 23.02) the run starts when its process
    did: never before it was spawned (``btime`` is whole seconds, so counting from it put the
    start up to a second early and priced every restart up to a second too dear)."""
    code = (
        "import time, hops_probe as p; "
        "print(repr(p._run_start({}, time.time)), repr(time.time()))"
    )
    spawned = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    started, now = (float(v) for v in out.stdout.split())
    assert spawned - 0.05 <= started <= now
