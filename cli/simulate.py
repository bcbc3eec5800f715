"""``hops simulate``: replay a workload on a described cluster under several policies."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hops_cli.common import EXIT_USAGE, console, fail, print_json

if TYPE_CHECKING:
    from hopsd.sim.knobs import SimKnobs

COLUMNS = (
    ("makespan_h", "makespan h", "{:.2f}"),
    ("avg_jct_h", "avg JCT h", "{:.2f}"),
    ("median_jct_h", "med JCT h", "{:.2f}"),
    ("p99_jct_h", "p99 JCT h", "{:.2f}"),
    ("avg_wait_h", "avg wait h", "{:.2f}"),
    ("max_lr", "max LR", "{:.2f}"),
    ("p99_lr", "p99 LR", "{:.2f}"),
    ("max_ftf", "max FTF", "{:.2f}"),
    ("avg_idle_gpus", "idle GPUs", "{:.2f}"),
    ("utilization", "util", "{:.1%}"),
    ("preemptions", "preempt", "{:.0f}"),
)
#: Metrics shown (mean and 95 % interval) when several seeds run.
SEED_COLUMNS = ("makespan_h", "avg_jct_h", "p99_jct_h", "avg_wait_h", "max_lr", "avg_idle_gpus")


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while solvers run.

    Solver libraries may print from native code straight to fd 1 (HiGHS builds
    do, e.g. ``HighsMipSolverData::transformNewIntegerFeasibleSolution``), which
    Python cannot intercept. Moving fd 1 itself keeps stdout for the results
    alone; worker processes forked meanwhile inherit the redirection.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _table(results: dict[str, Any]) -> Table:
    title = f"{results.get('preset') or results.get('trace')}: {results['n_jobs']} jobs"
    table = Table(title=f"{title}, {results['total_gpus']} GPUs, seed {results['seed']}")
    table.add_column("policy")
    for _, header, _ in COLUMNS:
        table.add_column(header, justify="right")
    for name, figures in results["policies"].items():
        table.add_row(name, *(fmt.format(figures[key]) for key, _, fmt in COLUMNS))
    return table


def _ci(figure: dict[str, float]) -> str:
    return f"{figure['mean']:.2f} [{figure['ci_low']:.2f}, {figure['ci_high']:.2f}]"


def seed_tables(results: dict[str, Any]) -> list[Table]:
    seeds = results["seeds"]
    label = results.get("workload") or results.get("preset") or results.get("trace")
    headers = {key: header for key, header, _ in COLUMNS}
    means = Table(
        title=f"{label}: mean [95% CI] over seeds {seeds[0]}..{seeds[-1]} (n={len(seeds)})"
    )
    means.add_column("policy")
    for key in SEED_COLUMNS:
        means.add_column(headers[key], justify="right")
    for name, figures in results["summary"].items():
        means.add_row(
            name,
            *(_ci(figures[k]) for k in SEED_COLUMNS),
        )
    ratios = Table(title=f"paired per-seed ratio {results['reference']} / baseline [95% CI]")
    ratios.add_column("baseline")
    keys = [k for k in SEED_COLUMNS if k != "avg_idle_gpus"]
    for key in keys:
        ratios.add_column(headers[key], justify="right")
    for base, figures in results["paired_ratio"].items():
        ratios.add_row(
            base,
            *(_ci(figures[k]) if k in figures else "-" for k in keys),
        )
    return [means, ratios]


def _knobs(
    sim_config: str | None,
    round_length: float | None,
    restart_penalty: float | None,
    profiling_s: float | None,
    notice_grace: float | None = None,
) -> SimKnobs:
    """The simulation's knobs: the ``--sim-config`` file's, overridden by the flags given."""
    from hopsd.sim.knobs import SimKnobs, load_knobs, parse_knobs

    knobs = load_knobs(sim_config) if sim_config is not None else SimKnobs()
    flags = {
        "round_length_s": round_length,
        "restart_penalty_s": restart_penalty,
        "profiling_s": profiling_s,
        "notice_grace_s": notice_grace,
    }
    return knobs.with_defaults(
        parse_knobs({k: v for k, v in flags.items() if v is not None}, "command line").defaults
    )


def progress_bar(show: bool) -> Progress:
    """One bar per policy on stderr, shown only on a terminal."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console().__class__(stderr=True),
        disable=not show,
        transient=True,
    )


