"""CLI backend: command building, error classification on recorded stderr, retry policy.

The runner here replays recorded Slurm output through the backend's own seam;
the live behaviour is covered by ``test_contract_live.py``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from placement_check import gres_request

from hopsd.slurm.classify import error_for
from hopsd.slurm.cli_backend import CliSlurm, check_sbatch_args, parse_job_id, update_argv
from hopsd.slurm.errors import (
    PlacementError,
    SlurmCommandError,
    SlurmJobNotFoundError,
    SlurmTimeoutError,
    SlurmUnavailableError,
    SubmitArgumentError,
)
from hopsd.slurm.factory import make_port, pyslurm_unavailable_reason
from hopsd.slurm.port import Placement, SubmitRequest
from hopsd.slurm.runner import CompletedRun, CountingRunner, SubprocessRunner
from hopsd.slurm.tag import HopsTag

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
TAG = HopsTag((2, 4), 1e6, model="resnet50")


def recorded_error(name: str) -> tuple[str, int]:
    """A recorded stderr file whose last line is `rc=N`."""
    lines = (FIXTURES / name).read_text().splitlines()
    return "\n".join(lines[:-1]), int(lines[-1].removeprefix("rc="))


class Replay:
    """Answers each call with the next scripted result (or raises it)."""

    def __init__(self, *answers: CompletedRun | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        self.calls.append(tuple(argv))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return CompletedRun(tuple(argv), answer.returncode, answer.stdout, answer.stderr)


def ok(stdout: str = "") -> CompletedRun:
    return CompletedRun((), 0, stdout, "")


def failed(name: str) -> CompletedRun:
    stderr, code = recorded_error(name)
    return CompletedRun((), code, "", stderr)


# ------------------------------------------------------------------ commands
def test_submit_puts_hops_options_last_and_parses_the_id() -> None:
    run = Replay(ok((FIXTURES / "sbatch_parsable.22.05.txt").read_text()))
    job_id = CliSlurm(run=run).submit(
        SubmitRequest("/tmp/t.sh", sbatch_args=["-p", "all"], tag=TAG)
    )
    assert job_id == 1
    assert run.calls == [
        (
            "sbatch",
            "-p",
            "all",
            "--parsable",
            "--hold",
            "--requeue",
            "--gres=gpu:2",
            "--comment=" + TAG.encode(),
            "/tmp/t.sh",
        )
    ]


def test_submit_as_another_user_goes_through_runuser() -> None:
    run = Replay(ok("17;hops\n"))
    assert CliSlurm(run=run).submit(SubmitRequest("/tmp/t.sh", tag=TAG, as_user="ana")) == 17
    assert run.calls[0][:4] == ("runuser", "-u", "ana", "--")
    with pytest.raises(SubmitArgumentError):
        CliSlurm(run=run).submit(SubmitRequest("/tmp/t.sh", tag=TAG, as_user="-x"))


@pytest.mark.parametrize(
    "arg", ["--comment=x", "--hold", "-H", "--gres=gpu:a100:2", "--gpus=2", "-G2", "--no-requeue"]
)
def test_submit_refuses_arguments_that_would_undo_hops(arg: str) -> None:
    with pytest.raises(SubmitArgumentError, match="set by hops"):
        check_sbatch_args(["-p", "all", arg])


def test_update_uniform_and_uneven_placements() -> None:
    uniform = Placement.of("a100", {"a100n2": 2})
    assert update_argv(5, uniform) == [
        "scontrol",
        "update",
        "JobId=5",
        "Partition=a100",
        "NodeList=a100n2",
        "NumNodes=1",
        "TresPerJob=",
        "Gres=gpu:2",
    ]
    uneven = Placement.of("v100", {"v100n2": 1, "v100n1": 3})
    assert update_argv(6, uneven) == [
        "scontrol",
        "update",
        "JobId=6",
        "Partition=v100",
        "NodeList=v100n[1-2]",
        "NumNodes=2",
        "TresPerNode=",
        "TresPerJob=gres:gpu:4",
    ]
    assert gres_request(uneven) == "gres:gpu:4" and gres_request(uniform) == "gres:gpu:2"


def test_a_job_with_cpus_per_gpu_gets_cpus_that_follow_its_gpus() -> None:
    """22.05 keeps a requeued job's first CPU count; hops sets it with every placement."""
    uneven = Placement.of("v100", {"v100n1": 3, "v100n2": 1}, cpus_per_gpu=2)
    assert update_argv(7, uneven)[-1] == "NumCPUs=8"
    plain = update_argv(7, Placement.of("v100", {"v100n1": 3}))
    assert not any(a.startswith("NumCPUs") for a in plain)


