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

from daemon_live import LiveEnv

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.runner import CompletedRun, SubprocessRunner


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
