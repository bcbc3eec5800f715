"""hops in a PyTorch Lightning job: one callback and one cluster environment.

::

    from hops_probe import Probe
    probe = Probe()                       # first thing, before torch and Lightning
    import lightning.pytorch as pl
    from hops_probe import lightning as hops_pl

    trainer = pl.Trainer(
        callbacks=[hops_pl.HopsCallback(probe, "ckpt.ckpt", samples_per_step=...)],
        plugins=[hops_pl.environment()],
        ...,
    )
    trainer.fit(model, ckpt_path=hops_pl.resume_from("ckpt.ckpt"))

The callback reports every training step to hopsd (forward, backward and
update timed from Lightning's hooks), and on hops's notice: all ranks agree
on the step to stop at (Lightning's ``reduce_boolean_decision``), the
trainer saves a checkpoint (rank 0 writes it), the probe reports it, and the
job waits for hopsd to requeue it.

:func:`environment` never uses Lightning's own requeue on SIGUSR1
(``SLURMEnvironment(auto_requeue=True)``): Lightning would run a plain
``scontrol requeue`` and the job would start again wherever Slurm likes,
fighting hops's held requeue, which places the next run itself. Ranks that
``srun`` started (one task per GPU, across servers) are :class:`SrunTasks`:
each task is one Lightning "node" of one device, so a run placed unevenly
(``a100n1:3,a100n2:1``) trains like an even one, which Lightning's own SLURM
environment (``--ntasks-per-node``, the same count on every node) refuses.
:func:`layout` gives the ``devices`` and ``num_nodes`` that go with it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    TorchElasticEnvironment,
)

from hops_probe import Probe
from hops_probe.pytorch import World, attach, rendezvous, tell_notice, wait_for_requeue, world

__all__ = ["HopsCallback", "SrunTasks", "environment", "layout", "resume_from"]


def _srun_task() -> bool:
    """This process is a task of an ``srun`` step, not the batch script."""
    env = os.environ
    return env.get("SLURM_STEP_ID", "batch") not in ("batch", "") and bool(env.get("SLURM_NTASKS"))


class SrunTasks(ClusterEnvironment):
    """One srun task per GPU, each a Lightning node of one device; ranks from Slurm.

    Slurm binds each task to its own GPU (``--gpus-per-task=1``), so every task
    sees one device and its local rank is 0; its node rank is its global rank.
    Lightning's setters are ignored: Slurm, not Lightning, numbered the tasks.
    """

    def __init__(self) -> None:
        super().__init__()
        self.rank: World = world()
        self._address, self._port = rendezvous()

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self._address

    @property
    def main_port(self) -> int:
        return self._port

    @staticmethod
    def detect() -> bool:
        return _srun_task()

    def world_size(self) -> int:
        return self.rank.world_size

    def set_world_size(self, size: int) -> None:
        """Slurm's count stands."""

    def global_rank(self) -> int:
        return self.rank.rank

    def set_global_rank(self, rank: int) -> None:
        """Slurm's rank stands."""

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self.rank.rank


def environment() -> ClusterEnvironment:
    """Lightning's environment for this process, never with Lightning's own requeue.

    Ranks started by ``srun`` (one task per GPU): :class:`SrunTasks`. Started
    by ``torchrun``: torch elastic's. Else Lightning starts the ranks itself
    (``LightningEnvironment``).
    """
    if _srun_task():
        return SrunTasks()
    if TorchElasticEnvironment.detect():
        return TorchElasticEnvironment()
    return LightningEnvironment()


def layout() -> tuple[int, int]:
    """``(devices, num_nodes)`` for ``pl.Trainer`` that go with :func:`environment`.

    srun's tasks: one device per task, as many nodes as tasks. torchrun's: its
    workers per node, on as many nodes as that makes the world. Otherwise the
    GPUs Slurm gave this node (Lightning starts a process for each), one node.
    """
    if _srun_task():
        return 1, world().world_size
    if TorchElasticEnvironment.detect():
        ranks = world()
        per_node = max(ranks.local_world_size, 1)
        return per_node, max(ranks.world_size // per_node, 1)
    return int(os.environ.get("SLURM_GPUS_ON_NODE") or 1), 1


def resume_from(path: str | Path) -> str | None:
    """``ckpt_path`` for ``Trainer.fit``: the job's last checkpoint, or None at its start."""
    return str(path) if Path(path).exists() else None


class HopsCallback(pl.Callback):
    """Reports steps to hopsd and checkpoints on its notice (see the module docstring).

    ``samples_per_step`` is the whole job's samples in one optimizer step on
    this world size (the global batch), as the probe counts them.
    """

    def __init__(
        self, probe: Probe, checkpoint: str | Path, samples_per_step: float = 0.0
    ) -> None:
        self.probe = probe
        self.checkpoint = Path(checkpoint)
        self.samples_per_step = samples_per_step
        self._iteration: Any = None
        self._phase: Any = None
        self.stopped = False
        self._told = 0

    def _enter(self, name: str) -> None:
        self._leave()
        if self._iteration is not None:
            self._phase = self._iteration.phase(name)
            self._phase.__enter__()

    def _leave(self) -> None:
        if self._phase is not None:
            self._phase.__exit__(None, None, None)
            self._phase = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        attach(self.probe)

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._iteration = self.probe.iteration(samples=self.samples_per_step).__enter__()
        self._enter("forward")

    def on_before_backward(self, *args: Any) -> None:
        self._enter("backward")

    def on_before_optimizer_step(self, *args: Any) -> None:
        self._enter("update")

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        self._leave()
        if self._iteration is not None:
            self._iteration.__exit__(None, None, None)
            self._iteration = None
        heard = self.probe.preempt_requested()
        if not trainer.strategy.reduce_boolean_decision(heard, all=False):
            return
        started = time.perf_counter()
        trainer.save_checkpoint(self.checkpoint)  # every rank calls it; rank 0 writes
        trainer.strategy.barrier("hops-notice")
        self.probe.checkpointed(time.perf_counter() - started)
        self.stopped = True
        self._told = tell_notice(self.probe, trainer.global_rank, trainer.world_size,
                                 self._told, trainer.global_step)  # fmt: skip
        wait_for_requeue()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.probe.close()