@pytest.mark.parametrize(
    ("partition", "mapping"),
    [
        ("a100", {}),
        ("a100", {"a100n1": 0}),
        ("a 100", {"a100n1": 1}),
        ("a100", {"a100n1,a100n2": 1}),
        ("a100", {"a100n1": True}),
    ],
)
def test_bad_placements_are_refused(partition: str, mapping: dict[str, int]) -> None:
    with pytest.raises(PlacementError):
        Placement.of(partition, mapping)


def test_parse_job_id_refuses_noise() -> None:
    assert parse_job_id(ok("42\n")) == 42
    with pytest.raises(SlurmCommandError):
        parse_job_id(ok("Submitted batch job 42\n"))


# ------------------------------------------------------------------ errors
def test_recorded_errors_are_classified() -> None:
    unavailable = error_for(failed("err_scontrol_no_controller.22.05.txt"))
    assert isinstance(unavailable, SlurmUnavailableError)
    assert "Unable to contact slurm controller" in str(unavailable)
    assert isinstance(error_for(failed("err_sacct_no_dbd.22.05.txt")), SlurmUnavailableError)
    # hold, release and requeuehold word an absent slurmctld differently (22.05 and 24.11)
    for name in (
        "err_release_no_controller.22.05.txt",
        "err_release_no_controller.24.11.txt",
        "err_requeuehold_no_controller.22.05.txt",
    ):
        assert isinstance(error_for(failed(name)), SlurmUnavailableError), name
    missing = error_for(failed("err_update_unknown.22.05.txt"))
    assert isinstance(missing, SlurmJobNotFoundError)
    refused = error_for(failed("err_sbatch_badpart.22.05.txt"))
    assert type(refused) is SlurmCommandError
    assert "Invalid partition name specified" in str(refused) and refused.returncode == 1


def test_sbatch_is_never_retried() -> None:
    run = Replay(failed("err_scontrol_no_controller.22.05.txt"), ok("9\n"))
    with pytest.raises(SlurmUnavailableError):
        CliSlurm(run=run).submit(SubmitRequest("/tmp/t.sh", tag=TAG))
    assert len(run.calls) == 1


def test_reads_retry_once_when_the_controller_did_not_answer() -> None:
    squeue = (FIXTURES / "squeue.22.05.json").read_text()
    run = Replay(failed("err_scontrol_no_controller.22.05.txt"), ok(squeue))
    assert len(CliSlurm(run=run).list_jobs()) == 5
    assert run.calls == [("squeue", "--json", "--states=all")] * 2
    twice = Replay(
        failed("err_scontrol_no_controller.22.05.txt"),
        failed("err_scontrol_no_controller.22.05.txt"),
    )
    with pytest.raises(SlurmUnavailableError):
        CliSlurm(run=twice).list_nodes()


def test_a_timeout_is_not_retried() -> None:
    run = Replay(SlurmTimeoutError("squeue gave no answer"), ok("{}"))
    with pytest.raises(SlurmTimeoutError):
        CliSlurm(run=run).list_jobs()
    assert len(run.calls) == 1


def test_accounting_is_one_call_and_skips_empty_requests() -> None:
    text = (FIXTURES / "sacct_parsable2.22.05.txt").read_text()
    run = CountingRunner(Replay(ok(text)))
    backend = CliSlurm(run=run)
    assert backend.accounting([]) == []
    assert [r.job_id for r in backend.accounting([5, 4, 4])] == [1, 2, 3, 4, 5]
    assert len(run.calls) == 1 and "4,5" in run.calls[0]


