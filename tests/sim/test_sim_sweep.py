"""Sweeps: one file per (workload, policy, seed) cell, skipped on a re-run, merged into the
results of a run over seeds; workloads from a simulation file; Slurm refused clearly."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hopsd.core.errors import MissingExtraError
from hopsd.sim import sweep_run
from hopsd.sim.knobs import Knobs, SimKnobs
from hopsd.sim.seeds import simulate_seeds
from hopsd.sim.sweep import (
    SweepError,
    Workload,
    load_workloads,
    make_workload,
    merge,
    pending,
    run_cells,
    write_atomic,
)
from hopsd.sim.sweep_run import plan_sweep, run_sweep
from hopsd.sweep_slurm import (
    SlurmOptions,
    check_slurm,
    error_line,
    failures_message,
    make_executor,
    parse_max_array_size,
    parse_queued,
    task_groups,
)

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "examples" / "sim" / "cluster.toml"
TRACE = REPO / "examples" / "sim" / "trace.csv"
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
POLICIES = ["hops", "fifo"]
CAT = shutil.which("cat")  # the fake commands run on a PATH of their own


def small() -> Workload:
    return make_workload(None, cluster=CLUSTER, trace=TRACE)


def without_wall(per_seed: dict[str, Any]) -> dict[str, Any]:
    return {
        s: {p: {k: v for k, v in f.items() if k != "wall_s"} for p, f in pols.items()}
        for s, pols in per_seed.items()
    }


def test_one_file_per_cell_and_merge_equals_a_run_over_seeds(tmp_path: Path) -> None:
    outcome = run_sweep([small()], seeds=[0, 1], policies=POLICIES, results=tmp_path, workers=2)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "cells/trace/fifo/seed-0.json",
        "cells/trace/fifo/seed-1.json",
        "cells/trace/hops/seed-0.json",
        "cells/trace/hops/seed-1.json",
        "results.json",
    ]
    cell = json.loads((tmp_path / "cells/trace/hops/seed-1.json").read_text())
    assert cell["inputs"]["seed"] == 1 and cell["inputs"]["policy"] == "hops"
    assert len(cell["jobs"]) == 4  # every simulated job's record
    direct = simulate_seeds(None, seeds=[0, 1], cluster=CLUSTER, trace=TRACE, policies=POLICIES)
    merged = outcome.merged[0]
    assert without_wall(merged["per_seed"]) == without_wall(direct["per_seed"])
    assert merged["summary"] == direct["summary"]
    assert merged["paired_ratio"] == direct["paired_ratio"]
    assert json.loads((tmp_path / "results.json").read_text())["summary"] == json.loads(
        json.dumps(merged["summary"])
    )


def test_rerun_computes_only_missing_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_sweep([small()], seeds=[0, 1], policies=POLICIES, results=tmp_path)
    (tmp_path / "cells/trace/hops/seed-1.json").unlink()
    kept = (tmp_path / "cells/trace/fifo/seed-0.json").stat().st_mtime_ns
    ran: list[str] = []
    real = sweep_run.run_cell
    monkeypatch.setattr(sweep_run, "run_cell", lambda c, r: ran.append(c.label) or real(c, r))
    outcome = run_sweep([small()], seeds=[0, 1], policies=POLICIES, results=tmp_path)
    assert ran == ["trace/hops/seed 1"]
    assert (outcome.cells, outcome.skipped, outcome.computed) == (4, 3, 1)
    assert (tmp_path / "cells/trace/fifo/seed-0.json").stat().st_mtime_ns == kept


def test_torn_cell_file_is_computed_again(tmp_path: Path) -> None:
    cells = plan_sweep([small()], seeds=[0], policies=["fifo"], knobs=None)
    path = tmp_path / cells[0].relpath
    path.parent.mkdir(parents=True)
    path.write_text('{"inputs": {"pol')
    assert pending(tmp_path, cells) == cells


def test_cell_of_other_knobs_is_refused_not_mixed(tmp_path: Path) -> None:
    run_sweep([small()], seeds=[0], policies=["fifo"], results=tmp_path)
    knobs = SimKnobs().with_defaults(Knobs(round_length_s=120.0))
    with pytest.raises(SweepError, match=r"seed-0\.json: computed with other inputs"):
        run_sweep([small()], seeds=[0], policies=["fifo"], results=tmp_path, knobs=knobs)


def test_merge_names_a_missing_cell(tmp_path: Path) -> None:
    cells = plan_sweep([small()], seeds=[0], policies=["fifo"], knobs=None)
    with pytest.raises(SweepError, match=r"cells/trace/fifo/seed-0\.json: missing"):
        merge(tmp_path, [small()], cells, [0], ["fifo"])


def test_write_atomic_keeps_the_old_file_when_a_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "c" / "cell.json"
    write_atomic(path, {"a": 1})
    write_atomic(path, {"a": 2})
    with pytest.raises(TypeError):
        write_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 2}
    assert os.listdir(path.parent) == ["cell.json"]


def test_workloads_of_a_simulation_file_resolve_paths_next_to_it(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    path = sub / "sweep.toml"
    path.write_text(
        'round_length_s = 120\n[workloads.small]\ncluster = "c.toml"\ntrace = "t.csv"\n'
        '[workloads.p64]\npreset = "paper-64"\n'
    )
    small_w, p64 = load_workloads(path)
    assert (small_w.name, small_w.cluster, small_w.trace) == (
        "small",
        str(sub / "c.toml"),
        str(sub / "t.csv"),
    )
    assert (p64.name, p64.preset, p64.cluster) == ("p64", "paper-64", None)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[workloads.a]\ncluster = "c.toml"\n', "give preset, or cluster and trace"),
        ('[workloads.a]\npreset = "paper-64"\nseed = "1"\n', "unknown key 'seed'"),
        ('[workloads."a b"]\npreset = "paper-64"\n', "workload name 'a b'"),
    ],
)
def test_bad_workload_tables_are_refused(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(table)
    with pytest.raises(SweepError, match=message):
        load_workloads(path)


def test_a_workload_named_twice_is_refused() -> None:
    with pytest.raises(SweepError, match="'trace' given twice"):
        plan_sweep([small(), small()], seeds=[0], policies=["fifo"], knobs=None)


def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sinfo: str) -> None:
    """sbatch, srun, squeue and sinfo on an otherwise empty PATH; sinfo runs ``sinfo``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    commands = {"sbatch": "exit 0", "srun": "exit 0", "squeue": "exit 0", "sinfo": sinfo}
    for name, body in commands.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_no_slurm_on_path_is_refused_saying_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SweepError, match=r"no Slurm here \(sbatch is not on PATH\).*local"):
        check_slurm(SlurmOptions())


