"""Live, as an unprivileged user: a job that appends to its report without bound does not
fill hopsd's spool.

The job (``hopsmallory``'s, submitted with ``sbatch`` as that user) appends
2 MiB to its report every 0.2 s (10 MiB/s) once placed. hopsd empties the
report each tick it finds it above its quota and tells the owner in ``hops
status``; the test samples the file's size and disk use meanwhile, and prints
them. Before, hopsd stopped reading the file at its limit but let it grow.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from daemon_live import LIVE, LiveEnv, drive, hopsd_process
from live_users import shared_env, submit_script_as
from test_live_hostile import status_of

from hopsd.daemon.sensing import MAX_FILE_BYTES
from hopsd.ledger.models import JobState

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the attacker's account needs root"),
]

RATE_MIB_S = 10
# written at most this much in all (the job gives up then), so a hopsd without the
# quota cannot fill the test machine's disk either
CAP_MIB = 400
FLOOD = (
    "chunk=$(head -c 2097152 /dev/zero | tr '\\0' 'x')\n"
    f"for i in $(seq {CAP_MIB // 2}); do\n"
    '  printf "%s\\n" "$chunk" >> "$HOPS_SPOOL_DIR/$SLURM_JOB_ID.jsonl"; sleep 0.2\n'
    "done\nsleep 300\n"
)


@pytest.fixture
def env() -> Iterator[LiveEnv]:
    with shared_env("hops-quota-") as live:
        yield live


def submit_flood(env: LiveEnv, user: str) -> int:
    return submit_script_as(env, user, "flood", FLOOD)


def test_a_report_past_its_quota_is_emptied_while_the_job_runs(env: LiveEnv, attacker: str) -> None:
    daemon = hopsd_process(env)
    try:
        job = submit_flood(env, attacker)
        report = env.spool_of(attacker) / f"{job}.jsonl"

        def running() -> bool:
            row = env.rows().get(job)
            return row is not None and row.state == JobState.RUNNING

        assert drive(lambda: None, running, deadline_s=60), (env.root / "hopsd.log").read_text()
        sizes: list[int] = []
        used: list[int] = []
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if report.exists():
                info = report.stat()
                sizes.append(info.st_size)
                used.append(info.st_blocks * 512)
            time.sleep(0.2)
        assert daemon.poll() is None, "hopsd died"
        tick = env.config.queue_refresh_s
        bound = MAX_FILE_BYTES + RATE_MIB_S * 2**20 * (2 * tick + 2.0)
        written = RATE_MIB_S * 30 * 2**20
        print(
            f"\nspool quota: wrote ~{written / 2**20:.0f} MiB in 30 s; report max "
            f"{max(sizes) / 2**20:.1f} MiB, disk max {max(used) / 2**20:.1f} MiB "
            f"(quota {MAX_FILE_BYTES / 2**20:.0f} MiB, bound {bound / 2**20:.1f} MiB)"
        )
        assert max(used) <= bound and max(sizes) <= bound
        shown = status_of(env, job)
        assert "emptied" in str(shown["problem"]) and shown["user"] == attacker
        log = (env.root / "hopsd.log").read_text()
        assert "event=tick-failed" not in log
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
