"""``hops submit --types/--exclude-types/--no-preempt``: tagged when sound, refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_scripts import train_script
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.slurm.tag import decode

runner = CliRunner()


def test_constraints_and_no_preempt_reach_the_tag(tmp_path: Path, port: Any) -> None:
    args = ["--gpus", "1,2", "--samples", "1000", "--types", "a100,v100", "--exclude-types", "v100"]
    result = runner.invoke(app, ["submit", str(train_script(tmp_path)), *args, "--no-preempt"])
    assert result.exit_code == 0, result.output
    tag = port.submitted[0]["tag"]
    assert tag.types == ("a100", "v100") and tag.exclude_types == ("v100",) and tag.no_preempt
    assert decode(tag.encode()) == tag


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--types", "a100,h100"],
            "hops: hopsd would refuse this job: unknown GPU type h100 "
            "(managed types: a100, k80, v100)",
        ),
        (
            ["--types", "k80", "--exclude-types", "k80"],
            "hops: hopsd would refuse this job: "
            "--types and --exclude-types leave no GPU type to run on",
        ),
        (
            ["--exclude-types", "k80,v100,a100"],
            "hops: hopsd would refuse this job: "
            "--types and --exclude-types leave no GPU type to run on",
        ),
        (
            ["--gpus", "8", "--exclude-types", "v100", "--no-preempt"],
            "hops: hopsd would refuse this job: smallest demand 8 GPUs exceeds the largest "
            "configuration of the GPU types it may run on (a100, k80) (4 GPUs)",
        ),
        (["--types", "a100,,a100"], "hops: --types: a GPU type is named twice"),
    ],
)
def test_bad_constraints_are_refused_in_one_line(
    tmp_path: Path, port: Any, args: list[str], line: str
) -> None:
    result = runner.invoke(app, ["submit", str(train_script(tmp_path)), "--samples", "1000", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == line
    assert port.submitted == []
