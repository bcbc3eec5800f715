"""CliRunner tests of every hops command: parsing, validation, rendering, --json schemas."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hops_cli.main import app

GOLDEN = Path(__file__).parent / "golden"
runner = CliRunner()


def script(tmp_path: Path, header: str = "", executable: bool = True) -> Path:
    path = tmp_path / "train.sh"
    path.write_text(f"#!/bin/bash\n{header}\npython train.py\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def shape(value: Any) -> Any:
    """The schema of a JSON value: keys and types, with lists reduced to their first item."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def check_golden(name: str, payload: Any) -> None:
    """Compare with the recorded schema; HOPS_WRITE_GOLDEN=1 re-records it (review the diff)."""
    path = GOLDEN / f"{name}.json"
    if os.environ.get("HOPS_WRITE_GOLDEN") == "1":
        path.write_text(json.dumps(shape(payload), indent=2, sort_keys=True) + "\n")
    assert shape(payload) == json.loads(path.read_text())


# ---- submit ---------------------------------------------------------------------------------


def test_submit_tags_and_submits_held(
    tmp_path: Path, port: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOPS_CONF", raising=False)  # embedded defaults: no spool_dir
    path = script(tmp_path, "#SBATCH --time=01:00:00\n#SBATCH -J resnet")
    result = runner.invoke(
        app,
        [
            "submit",
            str(path),
            "--gpus",
            "1,2,4",
            "--epochs",
            "2",
            "--dataset-size",
            "500",
            "--model",
            "resnet50",
            "--lr",
            "0.1",
            "--lr-scale",
            "linear",
            "--parsable",
            "--",
            "--mem=4G",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "1001"
    (sub,) = port.submitted
    # the user's options, then what the job needs at every start (no spool_dir configured)
    exported = "HOPS_BATCH_SIZE=32,HOPS_NOTICE_SIGNAL=USR1,HOPS_TOTAL_SAMPLES=1000"
    assert sub["args"] == ("--mem=4G", f"--export=ALL,{exported}")
    tag = sub["tag"]
    assert tag.demands == (1, 2, 4) and tag.total_samples == 1000
    assert tag.model == "resnet50" and tag.lr == (0.1,) and tag.lr_scale == "linear"


def test_submit_range_is_expanded(tmp_path: Path, port: Any) -> None:
    result = runner.invoke(
        app, ["submit", str(script(tmp_path)), "--gpus", "1-4", "--samples", "900"]
    )
    assert result.exit_code == 0, result.output
    assert port.submitted[0]["tag"].demands == (1, 2, 3, 4)
    assert "Submitted hops job 1001" in result.stdout


@pytest.mark.parametrize(
    ("args", "header", "executable", "message"),
    [
        (["--gpus", "", "--samples", "10"], "", True, "empty demand set"),
        (["--gpus", "two", "--samples", "10"], "", True, "not a GPU count"),
        (["--gpus", "0,1", "--samples", "10"], "", True, "positive"),
        (["--gpus", "1"], "", True, "size is needed"),
        (["--gpus", "1", "--samples", "10", "--epochs", "2"], "", True, "not both"),
        (["--gpus", "1", "--samples", "10"], "", False, "not executable"),
        (["--gpus", "1", "--samples", "10"], "#SBATCH --gres=gpu:v100:2", True, "conflicts"),
        (["--gpus", "1", "--samples", "10"], "#SBATCH -G 2", True, "conflicts"),
        (["--gpus", "1", "--samples", "10", "--", "--comment=x"], "", True, "set by hops"),
        (["--gpus", "1,2,16", "--samples", "10"], "", True, "more than any managed GPU type"),
        (["--gpus", "1", "--samples", "10", "--lr-scale", "cubic"], "", True, "lr scale"),
        (["--gpus", "1", "--samples", "10", "--batch-size", "0"], "", True, "batch-size"),
    ],
)
def test_submit_refuses_bad_input_without_submitting(
    tmp_path: Path,
    port: Any,
    args: list[str],
    header: str,
    executable: bool,
    message: str,
) -> None:
    path = script(tmp_path, header, executable)
    result = runner.invoke(app, ["submit", str(path), *args])
    assert result.exit_code != 0
    assert message in result.stderr
    assert result.stderr.startswith("hops: ") and "Traceback" not in result.output
    assert port.submitted == []


def test_submit_missing_script(tmp_path: Path, port: Any) -> None:
    result = runner.invoke(app, ["submit", str(tmp_path / "nope.sh"), "--samples", "5"])
    assert result.exit_code == 2 and "no such script" in result.stderr
    assert port.submitted == []


def test_submit_unknown_option_is_a_usage_error(tmp_path: Path, port: Any) -> None:
    result = runner.invoke(app, ["submit", str(script(tmp_path)), "--gpu", "2", "--samples", "5"])
    assert result.exit_code == 2 and "No such option" in result.output
    assert port.submitted == []


# ---- status / fairness / nodes ------------------------------------------------------------


def test_status_json_schema_and_values(ledger: str, port: Any) -> None:
    result = runner.invoke(app, ["status", "--all", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    jobs = {j["job_id"]: j for j in payload["jobs"]}
    assert jobs[101]["nodes"] == {"v100n1": 2} and jobs[101]["gpu_type"] == "v100"
    assert jobs[101]["eta_s"] is not None and jobs[101]["eta_s"] > 0
    assert jobs[102]["state"] == "queued" and jobs[102]["latency_ratio"] == 4.5
    # no lease holder in this ledger: a waiting job says hopsd is not running
    assert jobs[101]["reason"] == "running on v100 v100n1:1"
    assert jobs[102]["reason"] == "hopsd not running" and payload["daemon"]["mode"] == "stopped"
    assert jobs[101]["elapsed_s"] >= 2999 and jobs[102]["elapsed_s"] == 0.0
    assert 1799 <= jobs[102]["since_submit_s"] < 1900 and "age_s" not in jobs[102]
    # START and ETA are hopsd's recorded forecast: the waiting job starts when 101 ends
    assert jobs[102]["queue_position"] == 1 and jobs[102]["start_in_s"] == jobs[101]["eta_s"]
    assert jobs[101]["eta_s"] == pytest.approx(1500, abs=60)
    assert payload["leader"]["holder"] is None and payload["leader"]["token"] == 0
    v100 = next(c for c in payload["cluster"] if c["gpu_type"] == "v100")
    assert (v100["gpus_total"], v100["gpus_busy"], v100["gpus_idle"]) == (8, 2, 6)
    # a job hopsd refused shows with hopsd's reason, not nothing
    assert [(r["job_id"], r["user"]) for r in payload["refused"]] == [(103, "bob")]
    assert "below one batch" in payload["refused"][0]["reason"]


def test_status_says_who_leads_and_its_fencing_token(ledger: str, port: Any) -> None:
    import time

    from hopsd.ledger.engine import make_engine, make_sessionmaker
    from hopsd.ledger.lease import ensure_lease
    from hopsd.ledger.records import RoundSummary
    from hopsd.ledger.unit import Unit

    engine = make_engine(ledger)
    with make_sessionmaker(engine).begin() as s:
        ensure_lease(s, "head1:4242", 600.0, time.time())
        Unit(s).record_round(RoundSummary(number=1, started_at=time.time() - 5))
    engine.dispose()
    result = runner.invoke(app, ["status", "--all", "--json"])
    payload = json.loads(result.stdout)
    # the golden schema is recorded from a ledger with a leader, so that every field of
    # `leader` has its type (with no holder they are all null)
    check_golden("status", payload)
    assert payload["leader"]["holder"] == "head1:4242" and payload["leader"]["token"] == 1
    assert payload["daemon"]["mode"] != "stopped"
    table = runner.invoke(app, ["status", "--all"])
    assert "leader: head1:4242" in table.stdout and "fencing token 1" in table.stdout


def test_status_shows_refused_jobs_to_their_owner_only(ledger: str, port: Any) -> None:
    bob = runner.invoke(app, ["status", "--user", "bob"])
    assert "job 103 (bob): refused by hopsd: total samples 10 below one batch (32)" in bob.stdout
    alice = runner.invoke(app, ["status", "--user", "alice", "--json"])
    assert json.loads(alice.stdout)["refused"] == []


def test_status_filters_by_user(ledger: str, port: Any) -> None:
    result = runner.invoke(app, ["status", "--user", "bob", "--json"])
    assert [j["user"] for j in json.loads(result.stdout)["jobs"]] == ["bob"]


def test_status_table_renders_without_colour(ledger: str, port: Any) -> None:
    result = runner.invoke(app, ["status", "--all"])
    assert result.exit_code == 0, result.output
    assert "v100n1:2" in result.stdout and "\x1b[" not in result.stdout
    assert "RAQLR" in result.stdout and "REASON" in result.stdout


def test_status_table_says_what_its_document_says(ledger: str, port: Any) -> None:
    """The table's rows are made from the jobs' lines, the document from the same lines:
    every cell is the document's field as the table spells it, in the columns asked."""
    payload = json.loads(runner.invoke(app, ["status", "--all", "--json"]).stdout)
    table = runner.invoke(app, ["status", "--all", "-o", "jobid,type,nodes,state", "-P"])
    assert table.exit_code == 0, table.output
    rows = [line.split("|") for line in table.stdout.splitlines()]
    assert rows[0] == ["JOBID", "TYPE", "NODES", "STATE"]
    assert rows[1:] == [
        [
            str(j["job_id"]),
            j["gpu_type"] or "-",
            ",".join(f"{n}:{g}" for n, g in j["nodes"].items()) or "-",
            j["state"],
        ]
        for j in payload["jobs"]
    ]
    one = runner.invoke(app, ["status", "--all", "-o", "reason", "--noheader"])
    assert one.stdout.splitlines() == [j["reason"] or "-" for j in payload["jobs"]]


def test_status_without_ledger_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: Any
) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{tmp_path / "none.sqlite"}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 1 and "no ledger at" in result.stderr
    assert not (tmp_path / "none.sqlite").exists()


def test_invalid_config_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text("[scheduler]\nsigma = -1\n")
    result = runner.invoke(app, ["--config", str(conf), "status"])
    assert result.exit_code == 2 and "scheduler.sigma" in result.stderr


def test_fairness_json_schema_and_flags(ledger: str, port: Any, tmp_path: Path) -> None:
    plot = tmp_path / "lr.png"
    result = runner.invoke(app, ["fairness", "--json", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    check_golden("fairness", payload)
    jobs = {j["job_id"]: j for j in payload["jobs"]}
    assert jobs[102]["starving"] and not jobs[101]["starving"]
    assert jobs[101]["ftf_rho"] == 1.1 and jobs[102]["ftf_rho"] is None  # hopsd's figure
    users = {u["user"]: u for u in payload["users"]}
    assert users["alice"]["usage_share"] == 1.0 and users["bob"]["usage_share"] == 0.0
    assert users["alice"]["fair_share"] == 0.5
    # the factor hopsd applies: 2 ** (-usage share / fair share)
    assert users["alice"]["factor"] == 0.25 and users["bob"]["factor"] == 1.0
    # Jain over ratios (2, 0): (2)^2 / (2 * 4) = 0.5
    assert payload["jain_users"] == 0.5
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nodes_shows_learned_speed(ledger: str, port: Any) -> None:
    result = runner.invoke(app, ["nodes", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    check_golden("nodes", payload)
    speed = {n["node"]: n["speed_factor"] for n in payload["nodes"]}
    assert speed["v100n1"] == 1.0 and speed["v100n2"] == 0.6 and speed["k80n1"] is None
    table = runner.invoke(app, ["nodes"])
    assert "0.60" in table.stdout


# ---- cancel / db / version ------------------------------------------------------------------


def test_cancel_rejects_non_ids(port: Any) -> None:
    result = runner.invoke(app, ["cancel", "5;rm"])
    assert result.exit_code == 2 and "not a Slurm job id" in result.stderr
    assert port.cancelled == []


def test_db_upgrade_creates_then_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{tmp_path / "l.sqlite"}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    first = runner.invoke(app, ["db", "upgrade"])
    assert first.exit_code == 0 and "empty ->" in first.stdout
    current = runner.invoke(app, ["db", "current"])
    assert current.exit_code == 0 and "empty" not in current.stdout


@pytest.mark.parametrize("argv", [["version"], ["--version"], ["-V"]])
def test_version(argv: list[str]) -> None:
    import hopsd

    result = runner.invoke(app, argv)
    assert result.exit_code == 0 and result.stdout == f"hops {hopsd.__version__}\n"


@pytest.mark.parametrize("text", ["²", "1,²", "١-٣"])
def test_non_ascii_digits_are_refused_not_crashed_on(text: str) -> None:
    from hops_cli.submit_args import SubmitError, parse_gpus

    with pytest.raises(SubmitError):
        parse_gpus(text)


def test_cancel_refuses_non_ascii_digits(port: Any) -> None:
    result = runner.invoke(app, ["cancel", "²"])
    assert result.exit_code == 2 and port.cancelled == []


def test_fairness_mine_keeps_only_the_callers_jobs(
    ledger: str, port: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "bob")
    payload = json.loads(runner.invoke(app, ["fairness", "--mine", "--json"]).stdout)
    assert [j["user"] for j in payload["jobs"]] == ["bob"]
    assert {u["user"] for u in payload["users"]} == {"alice", "bob"}


def test_submit_refuses_what_hopsd_would_refuse(tmp_path: Path, port: Any) -> None:
    """Fewer samples than one batch: hopsd refuses it, so submit refuses it first."""
    path = script(tmp_path)
    result = runner.invoke(app, ["submit", str(path), "--samples", "10", "--batch-size", "32"])
    assert result.exit_code == 2 and port.submitted == []
    assert (
        result.stderr.strip()
        == "hops: hopsd would refuse this job: total samples 10 below one batch (32)"
    )
