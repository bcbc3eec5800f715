"""Read the model profile file: what each model of the workload really does on each GPU type.

TOML (or JSON with the same structure)::

    [models.resnet50]
    params = 25.6e6            # parameters (sets the all-reduce volume)
    batch_size = 32            # per-GPU batch
    dataset = "ImageNet"
    data_ms_per_sample = 2.5   # data loading on a host of factor 1.0
    p_hit = 0.8                # page-cache hit share of iterations
    miss_ratio = 3.0           # a miss costs this many hits
    pattern = 1                # 1 overlaps loading with compute, 2 does not
    comm_scale = 1.15          # real all-reduce time over the ideal ring time
    restore_s = 80             # optional: what a restart really costs (else the penalty)
    [models.resnet50.max_gpus]     # optional: most GPUs of a type one job can use
    K80 = 0                        # 0: does not fit one GPU (no throughput needed)
    [models.resnet50.throughput]   # compute-bound per-GPU samples/s on one GPU
    GTX1080Ti = 58.0
    RTX3090 = 192.0
    [models.resnet50.compute_ms]   # alternative: compute time per iteration (ms)
    TitanXP = 492.0
    [models.resnet50.measured_throughput.RTX3090]   # optional: measured scaling
    2 = 370.0                      # total samples/s one job sustains on 2 GPUs
    4 = 700.0                      # ... on 4 GPUs, whatever the placement
    "8/2" = 1300.0                 # ... on 8 GPUs over 2 servers
    "6+2" = 1250.0                 # ... on 6 GPUs of one server and 2 of another

Per type, either a throughput or a compute time is given; a GPU type the
cluster file maps with ``compute_as`` reuses its target's numbers.
``measured_throughput`` is what a source measured on some placements of a
type: the simulator's truth runs a configuration at the most specific
measurement matching it (its exact GPUs per server, then its GPUs and
servers, then its GPUs) and derives the others from ``params`` and
``comm_scale``; the scheduler never reads it (it learns the scaling by
measuring the job). A ``compute_as`` alias computes like its target but
scales on its own links.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hopsd.core.errors import HopsError, InvalidInputError
from hopsd.sim.input_file import read_input
from hopsd.sim.truth import ModelSpec, measured_key

_SCALARS = {
    "params",
    "batch_size",
    "dataset",
    "data_ms_per_sample",
    "p_hit",
    "miss_ratio",
    "pattern",
    "comm_scale",
    "restore_s",
}
_TABLES = {"throughput", "compute_ms", "max_gpus", "measured_throughput"}


class ProfileFileError(InvalidInputError):
    """A model profile file that cannot describe a model."""


def _per_type(where: str, table: Any, batch: int, as_ms: bool) -> dict[str, float]:
    if not isinstance(table, dict):
        raise ProfileFileError(f"{where} must be a table of GPU type = number")
    out: dict[str, float] = {}
    for gpu_type, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ProfileFileError(f"{where}.{gpu_type} must be a positive number, got {value!r}")
        out[gpu_type] = batch / (value / 1000.0) if as_ms else float(value)
    return out


def _limits(where: str, table: Any) -> dict[str, int]:
    if not isinstance(table, dict):
        raise ProfileFileError(f"{where} must be a table of GPU type = count")
    out: dict[str, int] = {}
    for gpu_type, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProfileFileError(f"{where}.{gpu_type} must be an integer >= 0, got {value!r}")
        out[gpu_type] = value
    return out


def _measured(where: str, table: Any) -> dict[str, dict[str, float]]:
    """GPU type -> measured placement (:func:`~hopsd.sim.truth.measured_key`) -> samples/s."""
    if not isinstance(table, dict):
        raise ProfileFileError(f"{where} must be a table of GPU type tables")
    out: dict[str, dict[str, float]] = {}
    for gpu_type, counts in table.items():
        label = f"{where}.{gpu_type}"
        if not isinstance(counts, dict):
            raise ProfileFileError(f"{label} must be a table of placement = samples/s")
        per: dict[str, float] = {}
        for key, value in counts.items():
            try:
                canonical = measured_key(str(key))
            except InvalidInputError as exc:
                raise ProfileFileError(f"{label}: {exc}") from None
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ProfileFileError(f"{label}.{key} must be a positive number")
            per[canonical] = float(value)
        out[gpu_type] = per
    return out


def _parse_model(where: str, name: str, table: Any) -> ModelSpec:
    label = f"{where}: [models.{name}]"
    if not isinstance(table, dict):
        raise ProfileFileError(f"{label} must be a table")
    unknown = set(table) - _SCALARS - _TABLES
    if unknown:
        raise ProfileFileError(f"{label}: unknown key(s) {sorted(unknown)}")
    for key in ("params", "batch_size"):
        if key not in table:
            raise ProfileFileError(f"{label}: missing {key!r}")
    batch = table["batch_size"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise ProfileFileError(f"{label}: batch_size must be a positive integer")
    thr = _per_type(f"{label}.throughput", table.get("throughput", {}), batch, as_ms=False)
    thr.update(_per_type(f"{label}.compute_ms", table.get("compute_ms", {}), batch, as_ms=True))
    if not thr:
        raise ProfileFileError(f"{label}: give a throughput or compute_ms table")
    limits = _limits(f"{label}.max_gpus", table.get("max_gpus", {}))
    measured = _measured(f"{label}.measured_throughput", table.get("measured_throughput", {}))
    scalars = {k: v for k, v in table.items() if k in _SCALARS and k != "batch_size"}
    try:
        return ModelSpec(
            name=name,
            batch_size=batch,
            throughput=thr,
            max_gpus=limits,
            measured_throughput=measured,
            **scalars,
        )
    except (HopsError, TypeError) as exc:
        raise ProfileFileError(f"{label}: {exc}") from exc


def parse_profiles(data: Mapping[str, Any], where: str = "profiles") -> dict[str, ModelSpec]:
    """Models of an already-parsed profile document."""
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise ProfileFileError(f"{where}: needs at least one [models.NAME] table")
    return {name: _parse_model(where, name, table) for name, table in models.items()}


def load_profiles(path: str | Path) -> dict[str, ModelSpec]:
    """Read a ``.toml`` or ``.json`` model profile file."""
    p = Path(path)
    text = read_input(p, ProfileFileError)
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileFileError(f"{p}: cannot parse: {exc}") from exc
    return parse_profiles(data, where=str(p))


def with_aliases(
    models: Mapping[str, ModelSpec], compute_as: Mapping[str, str]
) -> dict[str, ModelSpec]:
    """Copy each model's numbers to the GPU types that compute like another type.

    A measured scaling is not copied: it measured the other type's hosts and
    links, so an alias scales as its own links say (``params``, ``comm_scale``).
    """
    out: dict[str, ModelSpec] = {}
    for name, spec in models.items():
        thr = dict(spec.throughput)
        for alias, target in compute_as.items():
            if alias not in thr and target in thr:
                thr[alias] = thr[target]
        out[name] = replace(
            spec, throughput=thr, max_gpus=_alias_limits(spec.max_gpus, compute_as)
        )
    return out


def _alias_limits(limits: Mapping[str, int], compute_as: Mapping[str, str]) -> dict[str, int]:
    """A type that computes like another also shares its GPU limits (unless it has its own)."""
    out = dict(limits)
    for alias, target in compute_as.items():
        if alias not in out and target in limits:
            out[alias] = limits[target]
    return out
