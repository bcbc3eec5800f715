"""Live: a real hopsd gives notice before it moves jobs, and keeps the grace across a kill -9.

On the Slurm test cluster two one-GPU jobs start on the k80 node while a
non-hops job holds the a100 and v100 nodes; when it ends, the next round moves
both to the a100s (four times faster). Both checkpoint only rarely on their own
(every 1000 s), so a requeue without notice would cost them everything:

* the cooperating job checkpoints at once on the notice and waits; it is
  requeued within a tick or two of its report, far inside the grace, and its
  samples done never go backwards across the restart;
* the job that ignores the notice is requeued once the grace is over, within
  one tick of it -- and hopsd is killed (SIGKILL) in the middle of that grace:
  the restarted daemon keeps the same grace and sends no second signal.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process
from test_live_workload import block_nodes, seed

from hopsd.ledger.models import JobState
from hopsd.slurm.port import SubmitRequest

pytestmark = LIVE

GRACE_S = 12.0
TICK_S = 1.0  # queue_refresh_s of the live tests' hops.conf


@pytest.fixture
def env() -> Iterator[LiveEnv]:
    root = Path(tempfile.mkdtemp(prefix="hops-notice-"))
    live = LiveEnv.create(root, grace_s=GRACE_S)
    yield live
    live.cleanup()
    if os.environ.get("HOPS_TEST_KEEP"):
        shutil.copytree(root, "/tmp/notice-debug", dirs_exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)


def submit(env: LiveEnv, label: str, *flags: str) -> int:
    script = env.root / f"{label}.sh"
    train = Path(__file__).with_name("train_job.py")
    script.write_text(
        "#!/bin/bash\n"
        f"export HOPS_SPOOL_DIR={env.spool}\n"
        f"exec {env_python()} {train} --samples 6000 --batch 32 --base 50 "
        f"--checkpoint-every 1000 {' '.join(flags)}\n"
    )
    args = ["-J", f"{env.prefix}{label}", "-o", str(env.root / "%j.out"), "--open-mode=append",
            "-t", "10"]  # fmt: skip
    from hopsd.slurm.tag import HopsTag

    job = env.port.submit(
        SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 6000.0, 32))
    )
    env.submitted.append(job)
    return job


def env_python() -> str:
    import sys

    return sys.executable


def log_lines(env: LiveEnv, event: str, job: int) -> list[str]:
    text = "".join(p.read_text() for p in sorted(env.root.glob("hopsd*.log")))
    lines = text.splitlines()
    return [x for x in lines if f"event={event} " in x and f"job={job} " in x]


def waited(line: str) -> float:
    found = re.search(r"waited_s=([0-9.]+)", line)
    assert found is not None, line
    return float(found.group(1))


def test_notice_before_moves_no_lost_progress_and_the_grace_survives_a_kill(env: LiveEnv) -> None:
    blocker = block_nodes("a100n1,a100n2,v100n1,v100n2", 4, f"{env.prefix}block")
    env.blockers.append(blocker)
    assert drive(
        lambda: None,
        lambda: any(j.job_id == blocker and j.running for j in env.port.list_jobs()),
        20,
    )
    keen = submit(env, "keen")
    deaf = submit(env, "deaf", "--ignore-notice")
    daemon = hopsd_process(env, log=env.root / "hopsd-1.log")
    try:
        adopted = lambda: keen in env.rows() and deaf in env.rows()  # noqa: E731
        assert drive(lambda: None, adopted, 30)
        for job in (keen, deaf):
            seed(env, job, {"k80": 50.0, "v100": 100.0, "a100": 200.0})
        running = lambda: all(env.rows()[j].state == JobState.RUNNING for j in (keen, deaf))  # noqa: E731
        assert drive(lambda: None, running, 60), (env.root / "hopsd-1.log").read_text()
        time.sleep(3.0)  # some progress on the k80 before the a100s free up
        subprocess.run(["scancel", str(blocker)], check=True, timeout=20)
        noticed = lambda: bool(log_lines(env, "notice", deaf))  # noqa: E731
        assert drive(lambda: None, noticed, 60), (env.root / "hopsd-1.log").read_text()
        time.sleep(GRACE_S / 3)
        daemon.send_signal(signal.SIGKILL)  # in the middle of the deaf job's grace
        daemon.wait(timeout=30)
        daemon = hopsd_process(env, log=env.root / "hopsd-2.log")
        moved = lambda: all(log_lines(env, "notice-over", j) for j in (keen, deaf))  # noqa: E731
        assert drive(lambda: None, moved, GRACE_S * 3), (env.root / "hopsd-2.log").read_text()
        done = lambda: all(env.rows()[j].state == JobState.DONE for j in (keen, deaf))  # noqa: E731
        assert drive(lambda: None, done, 180), (env.root / "hopsd-2.log").read_text()
    finally:
        if daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=30)

    # each job had exactly one notice, and the restarted daemon sent none
    assert len(log_lines(env, "notice", keen)) == len(log_lines(env, "notice", deaf)) == 1
    (keen_over,) = log_lines(env, "notice-over", keen)
    (deaf_over,) = log_lines(env, "notice-over", deaf)
    assert "checkpointed" in keen_over and waited(keen_over) < GRACE_S / 2
    # requeued after the grace, within one tick (and the restart) of its end
    assert "grace over" in deaf_over and GRACE_S <= waited(deaf_over) <= GRACE_S + 3 * TICK_S

    keen_events = env.events(keen)
    starts = [e for e in keen_events if e["event"] == "start"]
    checkpoints = [e for e in keen_events if e["event"] == "checkpoint"]
    assert len(starts) >= 2 and checkpoints, keen_events
    assert starts[1]["samples_done"] == checkpoints[0]["samples_done"] > 0  # nothing lost
    assert starts[1]["gpu_type"] == "a100"
    deaf_starts = [e for e in env.events(deaf) if e["event"] == "start"]
    # it ignored the notice: back to its own (first) checkpoint, losing what came after
    assert len(deaf_starts) >= 2
    assert deaf_starts[1]["samples_done"] < checkpoints[0]["samples_done"]
