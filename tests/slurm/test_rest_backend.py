"""REST backend on recorded slurmrestd 24.11.5 replies (data parsers v0.0.40-42).

Fixtures in tests/fixtures/slurm/rest were recorded from the 24.11 test
cluster's slurmrestd (jobs 16-18 submitted through v0.0.40, 41 and 42; job 16
placed unevenly over v100n1+v100n2, job 17 on a100n1 with 2 GPUs; the job lists
are cut to those three jobs). A mock transport replays them, so requests are
checked without sockets; the live behaviour is in test_contract_live.py and
test_rest_live.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from placement_check import mismatches

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.errors import (
    SlurmAuthError,
    SlurmCommandError,
    SlurmJobNotFoundError,
    SlurmParseError,
    SlurmTimeoutError,
    SlurmUnavailableError,
    SubmitArgumentError,
)
from hopsd.slurm.parse_sinfo import nodes_from_document
from hopsd.slurm.parse_squeue import jobs_from_document
from hopsd.slurm.port import Placement, SubmitRequest
from hopsd.slurm.rest_backend import RestSlurm, signal_name, update_body
from hopsd.slurm.rest_client import RestClient, decode_reply, read_token
from hopsd.slurm.rest_submit import job_description, sbatch_directives, time_minutes
from hopsd.slurm.tag import HopsTag

REST = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "rest"
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")
TAG = HopsTag((1, 2, 4), 2e6, 64, "resnet50")
WHAT = ("GET", "/slurm/v0.0.42/jobs")


def recorded(name: str) -> str:
    return (REST / name).read_text()


def doc(name: str) -> dict[str, Any]:
    return json.loads(recorded(name))


class Recorder:
    """A mock slurmrestd: answers each request with the next recorded reply."""

    def __init__(self, *replies: tuple[int, str]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, text = self.replies.pop(0)
        return httpx.Response(status, text=text)

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def port(
    tmp_path: Path, *replies: tuple[int, str], version: str = "v0.0.42"
) -> tuple[RestSlurm, Recorder]:
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=aaa.bbb.ccc\n")
    recorder = Recorder(*replies)
    client = RestClient(
        "http://slurmrestd:6820",
        str(token),
        version=version,
        transport=httpx.MockTransport(recorder),
    )
    return RestSlurm(client, cli=CliSlurm()), recorder


# ----------------------------------------------------------------- reading
@pytest.mark.parametrize("version", VERSIONS)
def test_held_job_of_every_data_parser(version: str) -> None:
    (job,) = jobs_from_document(doc(f"job_held.{version}.24.11.json"))
    assert job.pending and job.held and job.reason == "JobHeldUser"
    assert job.tag == HopsTag((1, 2, 4), 2e6, 64, "resnet50", 25e6)
    assert job.gres_request == "gres/gpu:1" and job.gpus_by_node == ()
    assert job.name == "hops-fixture" and job.stdout_path == f"/tmp/hops-fixture-{job.job_id}.out"


@pytest.mark.parametrize("version", VERSIONS)
def test_running_jobs_carry_their_gpus_per_node(version: str) -> None:
    jobs = {j.job_id: j for j in jobs_from_document(doc(f"jobs_running.{version}.24.11.json"))}
    uneven, single, held = jobs[16], jobs[17], jobs[18]
    assert uneven.running and uneven.partition == "v100" and uneven.gpu_type == "v100"
    assert uneven.gpus == 4 and set(uneven.nodes) == {"v100n1", "v100n2"}
    assert sorted(uneven.placement.values()) == [1, 3]
    assert single.running and single.placement == {"a100n1": 2} and single.gpu_type == "a100"
    assert held.pending and held.held and held.gpus_by_node == ()
    assert mismatches(Placement.of("a100", {"a100n1": 2}), single) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_nodes_of_every_data_parser(version: str) -> None:
    nodes = {n.name: n for n in nodes_from_document(doc(f"nodes_running.{version}.24.11.json"))}
    assert set(nodes) == {"k80n1", "v100n1", "v100n2", "a100n1", "a100n2"}
    assert nodes["a100n1"].gpus_alloc == 2 and nodes["a100n1"].gpus_free == 2
    assert nodes["v100n1"].gpus_alloc + nodes["v100n2"].gpus_alloc == 4
    assert nodes["k80n1"].gpus_total == 2 and nodes["k80n1"].gpu_type == "k80"
    assert nodes["a100n2"].partitions == ("a100", "all", "hops")


def test_ended_jobs_are_listed_finished() -> None:
    """17's script had no USR1 trap, so the recorded notice killed it (FAILED)."""
    jobs = {j.job_id: j for j in jobs_from_document(doc("jobs_cancelled.v0.0.42.24.11.json"))}
    assert {i: j.state for i, j in jobs.items()} == {16: "CANCELLED", 17: "FAILED", 18: "CANCELLED"}
    assert all(j.finished for j in jobs.values())


