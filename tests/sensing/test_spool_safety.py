"""The spool under attack from another user: links, planted files, loose permissions.

Each test plays the other user's move (a file owned by ``nobody``, a link to a
victim file, a world-writable directory) and checks that hops refuses it. On
the code before these rules, the link was followed and the victim truncated,
and any planted mode file was obeyed.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import hops_probe as probe_module
from hops_cli.submit_env import export_option, job_environment, user_export, without_export
from hops_probe import Probe, read_mode_file
from hopsd.daemon.job_control import control_body, lr_for
from hopsd.daemon.main import main as hopsd_main
from hopsd.daemon.spool import Spools, UnsafeSpool, ensure_user_dir, prepare_root
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.models import JobRow, LrRule
from hopsd.slurm.tag import HopsTag

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
REPO = Path(__file__).resolve().parents[2]


def nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def probe_in(spool: Path, job: str = "42", **env: str) -> Probe:
    base = {"SLURM_JOB_ID": job, "HOPS_SPOOL_DIR": str(spool), "HOPS_PROBE_FLUSH_S": "1"}
    base.update(env)
    t = [0.0]
    p = Probe(environ=base, clock=lambda: t[0], wall=lambda: 1.7e9)
    p._test_clock = t  # type: ignore[attr-defined]
    return p


def run_a_while(p: Probe, seconds: float = 3.0) -> None:
    t = p._test_clock  # type: ignore[attr-defined]
    for _ in range(int(seconds * 10)):
        with p.iteration(samples=32):
            t[0] += 0.1
        p.progress(32)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the probe ----------------------------------------------------------------------------


def test_the_probe_never_follows_a_link_planted_on_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_module, "MAX_FILE_BYTES", 1000)
    victim = tmp_path / "precious.bin"
    victim.write_bytes(os.urandom(5000))  # above the size at which the probe starts afresh
    before = digest(victim)
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "42.jsonl").symlink_to(victim)
    p = probe_in(spool)
    run_a_while(p)
    p.close()
    assert digest(victim) == before and p.errors >= 1
    assert (spool / "42.jsonl").is_symlink()


def test_the_probe_never_writes_a_hard_link_to_another_file(tmp_path: Path) -> None:
    victim = tmp_path / "precious.bin"
    victim.write_bytes(b"keep me")
    spool = tmp_path / "spool"
    spool.mkdir()
    os.link(victim, spool / "42.jsonl")
    p = probe_in(spool)
    run_a_while(p)
    assert victim.read_bytes() == b"keep me" and p.errors >= 1


@root_only
def test_the_probe_never_writes_a_file_another_user_planted(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    planted = spool / "42.jsonl"
    planted.write_text("")
    os.chown(planted, *nobody())
    planted.chmod(0o666)  # even writable: not this job's file
    p = probe_in(spool)
    run_a_while(p)
    assert planted.read_text() == "" and p.errors >= 1


@root_only
def test_a_mode_file_another_user_wrote_is_ignored(tmp_path: Path) -> None:
    spool = tmp_path / "spool" / "bob"
    spool.mkdir(parents=True)
    mode = spool / "42.mode"
    mode.write_text(json.dumps({"mode": "off", "run": 0}))
    os.chown(mode, *nobody())
    assert read_mode_file(mode, 0, frozenset({0})) is None
    p = probe_in(spool)
    assert p.mode == "run" and p.writer  # not silenced
    os.chown(mode, 0, 0)  # hopsd's (root's) file is obeyed
    assert probe_in(spool).mode == "off"


def test_a_mode_file_that_is_a_link_is_ignored(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"mode": "off", "run": 0}))
    (tmp_path / "42.mode").symlink_to(target)
    assert probe_in(tmp_path).mode == "run"


def test_the_probe_reads_its_gpus_learning_rate_and_size(tmp_path: Path) -> None:
    (tmp_path / "42.mode").write_text(json.dumps({"run": 1, "gpus": 4, "lr": 0.4}))
    p = probe_in(tmp_path, SLURM_RESTART_COUNT="1", HOPS_TOTAL_SAMPLES="64000")
    assert (p.gpus, p.lr, p.total_samples, p.mode) == (4, 0.4, 64000.0, "run")
    stale = probe_in(tmp_path, SLURM_RESTART_COUNT="2")  # a file for an earlier run
    assert stale.gpus is None and stale.lr is None and stale.total_samples is None


def test_the_probe_reports_its_runs_time_to_the_first_iteration(tmp_path: Path) -> None:
    base = {"SLURM_JOB_ID": "42", "HOPS_SPOOL_DIR": str(tmp_path), "SLURM_JOB_START_TIME": "1000"}
    wall = [1012.5]
    p = Probe(environ=base, clock=lambda: 0.0, wall=lambda: wall[0])
    with p.iteration(samples=32):
        pass
    with p.iteration(samples=32):
        wall[0] += 1
    (start,) = [json.loads(x) for x in (tmp_path / "42.jsonl").read_text().splitlines()]
    assert start["kind"] == "start" and start["startup_s"] == 12.5  # once, at the first


def test_the_probe_stands_alone_with_the_standard_library_only(tmp_path: Path) -> None:
    """``pip install ./probe`` into a bare target, imported with no site-packages at all."""
    target = tmp_path / "env"
    source = shutil.copytree(REPO / "probe", tmp_path / "probe")  # builds leave files behind
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
               "--disable-pip-version-check", "--target", str(target), str(source)]  # fmt: skip
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import hops_probe; "
        "assert hops_probe.__file__.startswith(sys.argv[1]); "
        "assert not any(m.split('.')[0] in ('hopsd', 'numpy', 'sqlalchemy') for m in sys.modules); "
        "print(hops_probe.Probe.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-I", "-c", code, str(target)],
        check=True, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.stdout.strip() == "Probe"


# -- the notice ---------------------------------------------------------------------------


def records(spool: Path, job: str = "42") -> list[dict[str, object]]:
    return [json.loads(x) for x in (spool / f"{job}.jsonl").read_text().splitlines()]


def test_a_notice_is_seen_then_answered_with_a_checkpoint_record(tmp_path: Path) -> None:
    p = probe_in(tmp_path)
    run_a_while(p, 1.0)
    assert p.notice_signal == "SIGUSR1" and not p.preempt_requested()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert p.preempt_requested()
    p._test_clock[0] += 2.5  # type: ignore[attr-defined]  # saving took 2.5 s
    p.checkpointed()
    assert not p.preempt_requested()
    last = records(tmp_path)[-1]
    assert last["kind"] == "checkpoint" and last["seconds"] == 2.5 and last["samples_done"] == 32


def test_a_notice_runs_the_callback_after_the_iteration(tmp_path: Path) -> None:
    p = probe_in(tmp_path)
    saved: list[int] = []
    p.on_preempt(lambda: saved.append(1))
    run_a_while(p, 0.5)
    assert saved == []
    os.kill(os.getpid(), signal.SIGUSR1)
    run_a_while(p, 0.2)
    assert saved == [1]
    assert [r["kind"] for r in records(tmp_path)].count("checkpoint") == 1


# -- hopsd's side ---------------------------------------------------------------------------


def test_hopsd_creates_a_missing_spool_only_it_can_write(tmp_path: Path) -> None:
    spool = tmp_path / "a" / "spool"
    prepare_root(spool)
    info = spool.stat()
    assert info.st_uid == os.geteuid() and info.st_mode & 0o777 == 0o755


@pytest.mark.parametrize("problem", ["world-writable", "link", "loose-parent"])
def test_hopsd_refuses_a_spool_others_could_write_into(tmp_path: Path, problem: str) -> None:
    spool = tmp_path / "spool"
    if problem == "world-writable":
        spool.mkdir()
        spool.chmod(0o1777)  # the mode the test cluster's spool used to have
    elif problem == "link":
        (tmp_path / "real").mkdir()
        spool.symlink_to(tmp_path / "real")
    else:
        loose = tmp_path / "loose"
        loose.mkdir()
        loose.chmod(0o777)
        spool = loose / "spool"
        spool.mkdir()
    with pytest.raises(UnsafeSpool):
        prepare_root(spool)


def test_hopsd_exits_2_naming_the_key_for_an_unusable_spool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    spool.chmod(0o1777)
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[daemon]\nspool_dir = "{spool}"\n[ledger]\nurl = "sqlite:///{tmp_path}/l"\n')
    assert hopsd_main(["--config", str(conf), "--once"]) == 2
    assert "daemon.spool_dir" in capsys.readouterr().err


@root_only
def test_each_user_gets_a_private_directory_in_the_spool(tmp_path: Path) -> None:
    prepare_root(tmp_path / "spool")
    uid, _gid = nobody()
    made = ensure_user_dir(tmp_path / "spool", "nobody", uid)
    info = made.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (uid, 0o700)
    made.chmod(0o777)  # loosened by its owner: hopsd tightens it again
    ensure_user_dir(tmp_path / "spool", "nobody", uid)
    assert made.stat().st_mode & 0o777 == 0o700
    os.chown(made, 12345, 12345)  # a third owner: refused
    with pytest.raises(UnsafeSpool):
        ensure_user_dir(tmp_path / "spool", "nobody", uid)
    with pytest.raises(UnsafeSpool):
        ensure_user_dir(tmp_path / "spool", "../etc", uid)


def test_a_job_is_read_only_from_its_own_users_directory(tmp_path: Path) -> None:
    prepare_root(tmp_path / "spool")
    spools = Spools(tmp_path / "spool", uid_of=lambda user: os.getuid())
    tag = HopsTag((1,), 10.0)
    job = ObservedJob(7, "alice", "a", "RUNNING", comment=tag.encode(), tag=tag)
    spools.note([job])
    spool = spools.of(7)
    assert spool is not None and spool.path == tmp_path / "spool" / "alice" and spool.per_user
    assert (tmp_path / "spool" / "alice").is_dir()


# -- what the job is told -----------------------------------------------------------------


def test_hops_submit_exports_the_spool_and_size_keeping_the_users_export(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("hops_cli.submit_env.current_user", lambda: "bob")
    env = job_environment("/var/spool/hops", 64000.0, 32)
    assert env == {
        "HOPS_SPOOL_DIR": "/var/spool/hops/bob",
        "HOPS_TOTAL_SAMPLES": "64000",
        "HOPS_BATCH_SIZE": "32",
    }
    assert "HOPS_SPOOL_DIR" not in job_environment("", 1.0, 1)  # each job's working directory
    args = ["--mem=1G", "--export", "PATH,FOO=1"]
    assert user_export(args) == "PATH,FOO=1" and without_export(args) == ["--mem=1G"]
    ours = export_option({"A": "1"}, "PATH,FOO=1")
    assert ours == "--export=PATH,FOO=1,A=1"
    assert export_option({"A": "1"}, None) == "--export=ALL,A=1"
    assert export_option({"A": "1"}, "NONE") == "--export=A=1"


def test_the_learning_rate_follows_the_gpu_count() -> None:
    assert lr_for(0.1, LrRule.LINEAR, None, 1, 4) == pytest.approx(0.4)
    assert lr_for(0.1, LrRule.SQRT, None, 1, 4) == pytest.approx(0.2)
    assert lr_for(0.1, LrRule.NONE, None, 1, 4) == pytest.approx(0.1)
    assert lr_for(None, LrRule.NONE, {"1": 0.1, "2": 0.15}, 1, 2) == pytest.approx(0.15)
    assert lr_for(None, LrRule.NONE, None, 1, 2) is None
    row = JobRow(lr=0.1, lr_rule=LrRule.LINEAR, lr_by_demand=None, demands=[2, 4], restarts=0)
    body = control_body(row, {"gpus": 4, "run": 3, "kind": "move"}, 20)
    assert body == {"run": 3, "gpus": 4, "lr": pytest.approx(0.2)}
    profile = control_body(row, {"gpus": 2, "run": 0, "kind": "profile"}, 20)
    assert profile["mode"] == "profile" and profile["iterations"] == 20
