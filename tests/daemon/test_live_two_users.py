"""Live, as two Unix users: another user's moves against a job's spool files and holds fail.

On the Slurm test cluster a real ``hopsd`` schedules the job of the victim
(``hopsvictor``), submitted with ``hops submit`` through Slurm as that user; the
attacker (``hopsmallory``) acts beforehand with their own shell (``runuser``):

* **symlink squat** -- job ids are sequential, so the attacker learns the next
  one and links ``<id>.jsonl`` to a 5 MB file of the victim's wherever the
  victim's job might write its report. Before, the probe followed the link and,
  the file being above its 4 MB limit, truncated it.
* **planted files** -- the attacker pre-creates the victim's report file (the
  probe could not write it) and writes ``{"mode": "off"}`` as its mode file (the
  probe obeyed any). Before, the victim's job reported nothing.
* **release of a hops hold** -- the victim runs ``scontrol release`` on their own
  job that hops requeue-held. Before, Slurm started it again with no hops decision.

The victim's job runs the probe from ``probe/`` with the system Python (its
user cannot read the test's virtual environment): the standalone probe at work.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process
from live_users import (
    ATTACKER,
    VICTIM,
    AsUser,
    ensure_user,
    hops_submit_as,
    shared_env,
    traversable_home,
)

from hopsd.ledger.models import JobState
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the users' accounts needs root"),
]
# The victim's job runs this checkout's probe with the host's Python: not there for a
# cluster whose slurmd runs jobs inside a release root (HOPS_SLURM=24.11).
HOST_JOBS = pytest.mark.skipif(
    bool(os.environ.get("HOPS_SLURM_EXEC")), reason="jobs run inside a Slurm release root"
)

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
VICTIM_JOB = """\
import sys, time
try:
    from hops_probe import Probe
except ImportError:  # a checkout without the standalone probe
    from hops_probe import Probe

probe = Probe()
told = [getattr(probe, name, None) for name in ("gpus", "lr", "total_samples")]
print("told gpus=%s lr=%s total=%s" % tuple(told), flush=True)
done = 0
while done < 4800:
    with probe.iteration(samples=32):
        time.sleep(0.05)
    done += 32
    probe.progress(done)
probe.close()
print("done errors=%d" % probe.errors, flush=True)
"""


def shell_as(user: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", "sh", "-c", command],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def home_of(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


@pytest.fixture(scope="module")
def users() -> None:
    for name in (ATTACKER, VICTIM):
        traversable_home(ensure_user(name, home=True))


@pytest.fixture
def env(users: None) -> Iterator[LiveEnv]:
    with shared_env("hops-two-users-") as live:  # the victim's job reads its script here
        (live.root / "victim_job.py").write_text(VICTIM_JOB)
        yield live


@pytest.fixture
def precious() -> Iterator[tuple[Path, str]]:
    """A 5 MB file of the victim's (above the probe's 4 MB limit), and its digest."""
    path = home_of(VICTIM) / "precious.bin"
    made = shell_as(VICTIM, f"head -c 5000000 /dev/urandom > {path}")
    assert made.returncode == 0, made.stderr
    yield path, hashlib.sha256(path.read_bytes()).hexdigest()
    path.unlink(missing_ok=True)


def next_job_ids(env: LiveEnv, n: int = 3) -> list[int]:
    """The attacker's guess at the next job ids: submit one of their own, cancel it."""
    out = shell_as(ATTACKER, f"sbatch --parsable --hold -J {env.prefix}probe-id -o /dev/null "
                             "--wrap true")  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip().split(";")[0])
    subprocess.run(["scancel", str(job)], check=False, capture_output=True)
    return [job + i for i in range(1, n + 1)]


def plant(env: LiveEnv, command: str) -> list[str]:
    """The attacker runs ``command`` (with ``{dir}`` and ``{id}``) wherever a victim's file
    could be; the places where it worked."""
    worked = []
    for job in next_job_ids(env):
        for directory in (env.spool_root, env.spool_of(VICTIM)):
            done = shell_as(ATTACKER, command.format(dir=directory, id=job))
            if done.returncode == 0:
                worked.append(f"{directory}/{job}")
    return worked


