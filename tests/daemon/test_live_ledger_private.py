"""Live, as unprivileged Unix users: nobody can lock hopsd's SQLite ledger, and
nobody reads more of it than Slurm's ``PrivateData`` lets them.

* **lock attack** -- a user takes a shared ``fcntl`` lock on SQLite's WAL
  write-lock byte of ``LEDGER.sqlite-shm`` (and the database's lock bytes),
  which needs only read access, and holds it for 60 s while a workload runs.
  Before, every tick failed with "database is locked" and no job was adopted.
* **PrivateData** -- with ``PrivateData=jobs,usage,accounts`` (set on the test
  cluster for the test and reconfigured), one user's ``hops status --all``,
  ``show``, ``history --all``, ``fairness``, the bytes of the copy hopsd hands
  them, and ``/status.json`` carry nothing of another user's job; the other
  user and root see theirs.
* **tag edit** -- the owner drops ``--types k80`` from the job's comment after
  adoption (``scontrol update comment=``): the job stays on k80 and its owner
  reads why in ``hops status``.
"""

from __future__ import annotations

import json
import os
import site
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process
from live_users import ATTACKER, VICTIM, AsUser, ensure_user, shared_env, slurm_as

from hopsd.ledger.jobs import TERMINAL_STATES
from hopsd.ledger.models import JobState
from hopsd.ledger.private_copy import socket_path
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the users' accounts needs root"),
]

SYSTEM_PYTHON = "/usr/bin/python3"
LOCKER = """\
import fcntl, os, sys, time
held = []
for path, start, how in ((sys.argv[1] + "-shm", 120, 0), (sys.argv[1], 1073741824, fcntl.LOCK_NB)):
    try:
        fd = os.open(path, os.O_RDONLY)
        fcntl.lockf(fd, fcntl.LOCK_SH | how, 1, start, 0)  # WAL write lock; PENDING byte
        held.append(path)
    except OSError as exc:
        print("denied", path, exc.__class__.__name__, flush=True)
print("holding", *held, flush=True)
time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""


@pytest.fixture(scope="module")
def users() -> None:
    for name in (ATTACKER, VICTIM):
        ensure_user(name, home=True)


@pytest.fixture
def env(users: None) -> Iterator[LiveEnv]:
    with shared_env("hops-priv-") as live:  # like /var/lib/hops: users may traverse it
        live.config_path.chmod(0o644)
        yield live


def hops_as(user: str, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hops ARGS`` as ``user``, on the system Python with this environment's packages."""
    paths = [p for p in site.getsitepackages() if Path(p).is_dir()]
    code = (
        f"import site, sys\nfor p in {paths!r}: site.addsitedir(p)\n"
        "sys.argv[0] = 'hops'\nfrom hops_cli.launch import run\nrun()\n"
    )
    env = ["PATH=" + os.environ.get("PATH", "/usr/bin:/bin"), "HOME=/tmp",
           f"HOPS_CONF={conf}", f"SLURM_CONF={os.environ['SLURM_CONF']}"]  # fmt: skip
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", "-i", *env, SYSTEM_PYTHON, "-c", code, *args],
        capture_output=True, text=True, timeout=120, cwd="/tmp",
    )  # fmt: skip


def _private(env: LiveEnv) -> bool:
    ledger = Path(str(env.config.ledger_url).split("///", 1)[1])
    return socket_path(ledger).exists() and (ledger.stat().st_mode & 0o077) == 0


