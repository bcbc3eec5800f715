"""Live, as an unprivileged user: a hops job stays held until hops places it.

``hops submit`` holds a job with ``sbatch --hold``, a hold its owner may
``scontrol release``; Slurm would then start the job with no hops decision.
On the Slurm test cluster, with every GPU taken by other work, the owner
(``hopsvictor``) tries exactly that:

* after hopsd adopted the job, ``scontrol release`` is refused (hopsd made the
  hold its own, ``JobHeldAdmin``), and once the GPUs are free Slurm still does
  not start the job: only hops may. Before, the release worked and Slurm
  started the job as soon as GPUs were free;
* released before hopsd's first look and started at once by Slurm, the job is
  requeued held by hopsd with the reason recorded. Before, hopsd refused the
  job ("tagged but not submitted held") and let it run.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from daemon_live import LIVE, LiveEnv, drive
from live_users import VICTIM, AsUser, shared_env
from test_live_two_users import shell_as, users  # noqa: F401 - a fixture
from tick_steps import observe_and_reconcile

from hopsd.daemon.holds import UNPLANNED_RUN
from hopsd.daemon.tick import Tick
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.port import SlurmJob, SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the user's account needs root"),
]


@pytest.fixture
def env(users: None) -> Iterator[LiveEnv]:  # noqa: F811 - the fixture imported above
    with shared_env("hops-holds-") as live:  # the victim's job reads its script here
        yield live


def submit_as_victim(env: LiveEnv) -> int:
    """A job of the victim's, submitted held and tagged as ``hops submit`` does."""
    script = env.root / "victim.sh"
    script.write_text("#!/bin/sh\nsleep 120\n")
    script.chmod(0o755)
    victim = CliSlurm(run=AsUser(VICTIM))
    args = ["-J", f"{env.prefix}victim", "-o", "/dev/null", "-t", "5"]
    job = victim.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e6)))
    env.submitted.append(job)
    return job


def fill_every_gpu(env: LiveEnv) -> list[int]:
    """Other work on every GPU of the test cluster (root's jobs, not hops's)."""
    jobs = []
    for args in (["-p", "a100", "-N", "2"], ["-p", "v100", "-N", "2"], ["-p", "k80", "-N", "1"]):
        gpus = "2" if "k80" in args else "4"
        out = subprocess.run(
            ["sbatch", "--parsable", *args, f"--gres=gpu:{gpus}", "-J", f"{env.prefix}block",
             "-o", "/dev/null", "-t", "5", "--wrap", "sleep 300"],
            capture_output=True, text=True, timeout=20, check=True,
        )  # fmt: skip
        jobs.append(int(out.stdout.strip().split(";")[0]))
    env.blockers.extend(jobs)
    assert drive(lambda: None, lambda: all(state(env, j).running for j in jobs), 30, 0.5)
    return jobs


def state(env: LiveEnv, job: int) -> SlurmJob:
    (seen,) = [j for j in env.port.list_jobs() if j.job_id == job]
    return seen


def test_the_owner_cannot_release_a_fresh_hops_job(env: LiveEnv) -> None:
    blockers = fill_every_gpu(env)
    job = submit_as_victim(env)
    assert state(env, job).reason == "JobHeldUser"  # sbatch --hold: the owner's own hold
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    tick.run_once()  # adopted; no GPU free, so it waits
    tick.run_once()
    assert job in env.rows()
    released = shell_as(VICTIM, f"scontrol release {job}")
    assert released.returncode != 0, "the owner released a job hops had not placed"
    subprocess.run(["scancel", *map(str, blockers)], check=True, timeout=20)
    time.sleep(5.0)  # GPUs free, hopsd not ticking: only a release outside hops could start it
    seen = state(env, job)
    assert seen.pending and seen.held and seen.reason == "JobHeldAdmin", (seen.state, seen.reason)


def test_a_job_slurm_started_before_adoption_is_requeued_held(env: LiveEnv) -> None:
    job = submit_as_victim(env)
    released = shell_as(VICTIM, f"scontrol release {job}")  # before hopsd ever saw it
    assert released.returncode == 0, released.stderr
    assert drive(lambda: None, lambda: state(env, job).running, 20, 0.5)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    observe_and_reconcile(tick)  # adoption only: the requeue is taken by the next tick
    assert env.rows()[job].state_reason == UNPLANNED_RUN
    tick.run_once()  # the requeue (no grace here), then hops may place it itself
    seen = state(env, job)
    assert seen.restarts >= 1, (seen.state, seen.reason)  # its unplanned run was stopped
    assert env.rows()[job].state_reason != "", "the reason was not kept"
