"""``hops status`` with a real hopsd in shadow mode, then stopped, on the test cluster.

A shadow hopsd plans and records its reasons but enacts nothing: status must say
so and show what it would do per job, while the job stays held in Slurm. Once
hopsd is gone (its lease released), status must say hopsd is not running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
from daemon_live import LIVE, LiveEnv, drive, hopsd_process

from hops_cli.main import app

pytestmark = LIVE
runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveEnv]:
    live = LiveEnv.create(tmp_path)
    monkeypatch.setenv("HOPS_CONF", str(live.config_path))
    yield live
    live.cleanup()


def _status() -> dict[str, Any]:
    result = runner.invoke(app, ["status", "--all", "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def _slurm_state(job: int) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", str(job), "-o", "%T"], capture_output=True, text=True, timeout=20
    )
    return out.stdout.strip()


def test_status_shows_shadow_decisions_then_hopsd_not_running(env: LiveEnv) -> None:
    job = env.submit((1,), 2000.0, label="shadow")
    daemon = hopsd_process(env, args=("--shadow",))
    seen: dict[str, Any] = {}

    def look() -> None:
        seen.update(_status())

    def planned() -> bool:
        reasons = [j["reason"] or "" for j in seen.get("jobs", []) if j["job_id"] == job]
        return seen.get("daemon", {}).get("mode") == "shadow" and any(
            r.startswith("shadow: would") for r in reasons
        )

    try:
        assert drive(look, planned, 90.0), (seen, (env.root / "hopsd.log").read_text()[-2000:])
        assert _slurm_state(job) == "PENDING"  # shadow: nothing enacted, still held
        table = runner.invoke(app, ["status", "--all"]).stdout
        assert "shadow mode" in table
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    stopped = _status()
    assert stopped["daemon"]["mode"] == "stopped"
    mine = next(j for j in stopped["jobs"] if j["job_id"] == job)
    assert mine["reason"].startswith("hopsd not running")
    assert "hopsd is not running" in runner.invoke(app, ["status", "--all"]).stdout