def test_unreachable_controller_is_refused_with_sinfos_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = FIXTURES / "err_sinfo_no_controller.22.05.txt"  # real sinfo, controller down
    fake_slurm(tmp_path, monkeypatch, f"{CAT} {recorded} >&2; exit 1")
    with pytest.raises(SweepError, match="Unable to contact slurm controller"):
        check_slurm(SlurmOptions())


def test_unknown_partition_is_refused_listing_the_clusters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_slurm(tmp_path, monkeypatch, f"{CAT} {FIXTURES / 'sinfo_partitions.22.05.txt'}")
    check_slurm(SlurmOptions(partition="a100"))
    with pytest.raises(SweepError, match=r"'cpu': no such partition.*a100, all, hops, k80, v100"):
        check_slurm(SlurmOptions(partition="cpu"))


def test_error_line_of_submitits_report_of_a_failed_task() -> None:
    report = (FIXTURES / "submitit_failed_task.22.05.txt").read_text()  # real, submitit 1.5.4
    assert error_line(report).startswith("IsADirectoryError: [Errno 21] Is a directory: ")
    assert error_line("hopsd.core.errors.InvalidInputError: bad\n") == (
        "hopsd.core.errors.InvalidInputError: bad"
    )
    assert error_line("Job killed\n  - log\n") == "Job killed"


def test_queued_tasks_of_an_array() -> None:
    recorded = (FIXTURES / "squeue_array_tasks.22.05.txt").read_text()  # real, -r -o "%i %T"
    queued = parse_queued(0, recorded, "")
    assert queued is not None and len(queued) == 6
    assert (queued["80_0"], queued["80_5"]) == ("RUNNING", "PENDING")
    gone = (FIXTURES / "err_squeue_invalid_job.22.05.txt").read_text()  # array purged
    assert parse_queued(1, "", gone) == {}
    down = (FIXTURES / "err_squeue_no_controller.22.05.txt").read_text()
    assert parse_queued(1, "", down) is None  # unknown: not "every task ended"


