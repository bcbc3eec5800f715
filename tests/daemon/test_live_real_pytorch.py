"""Live: real PyTorch jobs under hopsd, submitted with ``hops submit`` as users do.

* A plain batch script, ``srun python train.py`` (no trap, no exec): hops
  profiles it, moves it to the fast type when that frees up, and it ends
  COMPLETED, every notice heard by its rank and no sample trained twice or
  skipped. Before hops gave notice to every step (and kept the batch shell
  alive through it), the first notice killed this job's shell and it FAILED.
* A DDP job started by the ``examples/pytorch/train.sh`` template: hops runs it
  on 1 GPU, moves it to 2 GPUs on two servers, then to 4 on one; every rank
  of every run hears each notice, the job
  trains on exactly the samples of an unmoved run and ends within 2 % of the
  loss of one process trained through the same world sizes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, hopsd_process
from real_jobs import (
    GRACE_S,
    LOSS_TOLERANCE,
    ROUND_S,
    RealJob,
    a100_blocked_but_one,
    block_gpus,
    cancel,
    done,
    explain,
    loss_gap,
    placement,
    ranks,
    requeues_by_kind,
    running,
    sample_count,
    slurm_state,
    submit,
    template_script,
    through_every_world_size,
    wait_for,
    world_sizes,
)

pytestmark = LIVE
pytest.importorskip("torch")

SCHEDULER = """
profiling = true
profiling_iterations = 5
profiling_timeout_s = 90.0
"""
NO_PROFILING = "profiling = false\n"


def make_env(scheduler: str) -> LiveEnv:
    root = Path(tempfile.mkdtemp(prefix="hops-real-"))
    root.chmod(0o755)
    daemon = "requeue_wait_s = 2.0\n"
    return LiveEnv.create(root, grace_s=GRACE_S, scheduler=scheduler, extra=daemon,
                          round_s=ROUND_S)  # fmt: skip


@pytest.fixture
def profiled() -> Iterator[LiveEnv]:
    yield from _env(SCHEDULER)


@pytest.fixture
def unprofiled() -> Iterator[LiveEnv]:
    yield from _env(NO_PROFILING)


def _env(scheduler: str) -> Iterator[LiveEnv]:
    env = make_env(scheduler)
    daemon = hopsd_process(env)
    try:
        yield env
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        env.cleanup()
        if os.environ.get("HOPS_TEST_KEEP"):
            shutil.copytree(env.root, "/tmp/real-debug", dirs_exist_ok=True)
        shutil.rmtree(env.root, ignore_errors=True)


def state(env: LiveEnv, job: RealJob) -> str:
    row = env.rows().get(job.slurm_id)
    return str(row.state.value if row is not None else "")


def test_a_plain_srun_job_is_profiled_moved_and_completes(profiled: LiveEnv) -> None:
    """Real jobs run as fast on every type of the test cluster (its GPUs are fake):
    what moves this one is capacity. One k80 GPU is free at first: the job is
    profiled there and runs on it; then an a100 server frees and hops moves it."""
    env = profiled
    name = f"{env.prefix}block"
    a100 = block_gpus("a100n1", 4, name)
    others = block_gpus("k80n1", 1, name) + [
        b for node in ("v100n1", "v100n2", "a100n2") for b in block_gpus(node, 4, name)
    ]
    env.blockers.extend(a100 + others)
    assert wait_for(lambda: running(a100 + others), 90)
    job = submit(env, "plain", gpus="1,2", samples=16_000)
    on_k80 = {"k80n1": 1}
    assert wait_for(lambda: placement(env, job.slurm_id) == on_k80 and state(env, job) == "running",
                    300), explain(env, job)  # fmt: skip
    cancel(a100)
    assert wait_for(lambda: "a100n1" in placement(env, job.slurm_id), 300), explain(env, job)
    cancel(others)
    assert wait_for(lambda: done(job), 600), explain(env, job)
    assert slurm_state(job.slurm_id) == "COMPLETED", explain(env, job)
    kinds = requeues_by_kind(env, job.slurm_id)
    assert kinds["preempt"] >= 1 and sum(kinds.values()) >= 2, (kinds, explain(env, job))
    count = sample_count(job)
    assert (count.repeated, count.skipped) == (0, 0), count
    heard = ranks(job)
    assert heard.signalled >= sum(kinds.values()) and heard.missed == 0, heard


def test_a_ddp_job_is_moved_across_world_sizes_and_preempted_without_losing_a_sample(
    unprofiled: LiveEnv,
) -> None:
    """The torchrun / srun template through every world size and a preemption."""
    env = unprofiled
    n1, n2 = a100_blocked_but_one(env)
    job = submit(env, "ddp", gpus="1,2,4", samples=60_000, script=template_script,
                 options=["--types", "a100", "--lr", "0.02", "--lr-scale", "linear"])  # fmt: skip
    through_every_world_size(env, job, n1, n2)
    finished_exactly(env, job, moves=2, preemptions=1)
    sizes = world_sizes(job)
    assert sizes[:3] == [1, 2, 4] and len(sizes) >= 4, sizes
    assert ranks(job).signalled >= 1 + 2 + 4


def finished_exactly(env: LiveEnv, job: RealJob, moves: int, preemptions: int = 0) -> None:
    """COMPLETED after at least ``moves`` moves and ``preemptions`` preemptions, every
    rank having heard each notice, every sample trained once, the loss as unmoved."""
    assert wait_for(lambda: done(job), 600), explain(env, job)
    assert slurm_state(job.slurm_id) == "COMPLETED", explain(env, job)
    kinds = requeues_by_kind(env, job.slurm_id)
    assert kinds["move"] >= moves and kinds["preempt"] >= preemptions, (kinds, explain(env, job))
    heard = ranks(job)
    assert heard.missed == 0 and heard.signalled >= 1, heard
    count = sample_count(job)
    assert (count.trained, count.repeated, count.skipped) == (job.samples, 0, 0), count
    live, gap = loss_gap(job)
    assert gap <= LOSS_TOLERANCE, (live, gap)


def test_a_lightning_job_moves_between_world_sizes_and_is_preempted_without_losing_a_sample(
    unprofiled: LiveEnv,
) -> None:
    """The Lightning template: one process, two across two servers (srun's ranks), four
    that Lightning starts itself on one, then preempted and resumed."""
    env = unprofiled
    n1, n2 = a100_blocked_but_one(env)

    def lightning(env: LiveEnv, label: str, folder: Path) -> str:
        return template_script(env, label, folder, "train_lightning.sh")

    job = submit(env, "lightning", gpus="1,2,4", samples=40_000, script=lightning,
                 options=["--types", "a100"])  # fmt: skip
    through_every_world_size(env, job, n1, n2)
    finished_exactly(env, job, moves=2, preemptions=1)
    assert world_sizes(job)[:3] == [1, 2, 4]
    assert "Handling auto-requeue" not in job.output()  # Lightning's own requeue stayed off
