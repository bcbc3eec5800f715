"""submitit through hops, data-parallel: ``tasks_per_node=2``, live under hopsd.

The submitted function is the example's real trainer (``examples/pytorch/train.py``,
imported on the node): srun starts one task per GPU hops placed the run on,
hops moves the job from one GPU to two, every rank hears the notice, the ranks
agree on the step, and the job trains on exactly its samples.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
    RealJob,
    block_gpus,
    loss_gap,
    placement,
    ranks,
    reported_runs,
    requeues_by_kind,
    running,
    sample_count,
    slurm_state,
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
                          extra="requeue_wait_s = 2.0\n")  # fmt: skip
    os.environ["HOPS_CONF"] = str(live.config_path)
    daemon = hopsd_process(live)
    yield live
    daemon.terminate()
    daemon.wait(timeout=30)
    live.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def test_submitit_with_two_tasks_per_node_moves_and_keeps_every_sample(env: LiveEnv) -> None:
    name = f"{env.prefix}block"
    n1, n2 = block_gpus("a100n1", 4, name), block_gpus("a100n2", 3, name)
    env.blockers.extend(n1 + n2)
    assert wait_for(lambda: running(n1 + n2), 60)
    folder = env.root / "sub"
    folder.mkdir()
    for source in EXAMPLES.glob("*.py"):
        shutil.copy(source, folder / source.name)
    samples = 16_000
    ex = submitit.AutoExecutor(folder=folder / "log", cluster="hops")
    ex.update_parameters(name=f"{env.prefix}sub", timeout_min=20, tasks_per_node=2,
                         hops_gpus="1,2", hops_samples=samples, hops_cpus_per_task=2,
                         hops_types="a100")  # fmt: skip
    argv = [*train_args(folder).split(), "--samples", str(samples)]
    submitted = ex.submit(train_in, str(folder), argv)
    job = RealJob(int(submitted.job_id), "sub", folder, samples)
    env.submitted.append(job.slurm_id)
    assert wait_for(lambda: placement(env, job.slurm_id) == {"a100n2": 1}, 180)
    assert wait_for(lambda: len(reported_runs(env, job)) >= 1, 120)
    subprocess.run(["scancel", *map(str, n1[:2])], capture_output=True, timeout=20, check=False)
    assert wait_for(lambda: placement(env, job.slurm_id) == {"a100n1": 2}, 240)
    assert submitted.result() == 0
    assert wait_for(lambda: slurm_state(job.slurm_id) == "COMPLETED", 60)
    assert requeues_by_kind(env, job.slurm_id)["move"] >= 1
    out = "".join(p.read_text(errors="replace") for p in (folder / "log").glob("*"))
    job.output = lambda: out  # type: ignore[method-assign]
    heard = ranks(job)
    assert heard.missed == 0 and heard.signalled >= 1, heard
    count = sample_count(job)
    assert (count.trained, count.repeated, count.skipped) == (samples, 0, 0), count
    assert loss_gap(job)[1] <= LOSS_TOLERANCE, loss_gap(job)
