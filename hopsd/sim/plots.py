"""PNG plots of a comparison (matplotlib, Agg backend, no display needed).

Every plot carries a title saying what was simulated (preset or trace, seed),
and every policy its own colour, line style and marker, so that two policies
with equal results stay visible (one curve does not hide the other) and the
plot still reads in greyscale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from hopsd.sim.metrics import JobRecord
from hopsd.sim.state import RoundStat

LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")
# A latency ratio of exactly 0 (a job that never waited) has no place on a log
# axis; such jobs are drawn at this floor, and the axis label says so.
LR_FLOOR = 0.01
LOG_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0)


def _style(index: int) -> dict[str, object]:
    return {
        "linestyle": LINE_STYLES[index % len(LINE_STYLES)],
        "marker": MARKERS[index % len(MARKERS)],
        "markersize": 4,
        "linewidth": 1.6,
    }


def _cdf(ax: Axes, values: Sequence[float], label: str, index: int) -> None:
    xs = np.sort(np.asarray(values, dtype=float))
    ys = np.arange(1, len(xs) + 1) / len(xs)
    # About ten markers per curve, offset per policy so equal curves stay apart.
    every = max(1, len(xs) // 10)
    start = (index * every) // 4 % every if every > 1 else 0
    ax.step(xs, ys, where="post", label=label, markevery=(start, every), **_style(index))  # type: ignore[arg-type]


def _plain(value: float, _pos: int) -> str:
    return f"{value:g}"


def _log_axis(ax: Axes, low: float, high: float) -> None:
    """A log axis whose labelled ticks a reader can read (0.01, 0.02, 0.05, 0.1, ...)."""
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ticks = [t for t in LOG_TICKS if low <= t <= high] or [low, high]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _save(path: Path, fig: Figure) -> None:
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cdf_figure(
    per_policy: Mapping[str, Sequence[JobRecord]],
    field: str,
    xlabel: str,
    scale: float = 1.0,
    log: bool = False,
    title: str = "",
) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    highest = 0.0
    for index, (name, records) in enumerate(per_policy.items()):
        values = [getattr(r, field) / scale for r in records]
        if log:
            values = [max(v, LR_FLOOR) for v in values]
        highest = max([highest, *values])
        _cdf(ax, values, name, index)
    if log:
        _log_axis(ax, LR_FLOOR * 0.9, max(1.0, highest * 1.2))
        xlabel += f" (log scale; values below {LR_FLOOR:g} drawn at {LR_FLOOR:g})"
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs (CDF)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_throughput(
    path: Path, per_policy: Mapping[str, Sequence[RoundStat]], title: str = ""
) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for index, (name, rounds) in enumerate(per_policy.items()):
        style = _style(index)
        style["markevery"] = max(1, len(rounds) // 12)
        ax.plot(
            [r.start / 3600 for r in rounds],
            [r.effective_throughput for r in rounds],
            label=name,
            **style,  # type: ignore[arg-type]
        )
    ax.set_xlabel("time (h)")
    ax.set_ylabel("cluster throughput\n(reference-GPU equivalents)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save(path, fig)


def write_plots(
    out_dir: Path,
    records: Mapping[str, Sequence[JobRecord]],
    rounds: Mapping[str, Sequence[RoundStat]],
    what: str = "",
) -> list[Path]:
    """The three standard plots; ``what`` (e.g. "paper-512, seed 0") goes in every title."""
    suffix = f" — {what}" if what else ""
    paths = [out_dir / "jct_cdf.png", out_dir / "latency_ratio_cdf.png", out_dir / "throughput.png"]
    jct = cdf_figure(
        records,
        "jct_s",
        "job completion time (h)",
        scale=3600.0,
        title=f"Job completion time{suffix}",
    )
    _save(paths[0], jct)
    latency = cdf_figure(
        records,
        "latency_ratio",
        "latency ratio (queue wait / expected run time)",
        log=True,
        title=f"Latency ratio{suffix}",
    )
    _save(paths[1], latency)
    plot_throughput(paths[2], rounds, title=f"Cluster throughput per round{suffix}")
    return paths
