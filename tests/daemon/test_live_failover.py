"""Failover on the live test cluster: two hopsd on one PostgreSQL ledger (a short run of
``benchmarks/failover.py``): the leader SIGKILLed twice and paused once, the standby
takes over within the lease time plus one tick, nothing lost, started twice or enacted
by the fenced daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_live import LIVE

pytestmark = [*LIVE, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "failover.py"


def test_standby_takes_over_twice_and_the_paused_leader_is_fenced() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--jobs", "3", "--database", "hops_failover_t"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if "could not connect" in done.stderr or "Connection refused" in done.stderr:
        pytest.skip("PostgreSQL on 127.0.0.1:5432 unreachable")
    assert done.stdout.strip(), done.stderr[-3000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["jobs"] == 3
    assert len(figures["takeover_s"]) == 3  # two kills and a pause
    assert figures["takeover_s_max"] <= figures["lease_ttl_s"] + figures["tick_s"], figures
    assert figures["lost"] == 0 and figures["started_twice"] == 0, figures
    assert figures["enacted_by_fenced"] == 0 and figures["pending_intents_left"] == 0, figures
    assert done.returncode == 0, done.stderr[-3000:]
