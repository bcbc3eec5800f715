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

:func:`environment` keeps Lightning's SLURM support (ranks from ``srun``) but
turns off its own requeue on SIGUSR1 (``auto_requeue``): Lightning would run
a plain ``scontrol requeue`` and the job would start again wherever Slurm
likes, fighting hops's held requeue, which places the next run itself.
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
    SLURMEnvironment,
    TorchElasticEnvironment,
)

from hops_probe import Probe
from hops_probe.pytorch import attach, tell_notice, wait_for_requeue

__all__ = ["HopsCallback", "environment", "resume_from"]


def environment() -> ClusterEnvironment:
    """Lightning's environment for this process, never with Lightning's own requeue.

    Ranks started by ``srun`` (one task per GPU): ``SLURMEnvironment`` with
    ``auto_requeue=False``. Started by ``torchrun``: torch elastic's. Else
    Lightning starts the ranks itself (``LightningEnvironment``).
    """
    if os.environ.get("SLURM_STEP_ID", "batch") not in ("batch", "") and os.environ.get(
        "SLURM_NTASKS"
    ):
        return SLURMEnvironment(auto_requeue=False)
    if TorchElasticEnvironment.detect():
        return TorchElasticEnvironment()
    return LightningEnvironment()


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
