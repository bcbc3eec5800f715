"""The Slurm port's contract, run against the live test cluster for every backend.

Needs ``docker/cluster.sh up`` (which exports ``SLURM_CONF``). Other suites may
use the cluster at the same time, so nodes are chosen among those with free
GPUs when each test runs, and every submitted job is cancelled afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from daemon_live import LIVE
from placement_check import mismatches, pending_mismatches

from hopsd.daemon.observe import job_view
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.errors import SlurmAccountingDisabledError, SlurmUnavailableError
from hopsd.slurm.factory import pyslurm_unavailable_reason
from hopsd.slurm.port import (
    AccountingRecord,
    Placement,
    SlurmJob,
    SlurmNode,
    SlurmPort,
    SubmitRequest,
)
from hopsd.slurm.rest_backend import RestSlurm
from hopsd.slurm.rest_client import RestClient
from hopsd.slurm.runner import SubprocessRunner
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE

T = TypeVar("T")
Submit = Callable[..., int]
TAG = HopsTag((1, 2, 4), 2e6, 64, "resnet50", 25e6, (0.1,), "linear")
SCRIPT = """#!/bin/sh
echo "NODELIST=$SLURM_JOB_NODELIST CVD=$CUDA_VISIBLE_DEVICES NODE=$SLURMD_NODENAME \
RESTART=${{SLURM_RESTART_COUNT:-0}}"
sleep {seconds}
"""
LINE_RE = re.compile(r"NODELIST=(\S*) CVD=(\S*) NODE=(\S*) RESTART=(\d+)")
# hops's checkpoint notice: USR1 to the batch script, which saves and exits 0.
NOTICE_SCRIPT = """#!/bin/sh
trap 'echo CHECKPOINT-NOTICE; exit 0' USR1
echo STARTED
sleep 120 &
wait
"""


@pytest.fixture(params=["cli", "rest", "pyslurm"])
def port(request: pytest.FixtureRequest) -> SlurmPort:
    if request.param == "cli":
        return CliSlurm(timeout_s=20)
    if request.param == "rest":
        url, token_file = request.getfixturevalue("slurmrestd")
        return RestSlurm(RestClient(url, token_file, timeout_s=20), cli=CliSlurm(timeout_s=20))
    reason = pyslurm_unavailable_reason()
    if reason is not None:
        print(f"pyslurm backend skipped: {reason}")
        pytest.skip(reason)
    from hopsd.slurm.pyslurm_backend import PyslurmSlurm

    return PyslurmSlurm(cli=CliSlurm(timeout_s=20))


@pytest.fixture
def submit(port: SlurmPort, tmp_path: Path) -> Iterator[Callable[..., int]]:
    """Submits scripts through the port and cancels every one of them afterwards."""
    submitted: list[int] = []

    def _submit(seconds: int = 120, text: str | None = None) -> int:
        script = tmp_path / f"job-{len(submitted)}-{seconds}.sh"
        script.write_text(SCRIPT.format(seconds=seconds) if text is None else text)
        script.chmod(0o755)
        args = ["-o", str(tmp_path / "%j.out"), "--open-mode=append", "-J", "hops-contract"]
        job_id = port.submit(SubmitRequest(str(script), sbatch_args=args, tag=TAG))
        submitted.append(job_id)
        return job_id

    yield _submit
    for job_id in submitted:
        with contextlib.suppress(SlurmUnavailableError):
            port.cancel(job_id)


def wait_for(what: str, probe: Callable[[], T | None], deadline_s: float = 20.0) -> T:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def job(port: SlurmPort, job_id: int) -> SlurmJob:
    found = [j for j in port.list_jobs() if j.job_id == job_id]
    assert len(found) == 1, f"job {job_id} listed {len(found)} times"
    return found[0]


def narrow_agrees(port: SlurmPort, job_id: int) -> None:
    """The CLI's narrow read (the tick's) observes the job as the JSON does, twice over:
    once through a JSON read where it lacks something, once from what it kept."""
    if not isinstance(port, CliSlurm):
        return
    for _ in range(2):
        narrow = [j for j in port.list_queue() if j.job_id == job_id]
        assert len(narrow) == 1
        assert job_view(narrow[0]) == job_view(job(port, job_id))


def free_node(port: SlurmPort, gpus: int, exclude: frozenset[str] = frozenset()) -> SlurmNode:
    """A usable node with at least ``gpus`` free GPUs, preferring the emptiest."""
    nodes = [n for n in port.list_nodes() if n.gpus_free >= gpus and n.name not in exclude]
    if not nodes:
        pytest.skip(f"no node has {gpus} free GPUs right now (cluster busy)")
    return max(nodes, key=lambda n: (n.gpus_free, n.name))


def own_partition(node: SlurmNode) -> str:
    """The per-type partition of a node (not `all`)."""
    typed = [p for p in node.partitions if p == node.gpu_type]
    return typed[0] if typed else node.partitions[0]


def output_lines(tmp_path: Path, job_id: int) -> list[tuple[str, str, str, int]]:
    path = tmp_path / f"{job_id}.out"
    text = path.read_text() if path.exists() else ""
    return [(m[1], m[2], m[3], int(m[4])) for m in LINE_RE.finditer(text)]


def place_and_run(port: SlurmPort, job_id: int, placement: Placement) -> SlurmJob:
    port.update_pending(job_id, placement)
    pending = job(port, job_id)
    assert pending.held and pending_mismatches(placement, pending) == []
    port.release(job_id)
    return wait_for(f"job {job_id} running", lambda: _running(port, job_id))


def _running(port: SlurmPort, job_id: int) -> SlurmJob | None:
    current = job(port, job_id)
    return current if current.running else None


# ------------------------------------------------------------------ the contract
def test_submitted_job_is_pending_held_with_its_tag(port: SlurmPort, submit: Submit) -> None:
    job_id = submit()
    listed = job(port, job_id)
    assert listed.pending and listed.held
    assert listed.tag == TAG and listed.tag_error is None
    assert listed.gres_request.replace("gres/", "gres:") == "gres:gpu:1"
    assert listed.gpus_by_node == ()
    narrow_agrees(port, job_id)


def test_placed_job_runs_exactly_there(port: SlurmPort, submit: Submit, tmp_path: Path) -> None:
    node = free_node(port, 2)
    placement = Placement.of(own_partition(node), {node.name: 2})
    job_id = submit()
    running = place_and_run(port, job_id, placement)
    assert mismatches(placement, running) == []
    assert running.gpu_type == node.gpu_type
    narrow_agrees(port, job_id)
    nodelist, cvd, name, restart = wait_for("job output", lambda: output_lines(tmp_path, job_id))[0]
    assert (nodelist, name, restart) == (node.name, node.name, 0)
    assert len(cvd.split(",")) == 2


def test_requeue_hold_then_replace_elsewhere(
    port: SlurmPort, submit: Submit, tmp_path: Path
) -> None:
    first = free_node(port, 1)
    job_id = submit()
    place_and_run(port, job_id, Placement.of(own_partition(first), {first.name: 1}))
    port.requeue_hold(job_id)
    requeued = wait_for("requeued job held", lambda: _held(port, job_id))
    assert requeued.restarts == 1 and requeued.gpus_by_node == ()
    narrow_agrees(port, job_id)
    second = free_node(port, 2, exclude=frozenset({first.name}))
    port.make_eligible(job_id)
    moved = place_and_run(port, job_id, Placement.of(own_partition(second), {second.name: 2}))
    assert moved.placement == {second.name: 2} and moved.gpu_type == second.gpu_type
    # The second run by its restart count: the first may be requeued before its script
    # prints anything (the requeue can follow the start within milliseconds).
    lines = wait_for(
        "second run output", lambda: [x for x in output_lines(tmp_path, job_id) if x[3] == 1]
    )
    assert lines[0][2] == second.name and len(lines[0][1].split(",")) == 2


def test_uneven_distributed_placement(port: SlurmPort, submit: Submit) -> None:
    by_type: dict[str, list[SlurmNode]] = {}
    for node in port.list_nodes():
        if node.gpu_type and node.usable and node.gpus_alloc == 0:
            by_type.setdefault(node.gpu_type, []).append(node)
    pairs = [ns for ns in by_type.values() if len(ns) >= 2 and min(n.gpus_total for n in ns) >= 3]
    if not pairs:
        pytest.skip("no two idle nodes of one type with 3+ GPUs right now (cluster busy)")
    a, b = pairs[0][:2]
    placement = Placement.of(own_partition(a), {a.name: 3, b.name: 1})
    job_id = submit()
    running = place_and_run(port, job_id, placement)
    assert running.gpus == 4 and set(running.nodes) == {a.name, b.name}
    # Slurm spreads a job total itself; with both nodes idle it may choose 3+1 either way.
    assert sorted(running.placement.values()) == [1, 3]
    narrow_agrees(port, job_id)


def test_cancel_and_accounting(port: SlurmPort, submit: Submit) -> None:
    node = free_node(port, 1)
    short = submit(seconds=1)
    long = submit()
    place_and_run(port, short, Placement.of(own_partition(node), {node.name: 1}))
    port.cancel(long)
    wait_for("cancelled job", lambda: job(port, long).state == "CANCELLED")
    wait_for("short job done", lambda: job(port, short).finished)
    try:
        records = wait_for("accounting records", lambda: _both_ended(port, [short, long]))
    except SlurmAccountingDisabledError as exc:
        pytest.skip(f"accounting is disabled on this cluster: {exc}")
    by_id = {r.job_id: r for r in records}
    assert by_id[short].state == "COMPLETED" and by_id[short].exit_code == 0
    assert by_id[short].nodes == (node.name,) and by_id[short].gpus == 1
    assert by_id[long].state == "CANCELLED"


def test_checkpoint_notice_reaches_the_batch_script(
    port: SlurmPort, submit: Submit, tmp_path: Path
) -> None:
    node = free_node(port, 1)
    job_id = submit(text=NOTICE_SCRIPT)
    place_and_run(port, job_id, Placement.of(own_partition(node), {node.name: 1}))
    out = tmp_path / f"{job_id}.out"
    wait_for("script started", lambda: out.exists() and "STARTED" in out.read_text())
    port.signal(job_id, "USR1")
    wait_for("notice handled", lambda: "CHECKPOINT-NOTICE" in out.read_text())
    ended = wait_for("job ended", lambda: _finished(port, job_id))
    assert ended.state == "COMPLETED"


def test_dead_controller_raises_typed_error_quickly(tmp_path: Path) -> None:
    """A slurm.conf copy pointing at an unused port stands for a dead slurmctld."""
    conf = Path(os.environ["SLURM_CONF"]).read_text()
    bogus = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=6999", conf)
    (tmp_path / "slurm.conf").write_text(bogus)
    dead = CliSlurm(
        run=SubprocessRunner(env={"SLURM_CONF": str(tmp_path / "slurm.conf")}), timeout_s=3
    )
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(seconds=1))
    started = time.monotonic()
    with pytest.raises(SlurmUnavailableError):
        dead.list_jobs()
    with pytest.raises(SlurmUnavailableError):
        dead.list_queue()  # the formatted read fails as the JSON one does, never "empty"
    with pytest.raises(SlurmUnavailableError):
        dead.list_nodes()
    with pytest.raises(SlurmUnavailableError):
        dead.submit(SubmitRequest(str(script), tag=TAG))
    assert time.monotonic() - started < 32  # four calls, each bounded by 2 x 3 s


def _held(port: SlurmPort, job_id: int) -> SlurmJob | None:
    """Held again once its last run has let go of the nodes: 23.02+ first list a
    requeued job as PENDING+COMPLETING, still holding its GPUs (22.05 does not say)."""
    current = job(port, job_id)
    settled = "COMPLETING" not in current.flags
    return current if current.pending and current.held and settled else None


def _finished(port: SlurmPort, job_id: int) -> SlurmJob | None:
    current = job(port, job_id)
    return current if current.finished else None


def _both_ended(port: SlurmPort, job_ids: list[int]) -> list[AccountingRecord] | None:
    records = port.accounting(job_ids)
    done = len(records) == len(job_ids) and all(r.end_time for r in records)
    return records if done else None


def test_hold_many_holds_every_listed_job_and_names_each_it_could_not(
    port: SlurmPort, submit: Callable[..., int]
) -> None:
    """hopsd's batched hold (adoption's): an operator's hold on each held job, a refusal
    for a job that has ended and for an id Slurm does not know, the others held."""
    first, second, ended = submit(), submit(), submit()
    port.cancel(ended)
    wait_for("the cancelled job to end", lambda: job(port, ended).finished)
    missing = 4_000_000_000
    refused = port.hold_many([first, ended, missing, second])
    assert set(refused) == {ended, missing}
    for held in (first, second):
        assert job(port, held).reason == "JobHeldAdmin"
