"""The hops command end to end, with the daemon scheduling on the live test cluster.

`hops submit` a job, let hopsd place it, read it back with `hops status` and
`hops fairness`, `hops cancel` a second job, and see the ledger follow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon_live import LIVE, LiveEnv, drive, hops_submit
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import JobState

pytestmark = LIVE

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    live = LiveEnv.create(tmp_path)
    monkeypatch.setenv("HOPS_CONF", str(live.config_path))
    yield live
    live.cleanup()


def status(*args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["status", "--all", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_submit_status_fairness_cancel_with_hopsd(env: LiveEnv) -> None:
    short = hops_submit(env, "short", 2400, "1,2")  # runs a few s: seen running
    long = hops_submit(env, "long", 10**7, "1")
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())

    def both_running() -> bool:
        jobs = {j["job_id"]: j for j in status()["jobs"]}
        return all(jobs.get(j, {}).get("state") == "running" for j in (short, long))

    assert drive(tick.run_once, both_running, deadline_s=60)
    jobs = {j["job_id"]: j for j in status()["jobs"]}
    for job in (short, long):
        assert jobs[job]["gpus"] in (1, 2) and jobs[job]["gpu_type"] in ("k80", "v100", "a100")
        assert sum(jobs[job]["nodes"].values()) == jobs[job]["gpus"]

    fairness = runner.invoke(app, ["fairness", "--json"])
    assert fairness.exit_code == 0, fairness.output
    listed = {j["job_id"] for j in json.loads(fairness.stdout)["jobs"]}
    assert {short, long} <= listed

    cancelled = runner.invoke(app, ["cancel", str(long)])
    assert cancelled.exit_code == 0, cancelled.output

    def settled() -> bool:
        rows = env.rows()
        return rows[long].state == JobState.CANCELLED and rows[short].state == JobState.DONE

    assert drive(tick.run_once, settled, deadline_s=90)
    remaining = {j["job_id"] for j in status()["jobs"]}
    assert short not in remaining and long not in remaining
    after = json.loads(runner.invoke(app, ["fairness", "--json"]).stdout)
    assert after["finished_in_window"] >= 1
