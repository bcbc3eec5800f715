"""The hops command against the live Slurm test cluster, acting as two different Unix users.

Each user's Slurm commands really run under their identity (``runuser``), so
Slurm itself decides who may cancel what; hops must relay its refusal clearly.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_live import need_cluster_and_root, temp_dir
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
from live_users import AsUser, ensure_user

from hops_cli.main import app
from hopsd.slurm.cli_backend import CliSlurm

pytestmark = pytest.mark.slurm

OWNER = "hopsalice"
OTHER = "hopsbob"
runner = CliRunner()


@pytest.fixture(scope="module")
def users() -> None:
    need_cluster_and_root("creating test users")
    ensure_user(OWNER)
    ensure_user(OTHER)


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Point the CLI's port at a runner for the user named in the yielded one-item list."""
    who = [OWNER]
    monkeypatch.setattr(
        "hopsd.slurm.factory.make_port",
        lambda *a, **k: CliSlurm(run=lambda argv, timeout: AsUser(who[0])(argv, timeout)),
    )
    monkeypatch.delenv("HOPS_CONF", raising=False)
    yield who


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory both test users can read and write (pytest's own tmp is root-only)."""
    with temp_dir("hops-cli-live-", 0o777) as work:
        yield work


def _script(work: Path) -> Path:
    path = work / "train.sh"
    path.write_text("#!/bin/bash\n#SBATCH -J hops-cli-live\n#SBATCH -o /dev/null\nsleep 30\n")
    path.chmod(0o755)
    return path


def _submitted(work: Path, gpus: str) -> str:
    """``hops submit`` of a short job asking ``gpus``; its job id."""
    path = _script(work)
    submitted = runner.invoke(
        app, ["submit", str(path), "--gpus", gpus, "--samples", "100", "--parsable"]
    )
    assert submitted.exit_code == 0, submitted.output
    return submitted.stdout.strip()


def _job_state(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T %u"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


def test_other_user_cannot_cancel_and_is_told_why(
    users: None, as_user: list[str], shared_dir: Path
) -> None:
    job_id = _submitted(shared_dir, "1,2")
    try:
        assert _job_state(job_id) == f"PENDING {OWNER}"
        as_user[0] = OTHER
        refused = runner.invoke(app, ["cancel", job_id])
        assert refused.exit_code == 1
        assert "belongs to another user" in refused.stderr
        assert _job_state(job_id) == f"PENDING {OWNER}"
        as_user[0] = OWNER
        accepted = runner.invoke(app, ["cancel", job_id])
        assert accepted.exit_code == 0, accepted.output
        assert f"Cancelled job {job_id}" in accepted.stdout
        assert not _job_state(job_id).startswith("PENDING")
    finally:
        subprocess.run(["scancel", job_id], check=False)


def test_cancel_is_honest_about_finished_unknown_and_array_ids(
    users: None, as_user: list[str], shared_dir: Path
) -> None:
    job_id = _submitted(shared_dir, "1")
    array = subprocess.run(
        [
            "runuser",
            "-u",
            OWNER,
            "--",
            "sbatch",
            "--parsable",
            "--hold",
            "--array=0-2",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 30",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=shared_dir,
    ).stdout.strip()
    try:
        first = runner.invoke(app, ["cancel", job_id])
        assert first.exit_code == 0 and f"Cancelled job {job_id}" in first.stdout
        again = runner.invoke(app, ["cancel", job_id])
        assert again.exit_code == 0, again.output
        assert f"job {job_id} already finished (CANCELLED)" in again.stdout
        unknown = runner.invoke(app, ["cancel", "987654"])
        assert unknown.exit_code == 1 and "no such job 987654" in unknown.stderr
        task = runner.invoke(app, ["cancel", f"{array}_1"])
        assert task.exit_code == 0, task.output
        assert f"Cancelled job {array}_1" in task.stdout
        left = subprocess.run(
            ["squeue", "-h", "-j", array, "-o", "%i %T"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert f"{array}_1 " not in left and "PENDING" in left
        # A task still inside its array's record (2 here) is cancelled by its id too.
        inner = runner.invoke(app, ["cancel", f"{array}_2", f"{array}_0"])
        assert inner.exit_code == 0, inner.output
        gone = subprocess.run(
            ["squeue", "-h", "-j", array], capture_output=True, text=True, check=False
        ).stdout
        assert gone.strip() == "", gone
    finally:
        subprocess.run(["scancel", job_id, array], check=False)


def _node_of(job_id: str, deadline_s: float = 60.0) -> str:
    """The node a job runs on once Slurm started it ('' if it never did in time)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"],
                             capture_output=True, text=True, check=False)  # fmt: skip
        state, _, node = out.stdout.strip().partition(" ")
        if state == "RUNNING":
            return node
        time.sleep(0.5)
    return ""


def test_a_job_its_owner_releases_before_adoption_still_runs_only_on_its_types(
    users: None, as_user: list[str], shared_dir: Path
) -> None:
    """No hopsd runs: the owner's ``scontrol release`` lets Slurm start the job at once.
    Before, it went to the default partition (any type: Slurm chose a100n1); now ``hops submit``
    gave Slurm the partitions of ``--types`` and Slurm keeps it there."""
    conf = shared_dir / "hops.conf"
    conf.write_text('[slurm]\npartitions = ["k80", "v100", "a100"]\n')
    path = _script(shared_dir)
    base = ["--config", str(conf), "submit", str(path), "--gpus", "1", "--samples", "100"]
    refused = runner.invoke(app, [*base, "--types", "a100", "--", "-p", "all"])
    assert refused.exit_code == 2 and "remove -p/--partition" in refused.stderr
    submitted = runner.invoke(app, [*base, "--types", "k80", "--parsable"])
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    try:
        released = AsUser(OWNER)(["scontrol", "release", job_id], 20)
        assert released.ok, released.stderr
        assert _node_of(job_id).startswith("k80"), _job_state(job_id)
    finally:
        subprocess.run(["scancel", job_id], check=False)
