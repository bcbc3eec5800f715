#!/usr/bin/env python3
"""A synthetic training job instrumented with the hops probe.

It trains nothing: each iteration sleeps through the data, forward, backward and
update phases for as long as a model of the given speed would take on the GPU
type Slurm placed it on, so hops sees real heterogeneity and learns it. Swap
the sleeps for a real loop and keep the ``probe`` lines to instrument your own
training script.

Like a real trainer it checkpoints only now and then (``--checkpoint-every``
seconds, in its working directory) -- and at once when hops gives notice that
it will move or preempt the job: it saves, tells hopsd (``probe.checkpointed()``),
which then requeues it without waiting out the grace, and trains no further
meanwhile, so the next run resumes exactly where this one stopped. It reads the
GPU count and learning rate hops chose for this run from the probe.

Usage (inside a batch script): train_synthetic.py --samples 20000 --speed a100=4,v100=2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hops_probe import Probe

# Phase shares of one iteration; the data phase runs in the loop (no overlap).
SHARES = {"data": 0.2, "forward": 0.3, "backward": 0.4, "update": 0.1}


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, required=True, help="samples to train on")
    parser.add_argument("--batch", type=int, default=32, help="per-GPU batch size")
    parser.add_argument("--rate", type=float, default=200.0, help="per-GPU samples/s at speed 1")
    parser.add_argument("--speed", default="", help="speed per GPU type, e.g. a100=4,v100=2")
    parser.add_argument("--checkpoint-every", type=float, default=60.0, help="seconds")
    return parser.parse_args(argv)


def speed_on_this_node(table: str) -> float:
    """This run's speed: the model's factor for the partition's GPU type, times the
    host's own factor (the test cluster exports HOPS_NODE_SPEED per node)."""
    factors = {k: float(v) for k, _, v in (p.partition("=") for p in table.split(",") if p)}
    gpu_type = os.environ.get("SLURM_JOB_PARTITION", "")
    return factors.get(gpu_type, 1.0) * float(os.environ.get("HOPS_NODE_SPEED", "1") or 1)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    checkpoint = Path(f"train-{os.environ.get('SLURM_JOB_ID', 'local')}.ckpt")
    done = json.loads(checkpoint.read_text())["samples"] if checkpoint.exists() else 0
    probe = Probe()
    probe.progress(done)  # where this run resumes: hops sees at once what a restart kept
    visible = max(len(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")), 1)
    gpus = probe.gpus or visible  # what hops placed this run on
    iteration_s = args.batch / (args.rate * speed_on_this_node(args.speed))
    print(f"start: {done}/{args.samples} samples, {gpus} GPU(s), lr {probe.lr}, "
          f"{iteration_s * 1e3:.1f} ms/it")  # fmt: skip
    saved_at = time.monotonic()
    while done < args.samples:
        with probe.iteration(samples=args.batch * gpus) as it:
            for phase, share in SHARES.items():
                with it.phase(phase):
                    time.sleep(iteration_s * share)
        done = min(done + args.batch * gpus, args.samples)
        probe.progress(done)
        if probe.preempt_requested():  # hops will move or preempt the job: save now
            checkpoint.write_text(json.dumps({"samples": done}))
            probe.checkpointed()
            print(f"notice: checkpointed at {done} samples; waiting to be requeued")
            time.sleep(600)  # hops requeues the job meanwhile; nothing is trained twice
        elif time.monotonic() - saved_at >= args.checkpoint_every:
            checkpoint.write_text(json.dumps({"samples": done}))
            saved_at = time.monotonic()
    checkpoint.write_text(json.dumps({"samples": done}))
    probe.close()
    print(f"done: {done} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