def submit_as_victim(env: LiveEnv, monkeypatch: pytest.MonkeyPatch) -> int:
    """``hops submit`` with the victim's identity for every Slurm command."""
    script = env.root / "victim.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -J {env.prefix}victim\n"
        f"#SBATCH -o {home_of(VICTIM)}/%j.out\n"
        "#SBATCH -t 10\n"
        f"export PYTHONPATH={REPO / 'probe'}:{REPO}\n"
        f'export HOPS_SPOOL_DIR="${{HOPS_SPOOL_DIR:-{env.spool_root}}}"\n'
        "export HOPS_PROBE_FLUSH_S=1\n"
        f"exec {SYSTEM_PYTHON} {env.root / 'victim_job.py'}\n"
    )
    args = ["--gpus", "1,2", "--samples", "4800", "--lr", "0.1", "--lr-scale", "linear"]
    return hops_submit_as(env, monkeypatch, VICTIM, script, args)


def run_to_the_end(env: LiveEnv, job: int) -> None:
    daemon = hopsd_process(env)
    try:
        done = lambda: job in env.rows() and env.rows()[job].state == JobState.DONE  # noqa: E731
        assert drive(lambda: None, done, deadline_s=120), (env.root / "hopsd.log").read_text()
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


@HOST_JOBS
def test_a_link_squatted_on_a_future_job_id_destroys_nothing(
    env: LiveEnv, precious: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    victim_file, digest = precious
    planted = plant(env, f"ln -s {victim_file} {{dir}}/{{id}}.jsonl")
    job = submit_as_victim(env, monkeypatch)
    run_to_the_end(env, job)
    assert hashlib.sha256(victim_file.read_bytes()).hexdigest() == digest, (
        f"the victim's file was changed through a link planted at {planted}"
    )
    assert env.rows()[job].samples_done > 0, "the victim's job reported nothing"


@HOST_JOBS
def test_planted_report_and_mode_files_do_not_silence_another_users_job(
    env: LiveEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(env, 'touch {dir}/{id}.jsonl && echo \'{{"mode": "off", "run": 0}}\' > {dir}/{id}.mode')
    job = submit_as_victim(env, monkeypatch)
    run_to_the_end(env, job)
    row = env.rows()[job]
    assert row.samples_done > 0, "the victim's job was silenced: hopsd got no report"
    out = (home_of(VICTIM) / f"{job}.out").read_text()
    told = re.search(r"told gpus=(\d+) lr=([0-9.e-]+) total=([0-9.]+)", out)
    assert told is not None, out  # each start learns its GPUs and learning rate from hopsd
    gpus, lr, total = int(told.group(1)), float(told.group(2)), float(told.group(3))
    assert gpus in (1, 2) and lr == pytest.approx(0.1 * gpus) and total == 4800
    assert "done errors=0" in out


def test_the_owner_cannot_release_a_job_hops_requeue_held(users: None) -> None:
    script = Path(tempfile.mkdtemp(prefix="hops-hold-")) / "sleep.sh"
    script.parent.chmod(0o755)
    script.write_text("#!/bin/sh\nsleep 120\n")
    script.chmod(0o755)
    victim = CliSlurm(run=AsUser(VICTIM))
    hops = CliSlurm()  # hopsd's own identity (root)
    args = ["-o", "/dev/null", "-t", "5"]
    job = victim.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e6)))
    try:
        hops.release(job)

        def running() -> bool:
            return any(j.job_id == job and j.state == "RUNNING" for j in hops.list_jobs())

        assert drive(lambda: None, running, deadline_s=30)
        hops.requeue_hold(job)
        time.sleep(1.0)
        released = shell_as(VICTIM, f"scontrol release {job}")
        assert released.returncode != 0, "the owner released a hold hops had placed"
        time.sleep(4.0)  # long enough for Slurm to start a released job again
        (seen,) = [j for j in hops.list_jobs() if j.job_id == job]
        assert seen.state == "PENDING" and seen.held, f"{seen.state} {seen.reason}"
    finally:
        subprocess.run(["scancel", str(job)], check=False, capture_output=True)
        shutil.rmtree(script.parent, ignore_errors=True)
