"""``hops simulate`` as a sweep: workloads x policies x seeds, cells in a results directory.

The command turns into a sweep when it is given ``--results DIR``, ``--executor
slurm``, several workloads (``--preset`` more than once, or ``[workloads.NAME]``
tables in the ``--sim-config`` file). The computing is :mod:`hopsd.sim.sweep_run`'s;
this module gathers the workloads from the options, shows one progress bar for
the cells, and prints the merged results as ``--seeds`` does, one workload after
the other.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from hops_cli.common import EXIT_USAGE, console, fail, print_json

if TYPE_CHECKING:
    from hopsd.sim.knobs import SimKnobs
    from hopsd.sim.sweep import Workload
    from hopsd.sim.sweep_run import SweepOutcome
    from hopsd.sweep_slurm import SlurmOptions

#: Where a sweep's cells run.
EXECUTORS = ("local", "slurm")


def workloads_of(
    presets: Sequence[str],
    cluster: str | None,
    trace: str | None,
    profiles: str | None,
    trace_format: str,
    sim_config: str | None,
) -> tuple[list[Workload], bool]:
    """The workloads asked for, and whether the simulation file named some.

    Each ``--preset`` (on ``--cluster`` when no trace goes with it), the
    ``--cluster``/``--trace`` pair (named after the trace file), then the
    simulation file's ``[workloads.NAME]`` tables; paper-64 when none is named."""
    from hopsd.sim.sweep import load_workloads, make_workload

    pair = cluster is not None and trace is not None
    named = load_workloads(sim_config) if sim_config is not None else []
    if not presets and not pair and not named:
        presets = ["paper-64"]  # as for one comparison
    on = None if pair else cluster
    out = [make_workload(None, preset=p, cluster=on, profiles=profiles) for p in presets]
    if pair:
        out.append(
            make_workload(
                None, cluster=cluster, trace=trace, profiles=profiles, trace_format=trace_format
            )
        )
    return [*out, *named], bool(named)


def is_sweep(
    results: str | None, executor: str, workloads: Sequence[Workload], named: bool
) -> bool:
    """Whether the options ask for a sweep rather than one comparison: a results directory,
    the Slurm executor, several workloads, or workloads named in the simulation file."""
    return results is not None or executor != "local" or len(workloads) > 1 or named


def run(
    workloads: Sequence[Workload],
    *,
    out: str | None,
    seeds: list[int],
    policies: list[str],
    knobs: SimKnobs,
    results: str | None,
    executor: str,
    workers: int,
    slurm: SlurmOptions,
    as_json: bool,
) -> None:
    """Run the sweep's missing cells, merge, print (see the module's docstring)."""
    from hops_cli.simulate import progress_bar, stdout_to_stderr
    from hopsd.core.errors import HopsError
    from hopsd.sim.sweep import merged_object
    from hopsd.sim.sweep_run import run_sweep
    from hopsd.sweep_slurm import SlurmArray

    if executor not in EXECUTORS:
        fail(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}", EXIT_USAGE)
    if out is not None:
        fail("--out is one comparison's; a sweep writes its results into --results", EXIT_USAGE)
    if results is None and executor != "local":
        fail(
            f"--executor {executor} needs --results DIR: a directory every node can write "
            "(on a shared file system), where each cell's file lands",
            EXIT_USAGE,
        )
    show = not as_json and sys.stderr.isatty()
    with ExitStack() as stack:
        where = results or stack.enter_context(tempfile.TemporaryDirectory(prefix="hops-sweep-"))
        progress = stack.enter_context(progress_bar(show))
        task = progress.add_task("cells", total=None)

        def report(done: int, total: int, what: str) -> None:
            progress.update(task, completed=done, total=total, description=what)

        try:
            with stdout_to_stderr():
                outcome = run_sweep(
                    workloads,
                    seeds=seeds,
                    policies=policies,
                    results=where,
                    knobs=knobs,
                    workers=workers,
                    remote=SlurmArray(slurm) if executor == "slurm" else None,
                    progress=report,
                )
        except HopsError as exc:
            fail(str(exc), EXIT_USAGE)
        except OSError as exc:
            fail(f"{exc.filename or 'input'}: {exc.strerror or exc}")
    if as_json:
        print_json(merged_object(outcome.merged))
        return
    _print_tables(outcome, results)


def _print_tables(outcome: SweepOutcome, results: str | None) -> None:
    from hops_cli.simulate import seed_tables

    for obj in outcome.merged:
        for table in seed_tables(obj):
            console().print(table)
    ran = ", ".join([f"{outcome.computed} computed", *outcome.notes])
    line = f"{outcome.cells} cells ({outcome.skipped} already done, {ran})"
    line += f" in {outcome.wall_s:.1f} s"
    if results is not None:
        line += f"; cells and results.json in {outcome.path.parent}"
    console().print(line)


def slurm_options(
    partition: str | None,
    time_limit: int,
    parallelism: int,
    cells_per_task: int | None,
    mem_gb: float | None,
) -> SlurmOptions:
    """The job array's options, refused here when out of range."""
    from hopsd.sweep_slurm import SlurmOptions

    if time_limit < 1:
        fail(f"--time-limit must be >= 1 minute, got {time_limit}", EXIT_USAGE)
    if parallelism < 1:
        fail(f"--array-parallelism must be >= 1, got {parallelism}", EXIT_USAGE)
    if cells_per_task is not None and cells_per_task < 1:
        fail(f"--cells-per-task must be >= 1, got {cells_per_task}", EXIT_USAGE)
    if mem_gb is not None and mem_gb <= 0:
        fail(f"--mem-gb must be > 0, got {mem_gb}", EXIT_USAGE)
    return SlurmOptions(
        partition, time_limit, parallelism, cells_per_task=cells_per_task, mem_gb=mem_gb
    )
