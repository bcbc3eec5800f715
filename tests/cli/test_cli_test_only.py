"""``hops submit --test-only``: the job's predicted start and finish, nothing submitted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.config import load_config

runner = CliRunner()


def _ask(tmp_path: Path, *args: str) -> dict[str, Any]:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\npython train.py\n")
    script.chmod(0o755)
    result = runner.invoke(app, ["submit", str(script), *args, "--test-only", "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_test_only_forecasts_each_type_and_count_and_submits_nothing(
    tmp_path: Path, ledger: str, port: Any
) -> None:
    """Free V100s: the job starts once hopsd sees it, and trains at the type table's rate
    (a job hops never saw); the A100s are held by a job hops does not manage, so it
    never starts there within the forecast."""
    config = load_config(os.environ["HOPS_CONF"])
    settings = config.settings()
    known = config.gpu_types.get("v100")
    rate = settings.reference_throughput * (known.speed if known else 1.0)
    payload = _ask(tmp_path, "--gpus", "2,4", "--samples", "24000", "--types", "v100")
    assert port.submitted == []
    rows = {(o["gpu_type"], o["gpus"]): o for o in payload["options"]}
    assert set(rows) == {("v100", 2), ("v100", 4)}
    soon = config.queue_refresh_s + settings.round_length_s + 1.0
    for (_, gpus), row in rows.items():
        assert row["start_in_s"] is not None and row["start_in_s"] <= soon
        assert row["end_at"] - row["start_at"] == pytest.approx(24000 / (gpus * rate), rel=0.02)
    expected = payload["expected"]
    assert expected["gpu_type"] == "v100" and expected["gpus"] in (2, 4)

    blocked = _ask(tmp_path, "--gpus", "4", "--samples", "24000", "--types", "a100")
    assert [(o["gpu_type"], o["start_at"]) for o in blocked["options"]] == [("a100", None)]
    assert blocked["expected"]["start_at"] is None and blocked["expected"]["end_at"] is None


def test_test_only_prints_a_line_per_option(tmp_path: Path, ledger: str, port: Any) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\npython train.py\n")
    script.chmod(0o755)
    args = ["--gpus", "1,2", "--samples", "5000", "--types", "k80,v100", "--test-only"]
    result = runner.invoke(app, ["submit", str(script), *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("not submitted;")
    assert any(line.split()[0] == "expected" for line in lines[1:])
    assert sum(1 for line in lines if " GPUs  start " in line) == 1 + 4
    assert port.submitted == []
