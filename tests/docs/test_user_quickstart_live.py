"""The user guide's quick start, command by command, as an unprivileged user on the live cluster.

The block marked ``quickstart`` in docs/user-guide.md is read from the page
itself and run unchanged by ``bash -e`` as a user with a home of their own,
with a real ``hopsd`` scheduling (adopting only this test's jobs). ``pip
install hops-probe`` resolves to the probe built from this checkout (no
package index here), and ``hops`` on the user's PATH is this checkout's
command. Then the job must finish under hopsd, and the quick start's last
command must list it done.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process

from hopsd.ledger.models import JobState

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the user's account needs root"),
]

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "user-guide.md"
USER = "hopscarol"
SYSTEM_PYTHON = "/usr/bin/python3"


def quickstart_commands() -> list[str]:
    """The commands of the guide's quick start: the ```sh block after its marker."""
    text = GUIDE.read_text()
    found = re.search(r"<!-- quickstart[^>]*-->\n```sh\n(.*?)\n```", text, re.S)
    assert found, "docs/user-guide.md has no <!-- quickstart --> block"
    return [line for line in found.group(1).splitlines() if line.strip()]


def test_the_quick_start_block_is_found_and_says_what_the_guide_says() -> None:
    commands = quickstart_commands()
    assert any(c.startswith("job=$(") and "hops submit" in c for c in commands)
    assert any("pip install hops-probe" in c for c in commands)
    assert commands[-1].startswith("hops history")


@pytest.fixture(scope="module")
def user() -> Iterator[Path]:
    """The user, with a fresh home directory of their own (removed afterwards)."""
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", USER], check=True)
    home = Path(tempfile.mkdtemp(prefix="hops-quickstart-home-"))
    home.chmod(0o755)
    shutil.chown(home, USER, USER)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def env() -> Iterator[LiveEnv]:
    root = Path(tempfile.mkdtemp(prefix="hops-quickstart-"))
    root.chmod(0o755)  # the user reads hops.conf and reaches their spool inside
    live = LiveEnv.create(root)
    live.config_path.chmod(0o644)
    yield live
    live.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def tools(root: Path) -> tuple[Path, Path]:
    """A ``hops`` command for the user (this checkout's, on the system Python) and
    the directory ``pip install hops-probe`` finds the probe in (built from ./probe)."""
    bin_dir, wheels = root / "bin", root / "wheels"
    bin_dir.mkdir()
    paths = [p for p in site.getsitepackages() if Path(p).is_dir()]
    hops = bin_dir / "hops"
    hops.write_text(
        f"#!{SYSTEM_PYTHON}\nimport site, sys\nfor p in {paths!r}: site.addsitedir(p)\n"
        "sys.argv[0] = 'hops'\nfrom hops_cli.launch import run\nrun()\n"
    )
    hops.chmod(0o755)
    source = root / "probe"  # setuptools builds in the source tree: a copy keeps the checkout clean
    shutil.copytree(REPO / "probe", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(source)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    for path in (bin_dir, wheels, *wheels.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return bin_dir, wheels


class Shell:
    """The user's shell: each command runs as the user, in the directory and with
    the ``job`` variable the quick start's earlier commands left."""

    def __init__(self, home: Path, env: LiveEnv, bin_dir: Path, wheels: Path) -> None:
        self.home = home
        self.state: list[str] = []
        self.variables = {
            "HOME": str(home),
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOPS_CONF": str(env.config_path),
            "SLURM_CONF": os.environ["SLURM_CONF"],
            # `pip install hops-probe`: the probe of this checkout, no index
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheels),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # sbatch takes the job's name from here over the script's #SBATCH
            # line: hopsd adopts only this test's jobs
            "SBATCH_JOB_NAME": f"{env.prefix}quickstart",
        }

    def attempt(self, command: str) -> subprocess.CompletedProcess[str]:
        script = "\n".join([*self.state, command, 'echo "__cwd=$PWD"; echo "__job=${job:-}"'])
        return subprocess.run(
            ["runuser", "-u", USER, "--", "env", "-i",
             *(f"{k}={v}" for k, v in self.variables.items()),
             "bash", "-euo", "pipefail", "-c", script],
            cwd=REPO, capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    def run(self, command: str, done: subprocess.CompletedProcess[str] | None = None) -> str:
        done = done or self.attempt(command)
        said = f"{command}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        assert done.returncode == 0, said
        cwd = re.findall(r"^__cwd=(.*)$", done.stdout, re.M)[-1]
        job = re.findall(r"^__job=(.*)$", done.stdout, re.M)[-1]
        self.state = [f"cd {cwd}", f"job={job}"]
        return done.stdout

    @property
    def job(self) -> int:
        return int(self.state[1].split("=", 1)[1])


def test_every_command_of_the_quick_start_runs_and_the_job_finishes(
    user: Path, env: LiveEnv
) -> None:
    commands = quickstart_commands()
    submit = next(i for i, c in enumerate(commands) if "hops submit" in c)
    show = next(i for i, c in enumerate(commands) if c.startswith("hops show"))
    shell = Shell(user, env, *tools(env.root))
    daemon = hopsd_process(env)
    try:
        for command in commands[: submit + 1]:
            shell.run(command)
        job = shell.job
        env.submitted.append(job)
        for command in commands[submit + 1 : show]:
            shell.run(command)  # hops status, as soon as the job is submitted

        # `hops show` answers once hopsd has adopted the job and the user's read
        # of the ledger (hopsd's copy, reused for 2 s) has it
        tries: list[subprocess.CompletedProcess[str]] = []

        def shown() -> bool:
            tries.append(shell.attempt(commands[show]))
            return tries[-1].returncode == 0

        assert drive(lambda: None, shown, deadline_s=20), (env.root / "hopsd.log").read_text()
        assert f"JobId={job} " in shell.run(commands[show], tries[-1])  # its story
        for command in commands[show + 1 : -1]:
            shell.run(command)

        def finished() -> bool:
            row = env.rows().get(job)
            return row is not None and row.state in (JobState.DONE, JobState.FAILED)

        assert drive(lambda: None, finished, deadline_s=75), (env.root / "hopsd.log").read_text()
        assert env.rows()[job].state == JobState.DONE
        status = shell.run("hops status")
        history = shell.run(commands[-1])
        assert re.search(rf"^{job}\s+\S+\s+{USER}\s+done\s", history, re.M), history
        assert not re.search(rf"^{job}\s", status, re.M), status  # no longer active
        output = next((user / "first-job").glob(f"*-{job}.out")).read_text()
        assert "done: 1000000 samples" in output, output
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