# ------------------------------------------------------------------ errors
def test_unknown_job_is_not_found_with_slurms_words() -> None:
    with pytest.raises(SlurmJobNotFoundError, match="Invalid job id specified"):
        decode_reply(WHAT, 404, recorded("err_release_unknown.v0.0.42.24.11.json"))


def test_bad_token_is_an_auth_error_with_slurms_words() -> None:
    with pytest.raises(SlurmAuthError, match="Protocol authentication error"):
        decode_reply(WHAT, 511, recorded("err_bad_token.v0.0.42.24.11.json"))
    with pytest.raises(SlurmAuthError, match="Authentication failure"):
        decode_reply(WHAT, 401, recorded("err_no_token.24.11.txt"))


def test_refused_submission_is_a_command_error_not_unavailability() -> None:
    with pytest.raises(SlurmCommandError, match="Invalid partition name specified") as caught:
        decode_reply(WHAT, 500, recorded("err_submit_badpart.v0.0.42.24.11.json"))
    assert not isinstance(caught.value, SlurmUnavailableError)


def test_controller_down_and_proxies_are_unavailability() -> None:
    """Recorded with slurmctld stopped: HTTP 502 after about 4 s, Slurm error 1800."""
    with pytest.raises(SlurmUnavailableError, match="Unable to contact slurm controller") as got:
        decode_reply(WHAT, 502, recorded("err_ctld_down.v0.0.42.24.11.json"))
    assert not isinstance(got.value, SlurmAuthError)
    with pytest.raises(SlurmUnavailableError, match="HTTP 502"):
        decode_reply(WHAT, 502, "<html>Bad Gateway</html>")
    with pytest.raises(SlurmParseError):
        decode_reply(WHAT, 200, "[]")


def test_signal_to_unknown_job_reported_inside_http_200(tmp_path: Path) -> None:
    rest, _ = port(tmp_path, (200, recorded("err_signal_unknown.v0.0.42.24.11.json")))
    with pytest.raises(SlurmJobNotFoundError, match="Invalid job id specified"):
        rest.signal(987654, "USR1")


