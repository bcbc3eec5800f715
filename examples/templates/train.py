#!/usr/bin/env python3
"""A plain-Python training job under hops: a small MLP fitted to sin(3x) by SGD.

Standard library only, so it runs anywhere (``pip install hops-probe`` is all it
needs); the lines marked ``# hops`` are what any training loop adds to run well
under hops, whatever its framework:

* the probe measures each iteration's phases and the job's progress, from which
  hops learns how fast the job runs on each GPU type and server;
* on hops's notice (before a move or a preemption) the job saves a checkpoint
  and says so, and hopsd requeues it at once;
* every run resumes from the checkpoint, on whatever GPU count hops chose
  (``probe.gpus``), with the learning rate ``hops submit --lr/--lr-scale`` gives
  for that count (``probe.lr``).

The job's size and per-GPU batch come from ``hops submit --samples`` and
``--batch-size`` (``HOPS_TOTAL_SAMPLES``, ``HOPS_BATCH_SIZE``); outside hops
it trains 20 000 samples in batches of 32.
"""

from __future__ import annotations

from hops_probe import Probe  # hops

probe = Probe()  # hops: first, so the notice handler is set before anything heavy loads

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HIDDEN = 16


def new_model(rng: random.Random) -> dict[str, list[float]]:
    return {
        "w1": [rng.gauss(0.0, 1.0) for _ in range(HIDDEN)],
        "b1": [0.0] * HIDDEN,
        "w2": [rng.gauss(0.0, 0.3) for _ in range(HIDDEN)],
        "b2": [0.0],
    }


def step(model: dict[str, list[float]], xs: list[float], ys: list[float], lr: float) -> float:
    """One SGD step on a batch; returns the batch's mean squared error."""
    w1, b1, w2, b2 = model["w1"], model["b1"], model["w2"], model["b2"]
    g_w1, g_b1, g_w2 = [0.0] * HIDDEN, [0.0] * HIDDEN, [0.0] * HIDDEN
    g_b2, loss = 0.0, 0.0
    for x, y in zip(xs, ys, strict=True):
        hidden = [math.tanh(w1[j] * x + b1[j]) for j in range(HIDDEN)]
        err = sum(w2[j] * hidden[j] for j in range(HIDDEN)) + b2[0] - y
        loss += err * err
        for j in range(HIDDEN):
            g_w2[j] += err * hidden[j]
            back = err * w2[j] * (1.0 - hidden[j] * hidden[j])
            g_w1[j] += back * x
            g_b1[j] += back
        g_b2 += err
    scale = 2.0 * lr / len(xs)
    for j in range(HIDDEN):
        w1[j] -= scale * g_w1[j]
        b1[j] -= scale * g_b1[j]
        w2[j] -= scale * g_w2[j]
    b2[0] -= scale * g_b2
    return loss / len(xs)


def main() -> int:
    total = int(probe.total_samples or 20_000)  # hops: hops submit --samples
    batch = int(os.environ.get("HOPS_BATCH_SIZE") or 32)  # hops: --batch-size, per GPU
    gpus = probe.gpus or 1  # hops: the GPU count of this run
    lr = probe.lr or 0.05  # hops: --lr scaled for that count (--lr-scale)
    # Slurm's job id stays the same across requeues: every run finds the checkpoint
    path = Path(f"checkpoint-{os.environ.get('SLURM_JOB_ID', 'local')}.json")
    state = json.loads(path.read_text()) if path.exists() else {"samples": 0, "model": None}
    done = int(state["samples"])
    model = state["model"] or new_model(random.Random(0))
    probe.progress(done)  # hops: where this run resumes
    print(f"start at {done}/{total} samples on {gpus} GPU(s), lr {lr}", flush=True)

    def save() -> None:
        path.with_suffix(".tmp").write_text(json.dumps({"samples": done, "model": model}))
        path.with_suffix(".tmp").replace(path)

    loss = float("nan")
    while done < total:
        size = min(batch * gpus, total - done)  # the global batch: per-GPU batch x GPUs
        with probe.iteration(samples=size) as it:  # hops: one iteration
            with it.phase("data"):
                rng = random.Random(done)  # data order fixed by position: resumes exactly
                xs = [rng.uniform(-1.0, 1.0) for _ in range(size)]
                ys = [math.sin(3.0 * x) for x in xs]
            with it.phase("forward"):  # this loop does forward and backward in one pass
                loss = step(model, xs, ys, lr)
        done += size
        probe.progress(done)  # hops: samples done so far
        if probe.preempt_requested():  # hops: a move or preemption is coming
            save()
            probe.checkpointed()  # hops: hopsd requeues the job now
            print(f"notice: checkpointed at {done} samples, loss {loss:.4f}", flush=True)
            # Train no further: hopsd requeues the job, which ends this run. Exiting
            # instead would end the job (it would be finished, not requeued). If no
            # requeue comes (hopsd changed its mind), train on: nothing is lost.
            time.sleep(600)
    save()
    probe.close()  # hops
    print(f"done: {done} samples, loss {loss:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
