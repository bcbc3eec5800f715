"""The simulator's plots: readable log ticks, a style per policy, a title saying what was run."""

from __future__ import annotations

from pathlib import Path

from hopsd.sim.metrics import JobRecord
from hopsd.sim.plots import cdf_figure


def record(job_id: int, latency_ratio: float) -> JobRecord:
    return JobRecord(
        job_id=str(job_id),
        model="m",
        user="u",
        demands="1",
        submit_s=0.0,
        first_start_s=1.0,
        finish_s=2.0,
        jct_s=2.0,
        wait_s=1.0,
        run_s=1.0,
        age_s=1.0,
        latency_ratio=latency_ratio,
        ftf_rho=1.0,
        restarts=0,
        gpu_types="a100",
    )


def test_latency_ratio_axis_labels_the_range_a_reader_needs() -> None:
    ratios = [0.0, 0.05, 0.1, 0.3, 0.74, 2.5]
    same = [record(i, r) for i, r in enumerate(ratios)]
    fig = cdf_figure({"hops": same, "fifo": same}, "latency_ratio", "LR", log=True, title="t")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    for wanted in ("0.01", "0.1", "0.2", "0.5", "1", "2"):
        assert wanted in labels
    # A ratio of 0 is drawn at the floor instead of vanishing off a log axis.
    xs = ax.get_lines()[0].get_xdata()
    assert min(xs) > 0


def test_equal_curves_stay_distinguishable() -> None:
    same = [record(i, 0.1 * (i + 1)) for i in range(20)]
    policies = {"hops": same, "sia": same, "gavel": same, "fifo": same}
    fig = cdf_figure(policies, "latency_ratio", "LR", log=True)
    lines = fig.axes[0].get_lines()
    assert len({(line.get_linestyle(), line.get_marker()) for line in lines}) == len(policies)


def test_simulation_plots_are_titled_with_preset_and_seed(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import hopsd.sim.plots as plots
    from hops_cli.main import app

    titles: list[str] = []
    close = plots.plt.close

    def keep_title(fig: object) -> None:
        titles.extend(ax.get_title() for ax in fig.axes)  # type: ignore[attr-defined]
        close(fig)  # type: ignore[arg-type]

    monkeypatch.setattr(plots.plt, "close", keep_title)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--preset",
            "paper-64",
            "--policies",
            "fifo",
            "--seed",
            "3",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(titles) == 3 and all(t.endswith("paper-64, seed 3") for t in titles), titles
    for name in ("jct_cdf.png", "latency_ratio_cdf.png", "throughput.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
