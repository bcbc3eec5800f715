"""With ``spool_dir = ""`` each job's working directory is its spool, used only when safe.

These tests run as root (the daemon's usual identity) and hand directories and
files to the unprivileged ``nobody`` user, the job's owner here.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import stat
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort, small_cluster
from sensing_conf import sensing_config
from sqlalchemy.orm import Session, sessionmaker

from hops_probe import Probe
from hopsd.config import HopsConfig
from hopsd.daemon.spool import Spools, UnsafeSpool, read_owned, write_file
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import JobState
from hopsd.slurm.tag import HopsTag

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand files to a user")

USER = "nobody"


def nobody() -> tuple[int, int]:
    entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory owned by the job's user, reachable by that user."""
    tmp_path.chmod(0o755)
    path = tmp_path / "work"
    path.mkdir()
    os.chown(path, *nobody())
    return path


def config(profiling: bool) -> HopsConfig:
    cfg = sensing_config(profiling)
    assert cfg.spool_dir == ""
    return cfg


def make_tick(sessions, port: FakePort, clock: FakeClock, *, profiling: bool) -> Tick:  # type: ignore[no-untyped-def]
    return Tick(config(profiling), port, sessions, clock=clock)


def state_of(sessions: sessionmaker[Session], job: int) -> tuple[JobState, str, float]:
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        return JobState(row.state), row.state_reason, row.samples_done


def probe_in(workdir: Path, job: int, node: str, monkeypatch: pytest.MonkeyPatch) -> Probe:
    """The probe as the job builds it with HOPS_SPOOL_DIR unset: it writes to its cwd."""
    monkeypatch.chdir(workdir)
    env = {"SLURM_JOB_ID": str(job), "SLURMD_NODENAME": node, "SLURM_RESTART_COUNT": "0"}
    return Probe(environ=env)


def running_job(sessions, workdir: Path, clock: FakeClock):  # type: ignore[no-untyped-def]
    port = FakePort(small_cluster())
    job = port.add_job(HopsTag((1,), 1e6), user=USER, work_dir=str(workdir))
    tick = make_tick(sessions, port, clock, profiling=False)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    (node,) = port.jobs[job].placement
    return port, tick, job, node


# -- reading reports -------------------------------------------------------------------


def test_reports_in_the_working_directory_are_read(sessions, workdir, monkeypatch) -> None:
    clock = FakeClock()
    _, tick, job, node = running_job(sessions, workdir, clock)
    probe = probe_in(workdir, job, node, monkeypatch)
    probe.progress(640)
    probe.flush()
    assert (workdir / f"{job}.jsonl").exists()
    os.chown(workdir / f"{job}.jsonl", *nobody())  # the job's user wrote it
    clock.advance(1)
    tick.run_once()
    assert state_of(sessions, job)[2] == 640


def test_a_report_not_owned_by_the_job_user_is_ignored(sessions, workdir, caplog) -> None:
    clock = FakeClock()
    _, tick, job, node = running_job(sessions, workdir, clock)
    record = {"v": 1, "job": job, "node": node, "run": 0, "at": 1.0, "kind": "run"}
    record |= {"iterations": 0, "samples": 0, "seconds": 0, "samples_done": 500}
    (workdir / f"{job}.jsonl").write_text(json.dumps(record) + "\n")  # root's file
    clock.advance(1)
    with caplog.at_level(logging.WARNING, logger="hopsd.sensing"):
        tick.run_once()
    assert state_of(sessions, job)[2] == 0
    assert "owned by uid 0" in caplog.text
    os.chown(workdir / f"{job}.jsonl", *nobody())
    clock.advance(1)
    tick.run_once()
    assert state_of(sessions, job)[2] == 500  # the same file, once it is the user's


def test_a_linked_progress_file_is_not_followed(sessions, workdir, tmp_path) -> None:
    clock = FakeClock()
    _, tick, job, _ = running_job(sessions, workdir, clock)
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"samples_done": 999, "at": 1}))
    os.chown(target, *nobody())
    (workdir / f"{job}.progress.json").symlink_to(target)
    clock.advance(1)
    tick.run_once()
    assert state_of(sessions, job)[2] == 0
    (workdir / f"{job}.progress.json").unlink()
    (workdir / f"{job}.progress.json").write_text(json.dumps({"samples_done": 321, "at": 2}))
    os.chown(workdir / f"{job}.progress.json", *nobody())
    clock.advance(1)
    tick.run_once()
    assert state_of(sessions, job)[2] == 321


