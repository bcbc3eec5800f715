"""What users see of refused input: one ``hops:`` line for bad options, the reason in status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_scripts import train_script
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import get_job

runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        ["--samples", "nan"],
        ["--samples", "inf"],
        ["--samples", "-inf"],
        ["--epochs", "nan", "--dataset-size", "10"],
        ["--epochs", "inf", "--dataset-size", "10"],
        ["--samples", "10", "--lr", "nan"],
        ["--samples", "10", "--params", "inf"],
        ["--samples", "10", "--bogus"],
        ["--samples", "10", "--batch-size", "x"],
    ],
)
def test_non_finite_or_malformed_options_are_one_line_exit_2(
    tmp_path: Path, port: Any, args: list[str]
) -> None:
    result = runner.invoke(app, ["submit", str(train_script(tmp_path)), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hops: "), result.stderr
    assert "Traceback" not in result.output
    assert port.submitted == []


def test_an_oversized_sbatch_line_is_refused(tmp_path: Path, port: Any) -> None:
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/bash\n#SBATCH -J " + "x" * 10_000 + "\npython train.py\n")
    path.chmod(0o755)
    result = runner.invoke(app, ["submit", str(path), "--samples", "10"])
    assert result.exit_code == 2 and "longer than" in result.stderr
    assert port.submitted == []


def test_a_bare_hops_still_prints_help() -> None:
    result = runner.invoke(app, [])
    assert "Usage" in result.output and "hops:" not in result.output


def set_problem(url: str, job_id: str, problem: str, samples_done: float | None = None) -> None:
    engine = make_engine(url)
    with make_sessionmaker(engine).begin() as s:
        row = get_job(s, job_id)
        assert row is not None
        row.input_problem = problem
        if samples_done is not None:
            row.samples_done = samples_done
    engine.dispose()


def test_status_shows_the_reason_a_jobs_input_was_refused(ledger: str, port: Any) -> None:
    set_problem(
        ledger, "j102", "progress file ignored: progress file is nested deeper than 2 levels"
    )
    payload = json.loads(runner.invoke(app, ["status", "--all", "--json"]).stdout)
    jobs = {j["job_id"]: j for j in payload["jobs"]}
    assert jobs[101]["problem"] is None
    assert "nested deeper" in jobs[102]["problem"]
    table = runner.invoke(app, ["status", "--all"])
    assert table.exit_code == 0, table.output
    assert "job 102: progress file ignored: progress file is nested deeper" in table.stdout


def test_status_json_stays_standard_with_a_non_finite_value(ledger: str, port: Any) -> None:
    set_problem(ledger, "j101", "", samples_done=float("inf"))
    result = runner.invoke(app, ["status", "--all", "--json"])
    assert result.exit_code == 0, result.output
    assert "Infinity" not in result.stdout and "NaN" not in result.stdout
    jobs = {j["job_id"]: j for j in json.loads(result.stdout)["jobs"]}
    assert jobs[101]["samples_done"] is None
