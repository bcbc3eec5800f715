"""A sweep: policies x seeds x workloads, one JSON file per cell in a results directory.

A comparison worth publishing runs every policy on several workloads and many
seeds: hundreds of independent replays, too many for one sitting of one
process. Each (workload, policy, seed) is a *cell*; its figures (and every
simulated job's record) go to ``cells/WORKLOAD/POLICY/seed-N.json`` in the
results directory, written atomically (a temporary file renamed into place), so
a cell file is either whole or absent however its process ended. A re-run of
the same sweep skips the cells whose files are there and computes the others;
the merge reads all of them into the same results object as a run over seeds
in one process (:func:`hopsd.sim.seeds.seeds_object`), one per workload.

Each cell file records what it was computed from (the workload with a digest
of its files' contents, policy, seed, the knobs and the policy's settings). A
file whose record differs from what the sweep now asks (another round length,
an edited trace) is never silently mixed in: the sweep refuses and names it.

Where the cells run is :mod:`hopsd.sim.sweep_run`'s concern (local processes
or a Slurm job array); this module only lays the cells out, runs one, and
merges.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
import traceback
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hopsd.core.errors import InvalidInputError
from hopsd.core.typed_settings import settings_table
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.knobs import effective
from hopsd.sim.metrics import job_records, records_as_dicts, summarise
from hopsd.sim.run import load_inputs, run_policy
from hopsd.sim.seeds import seeds_object

#: Where the cell files live inside a results directory.
CELLS = "cells"
#: The merged results object a sweep writes beside its cells.
MERGED = "results.json"
#: A workload's name becomes a directory name: keep it portable.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
WORKLOAD_KEYS = ("preset", "cluster", "trace", "profiles", "trace_format")


class SweepError(InvalidInputError):
    """A sweep that cannot run or merge as asked (its message says what to do)."""


@dataclass(frozen=True)
class Workload:
    """One workload of a sweep: a preset, or cluster and trace files (absolute paths)."""

    name: str
    preset: str | None = None
    cluster: str | None = None
    trace: str | None = None
    profiles: str | None = None
    trace_format: str = "hops"
    #: digest of the files' contents: an edited trace is another experiment
    digest: str = ""

    def source(self) -> dict[str, Any]:
        """How the results object names the workload (as ``hops simulate --seeds`` does)."""
        return {
            "workload": self.name,
            "preset": self.preset,
            "cluster": self.cluster,
            "trace": self.trace,
        }

    def load(self, seed: int) -> Any:
        """The ground truth and job list of this workload on ``seed``."""
        preset = self.preset if self.cluster is None or self.trace is None else None
        return load_inputs(
            preset, self.cluster, self.trace, self.profiles, seed, self.trace_format
        )


def _absolute(path: str | Path | None, base: Path | None = None) -> str | None:
    if path is None:
        return None
    p = Path(path).expanduser()
    return str((base / p if base is not None and not p.is_absolute() else p).resolve())


def make_workload(
    name: str | None,
    *,
    preset: str | None = None,
    cluster: str | Path | None = None,
    trace: str | Path | None = None,
    profiles: str | Path | None = None,
    trace_format: str = "hops",
    base: Path | None = None,
) -> Workload:
    """A workload with its files made absolute (relative to ``base`` when given), so a cell
    computed elsewhere (a Slurm node, another directory) reads the same files. Unnamed, it
    takes the preset's name or the trace file's stem."""
    label = name or preset or (Path(trace).stem if trace is not None else None)
    if label is None or not NAME.match(label):
        raise SweepError(
            f"workload name {label!r}: use letters, digits, '.', '_' and '-' "
            "(it names the workload's directory of cells)"
        )
    c, t, p = (_absolute(f, base) for f in (cluster, trace, profiles))
    digest = files_digest([f for f in (c, t, p) if f is not None])
    return Workload(label, preset, c, t, p, trace_format, digest)


def files_digest(paths: Sequence[str]) -> str:
    """SHA-256 (16 hex digits) of the files' contents, a directory's files in name order
    (Sia's traces directory); "" without files. A path that cannot be read counts as
    empty: loading the workload then says what is wrong with it."""
    if not paths:
        return ""
    digest = hashlib.sha256()
    for path in paths:
        root = Path(path)
        files = sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else [root]
        for f in files:
            digest.update(f.relative_to(root).as_posix().encode() if f != root else b"")
            try:
                digest.update(f.read_bytes())
            except OSError:
                digest.update(b"\0unreadable")
    return digest.hexdigest()[:16]


def parse_workloads(data: Mapping[str, Any], where: str, base: Path) -> list[Workload]:
    """The ``[workloads.NAME]`` tables of a simulation file, paths relative to ``base``.

    Each table takes ``preset``, or ``cluster`` and ``trace`` (with ``profiles`` and
    ``trace_format`` as on the command line)."""
    tables = data.get("workloads", {})
    if not isinstance(tables, dict):
        raise SweepError(f"{where}: [workloads] must hold one table per workload")
    out = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise SweepError(f"{where}: [workloads.{name}] must be a table")
        unknown = sorted(set(table) - set(WORKLOAD_KEYS))
        if unknown:
            raise SweepError(
                f"{where}: [workloads.{name}]: unknown key {unknown[0]!r}; "
                f"known: {', '.join(WORKLOAD_KEYS)}"
            )
        if not all(isinstance(v, str) for v in table.values()):
            raise SweepError(f"{where}: [workloads.{name}]: every value is a string")
        if "preset" not in table and not ("cluster" in table and "trace" in table):
            raise SweepError(f"{where}: [workloads.{name}]: give preset, or cluster and trace")
        out.append(make_workload(name, base=base, **table))
    return out


def load_workloads(path: str | Path) -> list[Workload]:
    """The workloads of a simulation TOML (none when it has no ``[workloads]``)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SweepError(f"{p}: cannot read: {exc}") from exc
    return parse_workloads(data, str(p), p.resolve().parent)


@dataclass(frozen=True)
class Cell:
    """One (workload, policy, seed) of a sweep, with what its policy runs with."""

    workload: Workload
    policy: str
    seed: int
    config: EngineConfig
    own: object

    @property
    def relpath(self) -> str:
        return f"{CELLS}/{self.workload.name}/{self.policy}/seed-{self.seed}.json"

    @property
    def label(self) -> str:
        return f"{self.workload.name}/{self.policy}/seed {self.seed}"

    def inputs(self) -> dict[str, Any]:
        """What the cell is computed from, as its file records it (plain JSON values)."""
        doc = {
            "workload": asdict(self.workload),
            "policy": self.policy,
            "seed": self.seed,
            "knobs": effective(self.config),
            "policy_settings": settings_table(self.own),
        }
        return dict(json.loads(json.dumps(doc)))


def cells_of(
    workloads: Sequence[Workload],
    policies: Sequence[str],
    seeds: Sequence[int],
    configs: Mapping[str, EngineConfig],
    own: Mapping[str, object],
) -> list[Cell]:
    """Every cell, workload by workload, seed by seed, policy by policy."""
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise SweepError(f"workload {twice!r} given twice: name each workload once")
    return [
        Cell(w, p, s, configs[p], own[p]) for w in workloads for s in seeds for p in policies
    ]


def write_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` as JSON so that ``path`` is never seen half written: a temporary file
    in the same directory, flushed to disk, then renamed over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after the rename; left only by a failed write


def run_cell(cell: Cell, results: str) -> str:
    """Compute one cell and write its file; returns the file's path.

    Runs in a worker process or a Slurm array task, so it takes and returns plain,
    picklable values and reads its inputs itself."""
    truth, jobs = cell.workload.load(cell.seed)
    config = replace(cell.config, seed=cell.seed)
    result = run_policy(truth, jobs, cell.policy, config, own=cell.own)
    records = job_records(truth, result)
    figures = summarise(result, records)
    figures["wall_s"] = result.wall_planning_s
    path = Path(results) / cell.relpath
    doc = {"inputs": cell.inputs(), "figures": figures, "jobs": records_as_dicts(records)}
    write_atomic(path, doc)
    return str(path)


def run_cells(cells: Sequence[Cell], results: str) -> list[str]:
    """Compute several cells in turn (one array task's share of a large sweep).

    A cell that fails does not stop the others: each is independent, and what is
    written is kept. The failures are raised together once all have run, each
    traceback printed first for the task's log."""
    written, failed = [], []
    for cell in cells:
        try:
            written.append(run_cell(cell, results))
        except Exception as exc:  # reported below, with the others
            traceback.print_exc()
            failed.append(f"{cell.label}: {type(exc).__name__}: {exc}")
    if failed:
        raise SweepError(f"{len(failed)} of {len(cells)} cells failed: {'; '.join(failed)}")
    return written


def read_cell(results: Path, cell: Cell) -> dict[str, Any] | None:
    """The cell's file, or None when it is not there yet (or not readable as a cell).

    A file recording other inputs than the cell's is refused: mixing it in would
    merge figures of two different experiments."""
    path = results / cell.relpath
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or "figures" not in doc:
        return None
    if doc.get("inputs") != cell.inputs():
        raise SweepError(
            f"{path}: computed with other inputs than this sweep's {cell.label} "
            f"(recorded: {json.dumps(doc.get('inputs'))}); use another results directory, "
            "or delete the cell files of the old experiment"
        )
    return doc


def pending(results: Path, cells: Sequence[Cell]) -> list[Cell]:
    """The cells whose files are not there yet: what a (re-)run still has to compute."""
    return [c for c in cells if read_cell(results, c) is None]


def merge(
    results: Path,
    workloads: Sequence[Workload],
    cells: Sequence[Cell],
    seeds: Sequence[int],
    policies: Sequence[str],
) -> list[dict[str, Any]]:
    """One results object per workload, from the cell files (every cell must be there)."""
    per_workload: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    for cell in cells:
        doc = read_cell(results, cell)
        if doc is None:
            raise SweepError(f"{results / cell.relpath}: missing; run the sweep again to finish it")
        per_seed = per_workload.setdefault(cell.workload.name, {})
        per_seed.setdefault(cell.seed, {})[cell.policy] = doc["figures"]
    first = {c.policy: c for c in cells}
    configs = {p: first[p].config for p in policies}
    own = {p: first[p].own for p in policies}
    return [
        seeds_object(w.source(), seeds, policies, configs, own, per_workload[w.name])
        for w in workloads
    ]


def write_merged(results: Path, merged: Sequence[Mapping[str, Any]]) -> Path:
    """``results.json`` beside the cells: one object, or ``{"workloads": [...]}``."""
    path = results / MERGED
    write_atomic(path, merged_object(merged))
    return path


def merged_object(merged: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """What ``--json`` prints: a workload's object as ``--seeds`` gives it, or the list."""
    return merged[0] if len(merged) == 1 else {"workloads": list(merged)}