def test_unreachable_and_silent_servers(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("x.y.z")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    for handler, error in ((refuse, SlurmUnavailableError), (stall, SlurmTimeoutError)):
        client = RestClient("http://h:1", str(token), transport=httpx.MockTransport(handler))
        with pytest.raises(error, match="slurmrestd at http://h:1"):
            RestSlurm(client).list_nodes()


def test_token_file_is_read_on_every_request(tmp_path: Path) -> None:
    nodes = (200, recorded("nodes_running.v0.0.42.24.11.json"))
    rest, recorder = port(tmp_path, nodes, nodes)
    rest.list_nodes()
    (tmp_path / "token").write_text("renewed.token.value\n")
    rest.list_nodes()
    sent = [r.headers["X-SLURM-USER-TOKEN"] for r in recorder.requests]
    assert sent == ["aaa.bbb.ccc", "renewed.token.value"]
    (tmp_path / "token").write_text("\n")
    with pytest.raises(SlurmAuthError, match="holds no token"):
        read_token(str(tmp_path / "token"))


# ------------------------------------------------------------------ writes
def test_submit_sends_held_tagged_job_with_script_directives(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J from-script\n#SBATCH --time=1-02:03\necho hi\n")
    rest, recorder = port(tmp_path, (200, recorded("submit.v0.0.42.24.11.json")))
    job_id = rest.submit(
        SubmitRequest(str(script), sbatch_args=["-o", "/tmp/%j.out", "-J", "cli"], tag=TAG)
    )
    assert job_id == 18
    request = recorder.requests[0]
    assert request.method == "POST" and request.url.path == "/slurm/v0.0.42/job/submit"
    job = recorder.body()["job"]
    assert job["script"] == script.read_text()
    assert (job["hold"], job["requeue"], job["tres_per_node"]) == (True, True, "gres/gpu:1")
    assert job["comment"] == TAG.encode()
    assert job["name"] == "cli"  # the command line beats #SBATCH, as with sbatch
    assert job["standard_output"] == "/tmp/%j.out"
    assert job["time_limit"]["number"] == (24 + 2) * 60 + 3


def test_submit_refuses_what_it_cannot_carry(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    rest, recorder = port(tmp_path)
    for args in (["--exclusive"], ["--gres=gpu:2"], ["--hold"]):
        with pytest.raises(SubmitArgumentError):
            rest.submit(SubmitRequest(str(script), sbatch_args=args, tag=TAG))
    with pytest.raises(SubmitArgumentError, match="owner of its token"):
        rest.cancel(5, as_user="hopsalice")
    assert recorder.requests == []


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        (
            Placement.of("a100", {"a100n1": 2}),
            {"tres_per_job": "", "tres_per_node": "gres/gpu:2", "minimum_nodes": 1},
        ),
        (
            Placement.of("v100", {"v100n1": 3, "v100n2": 1}),
            {"tres_per_node": "", "tres_per_job": "gres/gpu:4", "maximum_nodes": 2},
        ),
    ],
)
def test_update_pins_partition_nodes_and_gpus(
    tmp_path: Path, placement: Placement, expected: dict[str, Any]
) -> None:
    rest, recorder = port(tmp_path, (200, recorded("update.v0.0.42.24.11.json")))
    rest.update_pending(16, placement)
    body = recorder.body()
    assert body["partition"] == placement.partition
    assert body["required_nodes"] == list(placement.nodes)
    assert body.items() >= expected.items()
    assert body == update_body(placement)
    assert recorder.requests[0].url.path == "/slurm/v0.0.42/job/16"


def test_release_hold_signal_cancel_requests(tmp_path: Path) -> None:
    ok = recorded("update.v0.0.42.24.11.json")
    rest, recorder = port(
        tmp_path,
        (200, ok),
        (200, ok),
        (200, recorded("signal_ok.v0.0.42.24.11.json")),
        (200, recorded("signal_ok.v0.0.42.24.11.json")),
        version="v0.0.41",
    )
    rest.release(7)
    rest.hold(7)
    rest.signal(7, "usr1")
    rest.cancel(7)
    methods = [(r.method, r.url.path, dict(r.url.params)) for r in recorder.requests]
    assert methods == [
        ("POST", "/slurm/v0.0.41/job/7", {}),
        ("POST", "/slurm/v0.0.41/job/7", {}),
        ("DELETE", "/slurm/v0.0.41/job/7", {"signal": "SIGUSR1", "flags": "BATCH_JOB"}),
        ("DELETE", "/slurm/v0.0.41/job/7", {}),
    ]
    assert [recorder.body(i) for i in (0, 1)] == [{"hold": False}, {"hold": True}]


# --------------------------------------------------------- sbatch options
def test_time_forms_in_minutes() -> None:
    cases = {"90": 90, "1:30": 2, "2:00:00": 120, "1-0": 1440, "1-2:30": 1590, "0:0:1": 1}
    assert {k: time_minutes(k) for k in cases} == cases
    with pytest.raises(SubmitArgumentError):
        time_minutes("soon")


def test_directives_stop_at_the_first_command() -> None:
    script = (
        "#!/bin/sh\n# note\n#SBATCH -J a  # name\n\n#SBATCH --mem=2G\necho x\n#SBATCH -p late\n"
    )
    assert sbatch_directives(script) == ["-J", "a", "--mem=2G"]


def test_export_open_mode_and_signal() -> None:
    job = job_description(
        "#!/bin/sh\n",
        ["--export=NONE,A=1", "--open-mode=append", "--signal=B:USR1@30", "--mem=2G"],
        environ={"PATH": "/bin", "SECRET": "x"},
        cwd="/work",
    )
    assert job["environment"] == ["A=1"]
    assert job["open_mode"] == ["APPEND"]
    assert (job["kill_warning_signal"], job["kill_warning_flags"]) == ("SIGUSR1", ["BATCH_JOB"])
    assert job["kill_warning_delay"]["number"] == 30
    assert job["memory_per_node"]["number"] == 2048
    assert job["current_working_directory"] == "/work"
    default = job_description("#!/bin/sh\n", [], environ={"PATH": "/bin", "K": "v"}, cwd="/")
    assert default["environment"] == ["K=v", "PATH=/bin"]


def test_signal_names() -> None:
    assert [signal_name(s) for s in ("USR1", "sigusr2", "10")] == ["SIGUSR1", "SIGUSR2", "10"]
    for bad in ("USR1;rm", "", "99"):
        with pytest.raises(SubmitArgumentError):
            signal_name(bad)


def test_cancel_of_an_ended_job_is_no_failure_but_a_signal_is(tmp_path: Path) -> None:
    """As with scancel: recorded reply to DELETE of a job that had already completed."""
    done = (200, recorded("cancel_done.v0.0.42.24.11.json"))
    rest, _ = port(tmp_path, done, done)
    rest.cancel(60)
    with pytest.raises(SlurmCommandError, match="already completing or completed"):
        rest.signal(60, "USR1")
