"""PNG plots of a comparison (matplotlib, Agg backend, no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from hopsd.sim.engine import RoundStat
from hopsd.sim.metrics import JobRecord


def _cdf(ax: Axes, values: Sequence[float], label: str) -> None:
    xs = np.sort(np.asarray(values))
    ys = np.arange(1, len(xs) + 1) / len(xs)
    ax.step(xs, ys, where="post", label=label)


def plot_cdf(
    path: Path,
    per_policy: Mapping[str, Sequence[JobRecord]],
    field: str,
    xlabel: str,
    scale: float = 1.0,
    log: bool = False,
) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, records in per_policy.items():
        _cdf(ax, [getattr(r, field) / scale for r in records], name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    if log:
        ax.set_xscale("symlog", linthresh=0.1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(path: Path, per_policy: Mapping[str, Sequence[RoundStat]]) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, rounds in per_policy.items():
        ax.plot(
            [r.start / 3600 for r in rounds], [r.effective_throughput for r in rounds], label=name
        )
    ax.set_xlabel("time (h)")
    ax.set_ylabel("cluster throughput (reference-GPU equivalents)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(
    out_dir: Path,
    records: Mapping[str, Sequence[JobRecord]],
    rounds: Mapping[str, Sequence[RoundStat]],
) -> list[Path]:
    """The three standard plots; returns their paths."""
    paths = [out_dir / "jct_cdf.png", out_dir / "latency_ratio_cdf.png", out_dir / "throughput.png"]
    plot_cdf(paths[0], records, "jct_s", "job completion time (h)", scale=3600.0)
    plot_cdf(paths[1], records, "latency_ratio", "latency ratio", log=True)
    plot_throughput(paths[2], rounds)
    return paths
