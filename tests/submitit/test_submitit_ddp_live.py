"""submitit through hops, data-parallel: ``tasks_per_node=2``, live under hopsd.

The submitted function is the example's real trainer (``examples/pytorch/train.py``,
imported on the node): srun starts one task per GPU hops placed the run on,
hops moves the job through 1, 2 (across two servers) and 4 GPUs and preempts
it once, every rank hears each notice, the ranks agree on the step, and the job
trains on exactly its samples.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest
import submitit
from daemon_live import LIVE, LiveEnv, hopsd_process
from real_jobs import (
    EXAMPLES,
    GRACE_S,
    LOSS_TOLERANCE,
    ROUND_S,
    RealJob,
    a100_blocked_but_one,
    loss_gap,
    ranks,
    requeues_by_kind,
    sample_count,
    slurm_state,
    through_every_world_size,
    train_args,
    wait_for,
)

pytestmark = LIVE
pytest.importorskip("torch")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def train_in(folder: str, argv: list[str]) -> int:
    """Run the example trainer of ``folder`` in this task (one rank of the job)."""
    sys.path.insert(0, folder)
    os.chdir(folder)
    import train

    return int(train.main(argv))


@pytest.fixture
def env() -> Iterator[LiveEnv]:
    root = Path(tempfile.mkdtemp(prefix="hops-real-"))
    root.chmod(0o755)
    live = LiveEnv.create(root, grace_s=GRACE_S, scheduler="profiling = false\n",
                          extra="requeue_wait_s = 2.0\n", round_s=ROUND_S)  # fmt: skip
    os.environ["HOPS_CONF"] = str(live.config_path)
    daemon = hopsd_process(live)
    yield live
    daemon.terminate()
    daemon.wait(timeout=30)
    live.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def test_submitit_with_two_tasks_per_node_moves_is_preempted_and_keeps_every_sample(
    env: LiveEnv,
) -> None:
    """One srun task per GPU hops placed the run on, through 1, 2 across two servers and
    4 GPUs, and a preemption: every rank hears each notice, every sample once."""
    n1, n2 = a100_blocked_but_one(env)
    folder = env.root / "sub"
    folder.mkdir()
    for source in EXAMPLES.glob("*.py"):
        shutil.copy(source, folder / source.name)
    samples = 40_000
    ex = submitit.AutoExecutor(folder=folder / "log", cluster="hops")
    ex.update_parameters(name=f"{env.prefix}sub", timeout_min=20, tasks_per_node=2,
                         hops_gpus="1,2,4", hops_samples=samples, hops_cpus_per_task=2,
                         hops_types="a100")  # fmt: skip
    argv = [*train_args(folder).split(), "--samples", str(samples)]
    submitted = ex.submit(train_in, str(folder), argv)
    job = RealJob(int(submitted.job_id), "sub", folder, samples, outputs="log/*")
    env.submitted.append(job.slurm_id)
    through_every_world_size(env, job, n1, n2)
    assert submitted.result() == 0
    assert wait_for(lambda: slurm_state(job.slurm_id) == "COMPLETED", 60)
    kinds = requeues_by_kind(env, job.slurm_id)
    assert kinds["move"] >= 2 and kinds["preempt"] >= 1, kinds
    heard = ranks(job)
    assert heard.missed == 0 and heard.signalled >= 1 + 2 + 4, heard
    count = sample_count(job)
    assert (count.trained, count.repeated, count.skipped) == (samples, 0, 0), count
    assert loss_gap(job)[1] <= LOSS_TOLERANCE, loss_gap(job)
