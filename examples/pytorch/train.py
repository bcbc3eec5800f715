#!/usr/bin/env python3
"""A real data-parallel training job under hops: a small CNN, DDP, exact resume.

It trains a convolutional classifier on a dataset made in code (ten noisy
patterns, the same on every node for a given ``--seed``: nothing to
download) with ``torch.distributed`` (gloo on CPU, NCCL on GPUs), and stays
correct wherever and on how many GPUs hops runs it:

* **Notice**: the probe is created before torch is imported, so every rank
  catches hops's notice from the start; the ranks agree on the step to stop
  at (one ``all_reduce``), rank 0 writes the checkpoint, the probe reports it
  and the job waits for hopsd to requeue it.
* **Resume on another world size**: the per-GPU batch is fixed (``--batch``),
  the global batch is ``world size x batch`` and the learning rate follows
  ``--lr-scale`` (``linear``, ``sqrt``, ``none``; hops's own ``probe.lr`` when
  ``hops submit --lr`` gave one). The data order is one permutation per epoch
  of the whole dataset, cut at a position counted in samples, so a run on 4
  GPUs goes on exactly where a run on 1 stopped: no sample trained twice,
  none skipped.
* **Checkpoints** keep what a real job keeps: model, optimizer (momentum),
  scheduler, data position, RNG states and the history of world sizes.
* Each rank uses the CPU threads Slurm gives it.

The loss of rank ``r`` is its samples' summed loss scaled so that DDP's
average of gradients is the mean over the global batch: the step is the same
however the batch is split, which is what makes a moved job train like an
unmoved one. ``--reference RESULT`` replays the world sizes a finished job
ran at (from its ``--result`` file) in one process, for comparison.

Usage: see ``train.sh`` beside this file (torchrun on one node, srun on several).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hops_probe import Probe

PROBE = Probe()  # before torch: the notice handler is set before the slow imports

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from data import GlobalOrder, make_dataset  # noqa: E402
from model import SmallCNN, decay, device_pace, hold_device  # noqa: E402
from options import job_parser, parse, set_precision  # noqa: E402
from torch import nn  # noqa: E402

from hops_probe import pytorch as hops  # noqa: E402


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = job_parser(__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-steps", type=int, default=500, help="save every N steps")
    parser.add_argument("--reference", default="", help="replay a --result's world sizes")
    return parse(parser, argv)


# ---------------------------------------------------------------- data and model


# ---------------------------------------------------------------- training state


@dataclass
class State:
    """What a checkpoint restores, besides the model, optimizer and scheduler."""

    position: int = 0
    steps: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class Trainer:
    args: argparse.Namespace
    rank: hops.World
    world_size: int  # the global batch is world_size x batch
    split: int  # processes the global batch is split among (1: one process trains it all)
    lr: float
    model: nn.Module
    module: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    images: torch.Tensor
    labels: torch.Tensor
    order: GlobalOrder
    state: State
    progress: list[float]
    pace_s_per_sample: float = 0.0  # on fake GPUs: a step lasts at least this per sample

    def step(self) -> torch.Tensor:
        """One global step at the current position; the ids this rank trained."""
        args, state = self.args, self.state
        count = min(self.world_size * args.batch, args.samples - state.position)
        ids = self.order.ids(state.position, count)
        r, w = self.rank.rank % self.split, self.split
        mine = ids[r * count // w : (r + 1) * count // w]
        device_s = self.pace_s_per_sample * len(mine)
        with PROBE.iteration(samples=count) as it:
            with it.phase("data"):
                x, y = self.images[mine], self.labels[mine]
            with it.phase("forward"):
                began = time.perf_counter()
                loss = F.cross_entropy(self.model(x), y, reduction="sum") * (w / count)
                hold_device(began, device_s / 3)
            with it.phase("backward"):
                began = time.perf_counter()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                hold_device(began, 2 * device_s / 3)
            with it.phase("update"):
                self.optimizer.step()
        state.position += count
        state.steps += 1
        self.progress[0] = state.position / args.samples
        self.scheduler.step()
        return mine


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint or f"ckpt-{os.environ.get('SLURM_JOB_ID', 'local')}.pt")


def save(trainer: Trainer) -> None:
    """Rank 0 writes the checkpoint atomically (a crash mid-write keeps the last one)."""
    path = checkpoint_path(trainer.args)
    blob = {
        "model": trainer.module.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict(),
        "position": trainer.state.position,
        "steps": trainer.state.steps,
        "history": trainer.state.history,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def run_lr(args: argparse.Namespace, world_size: int) -> float:
    """hops's rate for this run's GPU count when it gave one, else the job's own rule."""
    if PROBE.lr is not None and PROBE.gpus == world_size:
        return PROBE.lr
    return hops.scaled_lr(args.lr, world_size, args.lr_scale, args.base_gpus)


def build(args: argparse.Namespace, rank: hops.World, world_size: int, lr: float) -> Trainer:
    torch.manual_seed(args.seed)
    module = SmallCNN(args.width)
    model: nn.Module = module
    if world_size > 1:
        model = nn.parallel.DistributedDataParallel(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    progress = [0.0]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: decay(progress[0]))
    images, labels = make_dataset(args.dataset_size, args.seed)
    order = GlobalOrder(args.dataset_size, args.seed)
    trainer = Trainer(
        args, rank, world_size, world_size if world_size > 1 else 1, lr, model, module,
        optimizer, scheduler, images, labels, order, State(), progress,
    )  # fmt: skip
    resume(trainer)
    return trainer


