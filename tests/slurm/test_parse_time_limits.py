"""Time limits and hold kinds as recorded from ``squeue --json`` on Slurm 22.05 and 24.11.

Both recordings hold the same jobs, submitted on the release's test cluster:

* a job of ``hopsvictor`` submitted ``--hold`` (a user hold), then held again by
  root (``scontrol hold``): an admin hold, ``JobHeldAdmin``, no time limit;
* ``--hold --time=7``: a user hold, ``JobHeldUser``, 7 minutes;
* ``--time=1-02:03:00``, running: 1563 minutes;
* no ``--time``, running: 22.05 prints 525600 minutes (the year Slurm gives an
  unlimited job), 24.11 an infinite number.

22.05's recording also keeps the cancelled jobs of an earlier run of the same
commands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import SlurmJob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def live(release: str) -> list[SlurmJob]:
    jobs = parse_jobs((FIXTURES / f"squeue_time_limits.{release}.json").read_text())
    return sorted((j for j in jobs if j.state != "CANCELLED"), key=lambda j: j.job_id)


@pytest.mark.parametrize(
    ("release", "unlimited_running"), [("22.05", 525600 * 60.0), ("24.11", None)]
)
def test_time_limits_in_seconds(release: str, unlimited_running: float | None) -> None:
    admin_held, user_held, limited, unlimited = live(release)
    assert admin_held.time_limit_s is None  # pending, no --time: none known yet
    assert user_held.time_limit_s == 7 * 60.0
    assert limited.running and limited.time_limit_s == 1563 * 60.0
    assert unlimited.running and unlimited.time_limit_s == unlimited_running


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_an_admin_hold_is_told_from_a_users_own(release: str) -> None:
    admin_held, user_held, _, _ = live(release)
    assert admin_held.user == "hopsvictor" and admin_held.held
    assert admin_held.reason == "JobHeldAdmin"
    assert user_held.held and user_held.reason == "JobHeldUser"
