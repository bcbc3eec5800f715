"""hops_probe.lightning's environment: srun's tasks, each a node of one device."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from lightning.pytorch.plugins.environments import LightningEnvironment

from hops_probe import lightning as hops_pl

UNEVEN_TASK = {  # task 2 of 4 of a run placed on a100n1:3,a100n2:1: the one on a100n2
    "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "3,1", "SLURM_JOB_ID": "77",
    "MASTER_ADDR": "a100n1", "MASTER_PORT": "23456",
}  # fmt: skip


def test_an_srun_task_of_an_uneven_run_is_one_node_of_one_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lightning's SLURM environment wants the same task count on every node; as one
    node per task, 3 + 1 GPUs is a world of 4 like any other."""
    for name, value in UNEVEN_TASK.items():
        monkeypatch.setenv(name, value)
    env = hops_pl.environment()
    assert isinstance(env, hops_pl.SrunTasks)
    assert (env.world_size(), env.global_rank(), env.local_rank(), env.node_rank()) == (4, 3, 0, 3)
    env.set_world_size(1)  # Lightning's own count does not replace Slurm's
    env.set_global_rank(0)
    assert (env.world_size(), env.global_rank()) == (4, 3)
    assert (env.main_address, env.main_port) == ("a100n1", 23456)
    assert env.creates_processes_externally
    assert hops_pl.layout() == (1, 4)


def test_the_batch_script_lets_lightning_start_a_rank_per_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("SLURM_STEP_ID", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_STEP_ID", "batch")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    assert isinstance(hops_pl.environment(), LightningEnvironment)
    assert hops_pl.layout() == (4, 1)
