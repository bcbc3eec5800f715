"""``hops submit --test-only``: the job's predicted start and finish, nothing submitted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.config import load_config

runner = CliRunner()


def _ask(tmp_path: Path, *args: str) -> dict[str, Any]:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\npython train.py\n")
    script.chmod(0o755)
    result = runner.invoke(app, ["submit", str(script), *args, "--test-only", "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_test_only_forecasts_each_type_and_count_and_submits_nothing(
    tmp_path: Path, ledger: str, port: Any
) -> None:
    """Free V100s: the job starts once hopsd sees it, and trains at the type table's rate
    (a job hops never saw); the A100s are held by a job hops does not manage, so it
    never starts there within the forecast."""
    config = load_config(os.environ["HOPS_CONF"])
    settings = config.settings()
    known = config.gpu_types.get("v100")
    rate = settings.reference_throughput * (known.speed if known else 1.0)
    payload = _ask(tmp_path, "--gpus", "2,4", "--samples", "24000", "--types", "v100")
    assert port.submitted == []
    rows = {(o["gpu_type"], o["gpus"]): o for o in payload["options"]}
    assert set(rows) == {("v100", 2), ("v100", 4)}
    soon = config.queue_refresh_s + settings.round_length_s + 1.0
    for (_, gpus), row in rows.items():
        assert row["start_in_s"] is not None and row["start_in_s"] <= soon
        assert row["end_at"] - row["start_at"] == pytest.approx(24000 / (gpus * rate), rel=0.02)
    expected = payload["expected"]
    assert expected["gpu_type"] == "v100" and expected["gpus"] in (2, 4)

    blocked = _ask(tmp_path, "--gpus", "4", "--samples", "24000", "--types", "a100")
    assert [(o["gpu_type"], o["start_at"]) for o in blocked["options"]] == [("a100", None)]
    assert blocked["expected"]["start_at"] is None and blocked["expected"]["end_at"] is None


def test_test_only_prints_a_line_per_option(tmp_path: Path, ledger: str, port: Any) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\npython train.py\n")
    script.chmod(0o755)
    args = ["--gpus", "1,2", "--samples", "5000", "--types", "k80,v100", "--test-only"]
    result = runner.invoke(app, ["submit", str(script), *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("not submitted;")
    assert any(line.split()[0] == "expected" for line in lines[1:])
    assert sum(1 for line in lines if " GPUs  start " in line) == 1 + 4
    assert port.submitted == []


def test_jobs_slurm_has_but_hopsd_has_not_adopted_yet_are_ahead_in_the_forecast(
    tmp_path: Path, ledger: str, port: Any
) -> None:
    """A tagged job submitted a moment ago (pending in Slurm, not in the ledger yet) that
    wants every free V100 for long is served first: the asked job starts after it."""
    from test_cli_cancel import job as slurm_job

    from hopsd.slurm.tag import HopsTag

    alone = _ask(tmp_path, "--gpus", "4", "--samples", "24000", "--types", "v100")
    port.jobs = [slurm_job(900, tag=HopsTag((6,), 6e6, types=("v100",)), submit_time=1.0)]
    behind = _ask(tmp_path, "--gpus", "4", "--samples", "24000", "--types", "v100")
    assert behind["queued_jobs"] == alone["queued_jobs"] + 1
    assert alone["expected"]["start_in_s"] is not None
    late = behind["expected"]["start_at"]
    assert late is None or late > alone["expected"]["end_at"]


def test_a_job_naming_a_known_model_is_assumed_at_what_that_model_measured(
    tmp_path: Path, ledger: str
) -> None:
    """An earlier resnet50 job (batch 32) measured 0.2 s per iteration on a V100: the
    asked job runs at 160 samples/s per V100, and a K80 at that scaled by the speeds."""
    from hopsd.core.model import Cluster, GpuType, Node
    from hopsd.core.throughput import Mixture, PhaseProfile
    from hopsd.daemon.test_only import assumed_rates
    from hopsd.ledger.engine import make_engine, make_sessionmaker
    from hopsd.ledger.models import JobRow
    from hopsd.ledger.throughput_store import SqlThroughputStore
    from hopsd.ledger.unit import Ledger
    from hopsd.slurm.tag import HopsTag

    engine = make_engine(ledger)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        row = session.get(JobRow, "j101")
        assert row is not None
        row.model_name, row.batch_size = "resnet50", 32
        profile = PhaseProfile(0.06, 0.12, 0.02, 1, Mixture.constant(0.0))
        SqlThroughputStore(session, 0.0).set_profile("j101", "v100", profile, iterations=20)
    cluster = Cluster.build(
        [GpuType("k80", speed=1.0), GpuType("v100", speed=2.0)],
        [Node("k80n1", "k80", 2), Node("v100n1", "v100", 4)],
    )
    table = {"k80": 100.0, "v100": 200.0}
    with Ledger(sessions).reading() as unit:
        known = assumed_rates(unit, cluster, HopsTag((1,), 1e4, 32, "resnet50", 0.0), table)
        never = assumed_rates(unit, cluster, HopsTag((1,), 1e4, 32, "bert", 0.0), table)
    engine.dispose()
    assert known["v100"] == pytest.approx(32 / 0.2, rel=1e-6)
    assert known["k80"] == pytest.approx(known["v100"] / 2, rel=1e-6)
    assert never == table
