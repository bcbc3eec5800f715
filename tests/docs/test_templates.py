"""The launch templates of examples/templates: hops submit accepts each, and the
plain-Python job trains, checkpoints and resumes with nothing but the probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hops_cli.submit_args import check_options, read_script

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "examples" / "templates"
SCRIPTS = ("python.sh", "torchrun.sh", "srun.sh", "lightning.sh")


@pytest.mark.parametrize("name", SCRIPTS)
def test_hops_submit_takes_the_template_and_bash_parses_it(name: str) -> None:
    script = read_script(str(TEMPLATES / name))  # executable, directives readable
    check_options(script.directives, name)  # no --gres/--gpus/--hold/--requeue/--comment
    assert "--open-mode=append" in script.directives
    subprocess.run(["bash", "-n", str(TEMPLATES / name)], check=True)


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_user_guide_lists_the_template(name: str) -> None:
    assert f"`{name}`" in (REPO / "docs" / "user-guide.md").read_text()


def _train(work: Path, samples: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOPS_", "SLURM_"))}
    env.update(HOPS_TOTAL_SAMPLES=str(samples), HOPS_BATCH_SIZE="16", SLURM_JOB_ID="7")
    done = subprocess.run(
        [sys.executable, str(TEMPLATES / "train.py")],
        cwd=work, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_plain_python_job_trains_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    first = _train(tmp_path, 4000)
    assert "start at 0/4000" in first and "done: 4000 samples" in first
    saved = json.loads((tmp_path / "checkpoint-7.json").read_text())
    assert saved["samples"] == 4000
    again = _train(tmp_path, 20000)  # the same job id: a later run resumes
    assert "start at 4000/20000" in again and "done: 20000 samples" in again
    loss = float(again.rsplit("loss ", 1)[1])
    assert loss < 0.1  # it learns sin(3x)
