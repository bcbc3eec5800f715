"""hops status/show/history on a ledger with a story: finished jobs, moves, hopsd's lease.

The ledger is written through the ledger's unit of work as hopsd writes it;
the commands run in-process through typer's runner against a recording Slurm.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_cancel import job as slurm_job
from test_cli_commands import check_golden, runner

from hops_cli.main import app
from hopsd.core.model import Configuration
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.records import (
    AllocationReason,
    JobSpec,
    JobState,
    JobUpdate,
    Prediction,
    RoundSummary,
)
from hopsd.ledger.unit import Ledger, Unit

V100 = Configuration.of("v100", {"v100n1": 2})
A100 = Configuration.of("a100", {"a100n1": 1})


def _job(unit: Unit, n: int, user: str, at: float) -> str:
    spec = JobSpec(
        f"j{n}",
        user,
        (1, 2),
        1e6,
        at,
        slurm_job_id=n,
        account="ml",
        script_path=f"/home/{user}/train{n}.sh",
        model_name="resnet50",
    )
    unit.add_job(spec, at)
    unit.transition(f"j{n}", JobState.QUEUED, at)
    return f"j{n}"


def _ran(unit: Unit, job: str, start: float, end: float | None, state: JobState) -> None:
    """Started on 2 V100s, moved to 1 A100 halfway, ended (or still running)."""
    unit.transition(job, JobState.RUNNING, start)
    unit.set_placement(job, V100)
    unit.record_allocation(None, job, AllocationReason.START, V100, start)
    unit.open_run(job, 0, "run", V100, start + 5)
    half = start + 1800
    unit.record_allocation(None, job, AllocationReason.MOVE, A100, half)
    unit.set_placement(job, A100)
    unit.close_run(job, half + 3, "moved")
    unit.open_run(job, 1, "run", A100, half + 20)
    if end is not None:
        unit.close_run(job, end, "completed" if state == JobState.DONE else "failed", 0)
        unit.record_allocation(None, job, AllocationReason.END, None, end)
        unit.transition(job, state, end, reason="exit 0" if state == JobState.DONE else "")


@pytest.fixture
def story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """Job 201 done (1 h: 0.5 h on 2 V100, 0.5 h on 1 A100), 202 cancelled before it ran,
    203 running, 204 and 205 waiting (205 with the higher LR)."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    ledger = Ledger.open(url)
    now = time.time()
    with ledger.unit() as unit:  # jobs first: allocations refer to committed job rows
        done = _job(unit, 201, "alice", now - 7200)
        never = _job(unit, 202, "bob", now - 5000)
        running = _job(unit, 203, "alice", now - 4000)
        waiting = [(_job(unit, n, "bob", now - 1000 + n), lr) for n, lr in ((204, 0.5), (205, 2.0))]
    with ledger.unit() as unit:
        _ran(unit, done, now - 6600, now - 3000, JobState.DONE)
        unit.update_job(
            JobUpdate(
                done,
                latency_ratio=0.5,
                wait_time=600.0,
                restarts=1,
                plan_reason="running on a100 a100n1:1",
            )
        )
        unit.transition(never, JobState.CANCELLED, now - 4000)
        unit.update_job(JobUpdate(never, latency_ratio=40.0, wait_time=1000.0))
        _ran(unit, running, now - 3600, None, JobState.RUNNING)
        unit.update_job(
            JobUpdate(running, samples_done=5e5, wait_time=400.0, plan_reason="running on a100")
        )
        for job, lr in waiting:
            unit.update_job(JobUpdate(job, latency_ratio=lr, plan_reason="queued: position"))
    with ledger.unit() as unit:  # hopsd's forecasts: an older one of 205, then the newest
        unit.record_predictions(
            [
                Prediction(running, now - 60, "running", None, now + 900),
                Prediction(waiting[1][0], now - 60, "queued", now + 600, now + 2000),
                Prediction(waiting[0][0], now - 60, "queued", None, None),
            ]
        )
        unit.record_predictions(
            [Prediction(waiting[1][0], now - 5, "queued", now + 900, now + 2300)]
        )
    ledger.dispose()
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    monkeypatch.setenv("HOPS_TEST_LEDGER", url)
    yield now


def _daemon(shadow: bool) -> None:
    """hopsd holds the lease and has recorded a round (shadow or not)."""
    import os

    ledger = Ledger.open(os.environ["HOPS_TEST_LEDGER"])
    now = time.time()
    with ledger.unit() as unit:
        assert unit.acquire_lease("host:1", 60.0, now, "hopsd")
        unit.record_round(RoundSummary(number=1, started_at=now, shadow=shadow))
    ledger.dispose()


