"""submitit through hops, live: hopsd places the jobs on the 22.05 test cluster.

``submitit.AutoExecutor(folder, cluster="hops")`` submits with ``hops submit``;
hopsd (a real ``hopsd`` process adopting only this test's jobs) places and
releases them; results, failures and states read back as with submitit's Slurm
executor. hops's checkpoint notice (USR1 to the batch script, sent here through
the port as hopsd sends it) makes a ``Checkpointable`` save its state and
requeue held; hopsd places it again and it finishes from the checkpoint.
"""

from __future__ import annotations

import operator
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest
import submitit
from daemon_live import LIVE, LiveEnv, hopsd_process
from submitit.helpers import Checkpointable

pytestmark = LIVE

# Jobs unpickle this module's classes by value: the job's Python need not import tests.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Counter(Checkpointable):
    """Counts to ``steps`` slowly, writing its progress; remembers where each run began."""

    def __init__(self, progress: str, steps: int) -> None:
        self.progress = progress
        self.steps = steps
        self.done = 0
        self.starts: list[int] = []

    def __call__(self) -> list[int]:
        self.starts.append(self.done)
        while self.done < self.steps:
            time.sleep(0.1)
            self.done += 1
            Path(self.progress).write_text(f"{len(self.starts)} {self.done}\n")
        return self.starts


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveEnv]:
    live = LiveEnv.create(tmp_path)
    monkeypatch.setenv("HOPS_CONF", str(live.config_path))
    daemon = hopsd_process(live)
    yield live
    daemon.terminate()
    daemon.wait(timeout=30)
    live.cleanup()


def executor(env: LiveEnv, label: str, **hops: object) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=env.root / "submitit" / "%j", cluster="hops")
    ex.update_parameters(name=f"{env.prefix}{label}", timeout_min=5, hops_samples=1000)
    ex.update_parameters(**{f"hops_{k}": v for k, v in hops.items()})
    return ex


def track(env: LiveEnv, job: submitit.Job) -> int:  # type: ignore[type-arg]
    job_id = int(job.job_id)
    env.submitted.append(job_id)
    return job_id


def final_state(job: submitit.Job, deadline_s: float = 30) -> str:  # type: ignore[type-arg]
    """The state once Slurm has ended the job (the result file may come first)."""
    end = time.monotonic() + deadline_s
    state = job.watcher.get_state(job.job_id, mode="force")
    while state in ("RUNNING", "COMPLETING", "PENDING") and time.monotonic() < end:
        time.sleep(0.5)
        state = job.watcher.get_state(job.job_id, mode="force")
    return state


def test_result_state_and_failure_as_with_slurm(env: LiveEnv) -> None:
    ex = executor(env, "add", gpus="1,2")
    good = ex.submit(operator.add, 5, 7)
    bad = ex.submit(int, "not a number")
    track(env, good), track(env, bad)
    assert good.result() == 12
    with pytest.raises(submitit.core.utils.FailedJobError, match="invalid literal for int"):
        bad.result()
    assert final_state(good) == "COMPLETED" and final_state(bad) == "FAILED"
    listed = {j.job_id: j for j in env.port.list_jobs()}
    ran = listed[int(good.job_id)]
    assert ran.tag is not None and ran.tag.demands == (1, 2) and ran.tag.total_samples == 1000
    # Submitted to the default partition `all`; hopsd pinned it to one GPU type's own.
    assert ran.partition in {"k80", "v100", "a100"} and "gpu=" in ran.alloc_tres


def test_checkpoint_notice_resumes_from_the_checkpoint(env: LiveEnv) -> None:
    progress = env.root / "progress"
    job = executor(env, "ckpt").submit(Counter(str(progress), steps=120))
    job_id = track(env, job)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = progress.read_text() if progress.exists() else ""
        if text.startswith("1 ") and int(text.split()[1]) >= 20:
            break
        time.sleep(0.3)
    else:
        pytest.fail(f"job {job_id} never made progress: {job.stderr()}")
    env.port.signal(job_id, "USR1")  # hops's checkpoint notice
    starts = job.result()
    assert len(starts) == 2, starts
    assert starts[0] == 0 and starts[1] >= 20  # the second run began where the notice found it
    assert final_state(job) == "COMPLETED"
    log = job.stderr() or ""
    assert "checkpoint notice" in log and "checkpoint saved" in log and "requeued held" in log
