#!/usr/bin/env python3
"""The example's CNN as a PyTorch Lightning job under hops (see train.py for the why).

The same model, data order, optimizer and rate decay as ``train.py``, so a
job trained here is compared with ``train.py --reference`` like a plain one.
What Lightning adds is the loop; what hops needs is two lines
(``hops_probe.lightning``): the callback, which reports steps and checkpoints
on the notice, and the environment, which stops Lightning's own SLURM
requeue. The data position is kept in the checkpoint in samples, so a run on
4 GPUs resumes exactly where a run on 1 stopped.

Usage: see ``train_lightning.sh`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hops_probe import Probe

PROBE = Probe()  # before torch and Lightning: the notice handler is set first

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from data import GlobalOrder, make_dataset  # noqa: E402
from model import SmallCNN, decay, device_pace, hold_device  # noqa: E402
from options import job_parser, parse  # noqa: E402
from torch.utils.data import DataLoader, Sampler, TensorDataset  # noqa: E402

from hops_probe import lightning as hops_pl  # noqa: E402
from hops_probe import pytorch as hops  # noqa: E402


def arguments(argv: list[str]) -> argparse.Namespace:
    return parse(job_parser(__doc__.splitlines()[0]), argv)


class GlobalBatches(Sampler[list[int]]):
    """This rank's share of every global step from ``start`` on (see train.py)."""

    def __init__(self, order: GlobalOrder, start: int, total: int, batch: int,
                 rank: int, world: int) -> None:  # fmt: skip
        self.order, self.start, self.total = order, start, total
        self.batch, self.rank, self.world = batch, rank, world

    def __iter__(self) -> Any:
        position = self.start
        while position < self.total:
            count = min(self.world * self.batch, self.total - position)
            ids = self.order.ids(position, count)
            r, w = self.rank, self.world
            yield ids[r * count // w : (r + 1) * count // w].tolist()
            position += count

    def __len__(self) -> int:
        step = self.world * self.batch
        return max((self.total - self.start + step - 1) // step, 0)


class CNNTask(pl.LightningModule):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__()
        self.args = args
        torch.manual_seed(args.seed)
        self.net = SmallCNN(args.width)
        self.images, self.labels = make_dataset(args.dataset_size, args.seed)
        self.order = GlobalOrder(args.dataset_size, args.seed)
        self.position = 0
        self.history: list[dict[str, float]] = []
        self.progress = [0.0]
        self.pace_s = device_pace(args.device_rate)
        self.log_file: Any = None
        self._began = 0.0
        self._last = 0  # samples of this rank's current batch, for its backward's pace

    # -- data -----------------------------------------------------------------
    def train_dataloader(self) -> DataLoader[Any]:
        world, rank = self.trainer.world_size, self.trainer.global_rank
        batches = GlobalBatches(self.order, self.position, self.args.samples,
                                self.args.batch, rank, world)  # fmt: skip
        return DataLoader(TensorDataset(self.images, self.labels), batch_sampler=batches)

    # -- training ---------------------------------------------------------------
    def on_train_start(self) -> None:
        """This run's rate for its world size, wherever the checkpoint left it."""
        world = self.trainer.world_size
        rule = hops.scaled_lr(self.args.lr, world, self.args.lr_scale, self.args.base_gpus)
        lr = PROBE.lr if PROBE.lr is not None and PROBE.gpus == world else rule
        optimizer = self.trainer.optimizers[0]
        scheduler = self.trainer.lr_scheduler_configs[0].scheduler
        self.progress[0] = self.position / self.args.samples
        for group in optimizer.param_groups:
            group["initial_lr"], group["lr"] = lr, lr * decay(self.progress[0])
        scheduler.base_lrs = [lr for _ in optimizer.param_groups]  # type: ignore[attr-defined]
        self.history.append({"position": self.position, "world_size": world, "lr": lr})
        restart = os.environ.get("SLURM_RESTART_COUNT", "0")
        print(f"start: run {restart} rank {self.trainer.global_rank}/{world} at "
              f"{self.position}/{self.args.samples} samples, lr {lr:g}", flush=True)  # fmt: skip
        if self.args.sample_log:
            folder = Path(self.args.sample_log)
            folder.mkdir(parents=True, exist_ok=True)
            job = os.environ.get("SLURM_JOB_ID", "local")
            name = f"{job}-run{restart}-rank{self.trainer.global_rank}.ids"
            self.log_file = (folder / name).open("a")

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        world = self.trainer.world_size
        count = min(world * self.args.batch, self.args.samples - self.position)
        began = time.perf_counter()
        loss = F.cross_entropy(self.net(x), y, reduction="sum") * (world / count)
        hold_device(began, self.pace_s * len(y) / 3)
        if self.log_file is not None:  # the ids of this step's share, as the sampler cut it
            rank = self.trainer.global_rank
            ids = self.order.ids(self.position, count)[rank * count // world :]
            self.log_file.write(" ".join(map(str, ids[: len(y)].tolist())) + "\n")
            self.log_file.flush()
        self.position += count  # counted here: the notice's checkpoint comes after this step
        self.progress[0] = self.position / self.args.samples
        PROBE.progress(self.position)
        self._last = len(y)
        return loss

    def on_before_backward(self, loss: torch.Tensor) -> None:
        self._began = time.perf_counter()

    def on_after_backward(self) -> None:
        hold_device(self._began, 2 * self.pace_s * self._last / 3)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.net.parameters(), lr=self.args.lr, momentum=0.9,
                                    weight_decay=5e-4)  # fmt: skip
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: decay(self.progress[0]))
        stepwise = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": stepwise}

    # -- checkpoint ---------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["hops"] = {"position": self.position, "history": self.history,
                              "rng": torch.get_rng_state()}  # fmt: skip

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint["hops"]
        self.position, self.history = saved["position"], saved["history"]
        torch.set_rng_state(saved["rng"])

    def on_train_batch_end(self, *args: Any) -> None:
        if self.position >= self.args.samples:
            self.trainer.should_stop = True

    def on_train_end(self) -> None:
        if self.log_file is not None:
            self.log_file.close()


