"""Run a sweep's missing cells, here in processes or through a remote runner, then merge.

:func:`run_sweep` is what ``hops simulate --results DIR`` calls. It checks the
whole request before any cell runs (policies, knobs, every workload's files),
lays out the cells (:mod:`hopsd.sim.sweep`), computes only those whose files
are missing, over ``workers`` local processes or with the ``remote`` runner it
is given (:class:`hopsd.sweep_slurm.SlurmArray`: one Slurm job array; the
simulator itself never reaches Slurm), and merges every cell into one results
object per workload, written to ``results.json`` in the results directory.

Cells are independent and each is a function of its inputs and seed, so where
a cell ran does not change its figures: a sweep computed on Slurm merges into
the same results as one computed here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hopsd.core.errors import InvalidInputError
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.knobs import SimKnobs
from hopsd.sim.run import check_request, policy_configs, policy_settings_of
from hopsd.sim.seeds import student_t
from hopsd.sim.sweep import (
    Cell,
    SweepError,
    Workload,
    cells_of,
    merge,
    pending,
    run_cell,
    write_merged,
)

#: progress(cells done, cells in the sweep, what is happening)
SweepProgress = Callable[[int, int, str], None]
#: remote(cells to compute, results directory, progress(cells ended, what)) -> notes:
#: computes the cells elsewhere, each writing its file into the results directory.
RemoteRunner = Callable[[Sequence[Cell], Path, Callable[[int, str], None]], list[str]]


@dataclass
class SweepOutcome:
    """The merged results, and how the run went (for the report line)."""

    merged: list[dict[str, Any]]
    path: Path
    cells: int
    skipped: int
    computed: int
    wall_s: float
    notes: list[str] = field(default_factory=list)


def plan_sweep(
    workloads: Sequence[Workload],
    *,
    seeds: Sequence[int],
    policies: Sequence[str],
    knobs: SimKnobs | None,
) -> list[Cell]:
    """Every cell of the sweep, after refusing what could not run: unknown policies or
    knob tables, a missing library, a workload whose files do not load."""
    if not workloads:
        raise InvalidInputError("give at least one workload")
    if not seeds:
        raise InvalidInputError("give at least one seed")
    own = policy_settings_of(policies, knobs)
    check_request(policies, None, own)
    if len(seeds) > 1:
        student_t()  # the intervals' library, before any cell runs
    for workload in workloads:
        workload.load(seeds[0])  # a bad file fails here, not in cell 300 of a job array
    configs = policy_configs(policies, EngineConfig(), knobs)
    return cells_of(workloads, policies, seeds, configs, own)


def run_local(
    todo: Sequence[Cell],
    results: Path,
    workers: int,
    progress: Callable[[int], None],
) -> None:
    """Compute ``todo`` here, over ``workers`` processes; ``progress(n)`` after each cell.

    A failing cell does not stop the others (each is independent, and each one
    written is kept); the failures are raised together at the end."""
    if workers < 1:
        raise InvalidInputError(f"workers must be >= 1, got {workers}")
    failed: list[tuple[Cell, BaseException]] = []
    if workers == 1 or len(todo) <= 1:
        for n, cell in enumerate(todo, 1):
            try:
                run_cell(cell, str(results))
            except Exception as exc:  # raised below, with the others
                failed.append((cell, exc))
            progress(n)
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            futures = {pool.submit(run_cell, cell, str(results)): cell for cell in todo}
            for n, future in enumerate(as_completed(futures), 1):
                error = future.exception()
                if error is not None:
                    failed.append((futures[future], error))
                progress(n)
    if failed:
        cell, first = failed[0]
        names = ", ".join(c.label for c, _ in failed[:5]) + (" ..." if len(failed) > 5 else "")
        raise SweepError(
            f"{len(failed)} of {len(todo)} cells failed ({names}); {cell.label}: "
            f"{type(first).__name__}: {first}. The other cells are kept: run the same command "
            "again to compute only the failed ones"
        ) from first


def run_sweep(
    workloads: Sequence[Workload],
    *,
    seeds: Sequence[int],
    policies: Sequence[str],
    results: str | Path,
    knobs: SimKnobs | None = None,
    workers: int = 1,
    remote: RemoteRunner | None = None,
    progress: SweepProgress | None = None,
) -> SweepOutcome:
    """Compute the sweep's missing cells and merge them all (see the module's docstring):
    here over ``workers`` processes, or by ``remote`` when given."""
    started = time.perf_counter()
    root = Path(results).expanduser().resolve()
    cells = plan_sweep(workloads, seeds=seeds, policies=policies, knobs=knobs)
    todo = pending(root, cells)
    before = len(cells) - len(todo)
    report = progress or (lambda _done, _total, _what: None)
    report(before, len(cells), "cells")
    notes: list[str] = []
    if todo and remote is None:
        run_local(todo, root, workers, lambda n: report(before + n, len(cells), "cells"))
    elif todo and remote is not None:
        notes = remote(todo, root, lambda n, what: report(before + n, len(cells), what))
    merged = merge(root, workloads, cells, seeds, policies)
    path = write_merged(root, merged)
    wall = time.perf_counter() - started
    return SweepOutcome(merged, path, len(cells), before, len(todo), wall, notes)
