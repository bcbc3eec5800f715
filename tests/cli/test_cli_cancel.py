"""``hops cancel`` says what really happened to each id, like scancel but honest."""

from __future__ import annotations

import getpass
from typing import Any

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.slurm.port import AccountingRecord, SlurmJob
from hopsd.slurm.tag import HopsTag

runner = CliRunner()
ME = getpass.getuser()


def job(job_id: int, state: str = "PENDING", user: str = ME, **extra: Any) -> SlurmJob:
    fields: dict[str, Any] = dict(
        job_id=job_id,
        name="train",
        user=user,
        account="ml",
        state=state,
        reason="None",
        held=state == "PENDING",
        partition="all",
        nodes=(),
        gpus_by_node=(),
        gpu_type=None,
        gres_request="gres:gpu:1",
        submit_time=1.0,
        start_time=None,
        end_time=None,
        comment="",
        tag=HopsTag(demands=(1,), total_samples=100.0),
        tag_error=None,
        restarts=0,
        work_dir="/tmp",
        stdout_path="/tmp/out",
    )
    fields.update(extra)
    return SlurmJob(**fields)


def ended(job_id: int, state: str = "COMPLETED") -> AccountingRecord:
    return AccountingRecord(job_id, state, 0, 0, 1.0, 2.0, 1, ("k80n1",), {})


def test_a_live_job_is_cancelled(port: Any) -> None:
    port.jobs = [job(5), job(6, "RUNNING")]
    result = runner.invoke(app, ["cancel", "5", "6"])
    assert result.exit_code == 0 and port.cancelled == [5, 6]
    assert result.stdout == "Cancelled job 5\nCancelled job 6\n"


def test_an_unknown_id_is_no_such_job_and_exit_1(port: Any) -> None:
    result = runner.invoke(app, ["cancel", "999"])
    assert result.exit_code == 1 and port.cancelled == []
    assert result.stderr.strip() == "hops: no such job 999"


@pytest.mark.parametrize("where", ["squeue", "accounting"])
def test_a_finished_job_is_already_finished_not_cancelled(port: Any, where: str) -> None:
    if where == "squeue":
        port.jobs = [job(7, "COMPLETED")]
    else:
        port.ended = [ended(7)]
    result = runner.invoke(app, ["cancel", "7"])
    assert result.exit_code == 0 and port.cancelled == []
    assert result.stdout.strip() == "job 7 already finished (COMPLETED)"


def test_an_array_task_id_is_accepted(port: Any) -> None:
    port.jobs = [job(27, array_id="26_1"), job(26, array_id="26_0")]
    result = runner.invoke(app, ["cancel", "26_1"])
    assert result.exit_code == 0, result.output
    assert port.cancelled == [27] and "Cancelled job 26_1" in result.stdout


def test_me_cancels_only_my_unfinished_hops_jobs(port: Any) -> None:
    port.jobs = [
        job(1),
        job(2, "RUNNING"),
        job(3, "COMPLETED"),
        job(4, user="someone-else"),
        job(5, tag=None),  # not a hops job
    ]
    result = runner.invoke(app, ["cancel", "--me"])
    assert result.exit_code == 0, result.output
    assert port.cancelled == [1, 2]


def test_me_with_nothing_to_cancel_says_so(port: Any) -> None:
    result = runner.invoke(app, ["cancel", "--me"])
    assert result.exit_code == 0 and port.cancelled == []
    assert "no unfinished hops jobs" in result.stdout


@pytest.mark.parametrize("text", ["5;rm", "26_", "_1", "1_2_3", "²"])
def test_what_is_not_a_job_id_is_a_usage_error(port: Any, text: str) -> None:
    result = runner.invoke(app, ["cancel", text])
    assert result.exit_code == 2 and port.cancelled == []


def test_no_ids_and_no_me_is_a_usage_error(port: Any) -> None:
    assert runner.invoke(app, ["cancel"]).exit_code == 2


def test_a_task_inside_its_arrays_record_is_cancelled_by_its_id(port: Any) -> None:
    port.jobs = [job(30, array_tasks="0-3,7%2")]
    result = runner.invoke(app, ["cancel", "30_7", "30_2", "30_5"])
    assert result.exit_code == 1
    assert port.cancelled == ["30_7", "30_2"]
    assert "no such job 30_5" in result.stderr


@pytest.mark.parametrize("bad", ["1;rm", "-1", "1_", "x_1", 0, -3, True])
def test_the_cli_backend_never_passes_a_raw_id_to_slurm(bad: Any) -> None:
    from hopsd.slurm.port import job_id_arg

    with pytest.raises(ValueError):
        job_id_arg(bad)