def main(argv: list[str]) -> int:
    args = arguments(argv)
    rank = hops.world()
    torch.set_num_threads(hops.cpu_threads(rank))
    task = CNNTask(args)
    path = Path(args.checkpoint or f"ckpt-{os.environ.get('SLURM_JOB_ID', 'local')}.ckpt")
    # one node: Lightning starts a rank per GPU itself; several: srun started one task
    # per GPU, each a Lightning "node" of one device (any GPU count per server)
    devices, nodes = hops_pl.layout()
    callback = hops_pl.HopsCallback(PROBE, path)
    trainer = pl.Trainer(
        accelerator="auto", devices=devices,
        precision="64-true" if args.precision == 64 else "32-true",
        num_nodes=nodes,
        strategy="ddp" if devices * nodes > 1 else "auto",
        # an "epoch" is what is left of the job from where the run began; should
        # Lightning end one early (it counts a resumed epoch's batches from its
        # checkpoint), the next starts at the job's own position
        max_epochs=1_000_000, reload_dataloaders_every_n_epochs=1,
        use_distributed_sampler=False, logger=False, enable_progress_bar=False,
        enable_checkpointing=False, enable_model_summary=False,
        callbacks=[callback], plugins=[hops_pl.environment()],
    )  # fmt: skip
    callback.samples_per_step = trainer.world_size * args.batch
    trainer.fit(task, ckpt_path=hops_pl.resume_from(path))
    trainer.save_checkpoint(path)  # every rank calls it (a collective); rank 0 writes
    if trainer.global_rank == 0:
        with torch.no_grad():
            loss = float(F.cross_entropy(task.net(task.images), task.labels).item())
        print(f"done: {task.position} samples, loss {loss:.6f}", flush=True)
        if args.result:
            Path(args.result).write_text(json.dumps(
                {"loss": loss, "samples": task.position, "history": task.history,
                 "precision": args.precision}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