def resume(trainer: Trainer) -> None:
    """Load the last checkpoint, then set this run's learning rate for its world size."""
    path = checkpoint_path(trainer.args)
    if path.exists():
        blob = torch.load(path, map_location="cpu", weights_only=False)
        trainer.module.load_state_dict(blob["model"])
        trainer.optimizer.load_state_dict(blob["optimizer"])
        trainer.scheduler.load_state_dict(blob["scheduler"])
        trainer.state = State(blob["position"], blob["steps"], blob["history"])
        torch.set_rng_state(blob["rng"]["torch"])
        random.setstate(blob["rng"]["python"])
    trainer.progress[0] = trainer.state.position / trainer.args.samples
    set_rate(trainer, trainer.lr)


def set_rate(trainer: Trainer, lr: float) -> None:
    """This run's base rate (its world size's), decayed to where the job stands."""
    trainer.lr = lr
    for group in trainer.optimizer.param_groups:
        group["initial_lr"] = lr
        group["lr"] = lr * decay(trainer.progress[0])
    trainer.scheduler.base_lrs = [lr for _ in trainer.optimizer.param_groups]


def evaluate(trainer: Trainer) -> float:
    """Mean loss over the whole dataset: the job's final training loss."""
    with torch.no_grad():
        logits = trainer.module(trainer.images)
        return float(F.cross_entropy(logits, trainer.labels).item())


# ---------------------------------------------------------------- the two modes


def train(args: argparse.Namespace) -> int:
    rank = hops.world()
    torch.set_num_threads(hops.cpu_threads(rank))
    backend = hops.init_distributed(rank)
    hops.attach(PROBE)
    size = rank.world_size
    trainer = build(args, rank, size, run_lr(args, size))
    trainer.pace_s_per_sample = device_pace(args.device_rate)
    state = trainer.state
    state.history.append({"position": state.position, "world_size": size, "lr": trainer.lr})
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    print(
        f"start: run {restart} rank {rank.rank}/{size} at {state.position}/{args.samples} "
        f"samples, lr {trainer.lr:g}, {torch.get_num_threads()} threads, {backend}",
        flush=True,
    )
    PROBE.progress(state.position)
    log = sample_log(args, rank, restart)
    told = 0  # notice signals this rank had heard at its last stop
    while state.position < args.samples:
        mine = trainer.step()
        if log is not None:
            log.write(" ".join(map(str, mine.tolist())) + "\n")
            log.flush()
        PROBE.progress(state.position)
        if hops.stop_for_notice(PROBE, rank, lambda: save(trainer)):
            told = hops.tell_notice(PROBE, rank.rank, size, told, state.position)
            hops.wait_for_requeue()
        elif state.steps % args.checkpoint_steps == 0 and rank.is_main:
            save(trainer)
    return finish(trainer, rank)


def sample_log(args: argparse.Namespace, rank: hops.World, restart: str):  # type: ignore[no-untyped-def]
    if not args.sample_log:
        return None
    folder = Path(args.sample_log)
    folder.mkdir(parents=True, exist_ok=True)
    job = os.environ.get("SLURM_JOB_ID", "local")
    return (folder / f"{job}-run{restart}-rank{rank.rank}.ids").open("a")


def finish(trainer: Trainer, rank: hops.World) -> int:
    if rank.is_main:
        save(trainer)
        loss = evaluate(trainer)
        print(f"done: {trainer.state.position} samples, loss {loss:.6f}", flush=True)
        if trainer.args.result:
            result = {"loss": loss, "samples": trainer.state.position,
                      "steps": trainer.state.steps, "history": trainer.state.history,
                      "precision": trainer.args.precision}  # fmt: skip
            Path(trainer.args.result).write_text(json.dumps(result))
    PROBE.close()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return 0


def reference(args: argparse.Namespace) -> int:
    """One process trains through the world sizes (and rates) a finished job ran at."""
    finished = json.loads(Path(args.reference).read_text())
    history = finished["history"]
    args.precision = int(finished.get("precision", 32))
    set_precision(args.precision)
    segments = [h for h in history if h["position"] < args.samples]
    args.checkpoint = str(Path(args.reference).with_suffix(".ref.pt"))
    checkpoint_path(args).unlink(missing_ok=True)
    single = hops.World(0, 1, 0, 1)
    start = time.perf_counter()
    trainer = build(args, single, 1, segments[0]["lr"])
    for index, seg in enumerate(segments):
        until = segments[index + 1]["position"] if index + 1 < len(segments) else args.samples
        trainer.world_size = int(seg["world_size"])
        set_rate(trainer, float(seg["lr"]))
        while trainer.state.position < until:
            trainer.step()
    loss = evaluate(trainer)
    print(json.dumps({"loss": loss, "samples": trainer.state.position,
                      "seconds": round(time.perf_counter() - start, 3)}))  # fmt: skip
    checkpoint_path(args).unlink(missing_ok=True)
    return 0


def main(argv: list[str]) -> int:
    args = arguments(argv)
    return reference(args) if args.reference else train(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
