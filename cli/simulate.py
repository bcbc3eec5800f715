"""``hops simulate``: replay a workload on a described cluster under several policies."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hops_cli.common import EXIT_USAGE, console, fail, print_json

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


def _table(results: dict[str, Any]) -> Table:
    title = f"{results.get('preset') or results.get('trace')}: {results['n_jobs']} jobs"
    table = Table(title=f"{title}, {results['total_gpus']} GPUs, seed {results['seed']}")
    table.add_column("policy")
    for _, header, _ in COLUMNS:
        table.add_column(header, justify="right")
    for name, figures in results["policies"].items():
        table.add_row(name, *(fmt.format(figures[key]) for key, _, fmt in COLUMNS))
    return table


def simulate(
    preset: Annotated[
        str | None, typer.Option("--preset", help="Built-in workload: paper-64 or paper-512.")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster description (TOML).")
    ] = None,
    trace: Annotated[str | None, typer.Option("--trace", help="Job trace (CSV).")] = None,
    profiles: Annotated[
        str | None, typer.Option("--profiles", help="Model throughput profiles file.")
    ] = None,
    policies: Annotated[
        str, typer.Option("--policies", help="Comma-separated: hops,sia,gavel,fifo,hops-ftf,...")
    ] = "hops,sia,gavel,fifo",
    seed: Annotated[int, typer.Option("--seed", help="Seed of workload and noise.")] = 0,
    out: Annotated[
        str | None, typer.Option("--out", help="Directory for results.json, CSVs and PNG plots.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results object.")] = False,
) -> None:
    """Compare hops with Sia, Gavel and plain Slurm FIFO on a simulated cluster.

    Example: hops simulate --preset paper-512 --policies hops,sia,gavel,fifo --seed 0 --out out/
    """
    from hopsd.core.errors import HopsError
    from hopsd.sim.run import simulate as run_simulation
    from hopsd.solver_banner import silence_solver_banner

    silence_solver_banner()  # the only command that solves; keep --json clean

    if preset is None and (cluster is None or trace is None):
        if cluster is not None or trace is not None:
            fail("--cluster and --trace go together (or use --preset)", EXIT_USAGE)
        preset = "paper-64"
    names = [p.strip() for p in policies.split(",") if p.strip()]
    show_progress = not as_json and sys.stderr.isatty()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console().__class__(stderr=True),
        disable=not show_progress,
        transient=True,
    ) as progress:
        tasks: dict[str, Any] = {}

        def report(policy: str, _sim_s: float, done: int, total: int) -> None:
            if policy not in tasks:
                tasks[policy] = progress.add_task(policy, total=total)
            progress.update(tasks[policy], completed=done)

        try:
            results = run_simulation(
                preset,
                cluster=cluster,
                trace=trace,
                profiles=profiles,
                policies=names,
                seed=seed,
                out_dir=out,
                progress_callback=report,
            )
        except HopsError as exc:
            fail(str(exc), EXIT_USAGE)
        except OSError as exc:
            fail(f"{exc.filename or 'input'}: {exc.strerror or exc}")
    if as_json:
        print_json(results)
        return
    console().print(_table(results))
    if out:
        console().print(f"results.json, per-job CSVs and plots written to {out}")