def _status(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["status", *args, "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_history_json_schema_and_figures(story: float, port: Any) -> None:
    result = runner.invoke(app, ["history", "--all", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    check_golden("history", payload)
    jobs = {j["job_id"]: j for j in payload["jobs"]}
    assert set(jobs) == {201, 202}
    done = jobs[201]
    assert done["jct_s"] == pytest.approx(4200, abs=2) and done["wait_s"] == 600.0
    assert done["restarts"] == 1 and done["latency_ratio"] == 0.5
    # 2 GPUs x 0.5 h on V100, then 1 GPU x 1 h (1800 s to the end... 3600 s) on A100
    assert done["gpu_hours"] == {"a100": 0.5, "v100": 1.0}
    assert jobs[202]["gpu_hours"] == {} and jobs[202]["elapsed_s"] == 0.0


def test_history_filters_and_window(story: float, port: Any) -> None:
    mine = json.loads(runner.invoke(app, ["history", "-u", "bob", "--json"]).stdout)
    assert [j["job_id"] for j in mine["jobs"]] == [202]
    early = json.loads(
        runner.invoke(app, ["history", "--all", "--until", "now-1h", "--json"]).stdout
    )
    assert [j["job_id"] for j in early["jobs"]] == [202]  # 201 ended 50 min ago
    done = runner.invoke(app, ["history", "--all", "-t", "done", "--parsable", "-o", "jobid,gpuh"])
    assert done.stdout.splitlines() == ["JOBID|GPUH", "201|a100:0.50,v100:1.00"]
    bad = runner.invoke(app, ["history", "--since", "yesterday-ish"])
    assert bad.exit_code == 2 and bad.stderr.startswith("hops: --since: not a time")


def test_raqlr_counts_only_jobs_that_ran(story: float, port: Any) -> None:
    # 202 was cancelled before it ran (LR 40 recorded): RAQLR is 201's 0.5 alone
    assert _status("--all")["raqlr"] == 0.5


def test_status_start_estimate_and_queue_order(story: float, port: Any) -> None:
    jobs = {j["job_id"]: j for j in _status("--all")["jobs"]}
    assert set(jobs) == {203, 204, 205}
    assert jobs[205]["queue_position"] == 1 and jobs[204]["queue_position"] == 2
    # START and ETA are the newest forecast recorded: 205 starts when 203 ends; the
    # forecast reached no start of 204
    assert jobs[203]["eta_s"] == pytest.approx(900, abs=30)
    assert jobs[205]["start_in_s"] == pytest.approx(900, abs=30)
    assert jobs[205]["eta_s"] is None and jobs[203]["start_in_s"] is None
    assert jobs[204]["start_in_s"] is None
    assert jobs[203]["name"] == "train203.sh" and jobs[203]["elapsed_s"] >= 3599


def test_status_says_when_hopsd_is_stopped_running_or_in_shadow(story: float, port: Any) -> None:
    stopped = _status("--all")
    assert stopped["daemon"]["mode"] == "stopped"
    assert {j["job_id"]: j["reason"] for j in stopped["jobs"]}[204].startswith("hopsd not running")
    text = runner.invoke(app, ["status", "--all"]).stdout
    assert "hopsd is not running" in text
    _daemon(shadow=True)
    shadow = _status("--all")
    assert shadow["daemon"]["mode"] == "shadow" and shadow["daemon"]["holder"] == "host:1"
    reasons = {j["job_id"]: j["reason"] for j in shadow["jobs"]}
    assert reasons[204] == "shadow: would queued: position"
    assert "shadow mode" in runner.invoke(app, ["status", "--all"]).stdout


def test_status_running_daemon_keeps_recorded_reasons(story: float, port: Any) -> None:
    _daemon(shadow=False)
    payload = _status("--all")
    assert payload["daemon"]["mode"] == "running"
    assert {j["job_id"]: j["reason"] for j in payload["jobs"]}[203] == "running on a100"


def test_status_slurm_filters(story: float, port: Any) -> None:
    port.jobs = [slurm_job(203, "RUNNING", array_tasks="4-7")]  # task 4 inside array 203's record
    assert [j["job_id"] for j in _status("205", "203_4")["jobs"]] == [203, 205]
    assert [j["job_id"] for j in _status("-u", "bob", "-t", "queued")["jobs"]] == [204, 205]
    assert [j["job_id"] for j in _status("--all", "-p", "a100")["jobs"]] == [203]
    assert [j["job_id"] for j in _status("--all", "-t", "done")["jobs"]] == [201]
    bad = runner.invoke(app, ["status", "-t", "sleeping"])
    assert bad.exit_code == 2 and "unknown state sleeping" in bad.stderr


@pytest.mark.parametrize(
    ("command", "task", "expected"),
    [
        (["status"], "203_1", 205),
        (["show"], "203_1", 205),
        (["cancel"], "203_1", 205),
        (["history", "--all"], "200_1", 201),
    ],
)
def test_every_command_reads_an_array_task_as_cancel_does(
    story: float, port: Any, command: list[str], task: str, expected: int
) -> None:
    """Tasks Slurm split off as jobs of their own (as squeue shows a held array in
    tests/fixtures/slurm/squeue_array_held.22.05.json): task 1 of array 203 is job 205,
    task 1 of the finished array 200 is job 201. Every command means that job, not the
    array's."""
    port.jobs = [
        slurm_job(203, array_tasks="2-3"),
        slurm_job(205, array_id="203_1"),
        slurm_job(201, "COMPLETED", array_id="200_1"),
    ]
    json_flag = [] if command == ["cancel"] else ["--json"]
    result = runner.invoke(app, [*command, task, *json_flag])
    assert result.exit_code == 0, result.output
    if command == ["cancel"]:
        assert port.cancelled == [expected]
        return
    payload = json.loads(result.stdout)
    found = [payload["job_id"]] if command == ["show"] else [j["job_id"] for j in payload["jobs"]]
    assert found == [expected]


def test_a_task_slurm_no_longer_lists_names_no_job(story: float, port: Any) -> None:
    port.jobs = [slurm_job(203, array_tasks="2-3")]
    assert _status("203_9")["jobs"] == []
    gone = runner.invoke(app, ["show", "203_9"])
    assert gone.exit_code == 1 and "no such hops job: 203_9" in gone.stderr


@pytest.mark.parametrize("command", ["status", "show", "history", "cancel"])
@pytest.mark.parametrize("text", ["\u00b2", "203_", "_1", "1_2_3", "0", "5;rm"])
def test_what_is_not_a_job_id_is_one_usage_line_everywhere(
    story: float, port: Any, command: str, text: str
) -> None:
    result = runner.invoke(app, [command, text])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("hops: not a Slurm job id") and port.cancelled == []


def test_status_formats_like_squeue(story: float, port: Any) -> None:
    plain = runner.invoke(app, ["status", "--all", "-o", "jobid,name,restarts"]).stdout
    lines = plain.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "RESTARTS"]
    assert lines[1].split() == ["203", "train203.sh", "0"]
    assert not any(c in plain for c in "┏━│┃╇")  # piped: no box drawing
    parsable = runner.invoke(
        app, ["status", "--all", "--noheader", "--parsable", "-o", "JOBID,STATE"]
    ).stdout
    assert parsable.splitlines() == ["203|running", "204|queued", "205|queued"]
    bad = runner.invoke(app, ["status", "-o", "jobid,colour"])
    assert bad.exit_code == 2 and "unknown column COLOUR" in bad.stderr


def test_show_tells_the_story(story: float, port: Any) -> None:
    result = runner.invoke(app, ["show", "201", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    check_golden("show", payload)
    assert [p["change"] for p in payload["placements"]] == ["start", "move", "end"]
    assert payload["placements"][1]["nodes"] == {"a100n1": 1}
    assert payload["state_reason"] == "exit 0" and payload["restarts"] == 1
    assert payload["reason"] == "exit 0"  # finished: how it ended, not "hopsd not running"
    runs = payload["runs"]
    assert [(r["run"], r["nodes"], r["ended"]) for r in runs] == [
        (0, {"v100n1": 2}, "moved"),
        (1, {"a100n1": 1}, "completed"),
    ]
    assert runs[0]["elapsed_s"] == pytest.approx(1798.0, abs=0.1)
    assert runs[1]["end_time"] == pytest.approx(payload["end_time"])
    story_text = runner.invoke(app, ["show", "201"]).stdout
    assert "Run=0 Kind=run Type=v100 Nodes=v100n1:2" in story_text
    assert "Ended=moved" in story_text and "Ended=completed" in story_text
    text = runner.invoke(app, ["show", "205"]).stdout
    assert "JobId=205" in text and "QueuePosition=1" in text and "LR=2.00" in text
    missing = runner.invoke(app, ["show", "999"])
    assert missing.exit_code == 1 and missing.stderr == "hops: no such hops job: 999\n"


def test_fairness_takes_me_and_keeps_mine(story: float, port: Any) -> None:
    for flag in ("--me", "--mine"):
        result = runner.invoke(app, ["fairness", flag, "--json"])
        assert result.exit_code == 0, result.output
    users = json.loads(runner.invoke(app, ["fairness", "-u", "bob", "--json"]).stdout)
    assert {j["user"] for j in users["jobs"]} == {"bob"}
    assert "--mine" not in runner.invoke(app, ["fairness", "--help"]).stdout
