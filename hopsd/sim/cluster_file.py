"""Read a cluster description from TOML.

Format (all bandwidths in model parameters per second)::

    [gpu_types.RTX3090]
    b_link = 2.5e9          # intra-node bandwidth
    b_net = 7.8e8           # network bandwidth
    speed = 3.0             # admin's relative speed (attained-service weight)
    compute_as = "RTX3090"  # optional: computes like this type (simulation only)

    [[node_groups]]
    prefix = "r3090-"       # nodes are named r3090-00, r3090-01, ...
    count = 16
    gpu_type = "RTX3090"
    gpus = 8
    server_model = "newer host"
    data_factor = 1.0            # hidden: data-loading slowness of these hosts
    data_factor_spread = 0.1     # hidden: log-normal spread between hosts

Errors name the file and the offending table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from hopsd.core.errors import HopsError, InvalidInputError
from hopsd.core.model import GpuType
from hopsd.sim.cluster import NodeGroup, SimCluster, build_sim_cluster

_TYPE_KEYS = {"b_link", "b_net", "speed", "compute_as"}
_GROUP_KEYS = {
    "prefix",
    "count",
    "gpu_type",
    "gpus",
    "server_model",
    "data_factor",
    "data_factor_spread",
}


class ClusterFileError(InvalidInputError):
    """A cluster file that cannot describe a cluster."""


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClusterFileError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


def _parse_type(where: str, name: str, table: Any) -> tuple[GpuType, str | None]:
    if not isinstance(table, dict):
        raise ClusterFileError(f"{where}: [gpu_types.{name}] must be a table")
    unknown = set(table) - _TYPE_KEYS
    if unknown:
        raise ClusterFileError(f"{where}: [gpu_types.{name}] unknown key(s) {sorted(unknown)}")
    kwargs = {
        k: _number(f"{where}: [gpu_types.{name}]", k, v)
        for k, v in table.items()
        if k != "compute_as"
    }
    try:
        gpu = GpuType(name, **kwargs)
    except HopsError as exc:
        raise ClusterFileError(f"{where}: {exc}") from exc
    alias = table.get("compute_as")
    if alias is not None and not isinstance(alias, str):
        raise ClusterFileError(f"{where}: [gpu_types.{name}] compute_as must be a type name")
    return gpu, alias


def _parse_group(where: str, index: int, table: Any, types: set[str]) -> NodeGroup:
    label = f"{where}: node_groups[{index}]"
    if not isinstance(table, dict):
        raise ClusterFileError(f"{label} must be a table")
    unknown = set(table) - _GROUP_KEYS
    if unknown:
        raise ClusterFileError(f"{label}: unknown key(s) {sorted(unknown)}")
    for key in ("prefix", "count", "gpu_type", "gpus"):
        if key not in table:
            raise ClusterFileError(f"{label}: missing {key!r}")
    if table["gpu_type"] not in types:
        raise ClusterFileError(
            f"{label}: unknown GPU type {table['gpu_type']!r}; declared: {sorted(types)}"
        )
    for key in ("count", "gpus"):
        if isinstance(table[key], bool) or not isinstance(table[key], int):
            raise ClusterFileError(f"{label}: {key} must be an integer, got {table[key]!r}")
    try:
        return NodeGroup(
            prefix=str(table["prefix"]),
            count=table["count"],
            gpu_type=str(table["gpu_type"]),
            gpus=table["gpus"],
            server_model=str(table.get("server_model", "")),
            data_factor=_number(label, "data_factor", table.get("data_factor", 1.0)),
            data_factor_spread=_number(
                label, "data_factor_spread", table.get("data_factor_spread", 0.0)
            ),
        )
    except ClusterFileError:
        raise
    except HopsError as exc:
        raise ClusterFileError(f"{label}: {exc}") from exc


def parse_cluster(data: dict[str, Any], where: str = "cluster", seed: int = 0) -> SimCluster:
    """Build a :class:`SimCluster` from an already-parsed TOML document."""
    raw_types = data.get("gpu_types")
    if not isinstance(raw_types, dict) or not raw_types:
        raise ClusterFileError(f"{where}: needs at least one [gpu_types.NAME] table")
    types: list[GpuType] = []
    aliases: dict[str, str] = {}
    for name, table in raw_types.items():
        gpu, alias = _parse_type(where, name, table)
        types.append(gpu)
        if alias is not None:
            aliases[name] = alias
    raw_groups = data.get("node_groups")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise ClusterFileError(f"{where}: needs at least one [[node_groups]] entry")
    names = {t.name for t in types}
    groups = [_parse_group(where, i, g, names) for i, g in enumerate(raw_groups)]
    try:
        return build_sim_cluster(types, groups, seed=seed, compute_as=aliases)
    except HopsError as exc:
        raise ClusterFileError(f"{where}: {exc}") from exc


def load_cluster(path: str | Path, seed: int = 0) -> SimCluster:
    """Read and validate a cluster TOML file."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClusterFileError(f"{p}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ClusterFileError(f"{p}: not valid TOML: {exc}") from exc
    return parse_cluster(data, where=str(p), seed=seed)