def _reporter(progress: Progress) -> Callable[[str, float, int, int], None]:
    """The simulation's progress callback: each policy's bar, added at its first report."""
    tasks: dict[str, Any] = {}

    def report(policy: str, _sim_s: float, done: int, total: int) -> None:
        if policy not in tasks:
            tasks[policy] = progress.add_task(policy, total=total)
        progress.update(tasks[policy], completed=done)

    return report


def _print_results(results: dict[str, Any], as_json: bool, seeded: bool, out: str | None) -> None:
    """The results object (``--json``), or the tables: one per run, two over seeds."""
    if as_json:
        print_json(results)
        return
    if seeded:
        for table in seed_tables(results):
            console().print(table)
        if out:
            console().print(f"results.json (every seed, intervals, ratios) written to {out}")
        return
    console().print(_table(results))
    if out:
        console().print(f"results.json, per-job CSVs and plots written to {out}")


# The command's options, one type each: the signature reads as the list of options.
PresetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--preset",
        help="Built-in workload: paper-64 or paper-512. Give it again for a sweep over several.",
    ),
]

ClusterOption = Annotated[str | None, typer.Option("--cluster", help="Cluster description (TOML).")]

TraceOption = Annotated[str | None, typer.Option("--trace", help="Job trace (CSV).")]

TraceFormatOption = Annotated[
    str,
    typer.Option(
        "--trace-format",
        help="hops (CSV), gavel (.trace; --profiles: Gavel's throughputs JSON) or sia "
        "(workload CSV; --profiles: Sia's traces directory).",
    ),
]

ProfilesOption = Annotated[
    str | None, typer.Option("--profiles", help="Model throughput profiles file.")
]

PoliciesOption = Annotated[
    str, typer.Option("--policies", help="Comma-separated: hops,sia,gavel,fifo,hops-ftf,...")
]

SeedOption = Annotated[int, typer.Option("--seed", help="Seed of workload and noise.")]

SeedsOption = Annotated[
    str | None,
    typer.Option("--seeds", help="Several seeds (0-9, 0,3,5): mean, 95% CI, paired ratios."),
]

WorkersOption = Annotated[
    int, typer.Option("--workers", help="Processes running policies (x seeds) at once.")
]

RoundLengthOption = Annotated[
    float | None, typer.Option("--round-length", help="Round length, seconds (all policies).")
]

RestartPenaltyOption = Annotated[
    float | None,
    typer.Option("--restart-penalty", help="Cost of a move or restart, seconds."),
]

ProfilingOption = Annotated[
    float | None, typer.Option("--profiling-s", help="Profiling time of a new job, seconds.")
]

NoticeGraceOption = Annotated[
    float | None,
    typer.Option(
        "--notice-grace",
        help="Checkpoint notice before a move or preemption, seconds (hopsd's: 120; 0: none).",
    ),
]

SimConfigOption = Annotated[
    str | None,
    typer.Option(
        "--sim-config",
        help="Simulation TOML: knob defaults, per-policy tables (policies.NAME), "
        "a sweep's workloads (workloads.NAME).",
    ),
]

OutOption = Annotated[
    str | None, typer.Option("--out", help="Directory for results.json, CSVs and PNG plots.")
]

AsJsonOption = Annotated[bool, typer.Option("--json", help="Print the results object.")]

ResultsOption = Annotated[
    str | None,
    typer.Option(
        "--results",
        help="Sweep directory: one JSON file per (workload, policy, seed) cell and the merged "
        "results.json; a re-run computes only the cells not there yet.",
    ),
]

ExecutorOption = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where a sweep's cells run: local (--workers processes) or slurm (one job array "
        "through submitit, on the Slurm cluster you submit to; needs --results on a shared "
        "file system).",
    ),
]

PartitionOption = Annotated[
    str | None,
    typer.Option("--partition", help="--executor slurm: partition (default: the cluster's)."),
]

TimeLimitOption = Annotated[
    int,
    typer.Option(
        "--time-limit",
        help="--executor slurm: time limit of one cell, minutes (a task of several cells "
        "gets that many times it).",
    ),
]

CellsPerTaskOption = Annotated[
    int | None,
    typer.Option(
        "--cells-per-task",
        help="--executor slurm: cells one array task computes in turn (default 1, or more "
        "when the sweep has more cells than the cluster's MaxArraySize).",
    ),
]

MemOption = Annotated[
    float | None,
    typer.Option(
        "--mem-gb", help="--executor slurm: memory of one task, GB (default: the cluster's)."
    ),
]

ArrayParallelismOption = Annotated[
    int,
    typer.Option(
        "--array-parallelism", help="--executor slurm: cells running at once (the array's %N)."
    ),
]


