"""`[slurm] command_prefix` live: hops drives Slurm 24.11 through its wrapper alone.

`HOPS_SLURM=24.11 docker/cluster.sh up` runs the cluster from a Debian trixie
root and exports ``HOPS_SLURM_EXEC`` (the wrapper that runs a command inside
it). Here the wrappers are taken off PATH, so the host's own commands (22.05)
are what a bare port would run, and they cannot talk to a 24.11 controller;
with the prefix configured, the port and the `hops` command work.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.config import parse_config
from hopsd.ledger import migrate
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.factory import make_port
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not os.environ.get("HOPS_SLURM_EXEC"),
        reason="HOPS_SLURM_EXEC unset: no cluster on another Slurm release (HOPS_SLURM=24.11)",
    ),
]

TAG = HopsTag((1, 2), 500.0, 32)


@pytest.fixture
def host_path_only(monkeypatch: pytest.MonkeyPatch) -> str:
    wrapper = os.environ["HOPS_SLURM_EXEC"]
    kept = [p for p in os.environ["PATH"].split(":") if p != str(Path(wrapper).parent)]
    monkeypatch.setenv("PATH", ":".join(kept))
    return wrapper


def test_without_the_prefix_the_host_commands_fail_typed(host_path_only: str) -> None:
    with pytest.raises(SlurmError):
        make_port("cli", timeout_s=10.0).list_nodes()


def test_the_port_works_through_the_prefix(host_path_only: str, tmp_path: Path) -> None:
    config = parse_config(f'[slurm]\ncommand_prefix = ["{host_path_only}"]\ntimeout_s = 10.0\n')
    port = make_port(
        config.slurm_backend,
        timeout_s=config.slurm_timeout_s,
        command_prefix=config.slurm_command_prefix,
    )
    nodes = {n.name: n for n in port.list_nodes()}
    assert nodes.keys() == {"k80n1", "v100n1", "v100n2", "a100n1", "a100n2"}
    assert nodes["a100n1"].gpu_type == "a100" and nodes["a100n1"].gpus_total == 4
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    job_id = port.submit(
        SubmitRequest(str(script), sbatch_args=["-o", "/dev/null", "-J", "prefix"], tag=TAG)
    )
    try:
        [listed] = [j for j in port.list_jobs() if j.job_id == job_id]
        assert listed.pending and listed.held and listed.tag == TAG
    finally:
        port.cancel(job_id)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        [listed] = [j for j in port.list_jobs() if j.job_id == job_id]
        if listed.state == "CANCELLED":
            break
        time.sleep(0.3)
    assert listed.state == "CANCELLED"


def test_hops_nodes_through_the_prefix_of_its_config(
    host_path_only: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(ledger)
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{ledger}"\n[slurm]\ncommand_prefix = ["{host_path_only}"]\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    result = CliRunner().invoke(app, ["nodes", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert "a100n2" in json.dumps(listed)
