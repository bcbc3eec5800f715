"""Pure parsers on output recorded from Slurm 24.11.5 (Debian trixie, the 24.11 test cluster).

One run of six jobs, recorded with `squeue --json --states=all`, `sinfo --json`,
`sacct --parsable2` (and `--json`), `scontrol show job -d -o`:

1. held, hops-tagged (demands 1,2,4), never placed;
2. tagged, placed by the port on a100n2 with 2 GPUs, running;
3. plain sbatch `--gpus=1`, placed unevenly {v100n1: 3, v100n2: 1}, running;
4. foreign, name and comment full of `KEY=VALUE` text, completed on k80n1;
5. `exit 3`, failed;
6. tagged, ran on a100n1, then `requeuehold` (`squeue_requeuehold.24.11.json`
   once the run let go of the node).

The 22.05 recordings are read in test_slurm_parsers.py; the same facts must
come out of both releases.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from placement_check import mismatches
from sinfo_check import five_nodes

from hopsd.slurm.classify import error_for
from hopsd.slurm.errors import SlurmCommandError, SlurmJobNotFoundError, SlurmUnavailableError
from hopsd.slurm.parse_sacct import parse_accounting
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import Placement, SlurmJob
from hopsd.slurm.runner import CompletedRun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def jobs() -> dict[int, SlurmJob]:
    return {j.job_id: j for j in parse_jobs(fixture("squeue.24.11.json"))}


def test_recorded_with_the_data_parser_shapes() -> None:
    """Guard: the recording really is 24.11's (wrapped numbers, state lists)."""
    doc = json.loads(fixture("squeue.24.11.json"))
    assert doc["meta"]["slurm"]["release"].startswith("24.11")
    first = doc["jobs"][0]
    assert isinstance(first["job_state"], list) and set(first["priority"]) >= {"set", "number"}


def test_held_tagged_job() -> None:
    held = jobs()[1]
    assert (held.state, held.reason, held.held, held.partition) == (
        "PENDING",
        "JobHeldUser",
        True,
        "all",
    )
    assert held.tag is not None and held.tag.demands == (1, 2, 4) and held.tag_error is None
    assert held.tag.lr_scale == "linear" and held.tag.model == "resnet50"
    assert held.gpus_by_node == () and held.nodes == () and held.priority == 0
    assert held.gres_request.replace("gres/", "gres:") == "gres:gpu:1"
    assert held.start_time is None and held.end_time is None
    assert held.submit_time == 1796090476.0
    assert held.stdout_path == "/tmp/hopsrec/1.out"  # %j filled in
    assert held.work_dir == "/tmp/hopsrec" and held.user == "root"


def test_running_jobs_hold_exactly_their_gpus() -> None:
    listed = jobs()
    placed = listed[2]
    assert placed.state == "RUNNING" and not placed.held and placed.tag is not None
    assert placed.placement == {"a100n2": 2} and placed.gpu_type == "a100"
    assert placed.start_time == 1796090479.0
    uneven = listed[3]
    assert uneven.placement == {"v100n1": 3, "v100n2": 1} and uneven.gpus == 4
    assert uneven.nodes == ("v100n1", "v100n2") and uneven.gpu_type == "v100"
    assert uneven.requested_nodes == ("v100n1", "v100n2")
    assert uneven.gres_request.replace("gres/", "gres:") == "gres:gpu:4"  # the job total
    assert mismatches(Placement.of("v100", {"v100n1": 3, "v100n2": 1}), uneven) == []


def test_per_node_gpus_match_scontrol_detail() -> None:
    """squeue's per-node GPUs agree with `scontrol show job -d` of the same moment."""
    record = next(
        line
        for line in fixture("scontrol_show_job_d_o.24.11.txt").splitlines()
        if line.startswith("JobId=3 ")
    )
    blocks = re.findall(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=gpu:v100:(\d+)", record)
    assert {n: int(g) for n, g in blocks} == jobs()[3].placement


def test_finished_jobs_hold_nothing_and_free_text_forges_nothing() -> None:
    listed = jobs()
    foreign = listed[4]
    assert foreign.name == "name with JobState=RUNNING"
    assert foreign.comment == "free text with spaces NodeList=forged x=y"
    assert foreign.state == "COMPLETED" and foreign.nodes == ("k80n1",)
    assert foreign.gpus_by_node == () and foreign.tag is None and foreign.tag_error is None
    failed = listed[5]
    assert (failed.state, failed.reason, failed.gres_request) == ("FAILED", "NonZeroExitCode", "")


def test_requeued_held_job_reads_as_held_with_no_time_facts() -> None:
    """24.11 gives it a future start estimate and an end decades away: not facts."""
    raw = json.loads(fixture("squeue_requeuehold.24.11.json"))["jobs"][0]
    assert raw["start_time"]["number"] > raw["submit_time"]["number"]
    [job] = parse_jobs(fixture("squeue_requeuehold.24.11.json"))
    assert (job.state, job.held, job.restarts, job.partition) == ("PENDING", True, 1, "a100")
    assert job.gpus_by_node == () and job.requested_nodes == ("a100n1",)
    assert job.start_time is None and job.end_time is None
    assert job.tag is not None and job.tag.demands == (1, 2)


def test_sinfo_nodes() -> None:
    nodes = five_nodes(fixture("sinfo.24.11.json"))
    assert nodes["a100n2"].gpus_alloc == 2 and nodes["a100n1"].gpus_alloc == 0
    assert nodes["k80n1"].gpus_total == 2 and nodes["k80n1"].state == "IDLE"


def test_sacct_parsable2_agrees_with_sacct_json(utc: None) -> None:
    records = {r.job_id: r for r in parse_accounting(fixture("sacct_parsable2.24.11.txt"))}
    assert records[4].state == "COMPLETED" and records[4].nodes == ("k80n1",)
    assert records[4].gpus == 1 and records[4].start_time == 1796090479.0
    assert (records[5].state, records[5].exit_code) == ("FAILED", 3)
    assert records[3].gpus == 4 and records[3].nodes == ("v100n1", "v100n2")
    assert records[6].start_time is None and records[6].nodes == ()
    recorded = {j["job_id"]: j for j in json.loads(fixture("sacct.24.11.json"))["jobs"]}
    assert recorded.keys() == records.keys()
    for job_id, record in records.items():
        assert [record.state] == recorded[job_id]["state"]["current"]
        assert record.partition == recorded[job_id]["partition"]


def test_recorded_errors_are_classified() -> None:
    def failed(name: str) -> CompletedRun:
        *lines, code = fixture(name).splitlines()
        return CompletedRun(("cmd",), int(code.removeprefix("rc=")), "", "\n".join(lines))

    down = error_for(failed("err_squeue_no_controller.24.11.txt"))
    assert isinstance(down, SlurmUnavailableError)
    assert isinstance(error_for(failed("err_release_unknown.24.11.txt")), SlurmJobNotFoundError)
    refused = error_for(failed("err_sbatch_badpart.24.11.txt"))
    assert type(refused) is SlurmCommandError and "Invalid partition" in str(refused)
