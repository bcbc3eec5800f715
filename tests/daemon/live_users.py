"""Other users on the live test cluster: make them, act as them, let them read a test's files.

The multi-user live tests (an attacker's and a victim's jobs beside the test's
own) run as root and act as each user through ``runuser``, as that user's own
shell would; a user's job reads its script from the test's directory, so that
directory is made traversable by all.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from daemon_live import LiveEnv
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.runner import CompletedRun, SubprocessRunner
from hopsd.slurm.tag import HopsTag

#: The unprivileged users of the multi-user live tests: one attacks hopsd, one is attacked.
ATTACKER = "hopsmallory"
VICTIM = "hopsvictor"


@dataclass(frozen=True)
class AsUser:
    """Runs commands as ``user`` (``runuser``), as that user's own shell would."""

    user: str

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        return SubprocessRunner()(["runuser", "-u", self.user, "--", *argv], timeout)


def ensure_user(name: str, *, home: bool = False) -> str:
    """The local user ``name``, made if missing (``home``: with a home directory)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        made = "--create-home" if home else "--no-create-home"
        subprocess.run(["useradd", made, "--shell", "/bin/sh", name], check=True)
    return name


def traversable_home(name: str) -> Path:
    """``name``'s home, made if missing, that other users may traverse (their jobs' output)."""
    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    if not home.is_dir():
        home.mkdir(parents=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    home.chmod(0o755)
    return home


def slurm_as(env: LiveEnv, user: str) -> CliSlurm:
    """A Slurm port that submits and acts as ``user``, with the test's Slurm timeout."""
    return CliSlurm(run=AsUser(user), timeout_s=env.config.slurm_timeout_s)


def submit_script_as(env: LiveEnv, user: str, name: str, body: str) -> int:
    """A one-GPU hops job of ``user`` that runs ``body`` (bash) with its spool as HOPS_SPOOL_DIR.

    The hostile-job tests submit what an attacker writes this way: as that user,
    held and tagged like any hops job, and cancelled with the test's other jobs.
    """
    script = env.root / f"{name}.sh"
    script.write_text(f"#!/bin/bash\nexport HOPS_SPOOL_DIR={env.spool_of(user)}\n{body}")
    script.chmod(0o755)
    args = ["-J", f"{env.prefix}{name}", "-o", "/dev/null", "-t", "10"]
    job = slurm_as(env, user).submit(
        SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e6))
    )
    env.submitted.append(job)
    return job


@contextmanager
def shared_env(prefix: str, scheduler: str = "") -> Iterator[LiveEnv]:
    """A live test's world in a directory every user may traverse (not write), removed after.

    pytest's own temporary directories are root's only; other users' jobs could
    not read their scripts there. ``scheduler``: more of hops.conf's ``[scheduler]``.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    live = LiveEnv.create(root, scheduler=scheduler)
    try:
        yield live
    finally:
        live.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def hops_submit_as(
    env: LiveEnv, monkeypatch: pytest.MonkeyPatch, user: str, script: Path, args: Sequence[str]
) -> int:
    """``hops submit script args`` with ``user``'s identity for Slurm; the job's id.

    The CLI runs inside this (root) test process: its Slurm port acts as ``user``
    and it believes ``user`` is who runs it.
    """
    script.chmod(0o755)
    port = slurm_as(env, user)
    monkeypatch.setattr("hopsd.slurm.factory.make_port", lambda *a, **k: port)
    monkeypatch.setattr("hops_cli.submit_env.current_user", lambda: user, raising=False)
    argv = ["--config", str(env.config_path), "submit", str(script), *args, "--parsable"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    job = int(result.stdout.strip())
    env.submitted.append(job)
    return job