# ------------------------------------------------------------------ runner
def test_subprocess_runner_times_out_and_kills() -> None:
    started = time.monotonic()
    with pytest.raises(SlurmTimeoutError, match=r"no answer within 0\.5 s"):
        SubprocessRunner()([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert time.monotonic() - started < 5


def test_subprocess_runner_passes_environment_and_reports_missing_commands() -> None:
    runner = SubprocessRunner(env={"SLURM_CONF": "/nowhere/slurm.conf"})
    code = "import os; print(os.environ['SLURM_CONF'], os.environ.get('PATH') is not None)"
    result = runner([sys.executable, "-c", code], 10)
    assert result.ok and result.stdout.split() == ["/nowhere/slurm.conf", "True"]
    with pytest.raises(SlurmUnavailableError, match="not installed"):
        runner(["hops-no-such-command"], 5)
    assert "SLURM_CONF" not in os.environ or os.environ["SLURM_CONF"] != "/nowhere/slurm.conf"


# ------------------------------------------------------------------ factory
def test_factory_defaults_to_cli_and_rejects_unknown() -> None:
    assert make_port().name == "cli"
    with pytest.raises(ValueError, match="unknown Slurm backend"):
        make_port("grpc")
    with pytest.raises(ValueError, match="rest_url"):
        make_port("rest")  # known, but it needs slurmrestd's URL and token


def test_factory_falls_back_to_cli_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    reason = pyslurm_unavailable_reason()
    if reason is None:
        pytest.skip("pyslurm imports here, so there is no fallback to observe")
    with caplog.at_level(logging.WARNING, logger="hopsd.slurm.factory"):
        port = make_port("pyslurm")
    assert port.name == "cli"
    assert "falling back to the CLI backend" in caplog.text


def test_signal_reaches_the_batch_shell_alone_or_every_step() -> None:
    replay = Replay(ok(), ok())
    backend = CliSlurm(run=replay)
    backend.signal(42, "usr1")
    backend.signal(42, "SIGTERM", batch_only=False)
    assert replay.calls == [
        ("scancel", "--batch", "--signal=USR1", "42"),
        ("scancel", "--full", "--signal=TERM", "42"),
    ]
    for bad in ("USR1 --full", "-9", ""):
        with pytest.raises(SubmitArgumentError):
            backend.signal(42, bad)


def test_hold_many_holds_a_list_per_call_and_names_each_refused_job() -> None:
    """Recorded: `scontrol hold 1,3,99999,2` holds 1 and 2, names 3 and 99999, exits 1."""
    run = Replay(failed("err_hold_list_partial.22.05.txt"))
    refused = CliSlurm(run=run).hold_many([2, 99999, 1, 3])
    assert run.calls == [("scontrol", "hold", "1,2,3,99999")]
    assert refused == {3: "Job has already finished", 99999: "Invalid job id specified"}


def test_hold_many_splits_a_long_queue_into_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hopsd.slurm.cli_backend.HOLD_BATCH", 2)
    run = Replay(ok(), ok(), ok())
    assert CliSlurm(run=run).hold_many([5, 4, 3, 2, 1]) == {}
    assert sorted(c[2] for c in run.calls) == ["1,2", "3,4", "5"]  # made at once: any order


def test_hold_many_makes_its_calls_at_once_and_reads_each_answer_for_its_own_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each call's answer names its own chunk's refusals, whichever call finishes first;
    a controller away in one call raises once all have answered."""
    monkeypatch.setattr("hopsd.slurm.cli_backend.HOLD_BATCH", 2)
    started: list[str] = []
    both = threading.Barrier(2, timeout=10)

    def run(argv: Sequence[str], timeout: float | None = None) -> CompletedRun:
        started.append(argv[2])
        both.wait()  # a call answers only once the other one is under way too
        if argv[2] == "3,4":
            return CompletedRun(tuple(argv), 1, "", "Invalid job id specified for job 4")
        return CompletedRun(tuple(argv), 0, "", "")

    assert CliSlurm(run=run).hold_many([1, 2, 3, 4]) == {4: "Invalid job id specified"}
    assert sorted(started) == ["1,2", "3,4"]

    def away(argv: Sequence[str], timeout: float | None = None) -> CompletedRun:
        started.append(argv[2])
        answer = failed("err_scontrol_no_controller.22.05.txt") if argv[2] == "1,2" else ok()
        return CompletedRun(tuple(argv), answer.returncode, "", answer.stderr)

    started.clear()
    with pytest.raises(SlurmUnavailableError):
        CliSlurm(run=away).hold_many([1, 2, 3, 4, 5])
    assert sorted(started) == ["1,2", "3,4", "5"]


def test_hold_many_raises_when_the_controller_is_away_and_asks_each_job_on_other_failures() -> None:
    for words in ("err_scontrol_no_controller.22.05.txt", "err_release_no_controller.22.05.txt"):
        away = Replay(failed(words))  # `scontrol hold` says what `release` does
        with pytest.raises(SlurmUnavailableError):
            CliSlurm(run=away).hold_many([1, 2])
    unnamed = CompletedRun((), 1, "", "scontrol: error: something unforeseen")
    run = Replay(unnamed, ok(), failed("err_release_unknown.22.05.txt"))
    refused = CliSlurm(run=run).hold_many([1, 2])
    assert run.calls[1:] == [("scontrol", "hold", "1"), ("scontrol", "hold", "2")]
    assert list(refused) == [2] and "Invalid job id" in refused[2]
