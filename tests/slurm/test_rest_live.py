"""The REST backend's failures, live against the test cluster's slurmrestd (Slurm 24.11).

Each failure must reach hops as the port's typed error carrying Slurm's own
words: a bad or missing token, an unreachable URL, an HTTP error for an unknown
job, and submissions the backend cannot translate faithfully.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from daemon_live import LIVE

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.errors import (
    SlurmAuthError,
    SlurmJobNotFoundError,
    SlurmUnavailableError,
    SubmitArgumentError,
)
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.rest_backend import RestSlurm
from hopsd.slurm.rest_client import RestClient
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE
TAG = HopsTag((1, 2), 1e5)


def rest(url: str, token_file: str | Path, timeout_s: float = 10) -> RestSlurm:
    return RestSlurm(RestClient(url, str(token_file), timeout_s=timeout_s), cli=CliSlurm())


def test_good_token_reads_the_cluster(slurmrestd: tuple[str, str]) -> None:
    port = rest(*slurmrestd)
    nodes = port.list_nodes()
    assert {n.gpu_type for n in nodes} >= {"k80", "v100", "a100"}
    assert all(n.gpus_total > 0 for n in nodes)


def test_forged_token_is_an_auth_error_with_slurms_message(
    slurmrestd: tuple[str, str], tmp_path: Path
) -> None:
    """A token whose signature was altered (what an attacker without the key can make)."""
    url, token_file = slurmrestd
    token = Path(token_file).read_text().strip()
    head, body, _signature = token.split(".")
    forged = tmp_path / "forged.jwt"
    forged.write_text(f"{head}.{body}.{'A' * 43}\n")
    with pytest.raises(SlurmAuthError, match="Protocol authentication error"):
        rest(url, forged).list_jobs()


def test_missing_token_file_is_an_auth_error(slurmrestd: tuple[str, str], tmp_path: Path) -> None:
    url, _ = slurmrestd
    with pytest.raises(SlurmAuthError, match="token file"):
        rest(url, tmp_path / "absent.jwt").list_nodes()


def test_unreachable_url_is_unavailable_quickly(slurmrestd: tuple[str, str]) -> None:
    _, token_file = slurmrestd
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SlurmUnavailableError, match="unreachable"):
        rest(f"http://127.0.0.1:{free}", token_file, timeout_s=3).list_jobs()
    assert time.monotonic() - started < 10


def test_unknown_job_is_not_found_with_slurms_message(slurmrestd: tuple[str, str]) -> None:
    port = rest(*slurmrestd)
    with pytest.raises(SlurmJobNotFoundError, match="Invalid job id specified"):
        port.release(987654)
    with pytest.raises(SlurmJobNotFoundError, match="Invalid job id specified"):
        port.signal(987654, "USR1")


def test_refused_partition_quotes_slurm(slurmrestd: tuple[str, str], tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    port = rest(*slurmrestd)
    with pytest.raises(Exception, match="Invalid partition name specified") as caught:
        port.submit(SubmitRequest(str(script), sbatch_args=["-p", "no-such-partition"], tag=TAG))
    assert not isinstance(caught.value, SlurmUnavailableError)


def test_script_directives_are_honoured(slurmrestd: tuple[str, str], tmp_path: Path) -> None:
    """slurmrestd ignores #SBATCH lines itself; the backend must carry them over."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -J from-script\n#SBATCH -o {tmp_path}/%j.log\ntrue\n")
    port = rest(*slurmrestd)
    job_id = port.submit(SubmitRequest(str(script), sbatch_args=["--time=0:30"], tag=TAG))
    try:
        listed = next(j for j in port.list_jobs() if j.job_id == job_id)
        assert listed.name == "from-script"
        assert listed.stdout_path == f"{tmp_path}/{job_id}.log"
        assert listed.held and listed.tag == TAG
    finally:
        port.cancel(job_id)


def test_untranslatable_options_are_refused(slurmrestd: tuple[str, str], tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    port = rest(*slurmrestd)
    with pytest.raises(SubmitArgumentError, match="--exclusive"):
        port.submit(SubmitRequest(str(script), sbatch_args=["--exclusive"], tag=TAG))
    with pytest.raises(SubmitArgumentError, match="owner of its token"):
        port.submit(SubmitRequest(str(script), tag=TAG, as_user="hopsalice"))