def test_slurm_executor_without_submitit_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit fails
    with pytest.raises(MissingExtraError, match=r"hops-scheduler\[submitit\]"):
        make_executor(tmp_path, SlurmOptions())


def test_cells_are_grouped_to_fit_the_clusters_array_size() -> None:
    assert parse_max_array_size((FIXTURES / "scontrol_show_config.22.05.txt").read_text()) == 1001
    cells = plan_sweep([small()], seeds=list(range(5)), policies=POLICIES, knobs=None)
    assert [len(g) for g in task_groups(cells, None, 1001)] == [1] * 10
    assert [len(g) for g in task_groups(cells, 4, 1001)] == [4, 4, 2]
    assert [len(g) for g in task_groups(cells, None, 3)] == [4, 4, 2]  # 10 cells, 3 tasks
    assert [c for g in task_groups(cells, 3, 1001) for c in g] == cells


def test_a_failing_cell_does_not_stop_the_rest_of_its_task(tmp_path: Path) -> None:
    cells = plan_sweep([small()], seeds=[0, 1], policies=["fifo"], knobs=None)
    (tmp_path / cells[0].relpath).mkdir(parents=True)  # no file can go there
    with pytest.raises(SweepError, match=r"1 of 2 cells failed: trace/fifo/seed 0: IsADir"):
        run_cells(cells, str(tmp_path))
    assert (tmp_path / cells[1].relpath).is_file()


def test_an_edited_trace_is_another_experiment(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE.read_text())
    sweep: dict[str, Any] = {"seeds": [0], "policies": ["fifo"], "results": tmp_path / "r"}
    run_sweep([make_workload(None, cluster=CLUSTER, trace=trace)], **sweep)
    trace.write_text(TRACE.read_text().replace("500000", "400000"))
    with pytest.raises(SweepError, match="computed with other inputs"):
        run_sweep([make_workload(None, cluster=CLUSTER, trace=trace)], **sweep)


def test_the_arrays_sbatch_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_slurm(tmp_path, monkeypatch, "exit 0")  # submitit looks for srun
    options = SlurmOptions("cpu", time_limit_min=5, array_parallelism=3, mem_gb=2.0)
    params = make_executor(tmp_path, options, cells_per_task=2).parameters
    assert params["time"] == 10  # two cells of five minutes each
    assert (params["partition"], params["mem"]) == ("cpu", "2048M")
    assert (params["array_parallelism"], params["cpus_per_task"]) == (3, 1)
    assert "partition" not in make_executor(tmp_path, SlurmOptions()).parameters


def test_no_log_from_any_task_points_at_the_shared_file_system(tmp_path: Path) -> None:
    cells = plan_sweep([small()], seeds=[0, 1], policies=["fifo"], knobs=None)

    def task(n: int) -> SimpleNamespace:  # a task that left nothing in the results
        folder = tmp_path / "slurm" / f"7_{n}"
        paths = {"result_pickle": folder / "r.pkl", "stderr": folder / "e.log", "folder": folder}
        return SimpleNamespace(paths=SimpleNamespace(**paths))

    everything = failures_message("7", [(c, task(n)) for n, c in enumerate(cells)], 2)
    assert "left Slurm's queue without a result" in everything
    assert "file system the nodes share?" in everything
    (tmp_path / "slurm" / "7_0").mkdir(parents=True)
    (tmp_path / "slurm" / "7_0" / "e.log").write_text("slurmstepd: error: *** CANCELLED ***")
    assert "nodes share" not in failures_message("7", [(cells[0], task(0))], 2)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_local_cell_is_named_and_the_others_are_kept(
    tmp_path: Path, workers: int
) -> None:
    cells = plan_sweep([small()], seeds=[0, 1, 2], policies=["fifo"], knobs=None)
    (tmp_path / cells[0].relpath).mkdir(parents=True)  # no file can go there
    with pytest.raises(SweepError, match=r"1 of 3 cells failed \(trace/fifo/seed 0\).*IsADir"):
        run_sweep([small()], seeds=[0, 1, 2], policies=["fifo"], results=tmp_path, workers=workers)
    assert all((tmp_path / c.relpath).is_file() for c in cells[1:])
