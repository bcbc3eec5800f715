"""``hops db prune``: removes old history from a real (SQLite) ledger, keeps the jobs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import JobRow, JobState, RoundRow
from hopsd.ledger.retention import DAY_S
from hopsd.ledger.rounds import RoundSummary, record_round

runner = CliRunner()


def test_db_prune_uses_days_and_keeps_job_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\nretention_days = 30\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    now = time.time()
    with sessions.begin() as s:
        job = add_job(s, JobSpec("1", "alice", (1,), 100.0, now - 40 * DAY_S), now - 40 * DAY_S)
        job.state = JobState.DONE
        for number, age in ((1, 40), (2, 20), (3, 1)):
            record_round(s, RoundSummary(number=number, started_at=now - age * DAY_S))

    def rounds() -> list[int]:
        with sessions() as s:
            return sorted(s.scalars(select(RoundRow.number)))

    result = runner.invoke(app, ["db", "prune"])  # [ledger] retention_days = 30
    assert result.exit_code == 0, result.output
    assert "removed 1 rounds" in result.stdout
    assert rounds() == [2, 3]
    result = runner.invoke(app, ["db", "prune", "--days", "10", "--batch", "1"])
    assert result.exit_code == 0 and "removed 1 rounds" in result.stdout
    assert rounds() == [3]
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(JobRow)) == 1
    refused = runner.invoke(app, ["db", "prune", "--days", "0"])
    assert refused.exit_code == 2
    engine.dispose()
