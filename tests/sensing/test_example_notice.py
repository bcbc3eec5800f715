"""``examples/train_synthetic.py`` checkpoints at once on hops's notice, and says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_synthetic.py"


def test_the_example_saves_and_reports_a_checkpoint_when_given_notice(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_JOB_ID": "7", "HOPS_SPOOL_DIR": str(tmp_path),
           "HOPS_PROBE_FLUSH_S": "0.5"}  # fmt: skip
    job = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--samples", "10000000", "--checkpoint-every", "3600"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(2.0)
        checkpoint = tmp_path / "train-7.ckpt"
        assert not checkpoint.exists()  # no checkpoint of its own yet (every hour)
        job.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not checkpoint.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        saved = json.loads(checkpoint.read_text())["samples"]
        time.sleep(1.0)
        assert json.loads(checkpoint.read_text())["samples"] == saved > 0  # it trains no further
        records = [json.loads(x) for x in (tmp_path / "7.jsonl").read_text().splitlines()]
        last = records[-1]
        assert last["kind"] == "checkpoint" and last["samples_done"] == saved
        assert job.poll() is None  # still there for hops to requeue
    finally:
        job.kill()
        job.wait(timeout=10)
