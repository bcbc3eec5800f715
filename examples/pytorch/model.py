"""The example's model and learning-rate decay, shared by the plain and Lightning jobs."""

from __future__ import annotations

import math
import os
import time

import torch
import torch.nn.functional as F
from data import CLASSES
from torch import nn


class SmallCNN(nn.Module):
    """Two convolutions and a linear head; no batch norm, so a step is split-invariant."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.head = nn.Linear(2 * width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def decay(progress: float) -> float:
    """Cosine decay of the rate over the job's samples, from 1 to 0.1."""
    return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


def device_pace(rates_text: str) -> float:
    """Seconds per sample of this node's fake GPU (0: none, train at the CPU's speed).

    The test cluster's GPUs are fake and every node is the same CPU: a real
    model trains equally fast everywhere. With ``--device-rate`` each step
    lasts as long as it would on the GPU type Slurm placed the run on, so hops
    sees the heterogeneity it is built for; the training itself is unchanged.
    """
    pairs = (p.partition("=") for p in rates_text.split(",") if p)
    rates = {kind: float(value) for kind, _, value in pairs}
    rate = rates.get(os.environ.get("SLURM_JOB_PARTITION", ""), 0.0)
    speed = float(os.environ.get("HOPS_NODE_SPEED", "1") or 1)
    return 1.0 / (rate * speed) if rate > 0 and speed > 0 else 0.0


def hold_device(since: float, seconds: float) -> None:
    """Wait out what is left of ``seconds`` since ``since``: the fake GPU's share of a phase."""
    left = seconds - (time.perf_counter() - since)
    if left > 0:
        time.sleep(left)
