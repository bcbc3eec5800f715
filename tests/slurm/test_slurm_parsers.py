"""Pure parsers on recorded Slurm 22.05.8 output and hand-made 23.x/24.x shapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from placement_check import mismatches, pending_mismatches
from sinfo_check import five_nodes

from hopsd.slurm.errors import SlurmParseError, SlurmUnavailableError
from hopsd.slurm.gres import gpu_items, tres_gpus
from hopsd.slurm.parse_sacct import parse_accounting, parse_local_time
from hopsd.slurm.parse_sinfo import parse_nodes
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import Placement, SlurmJob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def jobs_by_id(name: str) -> dict[int, SlurmJob]:
    return {j.job_id: j for j in parse_jobs(fixture(name))}


# ------------------------------------------------------------------ squeue 22.05
def test_squeue_2205_held_tagged_job() -> None:
    jobs = jobs_by_id("squeue.22.05.json")
    held = jobs[1]
    assert (held.state, held.reason, held.held, held.partition) == (
        "PENDING",
        "JobHeldUser",
        True,
        "all",
    )
    assert held.tag is not None and held.tag.demands == (1, 2, 4)
    assert held.tag.lr_scale == "linear" and held.tag_error is None
    assert held.gpus_by_node == () and held.nodes == ()
    assert held.gres_request == "gres:gpu:1"
    assert held.start_time is None and held.submit_time == 1795966942.0
    assert held.stdout_path == "/tmp/hopsrec/1.out"  # %j filled in
    assert held.work_dir == "/tmp/hopsrec" and held.user == "root"


def test_squeue_2205_per_node_gpus_match_scontrol_detail() -> None:
    """The uneven job's per-node GPUs agree with `scontrol show job -d` of the same run."""
    jobs = jobs_by_id("squeue.22.05.json")
    uneven = jobs[3]
    assert uneven.state == "RUNNING" and not uneven.held
    assert uneven.placement == {"v100n1": 3, "v100n2": 1}
    assert uneven.gpu_type == "v100" and uneven.gpus == 4
    assert uneven.nodes == ("v100n1", "v100n2")
    assert uneven.requested_nodes == ("v100n1", "v100n2")
    assert uneven.gres_request == "gres:gpu:4"
    record = next(
        line
        for line in fixture("scontrol_show_job_d_o.22.05.txt").splitlines()
        if line.startswith("JobId=3 ")
    )
    blocks = re.findall(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=gpu:v100:(\d+)", record)
    assert {n: int(g) for n, g in blocks} == uneven.placement
    assert jobs[2].placement == {"a100n2": 2} and jobs[2].gpu_type == "a100"


def test_squeue_2205_free_text_cannot_forge_fields() -> None:
    jobs = jobs_by_id("squeue.22.05.json")
    foreign = jobs[4]
    assert foreign.comment == "free text with spaces NodeList=forged x=y"
    assert foreign.name == "name with JobState=RUNNING"
    assert foreign.state == "COMPLETED" and foreign.nodes == ("k80n1",)
    assert foreign.tag is None and foreign.tag_error is None
    assert foreign.gpus_by_node == ()  # a finished job holds nothing
    assert jobs[5].state == "FAILED" and jobs[5].reason == "NonZeroExitCode"


def test_squeue_2205_requeued_held_job() -> None:
    job = jobs_by_id("squeue_requeuehold.22.05.json")[2]
    assert (job.state, job.held, job.restarts, job.partition) == ("PENDING", True, 1, "a100")
    assert job.gpus_by_node == () and job.gres_request == "gres:gpu:2"


def test_squeue_without_controller_is_unavailable_not_empty() -> None:
    """22.05 exits 0 with an empty list and an `errors` entry when slurmctld is down."""
    with pytest.raises(SlurmUnavailableError, match="slurm_load_jobs"):
        parse_jobs(fixture("squeue_no_controller.22.05.json"))


def test_squeue_garbage_is_a_parse_error() -> None:
    with pytest.raises(SlurmParseError):
        parse_jobs("squeue: error: something\n")
    with pytest.raises(SlurmParseError):
        parse_jobs("[1, 2]")


# ------------------------------------------------------------------ squeue 24.11
def test_squeue_2411_shape() -> None:
    jobs = jobs_by_id("squeue.24.11.handmade.json")
    assert set(jobs) == {4242, 4243}  # the record without an id is skipped
    run = jobs[4242]
    assert run.state == "RUNNING" and run.priority == 4294901700
    assert run.placement == {"h100n1": 3, "h100n2": 1} and run.gpu_type == "h100"
    assert run.start_time == 1767200000.0 and run.end_time == 1767225600.0
    assert run.restarts == 2 and run.gres_request == "gres/gpu:4"
    assert run.stdout_path == "/home/ana/run/train-4242.out"
    assert run.tag is not None and run.tag.model == "vit" and run.tag.batch_size == 64
    forged = jobs[4243]
    assert forged.held and forged.end_time is None and forged.start_time is None
    assert forged.tag is None and "integer in 1" in (forged.tag_error or "")


# ------------------------------------------------------------------ nodes
def test_sinfo_2205_nodes() -> None:
    nodes = five_nodes(fixture("sinfo.22.05.json"))
    assert nodes["k80n1"].gpus_total == 2 and nodes["k80n1"].gpus_alloc == 0


def test_sinfo_without_controller_is_unavailable() -> None:
    with pytest.raises(SlurmUnavailableError):
        parse_nodes(fixture("sinfo_no_controller.22.05.json"))


def test_node_json_2311_state_lists_and_drain() -> None:
    nodes = {n.name: n for n in parse_nodes(fixture("scontrol_nodes.23.11.handmade.json"))}
    assert nodes["h100n1"].gpus_total == 4 and nodes["h100n1"].gpus_alloc == 3
    assert nodes["h100n1"].usable and nodes["h100n1"].gpus_free == 1
    drained = nodes["h100n2"]
    assert drained.flags == ("DRAIN",) and not drained.usable and drained.gpus_free == 0
    assert nodes["cpu1"].gpus_total == 0 and nodes["cpu1"].gpu_type is None


def test_sinfo_2411_groups_merge_partitions() -> None:
    nodes = {n.name: n for n in parse_nodes(fixture("sinfo.24.11.handmade.json"))}
    assert nodes["h100n1"].partitions == ("all", "h100")
    assert nodes["h100n1"].gpus_alloc == 3 and nodes["l40n1"].gpus_total == 8


# ------------------------------------------------------------------ sacct
def test_sacct_parsable2(utc: None) -> None:
    records = {r.job_id: r for r in parse_accounting(fixture("sacct_parsable2.22.05.txt"))}
    done = records[4]
    assert (done.state, done.exit_code, done.elapsed_s, done.nodes) == (
        "COMPLETED",
        0,
        1,
        ("k80n1",),
    )
    assert done.start_time == 1795966943.0  # 2026-11-29T15:42:23 read as UTC here
    assert done.end_time == 1795966944.0
    assert records[5].state == "FAILED" and records[5].exit_code == 3
    assert records[3].gpus == 4 and records[3].nodes == ("v100n1", "v100n2")
    assert records[1].nodes == () and records[1].start_time is None


def test_sacct_keeps_the_latest_line_and_skips_steps() -> None:
    text = (
        "JobIDRaw|State|ExitCode|Start|End|ElapsedRaw|NodeList|AllocTRES|Partition|User\n"
        "7|REQUEUED|0:0|Unknown|Unknown|5|a100n1|gres/gpu=2|a100|ana\n"
        "7.batch|COMPLETED|0:0|Unknown|Unknown|5|a100n1||a100|\n"
        "7|CANCELLED by 0|0:15|Unknown|Unknown|9|h100n1|gres/gpu=4|h100|ana\n"
    )
    [record] = parse_accounting(text)
    assert (record.state, record.signal, record.gpus, record.nodes) == (
        "CANCELLED",
        15,
        4,
        ("h100n1",),
    )


def test_sacct_without_columns_is_a_parse_error() -> None:
    with pytest.raises(SlurmParseError):
        parse_accounting("something else\n1|2\n")
    assert parse_local_time("Unknown") is None


# ------------------------------------------------------------------ gres strings
def test_gres_strings() -> None:
    [item] = gpu_items("gpu:v100:1(IDX:0,2-3)")
    assert (item.gpu_type, item.count, item.indexes) == ("v100", 1, (0, 2, 3))
    assert [i.count for i in gpu_items("gpu:a100:4(S:0-1),shard:8,gpu:2")] == [4, 2]
    assert gpu_items("gres:gpu:2")[0].gpu_type is None
    assert gpu_items("gpu:a100:0(IDX:N/A)")[0].count == 0
    assert tres_gpus("cpu=2,node=2,billing=2,gres/gpu=4,gres/gpu:v100=4") == 4


# ------------------------------------------------------------------ placement checks
def test_placement_checks_against_recorded_jobs() -> None:
    jobs = jobs_by_id("squeue.22.05.json")
    planned = Placement.of("v100", {"v100n1": 3, "v100n2": 1})
    assert mismatches(planned, jobs[3]) == []
    swapped = Placement.of("v100", {"v100n1": 1, "v100n2": 3})
    assert mismatches(swapped, jobs[3]) == [
        "GPUs per node {'v100n1': 3, 'v100n2': 1} != {'v100n1': 1, 'v100n2': 3}"
    ]
    assert pending_mismatches(planned, jobs[3]) == []  # pinned nodes and job total match
    held = jobs[1]
    problems = pending_mismatches(Placement.of("a100", {"a100n2": 2}), held)
    assert len(problems) == 3  # partition, nodes and GPU request all still differ


def test_squeue_2205_array_tasks_and_the_arrays_own_record() -> None:
    """A held array: tasks split off carry ``ARRAY_TASK``; the others stay on the array record."""
    jobs = {j.job_id: j for j in parse_jobs(fixture("squeue_array_held.22.05.json"))}
    assert jobs[1].array_id == "1_0" and jobs[2].array_id == "1_1"
    assert jobs[60].array_id == "" and jobs[60].array_tasks == "0-3"


# ------------------------------------------------------------- CPUs per GPU
def test_squeue_2205_reads_a_jobs_cpus_per_gpu() -> None:
    """Recorded from two held ``--cpus-per-gpu=2`` jobs after a requeue and a move."""
    jobs = jobs_by_id("squeue_cpus_per_gpu.22.05.json")
    assert {j.cpus_per_gpu for j in jobs.values()} == {2}
    plain = jobs_by_id("squeue.22.05.json")
    assert all(j.cpus_per_gpu == 0 for j in plain.values())


def test_cpus_per_gpu_reads_both_spellings_and_typed_requests() -> None:
    from hopsd.slurm.parse_squeue import cpus_per_gpu

    assert cpus_per_gpu("gres:gpu:2") == 2
    assert cpus_per_gpu("gres/gpu:4") == 4
    assert cpus_per_gpu("gres:gpu:a100:3") == 3
    assert cpus_per_gpu("") == 0
    assert cpus_per_gpu("gres:mps:2") == 0


def test_squeue_2205_a_large_queue_of_held_jobs_and_running_array_tasks() -> None:
    """Recorded: 10,000 held hops jobs and a 2,000-task array of running one-CPU jobs."""
    import lzma

    text = lzma.decompress((FIXTURES / "squeue_10000_held_2000_running.22.05.json.xz").read_bytes())
    jobs = parse_jobs(text.decode())
    held = [j for j in jobs if j.pending and j.held and j.tag is not None]
    running = [j for j in jobs if j.running]
    assert len(held) == 9991 and {j.reason for j in held} == {"JobHeldAdmin"}
    released = [j for j in jobs if j.pending and not j.held]  # released by hopsd, not started yet
    assert len(released) == 3 and {j.reason for j in released} == {"Resources"}
    assert len(running) == 2000 and all(j.tag is None and j.gpus == 0 for j in running)
    arrays = {j.array_id.split("_")[0] for j in running}
    assert len(arrays) == 1 and len({j.array_id for j in running}) == 2000