def test_read_owned_checks_the_opened_file(tmp_path: Path) -> None:
    path = tmp_path / "r"
    path.write_bytes(b"0123456789")
    uid = os.getuid()
    assert read_owned(path, uid, 4, start=3) == (b"3456", 10)
    with pytest.raises(UnsafeSpool, match="owned by uid"):
        read_owned(path, uid + 1, 4)
    (tmp_path / "link").symlink_to(path)
    with pytest.raises(UnsafeSpool, match="link"):
        read_owned(tmp_path / "link", uid, 4)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeSpool, match="regular"):
        read_owned(tmp_path / "fifo", uid, 4)  # never blocks on a FIFO


def test_spools_keep_a_gone_job_for_one_tick() -> None:
    tag = HopsTag((1,), 10.0)
    job = ObservedJob(5, "u", "a", "RUNNING", comment=tag.encode(), tag=tag, work_dir="/w")
    relative = ObservedJob(6, "u", "a", "PENDING", tag=tag, work_dir="w")
    spools = Spools(None)
    spools.note([job, relative])
    assert spools.of(5) is not None and spools.of(5).path == Path("/w")  # type: ignore[union-attr]
    assert spools.of(6) is None  # relative: not trusted
    spools.note([])
    assert spools.of(5) is not None  # gone this tick: still resolvable to read its end
    spools.note([])
    assert spools.of(5) is None
    shared = Spools(Path("/spool"))
    assert shared.of(99) is None  # in the shared spool a job's file is in its user's directory


# -- writing mode files ----------------------------------------------------------------


def test_profiling_writes_the_mode_file_into_the_users_directory(sessions, workdir) -> None:
    port, clock = FakePort(small_cluster()), FakeClock()
    job = port.add_job(HopsTag((1,), 1e6), user=USER, work_dir=str(workdir))
    tick = make_tick(sessions, port, clock, profiling=True)
    tick.run_once()
    assert state_of(sessions, job)[0] == JobState.PROFILING
    mode = workdir / f"{job}.mode"
    body = {"mode": "profile", "iterations": 3, "run": 0, "gpus": 1}  # gpus: told at release
    assert json.loads(mode.read_text()) == body
    info = os.lstat(mode)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == nobody()[0]
    assert [p.name for p in workdir.iterdir()] == [mode.name]  # no temporary left behind
    assert port.actions(job) == ["update", "release"]


def test_a_directory_of_another_owner_skips_profiling(sessions, tmp_path, caplog) -> None:
    rootdir = tmp_path / "roots"
    rootdir.mkdir()  # owned by root, the job's user is nobody
    port, clock = FakePort(small_cluster()), FakeClock()
    job = port.add_job(HopsTag((1,), 1e6), user=USER, work_dir=str(rootdir))
    tick = make_tick(sessions, port, clock, profiling=True)
    with caplog.at_level(logging.WARNING, logger="hopsd.profiling"):
        tick.run_once()
    state, reason, _ = state_of(sessions, job)
    assert "not the job's user" in caplog.text
    assert state == JobState.QUEUED and "skipped, no mode file" in reason
    assert list(rootdir.iterdir()) == []
    assert port.actions(job) == []  # never released for a profiling run
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"  # planned like any queued job


def test_an_unknown_working_directory_skips_profiling(sessions) -> None:
    port, clock = FakePort(small_cluster()), FakeClock()
    job = port.add_job(HopsTag((1,), 1e6), user=USER, work_dir="relative/dir")
    tick = make_tick(sessions, port, clock, profiling=True)
    tick.run_once()
    state, reason, _ = state_of(sessions, job)
    assert state == JobState.QUEUED and "working directory is unknown" in reason
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"


def test_a_planted_link_is_replaced_not_followed(workdir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (workdir / "7.mode").symlink_to(victim)
    write_file(workdir, "7.mode", b"{}", nobody()[0])
    assert victim.read_text() == "precious"
    assert not (workdir / "7.mode").is_symlink() and (workdir / "7.mode").read_text() == "{}"
    linked = tmp_path / "linked"
    linked.symlink_to(workdir)
    with pytest.raises(UnsafeSpool):
        write_file(linked, "7.mode", b"{}", nobody()[0])  # the directory itself is a link
    with pytest.raises(UnsafeSpool, match="not the job's user"):
        write_file(workdir, "7.mode", b"{}", 12345)
