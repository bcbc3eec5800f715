"""The containerised Slurm test cluster, for real: up, a hops workload under hopsd, down.

`docker/cluster.sh up --container` builds (or reuses) the 22.05 image, starts a
Docker engine itself when none answers, and runs the five-node cluster in one
unprivileged container with host networking. hops on the host then talks to it
with the host's own Slurm client, exactly as to the native cluster: jobs are
submitted with `hops submit`, scheduled by a `hopsd` process on the host, and
must all finish once, on the container's nodes. `down` must leave no container.

The engine is inspected through the Docker SDK, never by parsing `docker` output;
when none answers, the test starts its own dockerd (and stops it at the end).
The cluster uses its own ports (HOPS_CLUSTER_PORT + 100) and state directory,
so it runs beside the native test cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from daemon_live import LiveEnv, drive, hops_submit, hopsd_process
from typer.testing import CliRunner

from hopsd.ledger.models import JobState

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="the container cluster needs root"),
]

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "docker" / "cluster.sh"
LABEL = "org.hops.cluster"
NODES = {"k80n1", "v100n1", "v100n2", "a100n1", "a100n2"}
runner = CliRunner()


DOCKER_DIR = Path(os.environ.get("HOPS_DOCKER_DIR", "/var/tmp/hops-docker"))
OWN_ENGINE = f"unix://{DOCKER_DIR}/docker.sock"


def answers(address: str) -> bool:
    try:
        return bool(docker.DockerClient(base_url=address, timeout=5).ping())
    except docker.errors.DockerException:
        return False


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    """A Docker engine: one that already answers, else a dockerd this test starts and stops.

    The flags are the ones this machine kind allows (no iptables, no bridge,
    vfs); images stay cached in its data root between runs.
    """
    for address in (os.environ.get("DOCKER_HOST", ""), "unix:///var/run/docker.sock", OWN_ENGINE):
        if address and answers(address):
            yield address
            return
    if subprocess.run(["sh", "-c", "command -v dockerd"], capture_output=True).returncode:
        subprocess.run(
            ["bash", "-c", "apt-get update -qq && apt-get install -y -qq docker.io"],
            check=True,
            timeout=600,
            capture_output=True,
        )
    (DOCKER_DIR / "data").mkdir(parents=True, exist_ok=True)
    log = open(DOCKER_DIR / "dockerd.log", "ab")  # noqa: SIM115 - handed to the child
    daemon = subprocess.Popen(
        [
            "dockerd",
            f"--data-root={DOCKER_DIR / 'data'}",
            f"--exec-root={DOCKER_DIR / 'exec'}",
            f"--host={OWN_ENGINE}",
            f"--pidfile={DOCKER_DIR / 'dockerd.pid'}",
            "--storage-driver=vfs",
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        assert drive(lambda: None, lambda: answers(OWN_ENGINE), 60, 0.5), "dockerd did not answer"
        yield OWN_ENGINE
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        log.close()
        # dockerd leaves its network namespace mounted in its exec root
        mounts = subprocess.run(
            ["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True, check=False
        ).stdout.split()
        for target in sorted(m for m in mounts if m.startswith(f"{DOCKER_DIR}/exec/")):
            subprocess.run(["umount", target], capture_output=True, check=False)


# Read once: the test later exports the container cluster's own variables.
PORT = os.environ.get(
    "HOPS_CONTAINER_CLUSTER_PORT", str(int(os.environ.get("HOPS_CLUSTER_PORT", "6817")) + 100)
)
STATE_DIR = os.environ.get("HOPS_CLUSTER_DIR", "/var/tmp/hops-cluster") + "-container"


def cluster_env(engine: str) -> dict[str, str]:
    """Ports and state directory of the container cluster, beside the native one."""
    env = dict(os.environ)
    env.pop("HOPS_SLURM", None)
    env.update({"HOPS_CLUSTER_PORT": PORT, "HOPS_CLUSTER_DIR": STATE_DIR, "DOCKER_HOST": engine})
    return env


def cluster(engine: str, command: str, *args: str) -> str:
    done = subprocess.run(
        ["bash", str(CLUSTER_SH), command, *args],
        env=cluster_env(engine),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"cluster.sh {command} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def exports(stdout: str) -> dict[str, str]:
    pairs = (line.removeprefix("export ").split("=", 1) for line in stdout.splitlines())
    return {k: v for k, v in pairs if k.isidentifier()}


def ours(client: docker.DockerClient, engine: str) -> list[docker.models.containers.Container]:
    return client.containers.list(all=True, filters={"label": f"{LABEL}={PORT}"})


@pytest.fixture
def container_cluster(engine: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The container cluster, up; down (whatever happened) afterwards."""
    try:
        exported = exports(cluster(engine, "up", "--container"))
        for name, value in exported.items():
            monkeypatch.setenv(name, value)
        yield exported
    finally:
        cluster(engine, "down")


def test_workload_under_hopsd_on_the_container_cluster_then_nothing_left(
    engine: str,
    container_cluster: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = docker.DockerClient(base_url=engine)
    [container] = ours(client, engine)
    assert container.status == "running"
    assert any(tag.startswith("hops-slurm:22.05") for tag in container.image.tags)
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    assert not container.attrs["HostConfig"]["Privileged"]
    inside = container.exec_run(["sinfo", "-V"]).output.decode().strip()
    host = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, check=True)
    assert inside == host.stdout.strip()  # one release on both sides of the socket

    env = LiveEnv.create(tmp_path)
    monkeypatch.setenv("HOPS_CONF", str(env.config_path))
    workload = [("a", 600, "1"), ("b", 900, "1,2"), ("c", 1200, "2,4"), ("d", 700, "1,2,4")]
    jobs = [hops_submit(env, label, samples, gpus) for label, samples, gpus in workload]
    daemon = hopsd_process(env)
    try:
        assert drive(lambda: None, env.all_terminal, deadline_s=180, interval_s=2.0), (
            env.root / "hopsd.log"
        ).read_text()[-3000:]
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
        env.cleanup()
    rows = env.rows()
    for job in jobs:
        assert rows[job].state == JobState.DONE, (job, rows[job].state, rows[job].state_reason)
        events = env.events(job)
        assert [e["event"] for e in events].count("done") == 1, events
        assert set(events[-1]["nodes"]) <= NODES
    records = {r.job_id: r for r in env.port.accounting(jobs)}  # slurmdbd in the container
    assert {records[j].state for j in jobs} == {"COMPLETED"}

    cluster(engine, "down")
    assert ours(client, engine) == []
    assert not Path(STATE_DIR, "host", "pids").exists()  # dockerd it started: stopped
    assert not Path(STATE_DIR, "container").exists()
