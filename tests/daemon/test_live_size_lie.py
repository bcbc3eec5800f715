"""Live, as two Unix users: a job that lies about its size gains nothing once it is caught.

On the Slurm test cluster both users submit through ``hops submit`` a job that
runs ten minutes (``sleep``, no probe) on the two k80 GPUs (``--types k80
--gpus 2``), so only one of them runs at a time:

* ``hopsvictor`` submits honestly first (20000 samples: 100 s at the table's
  200 samples/s on two k80s) and runs;
* ``hopsmallory`` then claims ``--samples 64`` (0.3 s of work). Believed, the
  claim makes its expected run time a fraction of a second, so its latency
  ratio soars and the next round preempts the victim for it. Before hops
  checked claims, nothing ever caught the lie: the attacker kept the GPUs for
  as long as its job ran, the victim waited.

With the check (here 2x the claim plus ``size_check_slack_s = 4``) hopsd stops
believing the claim a few seconds into the attacker's run, sizes the job from
its 10-minute time limit, says so (``hops show``), and the victim gets its
GPUs back at the next round, as against an honest submission of that size.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from daemon_live import LIVE, LiveEnv, drive
from live_users import ATTACKER, VICTIM, hops_submit_as, shared_env
from test_live_two_users import users  # noqa: F401 - a fixture
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.core.sizeclaim import DOUBT
from hopsd.daemon.tick import Tick

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the users' accounts needs root"),
]


@pytest.fixture
def env(users: None) -> Iterator[LiveEnv]:  # noqa: F811 - the fixture imported above
    # the users' jobs read their scripts here
    with shared_env("hops-size-lie-", scheduler="size_check_slack_s = 4.0") as live:
        yield live


def submit_as(
    env: LiveEnv, monkeypatch: pytest.MonkeyPatch, user: str, label: str, samples: int
) -> int:
    """``hops submit`` of a ten-minute ``sleep`` with ``user``'s identity for Slurm."""
    script = env.root / f"{label}.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH -J {env.prefix}{label}\n#SBATCH -o /dev/null\n"
        "#SBATCH -t 10\nsleep 600\n"
    )
    args = ["--gpus", "2", "--types", "k80", "--samples", str(samples)]
    return hops_submit_as(env, monkeypatch, user, script, args)


def running(env: LiveEnv) -> set[int]:
    return {j.job_id for j in env.port.list_jobs() if j.running}


def test_a_size_lie_is_caught_and_gains_nothing_over_an_honest_job(
    env: LiveEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    honest = submit_as(env, monkeypatch, VICTIM, "honest", 20000)
    assert drive(tick.run_once, lambda: honest in running(env), 30), "the honest job never ran"
    liar = submit_as(env, monkeypatch, ATTACKER, "liar", 64)
    # believed at first, the lie buys the GPUs: the honest job is preempted for it
    assert drive(tick.run_once, lambda: liar in running(env), 30), "the lie bought nothing"
    assert honest not in running(env)
    # caught a few seconds into its run, the liar ranks as a 10-minute job: the honest
    # job, waiting, gets its GPUs back
    back = lambda: honest in running(env) and liar not in running(env)  # noqa: E731
    assert drive(tick.run_once, back, 40), (
        f"the liar kept the GPUs: running {sorted(running(env))}, "
        f"liar's doubt {env.rows()[liar].size_doubt!r}"
    )
    doubt = env.rows()[liar].size_doubt
    assert doubt.startswith(f"{DOUBT}: ran about ") and "time limit (600 s)" in doubt
    assert env.rows()[honest].size_doubt == ""  # the honest claim stays believed
    for _ in range(12):  # and it keeps them: over more rounds the liar does not win again
        tick.run_once()
        assert liar not in running(env)
        time.sleep(1.0)
    shown = CliRunner().invoke(app, ["--config", str(env.config_path), "show", str(liar)])
    assert f"SizeClaim={DOUBT}" in shown.stdout, shown.output