def simulate(
    preset: PresetOption = None,
    cluster: ClusterOption = None,
    trace: TraceOption = None,
    trace_format: TraceFormatOption = "hops",
    profiles: ProfilesOption = None,
    policies: PoliciesOption = "hops,sia,gavel,fifo",
    seed: SeedOption = 0,
    seeds: SeedsOption = None,
    workers: WorkersOption = 1,
    round_length: RoundLengthOption = None,
    restart_penalty: RestartPenaltyOption = None,
    profiling_s: ProfilingOption = None,
    notice_grace: NoticeGraceOption = None,
    sim_config: SimConfigOption = None,
    out: OutOption = None,
    as_json: AsJsonOption = False,
    results: ResultsOption = None,
    executor: ExecutorOption = "local",
    partition: PartitionOption = None,
    time_limit: TimeLimitOption = 60,
    array_parallelism: ArrayParallelismOption = 64,
    cells_per_task: CellsPerTaskOption = None,
    mem: MemOption = None,
) -> None:
    """Compare hops with Sia, Gavel and plain Slurm FIFO on a simulated cluster.

    Example: hops simulate --preset paper-512 --policies hops,sia,gavel,fifo --seed 0 --out out/

    A sweep runs every policy on every seed of every workload, one cell each: give
    --results DIR (cells are kept there, so an interrupted sweep resumes), several
    --preset, or workloads.NAME tables in --sim-config. --executor slurm submits the
    missing cells as one job array and waits for it, showing its progress; the
    merged tables (mean and 95% CI over seeds) are the same as a local run's.

    Example: hops simulate --preset paper-64 --preset paper-512 --seeds 0-9
    --results sweep/ --executor slurm --partition cpu --time-limit 30
    """
    from hops_cli import simulate_sweep as sweep
    from hopsd.core.errors import HopsError
    from hopsd.sim.seeds import parse_seeds
    from hopsd.solver_banner import silence_solver_banner

    silence_solver_banner()  # the only command that solves; keep --json clean

    names = [p.strip() for p in policies.split(",") if p.strip()]
    try:
        knobs = _knobs(sim_config, round_length, restart_penalty, profiling_s, notice_grace)
        seed_list = parse_seeds(seeds) if seeds is not None else None
        workloads, named = sweep.workloads_of(
            preset or [], cluster, trace, profiles, trace_format, sim_config
        )
    except HopsError as exc:
        fail(str(exc), EXIT_USAGE)
    if (cluster is None) != (trace is None) and not preset:
        fail("--cluster and --trace go together (or use --preset)", EXIT_USAGE)
    if sweep.is_sweep(results, executor, workloads, named):
        slurm = sweep.slurm_options(partition, time_limit, array_parallelism, cells_per_task, mem)
        sweep.run(
            workloads, out=out, seeds=seed_list or [seed], policies=names, knobs=knobs,
            results=results, executor=executor, workers=workers, slurm=slurm, as_json=as_json,
        )  # fmt: skip
        return
    one_preset = preset[0] if preset else None
    if one_preset is None and (cluster is None or trace is None):
        one_preset = "paper-64"
    inputs: dict[str, Any] = {"cluster": cluster, "trace": trace, "profiles": profiles}
    inputs |= {"trace_format": trace_format, "policies": names, "knobs": knobs}
    inputs |= {"workers": workers, "out_dir": out}
    outcome = _compare(one_preset, inputs, seed, seed_list, show=not as_json)
    _print_results(outcome, as_json, seed_list is not None, out)


def _compare(
    preset: str | None,
    inputs: dict[str, Any],
    seed: int,
    seed_list: list[int] | None,
    show: bool,
) -> dict[str, Any]:
    """One comparison: every policy on one seed (a bar per policy on a terminal), or on
    each of ``seed_list``; ``inputs`` holds the keyword arguments both runs take."""
    from hopsd.core.errors import HopsError
    from hopsd.sim.run import simulate as run_simulation
    from hopsd.sim.seeds import simulate_seeds

    show_progress = show and sys.stderr.isatty() and seed_list is None
    with progress_bar(show_progress) as progress:
        try:
            with stdout_to_stderr():
                if seed_list is not None:
                    outcome = simulate_seeds(preset, seeds=seed_list, **inputs)
                else:
                    report = _reporter(progress)
                    outcome = run_simulation(preset, seed=seed, progress_callback=report, **inputs)
        except HopsError as exc:
            fail(str(exc), EXIT_USAGE)
        except OSError as exc:
            fail(f"{exc.filename or 'input'}: {exc.strerror or exc}")
    return outcome
