"""Live: an unprivileged user's job attacks hopsd through its spool files; hopsd shrugs.

On the Slurm test cluster, a real ``hopsd`` process schedules the jobs of two
users. The attacker (an unprivileged Unix user, running ``sbatch`` as
themselves) submits a hops job that, once placed, either writes ``'[' * 20000``
into its progress file or keeps appending deeply nested lines to its report.
hopsd must keep running and keep scheduling the other user's job to
completion, and ``hops status`` must show the attacker's job with the reason
its input was refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process
from live_users import shared_env, submit_script_as
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.ledger.models import JobState

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the attacker's account needs root"),
]

NESTED = "head -c {n} /dev/zero | tr '\\0' '['"
ATTACKS = {
    # one write of the file hopsd parses for jobs without the probe
    "progress": f'{NESTED.format(n=20000)} > "$HOPS_SPOOL_DIR/$SLURM_JOB_ID.progress.json"\n'
    "sleep 300\n",
    # a stream of nested lines into the probe's report, one every half second
    "report": f"line=$({NESTED.format(n=10000)})\n"
    'while true; do echo "$line" >> "$HOPS_SPOOL_DIR/$SLURM_JOB_ID.jsonl"; sleep 0.5; done\n',
}


@pytest.fixture
def env() -> Iterator[LiveEnv]:
    # the attacker's job reads its script here; hopsd gives every user a directory in its spool
    with shared_env("hops-hostile-") as live:
        yield live


def submit_attack(env: LiveEnv, user: str, attack: str) -> int:
    return submit_script_as(env, user, "attack", ATTACKS[attack])


def status_of(env: LiveEnv, job: int) -> dict[str, object]:
    result = CliRunner().invoke(
        app, ["--config", str(env.config_path), "status", "--all", "--json"]
    )
    assert result.exit_code == 0, result.output
    jobs = {j["job_id"]: j for j in json.loads(result.stdout)["jobs"]}
    return jobs[job]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_job_leaves_hopsd_scheduling_everyone_else(
    env: LiveEnv, attacker: str, attack: str
) -> None:
    daemon = hopsd_process(env)
    try:
        bad = submit_attack(env, attacker, attack)

        def refused() -> bool:
            row = env.rows().get(bad)
            return row is not None and "nested deeper" in row.input_problem

        assert drive(lambda: None, refused, deadline_s=60), (env.root / "hopsd.log").read_text()
        assert daemon.poll() is None, "hopsd died"
        honest = env.submit((1, 2), 400, label="honest")
        done = lambda: honest in env.rows() and env.rows()[honest].state == JobState.DONE  # noqa: E731
        assert drive(lambda: None, done, deadline_s=90), (env.root / "hopsd.log").read_text()
        time.sleep(2)  # several more ticks with the attack going on
        assert daemon.poll() is None, "hopsd died"
        row = env.rows()[bad]
        assert row.user == attacker and row.state == JobState.RUNNING
        shown = status_of(env, bad)
        assert shown["user"] == attacker and "nested deeper" in str(shown["problem"])
        log = (env.root / "hopsd.log").read_text()
        assert "RecursionError" not in log and "event=tick-failed" not in log
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
