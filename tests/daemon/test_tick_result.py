"""A tick's figures: what the service logs and the benchmarks time of every tick."""

from __future__ import annotations

from hopsd.daemon.tick_result import TickResult


def test_the_figures_are_each_steps_cost_in_order_and_the_slurm_calls() -> None:
    result = TickResult(started_at=1e9, observe_s=0.5, forecast_s=0.25, total_s=1.0, slurm_calls=3)
    steps = ["observe", "reconcile", "resume", "decide", "record", "enact", "forecast", "total"]
    assert list(result.figures()) == [f"{step}_s" for step in steps] + ["slurm_calls"]
    assert result.figures()["observe_s"] == 0.5
    assert result.figures()["forecast_s"] == 0.25
    assert result.figures()["slurm_calls"] == 3
