"""benchmarks/live_ab.py's pure parts, without a cluster: the plain Slurm arm's sbatch
command of a job, and JCTs and their summaries from recorded ``sacct -D -X`` output."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest
from by_path import load_by_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_by_path("live_ab", ROOT / "benchmarks" / "live_ab.py")


def _argv(bench: ModuleType, job: object, choice: str = "largest") -> list[str]:
    return list(bench.sbatch_argv(job, "n", Path("/o/%j.out"), Path("/s.sh"), choice))


def test_a_plain_job_asks_for_the_largest_count_on_its_allowed_types_fastest_first(
    bench: ModuleType,
) -> None:
    job = bench.job(3, "gpt2", (2, 4), 1000, ("v100", "a100"))
    argv = _argv(bench, job)
    assert argv[0] == "sbatch"
    assert argv[argv.index("-p") + 1] == "a100,v100"  # never k80, a100 tried first
    assert "--gpus=4" in argv and argv[-1] == "/s.sh"
    assert "--gpus=2" in _argv(bench, job, "smallest")
    # no hops tag and no hold: Slurm schedules it as it is
    assert not any(a.startswith(("--comment", "--hold")) for a in argv)
    assert argv[argv.index("-t") + 1] == str(bench.TIME_LIMIT_MIN)


def test_a_job_of_any_type_may_run_on_every_partition(bench: ModuleType) -> None:
    argv = _argv(bench, bench.job(0, "resnet50", (1,), 500))
    assert argv[argv.index("-p") + 1] == "a100,v100,k80"
    assert "--gpus=1" in argv


def test_both_arms_run_the_same_script_and_the_hops_tag_mirrors_the_job(
    bench: ModuleType, tmp_path: Path
) -> None:
    job = bench.scaled_jobs([bench.job(2, "bert", (2, 4), 1000, ("a100",))], 3.0)[0]
    assert job.arrival.at_s == 6 and job.arrival.samples == 3000
    denser = bench.scaled_jobs([bench.job(2, "bert", (2, 4), 1000, ("a100",))], 3.0, 0.5)[0]
    assert denser.arrival.at_s == 3 and denser.arrival.samples == 3000
    assert denser.types == ("a100",) and denser.arrival.type_speed == job.arrival.type_speed
    a = bench.job_script(job, tmp_path / "a")
    b = bench.job_script(job, tmp_path / "b")
    assert a.replace(str(tmp_path / "a"), "") == b.replace(str(tmp_path / "b"), "")
    assert "--samples 3000 " in a and "a100=6" in a
    tag = bench.hops_tag(job)
    assert tag.demands == (2, 4) and tag.total_samples == 3000 and tag.types == ("a100",)
    assert tag.model == "bert" and tag.batch_size == job.batch


def test_the_workload_is_mixed_and_spread(bench: ModuleType) -> None:
    jobs = bench.WORKLOAD
    assert len(jobs) >= 16
    assert len({j.model for j in jobs}) >= 3 and len({j.arrival.demands for j in jobs}) >= 3
    assert max(j.arrival.at_s for j in jobs) > 0


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


SACCT = """JobIDRaw|State|Submit|Start|End|Partition|AllocTRES
7|REQUEUED|2026-12-06T10:00:00|2026-12-06T10:00:05|2026-12-06T10:00:20|v100|billing=1,cpu=1,gres/gpu:v100=2,gres/gpu=2,node=1
7|COMPLETED|2026-12-06T10:00:21|2026-12-06T10:00:30|2026-12-06T10:01:40|a100|billing=1,cpu=1,gres/gpu:a100=4,gres/gpu=4,node=1
8|COMPLETED|2026-12-06T10:00:10|2026-12-06T10:00:10|2026-12-06T10:00:40|k80|billing=1,gres/gpu:k80=1,gres/gpu=1,node=1
9|FAILED|2026-12-06T10:00:10|2026-12-06T10:00:12|2026-12-06T10:00:13|k80|gres/gpu:k80=1
10|RUNNING|2026-12-06T10:00:10|2026-12-06T10:00:12|Unknown|k80|gres/gpu:k80=1
"""


def test_a_requeued_jobs_jct_runs_from_its_first_submit_to_its_last_end(
    bench: ModuleType,
) -> None:
    runs = bench.parse_sacct(SACCT)
    assert sorted(runs) == [7, 8, 9, 10] and len(runs[7]) == 2
    r = bench.job_result(runs[7])
    assert r["jct_s"] == pytest.approx(_t("2026-12-06T10:01:40") - _t("2026-12-06T10:00:00"))
    assert r["wait_s"] == 5 and r["last_run_s"] == 70 and r["runs"] == 2
    assert (r["gpu_type"], r["gpus"]) == ("a100", 4)
    assert bench.job_result(runs[8])["jct_s"] == 30


def test_a_job_that_did_not_complete_has_no_jct(bench: ModuleType) -> None:
    runs = bench.parse_sacct(SACCT)
    assert bench.job_result(runs[9])["jct_s"] is None
    assert bench.job_result(runs[10])["jct_s"] is None
    assert bench.parse_sacct("") == {}


def test_summaries_ratios_and_the_goal(bench: ModuleType) -> None:
    slurm = [10.0] * 99 + [110.0]
    s = bench.summarise(slurm)
    assert s["avg_jct_s"] == 11.0
    assert s["p99_jct_s"] == pytest.approx(10.0 + 0.01 * 100, abs=0.05)  # interpolated
    met = bench.compare_arms(slurm, [7.0] * 99 + [11.0])
    assert met["avg_ratio"] == pytest.approx(7.04 / 11.0, abs=1e-3) and met["meets_goal"]
    # a shorter average alone does not do: the p99 must be no worse
    worse_tail = bench.compare_arms(slurm, [6.0] * 98 + [30.0, 30.0])
    assert worse_tail["avg_ratio"] <= 0.7 and worse_tail["p99_ratio"] > 1.0
    assert not worse_tail["meets_goal"]
    assert not bench.compare_arms(slurm, [8.0] * 100)["meets_goal"]  # 0.727x: not enough