def test_a_users_lock_on_the_ledger_holds_back_no_job(env: LiveEnv) -> None:
    ledger = env.root / "ledger.sqlite"
    daemon = hopsd_process(env)
    locker = None
    try:
        assert drive(lambda: None, lambda: _private(env), deadline_s=30), (
            env.root / "hopsd.log"
        ).read_text()
        (env.root / "locker.py").write_text(LOCKER)
        locker = subprocess.Popen(
            ["runuser", "-u", ATTACKER, "--", SYSTEM_PYTHON, str(env.root / "locker.py"),
             str(ledger), "60"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        started = time.monotonic()
        jobs = [env.submit((1,), 600, label=f"w{k}") for k in range(3)]
        done = lambda: all(  # noqa: E731
            j in env.rows() and env.rows()[j].state == JobState.DONE for j in jobs
        )
        assert drive(lambda: None, done, deadline_s=55), (env.root / "hopsd.log").read_text()
        assert time.monotonic() - started < 60 and locker.poll() is None  # under the lock
        out, _ = locker.communicate(timeout=90)
        assert "holding\n" in out and out.count("denied") == 2, out
    finally:
        if locker is not None and locker.poll() is None:
            locker.kill()
        daemon.terminate()
        daemon.wait(timeout=30)
    log = (env.root / "hopsd.log").read_text()
    assert "database is locked" not in log and "tick-failed" not in log, log


@pytest.fixture
def private_data() -> Iterator[None]:
    """``PrivateData=jobs,usage,accounts`` on the test cluster for one test."""
    conf = Path(os.environ["SLURM_CONF"])
    before = conf.read_text()
    conf.write_text(before + "\nPrivateData=jobs,usage,accounts\n")
    subprocess.run(["scontrol", "reconfigure"], check=True, timeout=60)
    try:
        yield
    finally:
        conf.write_text(before)
        subprocess.run(["scontrol", "reconfigure"], check=True, timeout=60)


def _submit_as(
    env: LiveEnv,
    user: str,
    samples: float,
    types: tuple[str, ...] = (),
    demands: tuple[int, ...] = (1,),
    no_preempt: bool = False,
) -> int:
    script = env.root / f"{user}.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    script.chmod(0o755)
    port = slurm_as(env, user)
    tag = HopsTag(
        demands, samples, 32, model=f"secretmodel{user}", types=types, no_preempt=no_preempt
    )
    args = ["-J", f"{env.prefix}{user}", "-o", "/dev/null", "-t", "10"]
    job = port.submit(SubmitRequest(str(script), sbatch_args=args, tag=tag))
    env.submitted.append(job)
    return job


def _copy_bytes_as(user: str, ledger: Path) -> bytes:
    """What a user gets from hopsd's socket, fetched with their own program."""
    code = (
        "import socket, sys, os\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'copy\\n')\n"
        "msg, fds, _, _ = socket.recv_fds(s, 4096, 1)\n"
        "sys.stdout.buffer.write(os.pread(fds[0], 1 << 26, 0))\n"
    )
    out = subprocess.run(
        ["runuser", "-u", user, "--", SYSTEM_PYTHON, "-c", code, str(socket_path(ledger))],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout


def test_private_data_is_honoured_by_every_read_path(env: LiveEnv, private_data: None) -> None:
    port = _free_port()
    text = env.config_path.read_text().replace('address = ""', f'address = "127.0.0.1:{port}"')
    env.config_path.write_text(text)
    mine, theirs = _submit_as(env, ATTACKER, 1e9), _submit_as(env, VICTIM, 1e9)
    daemon = hopsd_process(env)
    try:
        adopted = lambda: {mine, theirs} <= set(env.rows())  # noqa: E731
        assert drive(lambda: None, adopted, deadline_s=60), (env.root / "hopsd.log").read_text()
        conf = env.config_path
        status = hops_as(ATTACKER, conf, "status", "--all", "--json")
        assert status.returncode == 0, status.stderr
        assert [j["job_id"] for j in json.loads(status.stdout)["jobs"]] == [mine]
        show = hops_as(ATTACKER, conf, "show", str(theirs), "--json")
        assert show.returncode != 0 and "secretmodel" + VICTIM not in show.stdout
        fairness = hops_as(ATTACKER, conf, "fairness", "--json")
        assert fairness.returncode == 0 and VICTIM not in fairness.stdout, fairness.stderr
        raw = _copy_bytes_as(ATTACKER, env.root / "ledger.sqlite")
        assert raw.startswith(b"SQLite format 3") and VICTIM.encode() not in raw
        assert ATTACKER.encode() in raw
        own = hops_as(VICTIM, conf, "status", "--json")
        assert [j["job_id"] for j in json.loads(own.stdout)["jobs"]] == [theirs], own.stderr
        assert json.loads(own.stdout)["jobs"][0]["name"] == f"{env.prefix}{VICTIM}"  # Slurm's
        page = _get(port, "/status.json") + _get(port, "/status") + _get(port, "/fairness.json")
        assert VICTIM not in page and ATTACKER not in page
        # the timeline draws no run of a job no user may see, once both have run
        running = (JobState.RUNNING, JobState.PROFILING)
        ran = lambda: all(env.rows()[j].state in running for j in (mine, theirs))  # noqa: E731
        assert drive(lambda: None, ran, deadline_s=60), (env.root / "hopsd.log").read_text()
        drawn = json.loads(_get(port, "/timeline.json"))["nodes"]
        assert not {b["job_id"] for n in drawn for b in n["bars"]} & {mine, theirs}, drawn
        # a job's own page is there only for a job any user may see
        assert [_code(port, f"/job/{j}{ext}") for j in (mine, theirs) for ext in ("", ".json")] == [
            404
        ] * 4
        everyone = hops_as("root", conf, "status", "--all", "--json")
        assert {j["job_id"] for j in json.loads(everyone.stdout)["jobs"]} == {mine, theirs}
        subprocess.run(["scancel", str(theirs)], check=True, timeout=20)
        ended = lambda: env.rows()[theirs].state in TERMINAL_STATES  # noqa: E731
        assert drive(lambda: None, ended, deadline_s=60)
        window = ("--since", "2000-01-01", "--json")
        history = hops_as(ATTACKER, conf, "history", "--all", *window)
        assert history.returncode == 0 and VICTIM not in history.stdout, history.stderr
        history = hops_as("root", conf, "history", "--all", *window)
        assert [j["job_id"] for j in json.loads(history.stdout)["jobs"]] == [theirs]
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def test_test_only_under_private_data_foresees_the_jobs_the_user_may_not_see(
    env: LiveEnv, private_data: None
) -> None:
    """Both K80s are held by another user's job that is never preempted and ends, by
    hopsd's estimate, within the forecast. The user may not see that job: on their own
    copy and squeue, its GPUs would look held for good and their job never to start.
    hopsd forecasts on all it sees, as root does, and tells them nothing else."""
    theirs = _submit_as(env, VICTIM, 12000, types=("k80",), demands=(2,), no_preempt=True)
    daemon = hopsd_process(env)
    try:
        running = lambda: theirs in env.rows() and env.rows()[theirs].state == JobState.RUNNING  # noqa: E731
        assert drive(lambda: None, running, deadline_s=90), (env.root / "hopsd.log").read_text()
        script = Path("/tmp/hops-test-only.sh")
        script.write_text("#!/bin/bash\nsleep 1\n")
        script.chmod(0o755)
        ask = (str(script), "--gpus", "1", "--samples", "600", "--types", "k80",
               "--test-only", "--json")  # fmt: skip
        mine = hops_as(ATTACKER, env.config_path, "submit", *ask)
        root = hops_as("root", env.config_path, "submit", *ask)
        assert mine.returncode == 0 and root.returncode == 0, mine.stderr + root.stderr
        said, known = json.loads(mine.stdout), json.loads(root.stdout)
        assert said["running_jobs"] is None and known["running_jobs"] == 1  # hopsd answered
        assert known["expected"]["start_in_s"] is not None, known
        assert said["expected"]["start_in_s"] is not None, said
        assert abs(said["expected"]["start_at"] - known["expected"]["start_at"]) < 15, (said, known)
        assert VICTIM not in mine.stdout and "secretmodel" not in mine.stdout
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _code(port: int, path: str) -> int:
    """The HTTP status hopsd answers ``path`` with."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _get(port: int, path: str) -> str:
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return str(r.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_an_owner_edit_of_the_tag_after_adoption_is_reported_and_ignored(env: LiveEnv) -> None:
    """The owner drops ``--types k80`` from the comment once hopsd adopted the job; before,
    the next round moved the job to a faster type."""
    job = _submit_as(env, VICTIM, 1e9, types=("k80",))
    daemon = hopsd_process(env)
    try:
        started = lambda: env.rows().get(job) is not None and _node(job)  # noqa: E731
        assert drive(lambda: None, started, deadline_s=60), (env.root / "hopsd.log").read_text()
        edited = HopsTag((1,), 1e9, 32, model=f"secretmodel{VICTIM}").encode()
        done = AsUser(VICTIM)(["scontrol", "update", f"jobid={job}", f"comment={edited}"], 20)
        assert done.ok, done.stderr
        places = set()
        for _ in range(30):  # about four rounds of 8 s
            places.add(_node(job))
            time.sleep(1)
        assert places <= {"k80n1", ""}, places
        own = hops_as(VICTIM, env.config_path, "status", "--json")
        problem = json.loads(own.stdout)["jobs"][0]["problem"]
        assert "changed after hopsd adopted it" in problem, own.stdout
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def _node(job: int) -> str:
    out = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%T %N"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    state, _, node = out.stdout.strip().partition(" ")
    return node if state == "RUNNING" else ""
